//! Point get and put + commit on a loaded store (`get/<engine>`,
//! `put_commit/<engine>`): the store code is shared, so these should match
//! across machineries except for what the machinery adds.

use criterion::{criterion_group, criterion_main, Criterion};
use snapshot_engine::with_machinery::{Engine, LockFree, Machinery};
#[cfg(feature = "baseline")]
use snapshot_engine::with_machinery::{RwLockBaseline, RwLockBaselinePatched};
use snapshot_engine::{CommitOptions, EngineConfig, Timestamp, TimestampUpdate, TxnOptions};

const KEYS: u64 = 100_000;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn loaded<M: Machinery>() -> Engine<M> {
    let e = Engine::<M>::with_machinery(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let v = [7u8; 100];
    for chunk in 0..KEYS / 1000 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in chunk * 1000..(chunk + 1) * 1000 {
            t.put(k.to_be_bytes(), v).unwrap();
        }
        t.commit(CommitOptions::at(1)).unwrap();
    }
    drop(s);
    e.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(1)),
        stable: Some(Timestamp::new(1)),
        durable: None,
    })
    .unwrap();
    e
}

fn ops<M: Machinery>(c: &mut Criterion) {
    let e = loaded::<M>();
    let mut s = e.session().unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    {
        let mut g = c.benchmark_group("get");
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        g.bench_function(M::NAME, |b| {
            b.iter(|| {
                let k = rng.below(KEYS).to_be_bytes();
                t.get_with(k, |v| v.map(|v| v[0])).unwrap()
            })
        });
        g.finish();
    }
    let mut g = c.benchmark_group("put_commit");
    let v = [9u8; 100];
    let mut ts = 1u64;
    g.bench_function(M::NAME, |b| {
        b.iter(|| {
            ts += 1;
            let k = rng.below(KEYS).to_be_bytes();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(k, v).unwrap();
            t.commit(CommitOptions::at(ts)).unwrap();
            if ts.is_multiple_of(1024) {
                // Let history go, so chains stay short.
                e.set_timestamps(TimestampUpdate {
                    oldest: Some(Timestamp::new(ts)),
                    stable: Some(Timestamp::new(ts)),
                    durable: None,
                })
                .unwrap();
            }
        })
    });
    g.finish();
}

/// The baselines run with feature `baseline` (every build at the
/// workspace root has it: the driver turns it on).
fn benches_all(c: &mut Criterion) {
    ops::<LockFree>(c);
    #[cfg(feature = "baseline")]
    ops::<RwLockBaseline>(c);
    #[cfg(feature = "baseline")]
    ops::<RwLockBaselinePatched>(c);
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
