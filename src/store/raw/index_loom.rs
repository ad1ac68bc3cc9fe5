//! The store's index under `--cfg loom`: a mutex-protected `BTreeMap` of
//! boxed entries with the API of the real index (`index.rs`), which
//! `raw/mod.rs` swaps for it at the module declaration. Loom cannot see
//! crossbeam-skiplist's atomics, and the index is not part of the snapshot
//! protocol the models check; the hash index has a model of its own
//! (`loom_tests/hash_index.rs`).

use super::chain::KeyEntry;
use super::hashindex::SlotAt;
use crate::machinery::epoch::{Collector, Guard};
use crate::sync::{mutant as m, mutant_on, Ordering};
use std::ops::Bound;

/// As the real index's: a key named for [`Index::key_of`] (here the map's
/// boxed key bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyRef(*const [u8]);

// SAFETY: as the real index's: an address, read only by `key_of` of its
// index, whose boxed keys are immutable and live as long as the index.
unsafe impl Send for KeyRef {}

impl KeyRef {
    /// As the real index's: names nothing.
    pub(crate) const NONE: KeyRef = KeyRef(std::ptr::slice_from_raw_parts(std::ptr::null(), 0));
}

/// Keys to boxed entries behind one mutex; entries live until the index
/// drops, as in the real index.
pub(crate) struct Index {
    map: crate::sync::Mutex<std::collections::BTreeMap<Box<[u8]>, Box<KeyEntry>>>,
    /// Keys created so far, as the real index's count: raised once the
    /// key is in the map.
    created: crate::sync::AtomicU64,
}

impl Index {
    pub(crate) fn new() -> Index {
        Index {
            map: crate::sync::Mutex::new(Default::default()),
            created: crate::sync::AtomicU64::new(0),
        }
    }

    /// As [`Index::new`]: the stand-in has no table to size.
    pub(crate) fn new_small() -> Index {
        Index::new()
    }

    fn extend<'g>(e: &KeyEntry) -> &'g KeyEntry {
        // SAFETY: entries are boxed (stable address) and never removed until
        // the index drops, which needs `&mut self`; every `'g` borrow is
        // bounded by a borrow of the index.
        unsafe { &*(e as *const KeyEntry) }
    }

    /// As the real index's: the keys created so far, loaded before a scan.
    pub(crate) fn created_before_scan(&self) -> u64 {
        // Acquire, as in the real index (where it is required): pairs with
        // the Release store in `count_one`. Stronger than needed here: the
        // map's mutex, taken by the walk after it, orders it too.
        self.created.load(Ordering::Acquire)
    }

    /// As the real index's: the keys created so far, loaded by a
    /// validation.
    pub(crate) fn created_now(&self) -> u64 {
        // Relaxed: the commit gate orders this load after every creation
        // a validation must see, as in the real index.
        self.created.load(Ordering::Relaxed)
    }

    pub(crate) fn get<'s>(&'s self, key: &[u8], _guard: &Guard) -> Option<&'s KeyEntry> {
        self.map.lock().unwrap().get(key).map(|b| Self::extend(b))
    }

    pub(crate) fn get_to_read<'s>(
        &'s self,
        key: &[u8],
        _bound: Option<u64>,
        guard: &Guard,
    ) -> Option<&'s KeyEntry> {
        self.get(key, guard)
    }

    pub(crate) fn hint(&self, _key: &[u8], _entry: &KeyEntry, _at: SlotAt, _guard: &Guard) {}

    /// As the real index's: names `key` (the map's own boxed bytes).
    pub(crate) fn key_ref(&self, key: &[u8]) -> KeyRef {
        KeyRef(key)
    }

    /// As the real index's: a prefetch, here of the key's bytes.
    pub(crate) fn prefetch_key(&self, r: KeyRef) {
        crate::store::raw::prefetch(r.0.cast::<u8>());
    }

    /// As the real index's: the stand-in has no slots.
    pub(crate) fn prefetch_slot(&self, _key: &[u8], _guard: &Guard) {}

    /// As the real index's: the key bytes and entry `r` names.
    ///
    /// # Safety
    /// `r` came from [`Index::key_ref`] of this index.
    pub(crate) unsafe fn key_of(&self, r: KeyRef) -> (&[u8], &KeyEntry) {
        // SAFETY: the caller's contract: the map's boxed key bytes, never
        // removed while the index lives.
        let key: &[u8] = unsafe { &*r.0 };
        let b = self.map.lock().unwrap();
        (
            key,
            Self::extend(b.get(key).expect("a named key is in the map")),
        )
    }

    /// The stand-in's map never migrates.
    pub(crate) fn finish_migration(&self, _collector: &Collector, _guard: &Guard) {}

    pub(crate) fn get_batch<'s, K: AsRef<[u8]>>(
        &'s self,
        keys: &[K],
        _bound: Option<u64>,
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
    ) -> (&'s [u8], &'s KeyEntry, SlotAt) {
        // The broken twin counts the key before it is in the map, so a scan
        // can load the raised count and then miss the key.
        let early = mutant_on(m::KEY_COUNTED_BEFORE_INSERT);
        if early && !self.map.lock().unwrap().contains_key(key) {
            self.count_one();
        }
        let mut m = self.map.lock().unwrap();
        if !m.contains_key(key) {
            m.insert(key.into(), Box::new(KeyEntry::new()));
            if !early {
                self.count_one();
            }
        }
        let (k, b) = m.get_key_value(key).expect("inserted above");
        // SAFETY: as in `extend`: boxed keys are never removed while the
        // index lives, and `'s` is bounded by a borrow of it.
        let k = unsafe { &*(&**k as *const [u8]) };
        (k, Self::extend(b), SlotAt::NONE)
    }

    /// Counts a created key (creators only, one at a time).
    fn count_one(&self) {
        // Relaxed load: creators store it under the map's mutex here (the
        // twin's stray store aside, which changes nothing in its models).
        let n = self.created.load(Ordering::Relaxed) + 1;
        // Release, as in the real index (where it is required): pairs with
        // the Acquire load in `created_before_scan`. Stronger than needed
        // here, as that load's comment says.
        self.created.store(n, Ordering::Release);
    }

    pub(crate) fn range<'s: 'g, 'g>(
        &'s self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        forward: bool,
        _guard: &'g Guard,
        mut f: impl FnMut(&'s [u8], &'s KeyEntry) -> bool,
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
