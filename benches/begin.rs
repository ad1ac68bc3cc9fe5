//! W2: begin + commit of an empty (read-only) transaction for every
//! combination of begin options, on every machinery (`begin/<engine>/<row>`).
//! Target: under 20 ns median for the lock-free engine.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, LockFree, PrepareConflicts, Protocol, RwLockBaseline,
    RwLockBaselineFixed, Timestamp, TimestampUpdate, TxnOptions,
};

fn rows() -> Vec<(&'static str, TxnOptions)> {
    let o = TxnOptions::default;
    let pc = |p: PrepareConflicts, roundup: bool| TxnOptions {
        prepare_conflicts: p,
        roundup_prepared: roundup,
        roundup_read: roundup,
        ..o()
    };
    vec![
        ("no-options", o()),
        ("enforce", pc(PrepareConflicts::Enforce, false)),
        ("enforce-roundup", pc(PrepareConflicts::Enforce, true)),
        ("ignore", pc(PrepareConflicts::Ignore, false)),
        ("ignore-roundup", pc(PrepareConflicts::Ignore, true)),
        (
            "ignore-allow-writes",
            pc(PrepareConflicts::IgnoreAllowWrites, false),
        ),
        (
            "ignore-allow-writes-roundup",
            pc(PrepareConflicts::IgnoreAllowWrites, true),
        ),
        (
            "read-only",
            TxnOptions {
                read_only: true,
                ..o()
            },
        ),
        (
            "read-timestamp",
            TxnOptions {
                read_timestamp: Some(Timestamp::new(10)),
                ..o()
            },
        ),
        (
            "read-at-stable",
            TxnOptions {
                read_at_stable: true,
                ..o()
            },
        ),
    ]
}

fn engine_rows<P: Protocol>(c: &mut Criterion) {
    let mut g = c.benchmark_group("begin");
    let e = Engine::<P>::with_machinery(EngineConfig::default());
    e.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(1)),
        stable: Some(Timestamp::new(10)),
        durable: None,
    })
    .unwrap();
    let mut s = e.session().unwrap();
    for (name, opts) in rows() {
        g.bench_function(BenchmarkId::new(P::NAME, name), |b| {
            b.iter(|| {
                let mut t = s.begin(&opts).unwrap();
                t.commit(CommitOptions::default()).unwrap();
            })
        });
    }
    g.finish();
}

fn begin(c: &mut Criterion) {
    engine_rows::<LockFree>(c);
    engine_rows::<RwLockBaseline>(c);
    engine_rows::<RwLockBaselineFixed>(c);
}

criterion_group!(benches, begin);
criterion_main!(benches);
