//! read-ts pieces: setting a read timestamp after begin, with and without a
//! commit in between (`read_ts/<engine>/...`), and taking a snapshot while
//! another thread keeps committing (`snapshot/<engine>`). `lock-free` runs
//! with the default config (SeqCst fences on both sides of handshake 1),
//! `lock-free-asymmetric` with `asymmetric_fences: true` (a compiler fence
//! for readers, a membarrier per horizon advance, where the process could
//! register), so one run compares the two. `advance_horizon/<pair>/<load>` times one horizon
//! advance, the side that pays the membarrier, alone and with a reader
//! thread running beside it (the membarrier interrupts it).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use snapshot_engine::with_machinery::{Engine, LockFree, Machinery};
#[cfg(feature = "baseline")]
use snapshot_engine::with_machinery::{RwLockBaseline, RwLockBaselinePatched};
use snapshot_engine::{CommitOptions, EngineConfig, Timestamp, TimestampUpdate, TxnOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn setup<M: Machinery>(asymmetric_fences: bool) -> Engine<M> {
    let e = Engine::<M>::with_machinery(EngineConfig {
        asymmetric_fences,
        ..EngineConfig::default()
    })
    .unwrap();
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

/// The engine's name in the bench ids: `lock-free-asymmetric` for the
/// lock-free engine with the asymmetric fence switched on.
fn name<M: Machinery>(asymmetric_fences: bool) -> String {
    if asymmetric_fences {
        format!("{}-asymmetric", M::NAME)
    } else {
        M::NAME.to_string()
    }
}

fn read_ts<M: Machinery>(c: &mut Criterion, asym: bool) {
    let mut g = c.benchmark_group("read_ts");
    let e = setup::<M>(asym);
    let mut r = e.session().unwrap();
    let mut w = e.session().unwrap();
    let opts = TxnOptions::default();
    // begin; set_read_timestamp; roll back. No commit in between: the
    // session's cached snapshot is still current. (The snapshot is taken
    // with the read timestamp, not at begin.)
    g.bench_function(
        BenchmarkId::new(name::<M>(asym), "no-commit-between"),
        |b| {
            b.iter(|| {
                let mut t = r.begin(&opts).unwrap();
                t.set_read_timestamp(Timestamp::new(1)).unwrap();
                t.rollback();
            })
        },
    );
    // The same with a writer's commit between begin and set_read_timestamp;
    // only begin and set_read_timestamp + rollback are timed (two clock
    // reads per segment, the same for every engine), not the commit.
    let mut ts = 10u64;
    g.bench_function(BenchmarkId::new(name::<M>(asym), "commit-between"), |b| {
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
fn snapshot<M: Machinery>(c: &mut Criterion, asym: bool) {
    let mut g = c.benchmark_group("snapshot");
    let e = setup::<M>(asym);
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
                if n.is_multiple_of(1024) {
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
        g.bench_function(name::<M>(asym), |b| {
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

/// One horizon advance (`TxnManager::advance_horizon`: floors, heavy fence,
/// slot scan) on the lock-free engine, alone and with a second thread
/// running read-ts reader transactions (begin, set_read_timestamp, one read,
/// commit) beside it.
fn advance(c: &mut Criterion, asym: bool) {
    let mut g = c.benchmark_group("advance_horizon");
    let pair = if asym { "asymmetric" } else { "symmetric" };
    let e = setup::<LockFree>(asym);
    if e.asymmetric_fences() != asym {
        eprintln!("advance_horizon/{pair}: this process could not register for membarrier");
        return;
    }
    g.bench_function(BenchmarkId::new(pair, "alone"), |b| {
        b.iter(|| e.manager().advance_horizon())
    });
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut r = e.session().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let mut t = r.begin(&TxnOptions::default()).unwrap();
                t.set_read_timestamp(Timestamp::new(1)).unwrap();
                t.get_with(b"k", |v| v.map(|v| v[0])).unwrap();
                t.commit(CommitOptions::default()).unwrap();
            }
        });
        g.bench_function(BenchmarkId::new(pair, "reader-running"), |b| {
            b.iter(|| e.manager().advance_horizon())
        });
        stop.store(true, Ordering::Relaxed);
    });
    g.finish();
}

/// The baselines run with feature `baseline` (every build at the
/// workspace root has it: the driver turns it on).
fn benches_all(c: &mut Criterion) {
    read_ts::<LockFree>(c, false);
    read_ts::<LockFree>(c, true);
    #[cfg(feature = "baseline")]
    read_ts::<RwLockBaseline>(c, false);
    #[cfg(feature = "baseline")]
    read_ts::<RwLockBaselinePatched>(c, false);
    snapshot::<LockFree>(c, false);
    snapshot::<LockFree>(c, true);
    #[cfg(feature = "baseline")]
    snapshot::<RwLockBaseline>(c, false);
    #[cfg(feature = "baseline")]
    snapshot::<RwLockBaselinePatched>(c, false);
    advance(c, false);
    advance(c, true);
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
