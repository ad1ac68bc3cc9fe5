//! The bundled store: the first user of the public machinery layer
//! (`crate::machinery`), which it reaches only through its public API.
//!
//! The ordered index of keys. Each key maps to a [`KeyEntry`] (its version
//! chain) that lives, at a stable address, until the store drops: keys are
//! never removed from the index, only their versions are pruned (DESIGN.md,
//! "Boundaries").
//!
//! Point reads go through a lock-free hash table (`raw/hashindex.rs`);
//! ordered scans through crossbeam-skiplist's lock-free `base::SkipList`.
//! Both are read under the same epoch guard as the version chains and take
//! no reference count, so a point read does no read-modify-write. Under `--cfg loom` the
//! skiplist (whose atomics loom cannot see) is replaced by a mutex-protected
//! `BTreeMap`; the index is not part of the snapshot protocol the models
//! check.

pub(crate) mod raw;

use crate::machinery::epoch::{Collector, Guard};
use raw::chain::KeyEntry;
#[cfg(not(loom))]
use raw::hashindex::{HashIndex, Node};
use std::ops::Bound;

/// A skiplist key: a pointer to the key's node, ordered by the key bytes.
#[cfg(not(loom))]
#[derive(Clone, Copy)]
struct NodeKey(*const Node);

#[cfg(not(loom))]
impl NodeKey {
    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: nodes are freed only when the store drops, after the
        // skiplist (field order in `Index`); a NodeKey never outlives it.
        unsafe { (*self.0).key() }
    }
}

#[cfg(not(loom))]
impl std::borrow::Borrow<[u8]> for NodeKey {
    fn borrow(&self) -> &[u8] {
        self.bytes()
    }
}

#[cfg(not(loom))]
impl PartialEq for NodeKey {
    fn eq(&self, o: &Self) -> bool {
        self.bytes() == o.bytes()
    }
}
#[cfg(not(loom))]
impl Eq for NodeKey {}
#[cfg(not(loom))]
impl PartialOrd for NodeKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
#[cfg(not(loom))]
impl Ord for NodeKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.bytes().cmp(o.bytes())
    }
}

// SAFETY: a NodeKey is a shared pointer to an immutable key plus a KeyEntry
// made of atomics; the node outlives every use (see `bytes`).
#[cfg(not(loom))]
unsafe impl Send for NodeKey {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl Sync for NodeKey {}

/// The index: a lock-free hash table for point reads and a lock-free
/// skiplist for ordered scans, both pointing at the same per-key [`Node`].
/// Creating a key takes `inserting` (writers creating keys only).
#[cfg(not(loom))]
pub(crate) struct Index {
    // Declared first so it drops before `hash` frees the nodes it points to.
    list: crossbeam_skiplist::base::SkipList<NodeKey, ()>,
    hash: HashIndex,
    inserting: crate::sync::Mutex<()>,
}

#[cfg(not(loom))]
impl Index {
    pub(crate) fn new() -> Index {
        Index {
            list: crossbeam_skiplist::base::SkipList::new(
                crossbeam_epoch::default_collector().clone(),
            ),
            hash: HashIndex::new(),
            inserting: crate::sync::Mutex::new(()),
        }
    }

    /// The entry for `key`, if the key was ever written. Loads only.
    #[inline]
    pub(crate) fn get<'g>(&'g self, key: &[u8], guard: &'g Guard) -> Option<&'g KeyEntry> {
        let h = self.hash.hash(key);
        self.hash.get(key, h, guard).map(|n| &n.entry)
    }

    /// The entry for `key`, inserting an empty one if needed.
    pub(crate) fn get_or_insert<'g>(
        &'g self,
        key: &[u8],
        rc: &Collector,
        guard: &'g Guard,
    ) -> &'g KeyEntry {
        let h = self.hash.hash(key);
        if let Some(n) = self.hash.get(key, h, guard) {
            return &n.entry;
        }
        let _g = self.inserting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = self.hash.get(key, h, guard) {
            return &n.entry;
        }
        // SAFETY: we hold `inserting`.
        let node = unsafe { self.hash.new_node(key) };
        self.list.insert(NodeKey(node), (), guard).release(guard);
        // SAFETY: we hold `inserting`, `node` is fresh from `new_node`, and
        // the re-check above under the mutex found no node for `key`.
        unsafe { self.hash.insert_locked(node, rc, guard) };
        // SAFETY: the node lives until the store drops (keys are never
        // removed), which the `'g` borrow of `self` rules out.
        unsafe { &(*node).entry }
    }

    /// Visits the entries with keys in `range`, in order, until `f` returns
    /// false.
    pub(crate) fn range<'g>(
        &'g self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        guard: &'g Guard,
        mut f: impl FnMut(&'g [u8], &'g KeyEntry) -> bool,
    ) {
        for e in self.list.range::<[u8], _>(range, guard) {
            // SAFETY: as in `get_or_insert`: nodes outlive `'g`.
            let n: &'g Node = unsafe { &*e.key().0 };
            if !f(n.key(), &n.entry) {
                break;
            }
        }
    }

    /// As [`Index::range`], in descending key order.
    pub(crate) fn range_rev<'g>(
        &'g self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        guard: &'g Guard,
        mut f: impl FnMut(&'g [u8], &'g KeyEntry) -> bool,
    ) {
        for e in self.list.range::<[u8], _>(range, guard).rev() {
            // SAFETY: as in `range`.
            let n: &'g Node = unsafe { &*e.key().0 };
            if !f(n.key(), &n.entry) {
                break;
            }
        }
    }

    /// Visits every entry.
    pub(crate) fn for_each<'g>(&'g self, guard: &'g Guard, mut f: impl FnMut(&'g KeyEntry)) {
        for e in self.list.iter(guard) {
            // SAFETY: as in `range`.
            f(unsafe { &(*e.key().0).entry });
        }
    }
}

#[cfg(loom)]
pub(crate) struct Index {
    map: crate::sync::Mutex<std::collections::BTreeMap<Box<[u8]>, Box<KeyEntry>>>,
}

#[cfg(loom)]
impl Index {
    pub(crate) fn new() -> Index {
        Index {
            map: crate::sync::Mutex::new(Default::default()),
        }
    }

    fn extend<'g>(e: &KeyEntry) -> &'g KeyEntry {
        // SAFETY: entries are boxed (stable address) and never removed until
        // the index drops, which needs `&mut self`; every `'g` borrow is
        // bounded by a borrow of the index.
        unsafe { &*(e as *const KeyEntry) }
    }

    pub(crate) fn get<'g>(&'g self, key: &[u8], _guard: &'g Guard) -> Option<&'g KeyEntry> {
        self.map.lock().unwrap().get(key).map(|b| Self::extend(b))
    }

    pub(crate) fn get_or_insert<'g>(
        &'g self,
        key: &[u8],
        _rc: &Collector,
        _guard: &'g Guard,
    ) -> &'g KeyEntry {
        let mut m = self.map.lock().unwrap();
        let b = m
            .entry(key.into())
            .or_insert_with(|| Box::new(KeyEntry::new()));
        Self::extend(b)
    }

    pub(crate) fn range<'g>(
        &'g self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        _guard: &'g Guard,
        mut f: impl FnMut(&'g [u8], &'g KeyEntry) -> bool,
    ) {
        let items: Vec<(*const [u8], *const KeyEntry)> = self
            .map
            .lock()
            .unwrap()
            .range::<[u8], _>(range)
            .map(|(k, v)| (&**k as *const [u8], &**v as *const KeyEntry))
            .collect();
        for (k, v) in items {
            // SAFETY: as in `extend`: boxed keys and entries are never
            // removed while the index lives.
            if !f(unsafe { &*k }, unsafe { &*v }) {
                break;
            }
        }
    }

    pub(crate) fn range_rev<'g>(
        &'g self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        _guard: &'g Guard,
        mut f: impl FnMut(&'g [u8], &'g KeyEntry) -> bool,
    ) {
        let items: Vec<(*const [u8], *const KeyEntry)> = self
            .map
            .lock()
            .unwrap()
            .range::<[u8], _>(range)
            .rev()
            .map(|(k, v)| (&**k as *const [u8], &**v as *const KeyEntry))
            .collect();
        for (k, v) in items {
            // SAFETY: as in `extend`.
            if !f(unsafe { &*k }, unsafe { &*v }) {
                break;
            }
        }
    }

    pub(crate) fn for_each<'g>(&'g self, _guard: &'g Guard, mut f: impl FnMut(&'g KeyEntry)) {
        let items: Vec<*const KeyEntry> = self
            .map
            .lock()
            .unwrap()
            .values()
            .map(|v| &**v as *const KeyEntry)
            .collect();
        for v in items {
            // SAFETY: as in `extend`.
            f(unsafe { &*v });
        }
    }
}

/// The key-value store: index, collector, and freed-version count.
pub(crate) struct Store {
    pub(crate) index: Index,
    pub(crate) rc: Collector,
    pub(crate) freed: std::sync::Arc<crate::sync::AtomicU64>,
}

impl Store {
    pub(crate) fn new() -> Store {
        Store {
            index: Index::new(),
            rc: Collector::new(),
            freed: std::sync::Arc::new(crate::sync::AtomicU64::new(0)),
        }
    }

    /// A callback for the collector that counts freed versions.
    pub(crate) fn on_free(&self) -> impl Fn(u64) + Send + 'static {
        let freed = self.freed.clone();
        move |n| {
            // Relaxed: a statistic.
            freed.fetch_add(n, crate::sync::Ordering::Relaxed);
        }
    }
}
