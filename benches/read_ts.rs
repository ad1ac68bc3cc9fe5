//! W1 pieces: setting a read timestamp after begin, with and without a
//! commit in between (`read_ts/<engine>/...`), and taking a snapshot while
//! another thread keeps committing (`snapshot/<engine>`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, LockFree, Protocol, RwLockBaseline, RwLockBaselineFixed,
    Timestamp, TimestampUpdate, TxnOptions,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn setup<P: Protocol>() -> Engine<P> {
    let e = Engine::<P>::with_machinery(EngineConfig::default());
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", b"v").unwrap();
        t.commit(CommitOptions::at(1)).unwrap();
    }
    e.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(1)),
        stable: Some(Timestamp::new(1)),
        durable: None,
    })
    .unwrap();
    e
}

fn read_ts<P: Protocol>(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_ts");
    let e = setup::<P>();
    let mut r = e.session().unwrap();
    let mut w = e.session().unwrap();
    let opts = TxnOptions::default();
    // begin; set_read_timestamp; roll back. No commit in between: the
    // session's cached snapshot is still current. (Since issue 14b the
    // snapshot is taken with the read timestamp, not at begin.)
    g.bench_function(BenchmarkId::new(P::NAME, "no-commit-between"), |b| {
        b.iter(|| {
            let mut t = r.begin(&opts).unwrap();
            t.set_read_timestamp(Timestamp::new(1)).unwrap();
            t.rollback();
        })
    });
    // The same with a writer's commit between begin and set_read_timestamp;
    // only begin and set_read_timestamp + rollback are timed (two clock
    // reads per segment, the same for every engine), not the commit.
    let mut ts = 10u64;
    g.bench_function(BenchmarkId::new(P::NAME, "commit-between"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                let mut t = r.begin(&opts).unwrap();
                total += t0.elapsed();
                ts += 1;
                let mut tw = w.begin(&opts).unwrap();
                tw.put(b"k", b"v").unwrap();
                tw.commit(CommitOptions::at(ts)).unwrap();
                let t1 = Instant::now();
                t.set_read_timestamp(Timestamp::new(1)).unwrap();
                t.rollback();
                total += t1.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// Snapshot acquisition (begin + get + rollback of a read-only transaction)
/// while a second thread commits as fast as it can.
fn snapshot<P: Protocol>(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    let e = setup::<P>();
    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut w = e.session().unwrap();
            let mut ts = 10;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                ts += 1;
                n += 1;
                let mut t = w.begin(&TxnOptions::default()).unwrap();
                t.put((n % 1024).to_be_bytes(), b"value").unwrap();
                t.commit(CommitOptions::at(ts)).unwrap();
                if n % 1024 == 0 {
                    e.set_timestamps(TimestampUpdate {
                        oldest: Some(Timestamp::new(ts)),
                        stable: Some(Timestamp::new(ts)),
                        durable: None,
                    })
                    .unwrap();
                }
            }
            commits.store(n, Ordering::Relaxed);
        });
        let mut r = e.session().unwrap();
        g.bench_function(P::NAME, |b| {
            b.iter(|| {
                let mut t = r.begin(&TxnOptions::default()).unwrap();
                t.get_with(b"k", |v| v.map(|v| v[0])).unwrap();
                t.rollback();
            })
        });
        stop.store(true, Ordering::Relaxed);
    });
    g.finish();
}

fn benches_all(c: &mut Criterion) {
    read_ts::<LockFree>(c);
    read_ts::<RwLockBaseline>(c);
    read_ts::<RwLockBaselineFixed>(c);
    snapshot::<LockFree>(c);
    snapshot::<RwLockBaseline>(c);
    snapshot::<RwLockBaselineFixed>(c);
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
