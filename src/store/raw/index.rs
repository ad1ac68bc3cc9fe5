//! The ordered index of keys: a lock-free hash table for point reads
//! (`hashindex.rs`) and crossbeam-skiplist's lock-free `base::SkipList` for
//! ordered scans, both pointing at the same per-key node. Each key maps to a
//! [`KeyEntry`] (its version chain) that lives, at a stable address, until
//! the index drops: keys are never removed, only their versions are pruned.
//!
//! Both structures are read under the store's epoch guard and take no
//! reference count, so a point read does no read-modify-write. The skiplist
//! runs on the same collector as the store (crossbeam-epoch's default one),
//! so one guard protects its towers, the hash tables and the version
//! chains. It frees only its own towers, and only when the index drops
//! (keys are never removed); the key nodes it points at are the hash
//! index's, freed after it, so neither frees what the other still reads.
//!
//! Under `--cfg loom` the skiplist (whose atomics loom cannot see) is
//! replaced by a mutex-protected `BTreeMap`; the index is not part of the
//! snapshot protocol the models check.

use super::chain::KeyEntry;
#[cfg(not(loom))]
use super::hashindex::{HashIndex, Node};
use crate::machinery::epoch::{Collector, Guard};
use std::ops::Bound;

/// A skiplist key: a pointer to the key's node, ordered by the key bytes.
#[cfg(not(loom))]
#[derive(Clone, Copy)]
struct NodeKey(*const Node);

#[cfg(not(loom))]
impl NodeKey {
    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: nodes are freed only when the index drops, after the
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
/// Creating a key takes the hash index's insert mutex (writers creating
/// keys only), under which the skiplist entry is added too.
#[cfg(not(loom))]
pub(crate) struct Index {
    // Declared first so it drops before `hash` frees the nodes it points to.
    list: crossbeam_skiplist::base::SkipList<NodeKey, ()>,
    hash: HashIndex,
}

#[cfg(not(loom))]
impl Index {
    pub(crate) fn new() -> Index {
        Index {
            list: crossbeam_skiplist::base::SkipList::new(
                crossbeam_epoch::default_collector().clone(),
            ),
            hash: HashIndex::new(),
        }
    }

    /// The entry for `key`, if the key was ever written. Loads only.
    #[inline]
    pub(crate) fn get<'s>(&'s self, key: &[u8], guard: &Guard) -> Option<&'s KeyEntry> {
        let h = self.hash.hash(key);
        self.hash.get(key, h, guard).map(|n| &n.entry)
    }

    /// Reads a batch of keys with their cache misses overlapped: every
    /// key's table slot is requested, then every key's node, then every
    /// key's head version, before the first read; `f(i, entry)` then runs
    /// for each key in order (`None`: never written) until it returns
    /// false. Loads only, as [`Index::get`].
    #[inline]
    pub(crate) fn get_batch<'s, K: AsRef<[u8]>>(
        &'s self,
        keys: &[K],
        guard: &Guard,
        mut f: impl FnMut(usize, Option<&'s KeyEntry>) -> bool,
    ) -> bool {
        use super::hashindex::Candidate;
        const BATCH: usize = 16;
        for (c, chunk) in keys.chunks(BATCH).enumerate() {
            let mut hs = [0u64; BATCH];
            for (h, k) in hs.iter_mut().zip(chunk) {
                *h = self.hash.hash(k.as_ref());
                self.hash.prefetch_slot(*h, guard);
            }
            let mut cs = [Candidate::NONE; BATCH];
            for (c, &h) in cs.iter_mut().zip(&hs[..chunk.len()]) {
                *c = self.hash.candidate(h, guard);
            }
            let mut es: [Option<&'s KeyEntry>; BATCH] = [None; BATCH];
            for (i, k) in chunk.iter().enumerate() {
                es[i] = self
                    .hash
                    .resolve(k.as_ref(), hs[i], cs[i], guard)
                    .map(|n| &n.entry);
                if let Some(e) = es[i] {
                    e.prefetch_head();
                }
            }
            for (i, e) in es[..chunk.len()].iter().enumerate() {
                if !f(c * BATCH + i, *e) {
                    return false;
                }
            }
        }
        true
    }

    /// Tells the index that `v` is now `key`'s head (a writer, after its
    /// head CAS): a hint that lookups prefetch, never dereferenced.
    #[inline]
    pub(crate) fn hint_head(&self, key: &[u8], v: *mut super::chain::Version, guard: &Guard) {
        self.hash.hint_head(key, self.hash.hash(key), v, guard);
    }

    /// The entry for `key`, inserting an empty one if needed. Entries live
    /// until the index drops, hence the `'s` borrow.
    pub(crate) fn get_or_insert<'s>(
        &'s self,
        key: &[u8],
        collector: &Collector,
        guard: &Guard,
    ) -> &'s KeyEntry {
        let (n, _) = self.hash.get_or_insert(key, collector, guard, |n| {
            self.list
                .insert(NodeKey(n as *const Node), (), guard)
                .release(guard);
        });
        &n.entry
    }

    /// Visits the entries with keys in `range`, in ascending key order if
    /// `forward`, else descending, until `f` returns false.
    pub(crate) fn range<'s: 'g, 'g>(
        &'s self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        forward: bool,
        guard: &'g Guard,
        mut f: impl FnMut(&'s [u8], &'g KeyEntry) -> bool,
    ) {
        let mut visit = |e: crossbeam_skiplist::base::Entry<'_, 'g, NodeKey, ()>| {
            // SAFETY: nodes are freed only when the index drops (after the
            // skiplist), which the `'s` borrow of `self` rules out, so the
            // node and its key outlive `'s` (keys are never removed), not
            // only the guard.
            let n: &'s Node = unsafe { &*e.key().0 };
            f(n.key(), &n.entry)
        };
        let entries = self.list.range::<[u8], _>(range, guard);
        if forward {
            entries.into_iter().all(&mut visit);
        } else {
            entries.rev().all(&mut visit);
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

    pub(crate) fn get<'s>(&'s self, key: &[u8], _guard: &Guard) -> Option<&'s KeyEntry> {
        self.map.lock().unwrap().get(key).map(|b| Self::extend(b))
    }

    pub(crate) fn hint_head(&self, _key: &[u8], _v: *mut super::chain::Version, _guard: &Guard) {}

    pub(crate) fn get_batch<'s, K: AsRef<[u8]>>(
        &'s self,
        keys: &[K],
        guard: &Guard,
        mut f: impl FnMut(usize, Option<&'s KeyEntry>) -> bool,
    ) -> bool {
        for (i, k) in keys.iter().enumerate() {
            if !f(i, self.get(k.as_ref(), guard)) {
                return false;
            }
        }
        true
    }

    pub(crate) fn get_or_insert<'s>(
        &'s self,
        key: &[u8],
        _collector: &Collector,
        _guard: &Guard,
    ) -> &'s KeyEntry {
        let mut m = self.map.lock().unwrap();
        let b = m
            .entry(key.into())
            .or_insert_with(|| Box::new(KeyEntry::new()));
        Self::extend(b)
    }

    pub(crate) fn range<'s: 'g, 'g>(
        &'s self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        forward: bool,
        _guard: &'g Guard,
        mut f: impl FnMut(&'s [u8], &'g KeyEntry) -> bool,
    ) {
        let items: Vec<(*const [u8], *const KeyEntry)> = self
            .map
            .lock()
            .unwrap()
            .range::<[u8], _>(range)
            .map(|(k, v)| (&**k as *const [u8], &**v as *const KeyEntry))
            .collect();
        // SAFETY: as in `extend`: boxed keys and entries are never removed
        // while the index lives.
        let mut visit = |(k, v): (*const [u8], *const KeyEntry)| f(unsafe { &*k }, unsafe { &*v });
        if forward {
            items.into_iter().all(&mut visit);
        } else {
            items.into_iter().rev().all(&mut visit);
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
