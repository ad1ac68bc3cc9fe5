//! A full scan of 100,000 keys (100-byte values) in one transaction, four
//! ways (`scan/<impl>`): the callback `scan` (one epoch guard for the whole
//! scan, values borrowed), the cursor's `next_ref` (a guard per batch of 64,
//! values copied into a reused buffer), the cursor as an `Iterator` (a
//! `Vec` per value), and `range` (every pair copied into one `Vec`). Plus
//! `session/<form>`: begin + commit of an empty transaction on a borrowed
//! and on an owned session (the same type; the owned one holds an `Arc`).

use criterion::{criterion_group, criterion_main, Criterion};
use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const KEYS: u64 = 100_000;

fn loaded() -> Arc<Engine> {
    let e = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let mut s = e.session().unwrap();
    let v = [7u8; 100];
    for chunk in 0..KEYS / 1000 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in chunk * 1000..(chunk + 1) * 1000 {
            t.put(k.to_be_bytes(), v).unwrap();
        }
        t.commit(CommitOptions::default()).unwrap();
    }
    drop(s);
    e
}

fn scan(c: &mut Criterion) {
    let e = loaded();
    let mut s = e.session().unwrap();
    let mut g = c.benchmark_group("scan");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("callback", |b| {
        b.iter(|| {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let mut n = 0u64;
            t.scan(.., |k, v| {
                n += (k.len() + v.len()) as u64;
                true
            })
            .unwrap();
            assert_eq!(n, KEYS * 108);
            black_box(n)
        })
    });
    g.bench_function("cursor_next_ref", |b| {
        b.iter(|| {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let mut c = t.cursor();
            let mut n = 0u64;
            while let Some(r) = c.next_ref() {
                let (k, v) = r.unwrap();
                n += (k.len() + v.len()) as u64;
            }
            assert_eq!(n, KEYS * 108);
            black_box(n)
        })
    });
    g.bench_function("cursor_iter", |b| {
        b.iter(|| {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let n: u64 = t
                .cursor()
                .map(|r| {
                    let (k, v) = r.unwrap();
                    (k.len() + v.len()) as u64
                })
                .sum();
            assert_eq!(n, KEYS * 108);
            black_box(n)
        })
    });
    g.bench_function("cursor_rev", |b| {
        b.iter(|| {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let mut c = t.cursor();
            let mut n = 0u64;
            while let Some(r) = c.next_back_ref() {
                let (k, v) = r.unwrap();
                n += (k.len() + v.len()) as u64;
            }
            assert_eq!(n, KEYS * 108);
            black_box(n)
        })
    });
    g.bench_function("range_vec", |b| {
        b.iter(|| {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let rows = t.range(..).unwrap();
            assert_eq!(rows.len() as u64, KEYS);
            black_box(rows)
        })
    });
    g.finish();
}

fn session(c: &mut Criterion) {
    let e = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let mut g = c.benchmark_group("session");
    g.sample_size(20).measurement_time(Duration::from_secs(2));
    let mut borrowed = e.session().unwrap();
    g.bench_function("borrowed", |b| {
        b.iter(|| {
            let t = borrowed.begin(&TxnOptions::default()).unwrap();
            t.commit(CommitOptions::default()).unwrap();
        })
    });
    drop(borrowed);
    let mut owned = e.owned_session().unwrap();
    g.bench_function("owned", |b| {
        b.iter(|| {
            let t = owned.begin(&TxnOptions::default()).unwrap();
            t.commit(CommitOptions::default()).unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, scan, session);
criterion_main!(benches);
