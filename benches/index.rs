//! `index/<impl>/...`: the store's hand-rolled point-lookup hash index
//! (`src/store/raw/hashindex.rs`, reached through the hidden
//! `snapshot_engine::bench_api` hook of feature `bench-hooks`, used as
//! `store/mod.rs` uses it) beside kept concurrent maps: papaya, scc's
//! `HashIndex`, and dashmap (sharded read-write locks, the locking
//! reference), since the index is not the crate's core.
//!
//! Keys are read-ts keys: a `u64` as 8 big-endian bytes, held as bytes (the store's
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
//! * `batch/<how>/<n>`: 16 point reads of random present keys in a store
//!   of `n` read-ts keys (8-byte keys, 100-byte values) and one value byte
//!   touched per read, one thread: `ceiling` is a plain
//!   `HashMap<u64, Box<[u8]>>` (the no-sync ceiling's lookup), `get` is 16
//!   `Txn::get_with` in one transaction, `get_many` one
//!   `Txn::get_many_with` of the 16 keys (misses overlapped), `txn-get` 16
//!   transactions of one `get_with` each (the read-ts reader). Criterion reports
//!   keys per second (16 per iteration).
//!
//! `INDEX_REVERSE=1` runs the implementations in reverse order (for rounds
//! with the order alternating); `INDEX_BATCH_ONLY=1` runs the `batch` group
//! alone. Keep runs short:
//! `cargo bench --bench index -- --warm-up-time 1 --measurement-time 2`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
#[cfg(feature = "bench-hooks")]
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

/// The store's own index, reached through `bench_api` (feature
/// `bench-hooks`; every build at the workspace root has it: the driver
/// turns it on).
#[cfg(feature = "bench-hooks")]
struct Ours(HashIndexHook);

#[cfg(feature = "bench-hooks")]
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

/// The `batch` group: batched point reads against the ceiling's lookups.
fn batch(c: &mut Criterion) {
    use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
    use std::collections::HashMap;
    const B: usize = 16;
    let mut g = c.benchmark_group("batch");
    g.throughput(criterion::Throughput::Elements(B as u64));
    for n in [100_000u64, 1_000_000] {
        let e = Engine::new(EngineConfig::default()).unwrap();
        let mut s = e.session().unwrap();
        let mut k = 0;
        while k < n {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            for _ in 0..1000.min(n - k) {
                t.put(key(k), [0x5au8; 100]).unwrap();
                k += 1;
            }
            t.commit(CommitOptions::default()).unwrap();
        }
        let mut map: HashMap<u64, Box<[u8]>, Hasher> = HashMap::default();
        for k in 0..n {
            map.insert(k, vec![0x5au8; 100].into());
        }
        let ks = probes(n, 3);
        let keys: Vec<[u8; 8]> = ks.iter().map(|&k| key(k)).collect();
        let opts = TxnOptions::default();
        let mut i = 0usize;
        let mut next = || {
            i = (i + B) & 0xffff;
            i
        };
        g.bench_function(BenchmarkId::new("ceiling", n), |b| {
            b.iter(|| {
                let at = next();
                let mut x = 0u8;
                for &k in &ks[at..at + B] {
                    x ^= map.get(&black_box(k)).map_or(0, |v| v[v.len() / 2]);
                }
                x
            })
        });
        g.bench_function(BenchmarkId::new("get_many", n), |b| {
            b.iter(|| {
                let at = next();
                let mut t = s.begin(&opts).unwrap();
                let mut x = 0u8;
                t.get_many_with(black_box(&keys[at..at + B]), |_, v| {
                    x ^= v.map_or(0, |v| v[v.len() / 2])
                })
                .unwrap();
                x
            })
        });
        g.bench_function(BenchmarkId::new("get", n), |b| {
            b.iter(|| {
                let at = next();
                let mut t = s.begin(&opts).unwrap();
                let mut x = 0u8;
                for k in &keys[at..at + B] {
                    x ^= t
                        .get_with(black_box(k), |v| v.map_or(0, |v| v[v.len() / 2]))
                        .unwrap();
                }
                x
            })
        });
        g.bench_function(BenchmarkId::new("txn-get", n), |b| {
            b.iter(|| {
                let at = next();
                let mut x = 0u8;
                for k in &keys[at..at + B] {
                    let mut t = s.begin(&opts).unwrap();
                    x ^= t
                        .get_with(black_box(k), |v| v.map_or(0, |v| v[v.len() / 2]))
                        .unwrap();
                }
                x
            })
        });
    }
    g.finish();
}

fn benches_all(c: &mut Criterion) {
    if std::env::var_os("INDEX_BATCH_ONLY").is_some() {
        return batch(c);
    }
    let mut all: Vec<fn(&mut Criterion)> = Vec::new();
    #[cfg(feature = "bench-hooks")]
    all.push(run::<Ours>);
    all.extend([run::<Papaya> as fn(&mut Criterion), run::<Scc>, run::<Dash>]);
    if std::env::var_os("INDEX_REVERSE").is_some() {
        all.iter().rev().for_each(|f| f(c));
    } else {
        all.iter().for_each(|f| f(c));
    }
    batch(c);
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
