//! The ordered side of the index (what scans walk) beside kept crates: the
//! store's ordered view (`src/store/raw/index.rs`: a sorted array of node
//! pointers plus a skiplist of the keys created since the last merge,
//! reached through the hidden `snapshot_engine::bench_api` hook), a
//! crossbeam-skiplist `base::SkipList` alone (the store's previous ordered
//! index) and scc's `TreeIndex` (a B+tree whose readers take no lock).
//!
//! Keys are read-ts keys, 8-byte big-endian integers, created in random order. The
//! crates are used as the store would use them: each holds a pointer per
//! key to a 64-byte node that starts with the key's bytes (the store's
//! node for an 8-byte key: 56 bytes, started on a line; allocated in
//! creation order before the measurement, as the store's arena does), and
//! compares through it.
//!
//! * Before the timings, one line per structure and size: the bytes it
//!   holds per key (requested sizes, counted by a wrapper around the system
//!   allocator). Ours is the whole index less the hash index alone with the
//!   same keys (its nodes and table).
//! * `ordered/scan-1000/<impl>/<n>`: a scan of 1,000 keys from a random
//!   start in `n` keys (100,000 and 1,000,000), one thread, reading one
//!   byte of each key it visits. Criterion reports keys per second.
//!
//! Keep runs short:
//! `cargo bench --bench ordered -- --warm-up-time 1 --measurement-time 2`.
//!
//! `ORDERED_CREATE=<n>` instead creates `n` keys in random order through
//! the store's whole index, one thread, and prints the time a key and the
//! longest single creations with where they fell (no criterion run).

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
#[cfg(feature = "bench-hooks")]
use snapshot_engine::bench_api::{HashIndexHook, IndexHook};
use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Borrow;
use std::cmp::Ordering as Cmp;
use std::ops::Bound;
use std::sync::atomic::{AtomicIsize, Ordering};
#[cfg(feature = "bench-hooks")]
use std::time::{Duration, Instant};

/// A key node as the store has it, reduced to what ordering reads.
type Node = [u8; 64];

/// What the crates hold per key: a pointer to its node, ordered by the key.
#[derive(Clone, Copy)]
struct NodePtr(*const Node);

impl NodePtr {
    fn key(&self) -> &[u8] {
        // SAFETY: the nodes live in `main`'s vector for as long as any
        // structure holding pointers to them.
        unsafe { &(&*self.0)[..8] }
    }
}

impl Borrow<[u8]> for NodePtr {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}
impl PartialEq for NodePtr {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for NodePtr {}
impl PartialOrd for NodePtr {
    fn partial_cmp(&self, o: &Self) -> Option<Cmp> {
        Some(self.cmp(o))
    }
}
impl Ord for NodePtr {
    fn cmp(&self, o: &Self) -> Cmp {
        self.key().cmp(o.key())
    }
}
// SAFETY: a shared pointer to a node no one writes after it is made.
unsafe impl Send for NodePtr {}
// SAFETY: as above.
unsafe impl Sync for NodePtr {}

/// Counts the bytes requested and not yet freed.
struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter is only arithmetic on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        HELD.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        HELD.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on (the system's calloc
        // takes fresh pages for a large block instead of zeroing it).
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        HELD.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            HELD.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const SIZES: [u64; 2] = [100_000, 1_000_000];
const SCAN: usize = 1_000;

fn shuffled(n: u64) -> Vec<u64> {
    let mut ks: Vec<u64> = (0..n).collect();
    ks.shuffle(&mut SmallRng::seed_from_u64(n));
    ks
}

/// Runs the epoch collectors' deferred frees (crossbeam's default one, the
/// store's and the skiplist's; scc's own), so that what an earlier
/// structure retired is not counted against a later one.
fn settle() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
        drop(scc::Guard::new());
    }
}

/// Builds a structure with `build`, returning it and the bytes it holds per
/// key once its retired memory is freed.
fn measured<T>(n: u64, build: impl FnOnce() -> T) -> (T, f64) {
    settle();
    let before = HELD.load(Ordering::Relaxed);
    let t = build();
    settle();
    let held = HELD.load(Ordering::Relaxed) - before;
    (t, held as f64 / n as f64)
}

/// `ORDERED_CREATE`: key creation's cost and its longest single waits.
/// The store's index is reached through `bench_api` (feature
/// `bench-hooks`; every build at the workspace root has it: the driver
/// turns it on).
#[cfg(feature = "bench-hooks")]
fn create(n: u64) {
    let keys = shuffled(n);
    let ix = IndexHook::new();
    let mut longest: Vec<(Duration, usize)> = Vec::new();
    let all = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        let t = Instant::now();
        ix.insert(&k.to_be_bytes());
        let took = t.elapsed();
        if took > Duration::from_millis(1) {
            longest.push((took, i));
        }
    }
    let all = all.elapsed();
    println!(
        "created {n} keys: {:.2} us a key",
        all.as_secs_f64() * 1e6 / n as f64
    );
    longest.sort();
    for (took, i) in longest.iter().rev().take(5) {
        println!("  {took:.2?} at key {i}");
    }
}

fn main() {
    if let Some(n) = std::env::var("ORDERED_CREATE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        #[cfg(feature = "bench-hooks")]
        return create(n);
        #[cfg(not(feature = "bench-hooks"))]
        panic!("ORDERED_CREATE={n} measures the store's index: it needs feature bench-hooks");
    }
    let mut c = Criterion::default().configure_from_args();
    for n in SIZES {
        let keys = shuffled(n);
        let nodes: Vec<Box<Node>> = keys
            .iter()
            .map(|k| {
                let mut b = Box::new([0; 64]);
                b[..8].copy_from_slice(&k.to_be_bytes());
                b
            })
            .collect();
        let ptrs: Vec<NodePtr> = nodes.iter().map(|b| NodePtr(&**b)).collect();
        let mut g = c.benchmark_group("ordered");
        g.throughput(Throughput::Elements(SCAN as u64));
        let mut rng = SmallRng::seed_from_u64(1);

        #[cfg(feature = "bench-hooks")]
        {
            let (ours, total) = measured(n, || {
                let ix = IndexHook::new();
                for k in &keys {
                    ix.insert(&k.to_be_bytes());
                }
                ix
            });
            let (hash, hash_only) = measured(n, || {
                let ix = HashIndexHook::new();
                for k in &keys {
                    ix.insert(&k.to_be_bytes());
                }
                ix
            });
            drop(hash);
            println!(
                "memory ordered-view {n} keys: {:.1} B/key (index {total:.1} less hash index {hash_only:.1})",
                total - hash_only
            );
            g.bench_function(BenchmarkId::new("scan-1000/ordered-view", n), |b| {
                b.iter(|| {
                    let from = rng.gen_range(0..n).to_be_bytes();
                    let mut left = SCAN;
                    ours.scan(&from, |k| {
                        black_box(k[7]);
                        left -= 1;
                        left > 0
                    });
                })
            });
            drop(ours);
        }

        let (list, bytes) = measured(n, || {
            let l = crossbeam_skiplist::base::SkipList::new(
                crossbeam_epoch::default_collector().clone(),
            );
            let guard = crossbeam_epoch::pin();
            for p in &ptrs {
                l.insert(*p, (), &guard).release(&guard);
            }
            l
        });
        println!("memory skiplist {n} keys: {bytes:.1} B/key");
        g.bench_function(BenchmarkId::new("scan-1000/skiplist", n), |b| {
            b.iter(|| {
                let from = rng.gen_range(0..n).to_be_bytes();
                let guard = crossbeam_epoch::pin();
                let range = (Bound::Included(&from[..]), Bound::Unbounded);
                for e in list.range::<[u8], _>(range, &guard).take(SCAN) {
                    black_box(e.key().key()[7]);
                }
            })
        });
        drop(list);

        let (tree, bytes) = measured(n, || {
            let t = scc::TreeIndex::<NodePtr, ()>::new();
            for p in &ptrs {
                let _ = t.insert_sync(*p, ());
            }
            t
        });
        println!("memory scc-treeindex {n} keys: {bytes:.1} B/key");
        g.bench_function(BenchmarkId::new("scan-1000/scc-treeindex", n), |b| {
            b.iter(|| {
                let from = rng.gen_range(0..n).to_be_bytes();
                let guard = scc::Guard::new();
                let range = (Bound::Included(&from[..]), Bound::Unbounded);
                for e in tree.range::<[u8], _>(range, &guard).take(SCAN) {
                    black_box(e.0.key()[7]);
                }
            })
        });
        g.finish();
        drop(tree);
        drop(nodes);
    }
    c.final_summary();
}
