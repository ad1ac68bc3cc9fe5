//! Hooks for `benches/index.rs` (feature `bench-hooks`, re-exported as the
//! hidden `snapshot_engine::bench_api`): the store's point-lookup hash index
//! (`hashindex.rs`) on its own, used the way `store/mod.rs` uses it, so it
//! can be measured beside other concurrent maps. Not part of the API: no
//! stability promise, hidden from the docs.

use crate::machinery::epoch::Collector;
use crate::store::raw::hashindex::HashIndex;
use crate::sync::Mutex;

/// The hash index with the collector and insert mutex that the store pairs
/// it with. Every key maps to its own node (key bytes and an empty version
/// chain), allocated on insert and freed when the index drops.
pub struct HashIndexHook {
    ix: HashIndex,
    rc: Collector,
    inserting: Mutex<()>,
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
            rc: Collector::new(),
            inserting: Mutex::new(()),
        }
    }

    /// A point lookup as `Txn::get_with` makes it: pin, hash, probe. Returns
    /// the key's node address (a pointer-sized payload), if inserted.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<usize> {
        let guard = self.rc.pin();
        let h = self.ix.hash(key);
        self.ix.get(key, h, &guard).map(|n| n as *const _ as usize)
    }

    /// Inserts `key` as the store's `Index::get_or_insert` does (a lookup,
    /// then the insert mutex, a re-check and the insert; the skiplist side
    /// is left out). Returns whether the key was new.
    pub fn insert(&self, key: &[u8]) -> bool {
        let guard = self.rc.pin();
        let h = self.ix.hash(key);
        if self.ix.get(key, h, &guard).is_some() {
            return false;
        }
        let _g = self.inserting.lock().unwrap_or_else(|e| e.into_inner());
        if self.ix.get(key, h, &guard).is_some() {
            return false;
        }
        // SAFETY: we hold `inserting` (one inserter at a time).
        let node = unsafe { self.ix.new_node(key) };
        // SAFETY: we hold `inserting` (one inserter at a time), `node` is
        // fresh from `new_node`, and the re-check above under the mutex found
        // no node for `key` (as in `store::Index::get_or_insert`).
        unsafe { self.ix.insert_locked(node, &self.rc, &guard) };
        true
    }
}
