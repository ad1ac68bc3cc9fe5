//! The ordered index of keys: a lock-free hash table for point reads
//! (`hashindex.rs`) and an ordered view for scans, both pointing at the
//! same per-key node. Each key maps to a [`KeyEntry`] (its version chain)
//! that lives, at a stable address, until the index drops: keys are never
//! removed, only their versions are pruned.
//!
//! The ordered view ([`Ordered`]) is two sorted sources behind one atomic
//! pointer: `base`, an immutable sorted array of node pointers (8 bytes a
//! key), and `delta`, a crossbeam-skiplist `base::SkipList` of the keys
//! created since `base` was built. Creating a key (under the hash index's
//! insert mutex, so creators are serialized) inserts it into `delta`; when
//! `delta` holds a sixteenth of `base`'s keys (at least [`MERGE_MIN`]), the
//! creator merges the two into a new `base` with an empty `delta`, publishes
//! the pair with one pointer store and retires the old pair to the epoch
//! collector. A scan loads the pair once and merges the two sources; a key
//! is in exactly one of them.
//!
//! Everything is read under the store's epoch guard and takes no reference
//! count, so a point read or a scan does no read-modify-write. The skiplist
//! runs on the same collector as the store (crossbeam-epoch's default one),
//! so one guard protects the pairs, their skiplists' towers, the hash
//! tables and the version chains. A retired pair frees its array and its
//! skiplist's towers and nothing else; the key nodes they point at are the
//! hash index's, freed only when the index drops, so neither frees what the
//! other still reads.
//!
//! Under `--cfg loom` the skiplist (whose atomics loom cannot see) is
//! replaced by a mutex-protected `BTreeMap`; the index is not part of the
//! snapshot protocol the models check.

use super::chain::KeyEntry;
#[cfg(not(loom))]
use super::hashindex::{HashIndex, Node};
#[cfg(not(loom))]
use super::SendPtr;
use crate::machinery::epoch::{Collector, Guard};
#[cfg(not(loom))]
use crate::sync::{AtomicPtr, Ordering};
use std::ops::Bound;

/// An ordered-view key: a pointer to the key's node, ordered by the key
/// bytes.
#[cfg(not(loom))]
#[derive(Clone, Copy)]
struct NodeKey(*const Node);

#[cfg(not(loom))]
impl NodeKey {
    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: nodes are freed only when the index drops, and every
        // comparison of NodeKeys runs through a borrow of the index (a
        // retired pair freed later drops its NodeKeys without reading them).
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

/// The ordered view's merge threshold: `delta` is merged into `base` once
/// it holds this many keys, or `base`'s divided by [`MERGE_RATIO`],
/// whichever is more.
#[cfg(not(loom))]
const MERGE_MIN: usize = 1024;

/// A merge reads every node once, so a key's creation pays about this many
/// node reads amortized; a scan steps through the skiplist (a dependent
/// miss more per key) for about one key in this many.
#[cfg(not(loom))]
const MERGE_RATIO: usize = 16;

/// The ordered view: every key in exactly one of `base` (sorted, immutable)
/// and `delta` (the keys created since `base` was built). Published whole
/// by one pointer store, retired whole to the epoch collector.
#[cfg(not(loom))]
struct Ordered {
    base: Box<[NodeKey]>,
    delta: crossbeam_skiplist::base::SkipList<NodeKey, ()>,
}

#[cfg(not(loom))]
impl Ordered {
    fn new(base: Box<[NodeKey]>) -> Box<Ordered> {
        Box::new(Ordered {
            base,
            delta: crossbeam_skiplist::base::SkipList::new(
                crossbeam_epoch::default_collector().clone(),
            ),
        })
    }

    /// The part of `base` inside `range`.
    fn base_span(&self, (lo, hi): (Bound<&[u8]>, Bound<&[u8]>)) -> &[NodeKey] {
        let b = &self.base;
        let start = match lo {
            Bound::Included(k) => b.partition_point(|n| n.bytes() < k),
            Bound::Excluded(k) => b.partition_point(|n| n.bytes() <= k),
            Bound::Unbounded => 0,
        };
        let end = match hi {
            Bound::Included(k) => b.partition_point(|n| n.bytes() <= k),
            Bound::Excluded(k) => b.partition_point(|n| n.bytes() < k),
            Bound::Unbounded => b.len(),
        };
        &b[start..end.max(start)]
    }
}

/// How many array slots ahead a walk of `base` prefetches nodes.
#[cfg(not(loom))]
const AHEAD: usize = 16;

/// Visits `base` (ascending) merged with `delta` (in the visiting order:
/// ascending if `forward`, else descending), in the visiting order, until
/// `f` returns false. Returns false if `f` did. Keys of `base` are compared
/// only while `delta` has keys left, and each node is prefetched `AHEAD`
/// slots before it is reached, so a stretch of `base` is walked with its
/// misses overlapped.
#[cfg(not(loom))]
fn merge(
    base: &[NodeKey],
    forward: bool,
    delta: impl Iterator<Item = NodeKey>,
    mut f: impl FnMut(NodeKey) -> bool,
) -> bool {
    // Strict, though `<=` / `>=` would do the same (equivalent): a key is in
    // one source only, so `d` and `b` are never equal.
    let before = |d: &NodeKey, b: &NodeKey| {
        if forward {
            d.bytes() < b.bytes()
        } else {
            d.bytes() > b.bytes()
        }
    };
    let mut delta = delta.peekable();
    let n = base.len();
    for j in 0..n {
        let i = if forward { j } else { n - 1 - j };
        let ahead = if forward {
            i.checked_add(AHEAD)
        } else {
            i.checked_sub(AHEAD)
        };
        if let Some(p) = ahead.and_then(|a| base.get(a)) {
            super::prefetch(p.0);
        }
        let b = base[i];
        while let Some(d) = delta.next_if(|d| before(d, &b)) {
            if !f(d) {
                return false;
            }
        }
        if !f(b) {
            return false;
        }
    }
    delta.all(f)
}

/// The index: a lock-free hash table for point reads and the ordered view
/// for scans, both pointing at the same per-key [`Node`]. Creating a key
/// takes the hash index's insert mutex (writers creating keys only), under
/// which the ordered view is updated too.
#[cfg(not(loom))]
pub(crate) struct Index {
    /// The current [`Ordered`]; freed by `Drop` (before `hash` frees the
    /// nodes it points to) or, once replaced, by the epoch collector.
    ordered: AtomicPtr<Ordered>,
    hash: HashIndex,
}

#[cfg(not(loom))]
impl Drop for Index {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no guard can still hold the current pair
        // (every borrow of it is bounded by a borrow of the index); it came
        // from `Box::into_raw` and is freed once, here.
        drop(unsafe { Box::from_raw(self.ordered.load(Ordering::Relaxed)) });
    }
}

#[cfg(not(loom))]
impl Index {
    pub(crate) fn new() -> Index {
        Index {
            ordered: AtomicPtr::new(Box::into_raw(Ordered::new(Box::new([])))),
            hash: HashIndex::new(),
        }
    }

    /// The ordered view now, for as long as `guard` is held.
    #[inline]
    fn ordered<'g>(&self, _guard: &'g Guard) -> &'g Ordered {
        // Acquire, required: pairs with the Release store in `add_ordered`
        // (the new pair's array and skiplist).
        let o = self.ordered.load(Ordering::Acquire);
        // SAFETY: loaded under `_guard`; a replaced pair is retired to the
        // epoch collector and freed only after every guard that could have
        // loaded it drops, and the current one only when the index drops,
        // which the borrow of `self` rules out.
        unsafe { &*o }
    }

    /// Adds a new key's node to the ordered view, merging `delta` into a
    /// new `base` when it is due. Called under the hash index's insert
    /// mutex only, so there is one caller at a time.
    fn add_ordered(&self, n: &Node, collector: &Collector, guard: &Guard) {
        let o = self.ordered(guard);
        o.delta
            .insert(NodeKey(n as *const Node), (), guard)
            .release(guard);
        // Equivalent with `<=` (the merge comes one key later).
        if o.delta.len() < MERGE_MIN.max(o.base.len() / MERGE_RATIO) {
            return;
        }
        let mut base = Vec::with_capacity(o.base.len() + o.delta.len());
        merge(&o.base, true, o.delta.iter(guard).map(|e| *e.key()), |k| {
            base.push(k);
            true
        });
        let new = Box::into_raw(Ordered::new(base.into_boxed_slice()));
        // Release, required: pairs with the Acquire load in `ordered`, so a
        // reader that loads the new pair sees its array and skiplist.
        self.ordered.store(new, Ordering::Release);
        let old = SendPtr(o as *const Ordered as *mut Ordered);
        collector.defer(guard, move || {
            let old = old;
            // SAFETY: the old pair is unreachable from the index since the
            // store above; the collector runs this after every guard that
            // could have loaded it drops, and nothing else frees it.
            drop(unsafe { Box::from_raw(old.0) });
        });
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
            self.add_ordered(n, collector, guard)
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
        let visit = |k: NodeKey| {
            // SAFETY: nodes are freed only when the index drops (after every
            // pair), which the `'s` borrow of `self` rules out, so the node
            // and its key outlive `'s` (keys are never removed), not only
            // the guard.
            let n: &'s Node = unsafe { &*k.0 };
            f(n.key(), &n.entry)
        };
        let o = self.ordered(guard);
        let base = o.base_span(range);
        let delta = o.delta.range::<[u8], _>(range, guard);
        if forward {
            merge(base, true, delta.map(|e| *e.key()), visit);
        } else {
            merge(base, false, delta.rev().map(|e| *e.key()), visit);
        }
    }

    /// Visits every entry.
    pub(crate) fn for_each<'g>(&'g self, guard: &'g Guard, mut f: impl FnMut(&'g KeyEntry)) {
        let o = self.ordered(guard);
        let delta = o.delta.iter(guard).map(|e| *e.key());
        for k in o.base.iter().copied().chain(delta) {
            // SAFETY: as in `range`.
            f(unsafe { &(*k.0).entry });
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;
    use std::ops::RangeBounds;

    /// The keys `range` visits, in visiting order.
    fn visit(ix: &Index, lo: Bound<&[u8]>, hi: Bound<&[u8]>, forward: bool) -> Vec<Vec<u8>> {
        let c = Collector::new();
        let g = c.pin();
        let mut out = Vec::new();
        ix.range((lo, hi), forward, &g, |k, _| {
            out.push(k.to_vec());
            true
        });
        out
    }

    fn bound(b: Bound<&Vec<u8>>) -> Bound<&[u8]> {
        b.map(Vec::as_slice)
    }

    #[test]
    fn scans_match_a_sorted_set_across_merges_in_both_directions() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let c = Collector::new();
        let ix = Index::new();
        let mut keys: Vec<Vec<u8>> = (0..12_000u32)
            .map(|i| {
                // Lengths 0..=40 (inline and boxed keys): a distinct 4-byte
                // head cut short for some (so some keys are prefixes of
                // others), then filler.
                let mut k = i.wrapping_mul(2_654_435_761).to_be_bytes().to_vec();
                k.truncate(1 + (i % 4) as usize);
                k.resize((i % 41) as usize, (i % 3) as u8);
                k
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        keys.shuffle(&mut rng);
        let mut model = BTreeSet::new();
        let mut checks = 0;
        for (i, k) in keys.iter().enumerate() {
            let g = c.pin();
            ix.get_or_insert(k, &c, &g);
            drop(g);
            model.insert(k.clone());
            // Check around the merge points and at random others.
            if i % 997 == 0 || i + 1 == keys.len() || (i + 1) % MERGE_MIN == 0 {
                checks += 1;
                for _ in 0..3 {
                    let a = &keys[rng.gen_range(0..=i)];
                    let b = &keys[rng.gen_range(0..=i)];
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    let bounds = [
                        (Bound::Included(a), Bound::Included(b)),
                        (Bound::Excluded(a), Bound::Excluded(b)),
                        (Bound::Included(a), Bound::Unbounded),
                        (Bound::Unbounded, Bound::Excluded(b)),
                        (Bound::Excluded(b), Bound::Included(a)),
                    ];
                    for (lo, hi) in bounds {
                        // Filtered, not `BTreeSet::range` (which panics on
                        // inverted or empty excluded bounds; the index must not).
                        let want: Vec<_> = model
                            .iter()
                            .filter(|k| (lo, hi).contains(k))
                            .cloned()
                            .collect();
                        let fwd = visit(&ix, bound(lo), bound(hi), true);
                        assert_eq!(fwd, want, "forward {lo:?}..{hi:?} after {} keys", i + 1);
                        let mut back = visit(&ix, bound(lo), bound(hi), false);
                        back.reverse();
                        assert_eq!(back, want, "backward {lo:?}..{hi:?}");
                    }
                }
            }
        }
        assert!(checks > 20);
        let all = visit(&ix, Bound::Unbounded, Bound::Unbounded, true);
        assert_eq!(all, model.iter().cloned().collect::<Vec<_>>());
        let g = c.pin();
        let o = ix.ordered(&g);
        assert_eq!(o.base.len() + o.delta.len(), keys.len());
        assert!(
            o.base.len() >= 8 * MERGE_MIN
                && o.delta.len() < MERGE_MIN.max(o.base.len() / MERGE_RATIO),
            "merged: base {} delta {}",
            o.base.len(),
            o.delta.len()
        );
        let mut n = 0;
        ix.for_each(&g, |_| n += 1);
        assert_eq!(n, keys.len());
    }

    #[test]
    fn a_scan_running_beside_key_creation_sees_every_earlier_key_once_in_order() {
        let c = Collector::new();
        let ix = Index::new();
        const KEYS: u64 = 60_000;
        let created = crate::sync::AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut order: Vec<u64> = (0..KEYS).collect();
                order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(3));
                // Created in shuffled order; `created` counts a prefix of
                // keys 0..KEYS in ascending order made so far, so a reader
                // knows which keys must be there.
                let mut done = vec![false; KEYS as usize];
                let mut prefix = 0;
                for k in order {
                    let g = c.pin();
                    ix.get_or_insert(&k.to_be_bytes(), &c, &g);
                    done[k as usize] = true;
                    while prefix < KEYS && done[prefix as usize] {
                        prefix += 1;
                    }
                    // Release: pairs with the reader's Acquire load, so the
                    // keys below `prefix` were inserted before it reads.
                    created.store(prefix, crate::sync::Ordering::Release);
                }
            });
            let mut scans = 0;
            loop {
                let must = created.load(crate::sync::Ordering::Acquire);
                let seen = visit(&ix, Bound::Unbounded, Bound::Unbounded, scans % 2 == 0);
                let mut seen: Vec<u64> = seen
                    .iter()
                    .map(|k| u64::from_be_bytes(k[..].try_into().unwrap()))
                    .collect();
                if scans % 2 == 1 {
                    seen.reverse();
                }
                assert!(seen.windows(2).all(|w| w[0] < w[1]), "strictly ascending");
                let below = seen.iter().take_while(|&&k| k < must).count() as u64;
                assert_eq!(below, must, "every key below {must} is there");
                scans += 1;
                if must == KEYS {
                    break;
                }
            }
            assert!(scans > 1);
        });
    }
}
