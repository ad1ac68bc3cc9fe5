//! Hooks for `benches/index.rs` (feature `bench-hooks`): the store's
//! point-lookup hash index (`store/raw/hashindex.rs`) on its own, used the
//! way the store uses it, so it can be measured beside other concurrent
//! maps. Not part of the API: no stability promise, hidden from the docs.

use crate::machinery::epoch::Collector;
use crate::store::raw::hashindex::HashIndex;

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
        self.ix.get(key, h, &guard).map(|n| n as *const _ as usize)
    }

    /// Inserts `key` as the store's `Index::get_or_insert` does (a lookup,
    /// then the insert mutex, a re-check and the insert; the skiplist side
    /// is left out). Returns whether the key was new.
    pub fn insert(&self, key: &[u8]) -> bool {
        let guard = self.collector.pin();
        self.ix
            .get_or_insert(key, &self.collector, &guard, |_| {})
            .1
    }
}
