//! `index/<impl>/...`: the store's hand-rolled point-lookup hash index
//! (`src/store/raw/hashindex.rs`, reached through the hidden
//! `snapshot_engine::bench_api` hook of feature `bench-hooks`, used as
//! `store/mod.rs` uses it) beside kept concurrent maps: papaya, scc's
//! `HashIndex`, and dashmap (sharded read-write locks, the locking
//! reference), since the index is not the crate's core.
//!
//! Keys are W1's: a `u64` as 8 big-endian bytes, held as bytes (the store's
//! keys are byte strings, so a map standing in for the index is keyed by
//! `Box<[u8]>` and looked up by `&[u8]`). Values are a pointer-sized payload
//! (`usize`; for ours, the key node's address). Every map hashes with
//! foldhash, the hasher the store uses, so the tables are compared, not
//! their default hashers.
//!
//! * `hit-<n>-1t`: a lookup of a random present key in a map of `n` keys
//!   (100,000 and 1,000,000).
//! * `hit-<n>-2t`: the same while a second thread looks up random keys in
//!   the same map; the first thread is measured.
//! * `insert-100000`: 100,000 new keys into an empty map, growth included
//!   (criterion reports the time for all of them; per key is that / 100,000).
//!   Ours allocates each key's node (key bytes and an empty version chain)
//!   here; the crates store the payload only, so a store built on one of
//!   them would add that allocation.
//!
//! `INDEX_REVERSE=1` runs the implementations in reverse order (for rounds
//! with the order alternating). Keep runs short:
//! `cargo bench --bench index -- --warm-up-time 1 --measurement-time 2`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snapshot_engine::bench_api::HashIndexHook;
use std::sync::atomic::{AtomicBool, Ordering};

type Hasher = foldhash::fast::RandomState;

/// A concurrent map from key bytes to a pointer-sized payload.
trait Index: Sync + Sized {
    const NAME: &'static str;
    fn new() -> Self;
    fn insert(&self, key: &[u8], value: usize);
    fn get(&self, key: &[u8]) -> Option<usize>;
}

/// The store's own index.
struct Ours(HashIndexHook);

impl Index for Ours {
    const NAME: &'static str = "hand-rolled";
    fn new() -> Self {
        Ours(HashIndexHook::new())
    }
    #[inline]
    fn insert(&self, key: &[u8], _value: usize) {
        // The payload is the node the insert allocates.
        self.0.insert(key);
    }
    #[inline]
    fn get(&self, key: &[u8]) -> Option<usize> {
        self.0.get(key)
    }
}

struct Papaya(papaya::HashMap<Box<[u8]>, usize, Hasher>);

impl Index for Papaya {
    const NAME: &'static str = "papaya";
    fn new() -> Self {
        Papaya(papaya::HashMap::with_hasher(Hasher::default()))
    }
    #[inline]
    fn insert(&self, key: &[u8], value: usize) {
        self.0.pin().insert(key.into(), value);
    }
    #[inline]
    fn get(&self, key: &[u8]) -> Option<usize> {
        // One guard per lookup, as a point read pins once.
        self.0.pin().get(key).copied()
    }
}

struct Scc(scc::HashIndex<Box<[u8]>, usize, Hasher>);

impl Index for Scc {
    const NAME: &'static str = "scc-HashIndex";
    fn new() -> Self {
        Scc(scc::HashIndex::with_hasher(Hasher::default()))
    }
    #[inline]
    fn insert(&self, key: &[u8], value: usize) {
        let _ = self.0.insert_sync(key.into(), value);
    }
    #[inline]
    fn get(&self, key: &[u8]) -> Option<usize> {
        self.0.peek_with(key, |_, v| *v)
    }
}

struct Dash(dashmap::DashMap<Box<[u8]>, usize, Hasher>);

impl Index for Dash {
    const NAME: &'static str = "dashmap";
    fn new() -> Self {
        Dash(dashmap::DashMap::with_hasher(Hasher::default()))
    }
    #[inline]
    fn insert(&self, key: &[u8], value: usize) {
        self.0.insert(key.into(), value);
    }
    #[inline]
    fn get(&self, key: &[u8]) -> Option<usize> {
        self.0.get(key).map(|v| *v)
    }
}

#[inline]
fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// Random key numbers below `n`, cycled through by the lookups (the same
/// sequence for every implementation).
fn probes(n: u64, seed: u64) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..1 << 16).map(|_| rng.gen_range(0..n)).collect()
}

fn filled<I: Index>(n: u64) -> I {
    let m = I::new();
    for i in 0..n {
        m.insert(&key(i), i as usize);
    }
    m
}

fn run<I: Index>(c: &mut Criterion) {
    let mut g = c.benchmark_group("index");
    for n in [100_000u64, 1_000_000] {
        let m: I = filled(n);
        let mine = probes(n, 1);
        // Every key is there (and a lookup is not optimized away below).
        assert!(mine.iter().all(|&i| m.get(&key(i)).is_some()));
        for threads in [1usize, 2] {
            let stop = AtomicBool::new(false);
            std::thread::scope(|sc| {
                if threads == 2 {
                    let (m, stop) = (&m, &stop);
                    sc.spawn(move || {
                        let theirs = probes(n, 2);
                        let (mut i, mut x) = (0usize, 0usize);
                        while !stop.load(Ordering::Relaxed) {
                            x ^= m.get(&key(theirs[i & 0xffff])).unwrap_or(0);
                            i += 1;
                        }
                        black_box(x);
                    });
                }
                let mut i = 0usize;
                g.bench_function(
                    BenchmarkId::new(I::NAME, format!("hit-{n}-{threads}t")),
                    |b| {
                        b.iter(|| {
                            i += 1;
                            m.get(black_box(&key(mine[i & 0xffff])))
                        })
                    },
                );
                stop.store(true, Ordering::Relaxed);
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("index");
    g.sample_size(10);
    const N: u64 = 100_000;
    g.bench_function(BenchmarkId::new(I::NAME, format!("insert-{N}")), |b| {
        b.iter_batched(
            I::new,
            |m| {
                for i in 0..N {
                    m.insert(black_box(&key(i)), i as usize);
                }
                // Dropped after the timing.
                m
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn benches_all(c: &mut Criterion) {
    let all: [fn(&mut Criterion); 4] = [run::<Ours>, run::<Papaya>, run::<Scc>, run::<Dash>];
    if std::env::var_os("INDEX_REVERSE").is_some() {
        all.iter().rev().for_each(|f| f(c));
    } else {
        all.iter().for_each(|f| f(c));
    }
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
