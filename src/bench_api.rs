//! Hooks for `benches/index.rs`, `benches/ordered.rs` and the workload
//! driver (feature `bench-hooks`): the store's point-lookup hash index
//! (`store/raw/hashindex.rs`) on its own, and its whole index (hash index
//! and ordered view, `store/raw/index.rs`), used the way the store uses
//! them, so they can be measured beside other concurrent maps; the
//! per-thread count of atomic read-modify-writes (feature `count-rmw`);
//! the duration of each of the commit log's batch syncs; and the version
//! slab (`store/raw/slab.rs`): its figures and its allocation on its own.
//! Not part of the API: no stability promise, hidden from the docs.

use crate::machinery::epoch::Collector;
use crate::store::raw::hashindex::{HashIndex, Want};
use crate::store::raw::index::Index;
use std::ops::Bound;

pub use crate::sync::thread_rmw_count;

/// The hash index with the collector and insert mutex that the store pairs
/// it with. Every key maps to its own node (key bytes and an empty version
/// chain), allocated on insert and freed when the index drops.
pub struct HashIndexHook {
    ix: HashIndex,
    collector: Collector,
}

impl Default for HashIndexHook {
    fn default() -> Self {
        HashIndexHook::new()
    }
}

impl HashIndexHook {
    /// An empty index (its table starts at 1,024 slots, as the store's).
    pub fn new() -> HashIndexHook {
        HashIndexHook {
            ix: HashIndex::new(),
            collector: Collector::new(),
        }
    }

    /// A point lookup as `Txn::get_with` makes it: pin, hash, probe. Returns
    /// the key's node address (a pointer-sized payload), if inserted.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<usize> {
        let guard = self.collector.pin();
        let h = self.ix.hash(key);
        self.ix
            .get(key, h, Want::Head, &guard)
            .map(|n| n as *const _ as usize)
    }

    /// Inserts `key` as the store's `Index::get_or_insert` does (a lookup,
    /// then the insert mutex, a re-check and the insert; the ordered view's
    /// side is left out). Returns whether the key was new.
    pub fn insert(&self, key: &[u8]) -> bool {
        let guard = self.collector.pin();
        self.ix
            .get_or_insert(key, &self.collector, &guard, |_| {})
            .1
    }
}

/// The store's whole index: the hash index and the ordered view over the
/// same key nodes, with the collector the store pairs them with.
pub struct IndexHook {
    ix: Index,
    collector: Collector,
}

impl Default for IndexHook {
    fn default() -> Self {
        IndexHook::new()
    }
}

impl IndexHook {
    /// An empty index.
    pub fn new() -> IndexHook {
        IndexHook {
            ix: Index::new(),
            collector: Collector::new(),
        }
    }

    /// Creates `key` as a writer's first put of it does (a no-op if it is
    /// there).
    pub fn insert(&self, key: &[u8]) {
        let guard = self.collector.pin();
        self.ix.get_or_insert(key, &self.collector, &guard);
    }

    /// Visits the keys from `from` on in ascending order, as a scan does,
    /// until `f` returns false.
    pub fn scan(&self, from: &[u8], mut f: impl FnMut(&[u8]) -> bool) {
        let guard = self.collector.pin();
        self.ix.range(
            (Bound::Included(from), Bound::Unbounded),
            true,
            &guard,
            |k, _| f(k),
        );
    }
}

/// The durations of the commit log's batch syncs while recording is on:
/// one list for the process, so the driver reads it around one engine at
/// a time.
static LOG_SYNCS: parking_lot::Mutex<Option<Vec<u64>>> = parking_lot::const_mutex(None);

/// Starts recording the duration of every batch sync of every commit log
/// in the process (dropping what was recorded before).
pub fn record_log_syncs() {
    *LOG_SYNCS.lock() = Some(Vec::new());
}

/// Stops recording; returns the durations of the batch syncs since
/// [`record_log_syncs`], in nanoseconds.
pub fn take_log_sync_nanos() -> Vec<u64> {
    LOG_SYNCS.lock().take().unwrap_or_default()
}

/// Notes one batch sync's duration (`durability/log.rs`) if recording.
pub(crate) fn note_log_sync(d: std::time::Duration) {
    if let Some(v) = LOG_SYNCS.lock().as_mut() {
        v.push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }
}

pub use crate::store::raw::slab::SlabStats;

/// The process's version slab's figures now (every engine's versions
/// share it): what `--report-memory` adds to the global allocator's bytes.
pub fn version_slab() -> SlabStats {
    crate::store::raw::slab::stats()
}

/// A block of at least `bytes` bytes from the version slab, as
/// `Version::alloc` takes one (this thread's cache, else the global
/// allocator).
#[inline]
pub fn slab_alloc(bytes: usize) -> std::ptr::NonNull<u8> {
    crate::store::raw::slab::alloc(bytes)
}

/// Frees a block from [`slab_alloc`] into this thread's cache.
///
/// # Safety
/// `p` came from `slab_alloc(bytes)` with the same `bytes`, is freed once
/// and not used after.
#[inline]
pub unsafe fn slab_free(p: std::ptr::NonNull<u8>, bytes: usize) {
    // SAFETY: the caller's contract is `free`'s.
    unsafe { crate::store::raw::slab::free(p, bytes) }
}
