//! `begin`: begin + commit of an empty (read-only) transaction for every
//! combination of begin options, on every machinery (`begin/<engine>/<row>`),
//! and begin + one read + commit (`begin-read/<engine>`).
//! Target: under 20 ns median for the lock-free engine.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use snapshot_bench::begin_rows::{begin_engine, begin_rows, BeginRow};
use snapshot_engine::with_machinery::{LockFree, Machinery, RwLockBaseline, RwLockBaselinePatched};
use snapshot_engine::{CommitOptions, TxnOptions};

fn engine_rows<M: Machinery>(c: &mut Criterion) {
    let mut g = c.benchmark_group("begin");
    let e = begin_engine::<M>();
    let mut s = e.session().unwrap();
    for BeginRow { id, opts, .. } in begin_rows() {
        g.bench_function(BenchmarkId::new(M::NAME, id), |b| {
            b.iter(|| {
                let t = s.begin(&opts).unwrap();
                t.commit(CommitOptions::default()).unwrap();
            })
        });
    }
    g.finish();
}

/// begin + one point read + commit (`begin-read/<engine>`): a transaction
/// takes its snapshot at its first read, so the rows
/// above without a read timestamp take none; this one pays for it, so the
/// lazy snapshot cannot hide a cost it only moved.
fn one_read<M: Machinery>(c: &mut Criterion) {
    let mut g = c.benchmark_group("begin-read");
    let e = begin_engine::<M>();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    let opts = TxnOptions::default();
    g.bench_function(M::NAME, |b| {
        b.iter(|| {
            let mut t = s.begin(&opts).unwrap();
            let v = t.get_with(b"k", |v| v.map_or(0, |v| v[0])).unwrap();
            t.commit(CommitOptions::default()).unwrap();
            v
        })
    });
    g.finish();
}

fn begin(c: &mut Criterion) {
    engine_rows::<LockFree>(c);
    engine_rows::<RwLockBaseline>(c);
    engine_rows::<RwLockBaselinePatched>(c);
    one_read::<LockFree>(c);
    one_read::<RwLockBaseline>(c);
    one_read::<RwLockBaselinePatched>(c);
}

criterion_group!(benches, begin);
criterion_main!(benches);
