//! The ordered index of keys: a lock-free hash table for point reads
//! (`hashindex.rs`) and an ordered view for scans, both pointing at the
//! same per-key node. Each key maps to a [`KeyEntry`] (its version chain)
//! that lives, at a stable address, until the index drops: keys are never
//! removed, only their versions are pruned.
//!
//! The ordered view ([`Ordered`]) is up to three sorted sources behind one
//! atomic pointer: `base`, an immutable sorted array of node pointers (8
//! bytes a key); `delta`, a crossbeam-skiplist `base::SkipList` of the keys
//! created since; and, while a merge is under way, `frozen`, the previous
//! delta. Creating a key (under the hash index's insert mutex, so creators
//! are serialized) inserts it into `delta`. When `delta` holds a sixteenth
//! of `base`'s keys (at least [`MERGE_MIN`]), that creator freezes it (a
//! new view: the same base, `frozen` = the old delta, an empty delta), and
//! from then on each creator places [`MERGE_STEPS`] keys of `base` and
//! `frozen` into the next array ([`Merge`]), so no creation pays for a
//! whole merge; the one that places the last publishes the merged base
//! with the current delta. Every view is published with one pointer store
//! and retired whole to the epoch collector, whose deferred destructor
//! parks it in a [`Graveyard`] that key creators empty, one view a
//! creation, and a skiplist that no view holds any more [`DRAIN_STEP`]
//! nodes a creation; its parts are shared, by `Arc`, with the views before
//! and after it. A scan loads the view once and merges its sources; a key
//! is in exactly one of them.
//!
//! Everything is read under the store's epoch guard and takes no reference
//! count, so a point read or a scan does no read-modify-write (the merge's
//! skiplist cursor and the parts' `Arc`s count references on the creator's
//! path only). The skiplists run on the same collector as the store
//! (crossbeam-epoch's default one), so one guard protects the views, their
//! skiplists' towers, the hash tables and the version chains. A part freed
//! with its last view frees its array or its skiplist's towers and nothing
//! else; the key nodes they point at are the hash index's, freed only when
//! the index drops, so neither frees what the other still reads.
//!
//! Under `--cfg loom` the store's `index` module is `index_loom.rs` instead
//! (the skiplist's atomics are invisible to loom): a mutex-protected
//! `BTreeMap` with the same API, as the index is not part of the snapshot
//! protocol the models check.

use super::chain::KeyEntry;
use super::hashindex::{prefetch_node, HashIndex, Hints, Node, SlotAt, Want};
use super::SendPtr;
use crate::machinery::epoch::{Collector, Guard};
use crate::sync::{AtomicPtr, AtomicU64, Mutex, Ordering};
use crossbeam_skiplist::base::RefEntry;
use std::ops::Bound;
use std::sync::Arc;

/// A key of an index named in 8 bytes ([`Index::key_ref`]): its node's
/// address. Only [`Index::key_of`] of the same index turns it back into
/// the key and its entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyRef(*const Node);

// SAFETY: a `KeyRef` is an address; it is dereferenced only by
// `Index::key_of` of the index it came from, whose nodes are Sync (read
// through atomics and immutable key bytes) and live as long as the index.
unsafe impl Send for KeyRef {}

impl KeyRef {
    /// Names nothing: a batch's unused place, never passed to `key_of`.
    pub(crate) const NONE: KeyRef = KeyRef(std::ptr::null());
}

/// An ordered-view key: a pointer to the key's node, ordered by the key
/// bytes.
#[derive(Clone, Copy)]
struct NodeKey(*const Node);

impl NodeKey {
    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: nodes are freed only when the index drops, and every
        // comparison of NodeKeys runs through a borrow of the index (a
        // retired view freed later drops its NodeKeys without reading them).
        unsafe { (*self.0).key() }
    }
}

impl std::borrow::Borrow<[u8]> for NodeKey {
    fn borrow(&self) -> &[u8] {
        self.bytes()
    }
}

impl PartialEq for NodeKey {
    fn eq(&self, o: &Self) -> bool {
        self.bytes() == o.bytes()
    }
}
impl Eq for NodeKey {}
impl PartialOrd for NodeKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for NodeKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.bytes().cmp(o.bytes())
    }
}

// SAFETY: a NodeKey is a shared pointer to an immutable key plus a KeyEntry
// made of atomics; the node outlives every use (see `bytes`).
unsafe impl Send for NodeKey {}
// SAFETY: as above.
unsafe impl Sync for NodeKey {}

/// Does `a` come before `b` in the visiting order (ascending if `forward`,
/// else descending)? Strict, though `<=` / `>=` would do the same
/// (equivalent): a key is in one source of a view only, so two keys merged
/// against each other are never equal.
#[inline]
fn goes_first(a: &NodeKey, b: &NodeKey, forward: bool) -> bool {
    if forward {
        a.bytes() < b.bytes()
    } else {
        a.bytes() > b.bytes()
    }
}

/// A skiplist of ordered-view keys, on crossbeam-epoch's default collector
/// (the store's).
type List = crossbeam_skiplist::base::SkipList<NodeKey, ()>;

fn new_list() -> Arc<List> {
    Arc::new(List::new(crossbeam_epoch::default_collector().clone()))
}

/// The ordered view's merge threshold: `delta` is frozen for a merge into
/// `base` once it holds this many keys, or `base`'s divided by
/// [`MERGE_RATIO`], whichever is more.
const MERGE_MIN: usize = 1024;

/// A merge reads every node once, so a key's creation pays about this many
/// node reads amortized; a scan steps through a skiplist (a dependent miss
/// more per key) for about one key in this many.
const MERGE_RATIO: usize = 16;

/// Merge steps (keys placed) per key created while a merge is under way:
/// enough that a merge of `base` and the frozen delta ends before the new
/// delta is half way to the next threshold, so no creation waits for one.
const MERGE_STEPS: usize = 2 * MERGE_RATIO + 2;

/// The ordered view: every key in exactly one of `base` (sorted,
/// immutable), `frozen` (the delta being merged into the next base, while a
/// merge is under way) and `delta` (keys created since). Published whole by
/// one pointer store and retired whole to the epoch collector; the parts
/// are shared between successive views, and each is freed with the last
/// view (or merge) holding it.
struct Ordered {
    base: Arc<Vec<NodeKey>>,
    frozen: Option<Arc<List>>,
    delta: Arc<List>,
}

impl Ordered {
    /// The part of `base` inside `range`.
    fn base_span(&self, (lo, hi): (Bound<&[u8]>, Bound<&[u8]>)) -> &[NodeKey] {
        let b = &self.base[..];
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

/// A merge under way: `base` and the frozen delta, merged a few keys at a
/// time by the key creators (one at a time: they hold the hash index's
/// insert mutex) into `next`.
struct Merge {
    /// The frozen delta's next key to place (None: all placed). Declared
    /// before `_frozen`, which it borrows, so it drops first.
    cursor: Option<RefEntry<'static, NodeKey, ()>>,
    /// The frozen delta, kept alive for `cursor`.
    _frozen: Arc<List>,
    base: Arc<Vec<NodeKey>>,
    /// `base`'s next key to place.
    at: usize,
    next: Vec<NodeKey>,
}

impl Merge {
    fn new(base: Arc<Vec<NodeKey>>, frozen: Arc<List>, guard: &Guard) -> Merge {
        let cursor = frozen.front(guard).and_then(|e| e.pin());
        // SAFETY: only the lifetime changes. The cursor borrows the list
        // that `frozen` keeps alive, at a fixed address, in this same
        // struct; it drops before `_frozen` (field order) and never leaves
        // the struct, and the list never removes a node.
        let cursor = cursor.map(|c| unsafe {
            std::mem::transmute::<RefEntry<'_, NodeKey, ()>, RefEntry<'static, NodeKey, ()>>(c)
        });
        let next = Vec::with_capacity(base.len() + frozen.len());
        Merge {
            cursor,
            _frozen: frozen,
            base,
            at: 0,
            next,
        }
    }

    /// Places up to `budget` keys (many more once the frozen keys are all
    /// placed: the rest of `base` is copied without reading a node).
    /// Returns whether the merge is complete.
    fn step(&mut self, budget: usize, guard: &Guard) -> bool {
        let base = &self.base[..];
        for _ in 0..budget {
            let Some(c) = &self.cursor else { break };
            let d = *c.key();
            if let Some(&b) = base.get(self.at).filter(|b| goes_first(b, &d, true)) {
                if let Some(p) = base.get(self.at + AHEAD) {
                    prefetch_node(p.0);
                }
                self.next.push(b);
                self.at += 1;
            } else {
                self.next.push(d);
                let c = self.cursor.take().expect("checked above");
                self.cursor = c.next(guard);
                c.release(guard);
            }
        }
        if self.cursor.is_none() {
            let end = base.len().min(self.at + budget * 64);
            self.next.extend_from_slice(&base[self.at..end]);
            self.at = end;
        }
        self.cursor.is_none() && self.at == base.len()
    }
}

/// How many array slots ahead a walk of `base` prefetches nodes.
const AHEAD: usize = 16;

/// Two sequences of keys, each in the visiting order (ascending if
/// `forward`, else descending), merged into one in that order.
struct Union<A: Iterator<Item = NodeKey>, B: Iterator<Item = NodeKey>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
    forward: bool,
}

/// The keys of two skiplist walks, each in the visiting order, as one.
fn union<'a, 'g, A, B>(
    a: A,
    b: B,
    forward: bool,
) -> impl Iterator<Item = NodeKey> + use<'a, 'g, A, B>
where
    A: Iterator<Item = crossbeam_skiplist::base::Entry<'a, 'g, NodeKey, ()>>,
    B: Iterator<Item = crossbeam_skiplist::base::Entry<'a, 'g, NodeKey, ()>>,
    'a: 'g,
{
    let key = |e: crossbeam_skiplist::base::Entry<'a, 'g, NodeKey, ()>| *e.key();
    Union {
        a: a.map(key).peekable(),
        b: b.map(key).peekable(),
        forward,
    }
}

impl<A: Iterator<Item = NodeKey>, B: Iterator<Item = NodeKey>> Iterator for Union<A, B> {
    type Item = NodeKey;

    fn next(&mut self) -> Option<NodeKey> {
        let a_first = match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) => goes_first(x, y, self.forward),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if a_first {
            self.a.next()
        } else {
            self.b.next()
        }
    }
}

/// Visits `base` (ascending) merged with `recent` (in the visiting order:
/// ascending if `forward`, else descending), in the visiting order, until
/// `f` returns false. Returns false if `f` did. Keys of `base` are compared
/// only while `recent` has keys left, and each node is prefetched `AHEAD`
/// slots before it is reached, so a stretch of `base` is walked with its
/// misses overlapped.
fn merge(
    base: &[NodeKey],
    forward: bool,
    recent: impl Iterator<Item = NodeKey>,
    mut f: impl FnMut(NodeKey) -> bool,
) -> bool {
    let mut recent = recent.peekable();
    let n = base.len();
    for j in 0..n {
        let i = if forward { j } else { n - 1 - j };
        let ahead = if forward {
            i.checked_add(AHEAD)
        } else {
            i.checked_sub(AHEAD)
        };
        if let Some(p) = ahead.and_then(|a| base.get(a)) {
            prefetch_node(p.0);
        }
        let b = base[i];
        while let Some(d) = recent.next_if(|d| goes_first(d, &b, forward)) {
            if !f(d) {
                return false;
            }
        }
        if !f(b) {
            return false;
        }
    }
    recent.all(f)
}

/// Retired ordered views that no guard can reach any more, waiting for a
/// key creator to free them, one a creation. The view that ends a merge
/// holds the last reference to the frozen skiplist, whose nodes are freed
/// one by one (a dependent miss each: tens of milliseconds at millions of
/// keys), and the epoch collector runs deferred work on whichever thread
/// pins next, a reader's included. So parking views here puts that cost on
/// the creators, who already hold the insert mutex, and a skiplist whose
/// last view is freed is drained [`DRAIN_STEP`] nodes a creation rather
/// than at once.
#[derive(Default)]
struct Graveyard {
    /// Views parked by their deferred destructors (any thread).
    parked: Mutex<Vec<SendPtr<Ordered>>>,
    /// Skiplists no view holds, being freed (key creators only).
    draining: Mutex<Vec<Drain>>,
}

/// Skiplist nodes a key creation frees while one drains. A frozen delta
/// holds a sixteenth of `base`'s keys when it freezes, and the next freeze
/// comes a sixteenth of `base`'s keys of creations later, so a drain ends
/// within a thirty-second of the creations between merges.
const DRAIN_STEP: usize = 32;

/// A skiplist being freed: what its `into_iter` has not yet handed out.
struct Drain(crossbeam_skiplist::base::IntoIter<NodeKey, ()>);

// SAFETY: the iterator owns the nodes it has left alone (the list was
// consumed whole, with no view and no guard able to reach it), so moving it
// between threads moves that ownership; its keys are `Send`.
unsafe impl Send for Drain {}

impl Graveyard {
    /// Parks a retired view that no guard can reach any more.
    fn park(&self, view: SendPtr<Ordered>) {
        self.parked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(view);
    }

    /// One creation's share: frees [`DRAIN_STEP`] nodes of a draining
    /// skiplist if one drains, or else one parked view (its lists that no
    /// other view holds start draining).
    fn free_one(&self) {
        let mut draining = self.draining.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = draining.last_mut() {
            // `IntoIter::next` frees each node it steps past.
            if d.0.by_ref().take(DRAIN_STEP).count() < DRAIN_STEP {
                draining.pop();
            }
            return;
        }
        let p = self.parked.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(p) = p {
            // SAFETY: parked by a deferred destructor of `Index::publish`,
            // so unreachable from the index and from every guard; popped
            // once, so freed once.
            let view = unsafe { Box::from_raw(p.0) };
            let Ordered {
                base,
                frozen,
                delta,
            } = *view;
            // An array is one free; a list some other view still holds
            // stays with it.
            drop(base);
            for list in frozen.into_iter().chain([delta]) {
                if let Ok(list) = Arc::try_unwrap(list) {
                    draining.push(Drain(list.into_iter()));
                }
            }
        }
    }
}

impl Drop for Graveyard {
    fn drop(&mut self) {
        let parked = self.parked.get_mut().unwrap_or_else(|e| e.into_inner());
        for p in parked.drain(..) {
            // SAFETY: as in `free_one`; the graveyard's last owner frees
            // what is left, once.
            drop(unsafe { Box::from_raw(p.0) });
        }
        // The draining lists free their nodes left as they drop.
    }
}

/// The index: a lock-free hash table for point reads and the ordered view
/// for scans, both pointing at the same per-key [`Node`]. Creating a key
/// takes the hash index's insert mutex (writers creating keys only), under
/// which the ordered view is updated too.
pub(crate) struct Index {
    /// The current [`Ordered`]; freed by `Drop` (before `hash` frees the
    /// nodes it points to) or, once replaced, through the graveyard.
    ordered: AtomicPtr<Ordered>,
    /// The merge under way, if any. Locked only by key creators, who hold
    /// the hash index's insert mutex already, so it is never contended.
    merging: Mutex<Option<Merge>>,
    /// Keys created so far, each counted once it is in the ordered view
    /// (creators only, under the insert mutex: a load and a store). A
    /// serializable validation that finds it unchanged since a scan knows
    /// no key was created in the scanned range meanwhile
    /// ([`Index::created_before_scan`]).
    created: AtomicU64,
    /// Shared with the deferred destructors that park retired views.
    graveyard: Arc<Graveyard>,
    hash: HashIndex,
}

#[cfg(test)]
thread_local! {
    /// The [`Index::get`] calls this thread made: a unit test counts the
    /// lookups a path makes.
    pub(crate) static LOOKUPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The [`Index::range`] walks this thread made, as `LOOKUPS`.
    pub(crate) static RANGE_WALKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Drop for Index {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no guard can still hold the current view
        // (every borrow of it is bounded by a borrow of the index); it came
        // from `Box::into_raw` and is freed once, here.
        drop(unsafe { Box::from_raw(self.ordered.load(Ordering::Relaxed)) });
    }
}

impl Index {
    pub(crate) fn new() -> Index {
        Index::with_hash(HashIndex::new())
    }

    /// An index whose hash table starts small (a named table's).
    pub(crate) fn new_small() -> Index {
        Index::with_hash(HashIndex::new_small())
    }

    fn with_hash(hash: HashIndex) -> Index {
        let empty = Ordered {
            base: Arc::new(Vec::new()),
            frozen: None,
            delta: new_list(),
        };
        Index {
            ordered: AtomicPtr::new(Box::into_raw(Box::new(empty))),
            merging: Mutex::new(None),
            created: AtomicU64::new(0),
            graveyard: Arc::default(),
            hash,
        }
    }

    /// The ordered view now, for as long as `guard` is held.
    #[inline]
    fn ordered<'g>(&self, _guard: &'g Guard) -> &'g Ordered {
        // Acquire, required: pairs with the Release store in `publish` (the
        // new view's parts).
        let o = self.ordered.load(Ordering::Acquire);
        // SAFETY: loaded under `_guard`; a replaced view is retired to the
        // epoch collector and freed only after every guard that could have
        // loaded it drops, and the current one only when the index drops,
        // which the borrow of `self` rules out.
        unsafe { &*o }
    }

    /// Replaces the ordered view `old` (the current one) with `new`. Key
    /// creators only, under the insert mutex.
    fn publish(&self, old: &Ordered, new: Ordered, collector: &Collector, guard: &Guard) {
        let new = Box::into_raw(Box::new(new));
        // Release, required: pairs with the Acquire load in `ordered`, so a
        // reader that loads the new view sees its parts.
        self.ordered.store(new, Ordering::Release);
        let old = SendPtr(old as *const Ordered as *mut Ordered);
        let graveyard = self.graveyard.clone();
        // The old view is unreachable from the index since the store above;
        // the collector runs this after every guard that could have loaded
        // it drops, and the graveyard frees it later, once.
        collector.defer(guard, move || {
            let old = old;
            graveyard.park(old);
        });
        // Hands the deferral to the global queue now: a thread's bag moves
        // only when it fills, and views held back that long (dozens of
        // merges) would keep their old arrays alive and then be freed at
        // once.
        collector.flush(guard);
    }

    /// Adds a new key's node to the ordered view, and moves the merge on:
    /// freezes `delta` for one when it is due, places a few keys of one
    /// under way, publishes the merged base when one ends. Called under the
    /// hash index's insert mutex only, so there is one caller at a time.
    fn add_ordered(&self, n: &Node, collector: &Collector, guard: &Guard) {
        self.graveyard.free_one();
        let o = self.ordered(guard);
        o.delta
            .insert(NodeKey(n as *const Node), (), guard)
            .release(guard);
        // Relaxed load: only creators store it, and the insert mutex orders
        // them.
        let created = self.created.load(Ordering::Relaxed) + 1;
        // Release, required: after the insert above; pairs with the Acquire
        // load in `created_before_scan`, so a scan that loads this count
        // finds this key in the view it walks.
        self.created.store(created, Ordering::Release);
        let mut merging = self.merging.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = merging.as_mut() {
            if m.step(MERGE_STEPS, guard) {
                let m = merging.take().expect("a merge under way");
                let merged = Ordered {
                    base: Arc::new(m.next),
                    frozen: None,
                    delta: o.delta.clone(),
                };
                self.publish(o, merged, collector, guard);
            }
            return;
        }
        // Equivalent with `<=` (the merge starts one key later).
        if o.delta.len() < MERGE_MIN.max(o.base.len() / MERGE_RATIO) {
            return;
        }
        *merging = Some(Merge::new(o.base.clone(), o.delta.clone(), guard));
        let frozen = Ordered {
            base: o.base.clone(),
            frozen: Some(o.delta.clone()),
            delta: new_list(),
        };
        self.publish(o, frozen, collector, guard);
    }

    /// The keys created so far, loaded before a scan walks the index: the
    /// walk finds every key it counts (keys are never removed).
    #[inline]
    pub(crate) fn created_before_scan(&self) -> u64 {
        // Acquire, required: pairs with the Release store in `add_ordered`
        // (the counted keys' insertion into the ordered view).
        self.created.load(Ordering::Acquire)
    }

    /// The keys created so far, loaded by a serializable validation: a
    /// creation it must see happens-before it already (through the commit
    /// gate: `kv/serializable.rs`).
    #[inline]
    pub(crate) fn created_now(&self) -> u64 {
        // Relaxed: the gate's sequence (Acquire) or mutex orders this load
        // after every creation a validation must see.
        self.created.load(Ordering::Relaxed)
    }

    /// The entry for `key`, if the key was ever written. Loads only.
    #[inline]
    pub(crate) fn get<'s>(&'s self, key: &[u8], guard: &Guard) -> Option<&'s KeyEntry> {
        self.get_to_read(key, None, guard)
    }

    /// [`Index::get`] for a read bounded by `bound` (its read timestamp;
    /// `None`: none): starts loading, beside the node, the key's head and,
    /// with a bound, its version at the stable timestamp of its last prune
    /// (the slot's hints), where a read at stable lands.
    #[inline]
    pub(crate) fn get_to_read<'s>(
        &'s self,
        key: &[u8],
        bound: Option<u64>,
        guard: &Guard,
    ) -> Option<&'s KeyEntry> {
        #[cfg(test)]
        LOOKUPS.with(|n| n.set(n.get() + 1));
        let h = self.hash.hash(key);
        self.hash.get(key, h, want(bound), guard).map(|n| n.entry())
    }

    /// Reads a batch of keys with their cache misses overlapped: every
    /// key's table slot is requested, then every key's node and its slot's
    /// hinted versions (as [`Index::get_to_read`]), then the
    /// version a read bounded by `bound` examines first (the head, or the
    /// hint's or finger's version: `KeyEntry::prefetch_for`), before the
    /// first read; `f(i, entry)` then runs
    /// for each key in order (`None`: never written) until it returns
    /// false. Loads only, as [`Index::get`].
    #[inline]
    pub(crate) fn get_batch<'s, K: AsRef<[u8]>>(
        &'s self,
        keys: &[K],
        bound: Option<u64>,
        guard: &Guard,
        mut f: impl FnMut(usize, Option<&'s KeyEntry>) -> bool,
    ) -> bool {
        use super::hashindex::Candidate;
        const BATCH: usize = 16;
        for (c, chunk) in keys.chunks(BATCH).enumerate() {
            let b = self.hash.batch(want(bound), guard);
            // At most `BATCH`, so the arrays' bound checks fold away.
            let n = chunk.len().min(BATCH);
            // Each key's hash and its home slot in the batch's table.
            let mut hs = [(0u64, 0usize); BATCH];
            for i in 0..n {
                let hash = self.hash.hash(chunk[i].as_ref());
                hs[i] = (hash, b.prefetch_slot(hash));
            }
            let mut cs = [Candidate::NONE; BATCH];
            for i in 0..n {
                cs[i] = b.candidate(hs[i].0, hs[i].1);
            }
            let mut es: [Option<&'s KeyEntry>; BATCH] = [None; BATCH];
            for i in 0..n {
                es[i] = b
                    .resolve(chunk[i].as_ref(), hs[i].0, cs[i])
                    .map(|n| n.entry());
                if let Some(e) = es[i] {
                    e.prefetch_for(bound);
                }
            }
            for (i, e) in es[..n].iter().enumerate() {
                if !f(c * BATCH + i, *e) {
                    return false;
                }
            }
        }
        true
    }

    /// Names `key` (the index's own bytes, as [`Index::get_or_insert`]
    /// lent them) in 8 bytes, for [`Index::key_of`]: its node's address.
    #[inline]
    pub(crate) fn key_ref(&self, key: &[u8]) -> KeyRef {
        KeyRef(Node::of_key(key))
    }

    /// Starts loading the node `r` names (its first lines), for a batch.
    #[inline]
    pub(crate) fn prefetch_key(&self, r: KeyRef) {
        prefetch_node(r.0);
    }

    /// Starts loading `key`'s home slot, for a batch of [`Index::hint`]s.
    #[inline]
    pub(crate) fn prefetch_slot(&self, key: &[u8], guard: &Guard) {
        self.hash.prefetch_slot(key, guard);
    }

    /// The key bytes and entry `r` names.
    ///
    /// # Safety
    /// `r` came from [`Index::key_ref`] of this index (nodes live until
    /// the index drops, which the borrow of `self` rules out).
    #[inline]
    pub(crate) unsafe fn key_of(&self, r: KeyRef) -> (&[u8], &KeyEntry) {
        // SAFETY: the caller's contract: `r.0` is a node of this index,
        // built in full before its key bytes were lent.
        let n = unsafe { &*r.0 };
        (n.key(), n.entry())
    }

    /// Tells the index `entry`'s head and its version at stable (a
    /// committer, after pruning `key`): hints that lookups prefetch, never
    /// dereferenced.
    /// `at`: where [`Index::get_or_insert`] found the key's slot.
    #[inline]
    pub(crate) fn hint(&self, key: &[u8], entry: &KeyEntry, at: SlotAt, guard: &Guard) {
        let (head, stable) = entry.hinted();
        self.hash.hint(key, at, Hints::new(head, stable), guard);
    }

    /// The index's own bytes of `key` and its entry, inserting an empty one
    /// if needed, and where its slot was found (for [`Index::hint`]). Keys
    /// and entries live until the index drops, hence the `'s` borrow.
    pub(crate) fn get_or_insert<'s>(
        &'s self,
        key: &[u8],
        collector: &Collector,
        guard: &Guard,
    ) -> (&'s [u8], &'s KeyEntry, SlotAt) {
        let (n, _, at) = self.hash.get_or_insert_at(key, collector, guard, |n| {
            self.add_ordered(n, collector, guard)
        });
        (n.key(), n.entry(), at)
    }

    /// Visits the entries with keys in `range`, in ascending key order if
    /// `forward`, else descending, until `f` returns false. Keys and
    /// entries are lent for as long as the index (never removed).
    pub(crate) fn range<'s: 'g, 'g>(
        &'s self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        forward: bool,
        guard: &'g Guard,
        mut f: impl FnMut(&'s [u8], &'s KeyEntry) -> bool,
    ) {
        #[cfg(test)]
        RANGE_WALKS.with(|n| n.set(n.get() + 1));
        let visit = |k: NodeKey| {
            // SAFETY: nodes are freed only when the index drops (after the
            // current view), which the `'s` borrow of `self` rules out, so the node
            // and its key outlive `'s` (keys are never removed), not only
            // the guard.
            let n: &'s Node = unsafe { &*k.0 };
            f(n.key(), n.entry())
        };
        let o = self.ordered(guard);
        let base = o.base_span(range);
        let frozen = o.frozen.as_deref().into_iter();
        let frozen = frozen.flat_map(|l| l.range::<[u8], _>(range, guard));
        let delta = o.delta.range::<[u8], _>(range, guard);
        if forward {
            merge(base, true, union(frozen, delta, true), visit);
        } else {
            merge(base, false, union(frozen.rev(), delta.rev(), false), visit);
        }
    }

    /// Finishes a pending migration of the hash table
    /// ([`HashIndex::finish_migration`]).
    pub(crate) fn finish_migration(&self, collector: &Collector, guard: &Guard) {
        self.hash.finish_migration(collector, guard);
    }

    /// Visits every entry.
    pub(crate) fn for_each<'g>(&'g self, guard: &'g Guard, mut f: impl FnMut(&'g KeyEntry)) {
        let o = self.ordered(guard);
        let lists = o.frozen.as_deref().into_iter().chain([&*o.delta]);
        let recent = lists.flat_map(|l| l.iter(guard)).map(|e| *e.key());
        for k in o.base.iter().copied().chain(recent) {
            // SAFETY: as in `range`.
            f(unsafe { (*k.0).entry() });
        }
    }
}

/// What a lookup for a read bounded by `bound` prefetches from the slot:
/// the stable version too when there is a bound.
#[inline]
fn want(bound: Option<u64>) -> Want {
    if bound.is_some() {
        Want::Stable
    } else {
        Want::Head
    }
}

#[cfg(test)]
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
        let (mut checks, mut during_merge, mut between_merges) = (0, 0, 0);
        for (i, k) in keys.iter().enumerate() {
            let g = c.pin();
            ix.get_or_insert(k, &c, &g);
            drop(g);
            model.insert(k.clone());
            // Check around the merge points and at random others.
            if i % 997 == 0 || i + 1 == keys.len() || (i + 1) % MERGE_MIN == 0 {
                checks += 1;
                if ix.ordered(&c.pin()).frozen.is_some() {
                    during_merge += 1;
                } else {
                    between_merges += 1;
                }
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
        let frozen = o.frozen.as_ref().map_or(0, |f| f.len());
        assert_eq!(o.base.len() + frozen + o.delta.len(), keys.len());
        assert!(
            o.base.len() >= 8 * MERGE_MIN,
            "merged: base {}",
            o.base.len()
        );
        assert!(
            during_merge > 5 && between_merges > 5,
            "checked {during_merge} times during a merge, {between_merges} between"
        );
        let mut n = 0;
        ix.for_each(&g, |_| n += 1);
        assert_eq!(n, keys.len());
    }

    /// A view for the graveyard alone: `frozen` and `delta` as given.
    fn view(frozen: Option<Arc<List>>, delta: Arc<List>) -> SendPtr<Ordered> {
        let o = Ordered {
            base: Arc::new(Vec::new()),
            frozen,
            delta,
        };
        SendPtr(Box::into_raw(Box::new(o)))
    }

    /// Creations (`free_one` calls) until the graveyard holds nothing.
    fn creations_to_empty(gy: &Graveyard) -> usize {
        let mut n = 0;
        while !gy.parked.lock().unwrap().is_empty() || !gy.draining.lock().unwrap().is_empty() {
            gy.free_one();
            n += 1;
            assert!(n < 1_000_000, "the graveyard never empties");
        }
        n
    }

    #[test]
    fn a_parked_skiplist_drains_a_few_nodes_a_creation_once_no_view_holds_it() {
        let c = Collector::new();
        let ix = Index::new();
        let g = c.pin();
        for i in 0..1_000u64 {
            ix.get_or_insert(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes(), &c, &g);
        }
        // A list of the index's nodes that no view of the index holds.
        let list = new_list();
        for e in ix.ordered(&g).delta.iter(&g) {
            list.insert(*e.key(), (), &g).release(&g);
        }
        assert_eq!(list.len(), 1_000);
        let gy = Graveyard::default();
        // Two parked views share the list: the first freed leaves it to the
        // second, and only the second's free starts its drain.
        gy.park(view(Some(list.clone()), new_list()));
        gy.park(view(Some(list), new_list()));
        gy.free_one();
        assert_eq!(gy.parked.lock().unwrap().len(), 1);
        assert_eq!(
            gy.draining.lock().unwrap().len(),
            1,
            "the shared list stays with the view still parked; the empty delta drains"
        );
        let n = creations_to_empty(&gy);
        // The first view's empty delta (one creation), the second view's
        // pop and its empty delta (one each), then 1,000 nodes at
        // `DRAIN_STEP` a creation.
        let want = 3 + 1_000usize.div_ceil(DRAIN_STEP);
        assert_eq!(n, want, "creations to drain, against {want}");
        // While a list drains, the next parked view waits its turn.
        gy.park(view(None, new_list()));
        gy.park(view(None, new_list()));
        assert_eq!(creations_to_empty(&gy), 4);
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
