//! The ordered index of keys. Each key maps to a [`KeyEntry`] (its version
//! chain) that lives, at a stable address, until the store drops: keys are
//! never removed from the index, only their versions are pruned (DESIGN.md,
//! "Boundaries").
//!
//! The index is crossbeam-skiplist's lock-free `base::SkipList`, read under
//! the same epoch guard as the version chains: a lookup takes no reference
//! count, so a point read does no read-modify-write. Under `--cfg loom` the
//! skiplist (whose atomics loom cannot see) is replaced by a mutex-protected
//! `BTreeMap`; the index is not part of the snapshot protocol the models
//! check.

use crate::raw::chain::KeyEntry;
use crate::raw::reclaim::{Guard, Reclaimer};
use std::ops::Bound;

#[cfg(not(loom))]
pub(crate) struct Index {
    list: crossbeam_skiplist::base::SkipList<Box<[u8]>, KeyEntry>,
}

#[cfg(not(loom))]
impl Index {
    pub(crate) fn new() -> Index {
        Index {
            list: crossbeam_skiplist::base::SkipList::new(
                crossbeam_epoch::default_collector().clone(),
            ),
        }
    }

    /// The entry for `key`, if the key was ever written.
    #[inline]
    pub(crate) fn get<'g>(&'g self, key: &[u8], guard: &'g Guard) -> Option<&'g KeyEntry> {
        self.list.get(key, guard).map(|e| e.value())
    }

    /// The entry for `key`, inserting an empty one if needed.
    pub(crate) fn get_or_insert<'g>(&'g self, key: &[u8], guard: &'g Guard) -> &'g KeyEntry {
        if let Some(e) = self.get(key, guard) {
            return e;
        }
        self.list
            .get_or_insert(key.into(), KeyEntry::new(), guard)
            .release(guard);
        self.get(key, guard)
            .expect("keys are never removed from the index")
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
            if !f(e.key(), e.value()) {
                break;
            }
        }
    }

    /// Visits every entry.
    pub(crate) fn for_each<'g>(&'g self, guard: &'g Guard, mut f: impl FnMut(&'g KeyEntry)) {
        for e in self.list.iter(guard) {
            f(e.value());
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

    pub(crate) fn get_or_insert<'g>(&'g self, key: &[u8], _guard: &'g Guard) -> &'g KeyEntry {
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
    pub(crate) rc: Reclaimer,
    pub(crate) freed: std::sync::Arc<crate::sync::AtomicU64>,
}

impl Store {
    pub(crate) fn new() -> Store {
        Store {
            index: Index::new(),
            rc: Reclaimer::new(),
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
