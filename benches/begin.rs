//! W2: begin + commit of an empty (read-only) transaction for every
//! combination of begin options, on every machinery (`begin/<engine>/<row>`).
//! Target: under 20 ns median for the lock-free engine.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use snapshot_engine::{CommitOptions, LockFree, Protocol, RwLockBaseline, RwLockBaselineFixed};

#[path = "../snapshot-bench/src/w2.rs"]
mod w2;
use w2::{begin_engine, begin_rows, BeginRow};

fn engine_rows<P: Protocol>(c: &mut Criterion) {
    let mut g = c.benchmark_group("begin");
    let e = begin_engine::<P>();
    let mut s = e.session().unwrap();
    for BeginRow { id, opts, .. } in begin_rows() {
        g.bench_function(BenchmarkId::new(P::NAME, id), |b| {
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
