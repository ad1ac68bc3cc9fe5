//! Point get and put + commit on a loaded store (`get/<engine>`,
//! `put_commit/<engine>`): the store code is shared, so these should match
//! across machineries except for what the machinery adds. `rmw/<isolation>`
//! (the lock-free machinery): a read-modify-write transaction, 2 point
//! reads and 1 update, as `snapshot-bench rw-mix` runs it with one writer,
//! under snapshot isolation and serializable: what tracking and
//! validation add to a commit. Each transaction is one call of
//! `rmw_txn`, so callgrind can count it alone:
//! `valgrind --tool=callgrind --toggle-collect='*rmw_txn*' <bench binary>
//! --bench rmw --profile-time 5`, then the inclusive instructions of
//! `rmw_txn` over its calls (`callgrind_annotate --inclusive=yes
//! --tree=caller`).

use criterion::{criterion_group, criterion_main, Criterion};
use snapshot_engine::with_machinery::{Engine, LockFree, Machinery, Session};
#[cfg(feature = "baseline")]
use snapshot_engine::with_machinery::{RwLockBaseline, RwLockBaselinePatched};
use snapshot_engine::{
    CommitOptions, EngineConfig, Isolation, Timestamp, TimestampUpdate, TxnOptions,
};

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

/// One read-modify-write transaction: reads `a` and `b`, writes `a` with
/// a value derived from both, commits at `ts`.
#[inline(never)]
fn rmw_txn(s: &mut Session<'_, LockFree>, opts: &TxnOptions, a: u64, b: u64, ts: u64) {
    let mut t = s.begin(opts).unwrap();
    let mut sum = 0u8;
    for k in [a, b] {
        sum = sum.wrapping_add(
            t.get_with(k.to_be_bytes(), |v| v.map_or(0, |v| v[0]))
                .unwrap(),
        );
    }
    let mut v = [1u8; 100];
    v[0] = sum;
    t.put(a.to_be_bytes(), v).unwrap();
    t.commit(CommitOptions::at(ts)).unwrap();
}

/// `rmw/<isolation>`: a fresh loaded engine for each level, one session.
fn rmw(c: &mut Criterion) {
    let mut g = c.benchmark_group("rmw");
    for (name, isolation) in [
        ("snapshot", Isolation::Snapshot),
        ("serializable", Isolation::Serializable),
    ] {
        let e = loaded::<LockFree>();
        let mut s = e.session().unwrap();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let opts = TxnOptions {
            isolation,
            ..TxnOptions::default()
        };
        let mut ts = 1u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                ts += 1;
                let (a, k) = (rng.below(KEYS), rng.below(KEYS));
                rmw_txn(&mut s, &opts, a, k, ts);
                if ts.is_multiple_of(1024) {
                    // Stable trails by about 500 commits, as rw-mix's
                    // timekeeper keeps it; history below goes.
                    e.set_timestamps(TimestampUpdate {
                        oldest: Some(Timestamp::new(ts - 1000)),
                        stable: Some(Timestamp::new(ts - 500)),
                        durable: None,
                    })
                    .unwrap();
                }
            })
        });
    }
    g.finish();
}

/// The baselines run with feature `baseline` (every build at the
/// workspace root has it: the driver turns it on).
fn benches_all(c: &mut Criterion) {
    ops::<LockFree>(c);
    rmw(c);
    #[cfg(feature = "baseline")]
    ops::<RwLockBaseline>(c);
    #[cfg(feature = "baseline")]
    ops::<RwLockBaselinePatched>(c);
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
