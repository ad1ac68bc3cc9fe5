//! The stable sweep's queue (DESIGN.md, "Version chains and the index",
//! the finger): every timestamped commit leaves one entry per key it wrote
//! to an ordered key (its commit timestamp and the key's entry); the thread
//! that raises stable takes the entries at or below the new stable and
//! moves each key's finger (and refreshes its hint) with
//! [`KeyEntry::cut`] before it publishes the new stable, so a reader at a
//! published stable starts at the version it reads.
//!
//! Committers push a batch per commit with a compare-and-swap on `top` (a
//! lock-free stack); the sweep takes the whole stack with one swap and
//! moves its entries into a min-heap by commit timestamp that only the
//! sweep touches, under its mutex (commits of different sessions reach the
//! queue out of timestamp order). The queue is lossy: the finger only picks
//! where a read starts, and the reader judges the version it lands on and
//! climbs (invariant 13), so an entry dropped (the queue full) or swept a
//! call late costs a climb, never a wrong read.
//!
//! Memory: an entry is 24 bytes in the heap (commit timestamp, entry
//! address, a named table's state); on the stack, until the next sweep, a
//! batch per commit of 56 bytes holding its first entry, plus 24 bytes per
//! further entry. At most about [`CAP`] entries are held; a commit that
//! finds the queue full, or comes before the first sweep (no stable set
//! yet), leaves none.
//!
//! # Lifetimes
//!
//! An entry names a `KeyEntry` inside an index node; nodes are never
//! removed from an index, and rollback to stable rebuilds chains in their
//! entries. The default table's index lives as long as the store that owns
//! this queue. An entry of a named table holds the table's state and is
//! used only while the sweep's guard finds the table's index in its slot
//! (not dropped): that guard then keeps the index, so its nodes, alive
//! (invariants 11, 19). A dropped table's entries are discarded unread.
//!
//! # Orderings
//!
//! The push's compare-and-swap (Release) pairs with the sweep's swap
//! (Acquire) of `top`: the sweep sees each batch's fields. A commit pushes
//! inside its completion, before its descriptor install and the release of
//! its commit claim, and the stable setter sweeps after it waited for
//! every claim at or below the new stable (Acquire, handshake 2): so every
//! commit at or below the new stable has pushed before the sweep takes the
//! stack.

use super::chain::{tails, KeyEntry, Pruned};
use crate::machinery::epoch::Collector;
use crate::machinery::Horizon;
use crate::store::{TableState, Tb};
use crate::sync::{mutant as m, mutant_on, AtomicBool, AtomicPtr, AtomicU64, Mutex, Ordering};
use std::cmp::{Ordering as Cmp, Reverse};
use std::collections::BinaryHeap;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// The most entries the queue holds; a commit finding this many leaves
/// none (its keys' fingers move at their next prune).
pub(crate) const CAP: u64 = 1 << 21;

/// Entries the sweep passes under one epoch guard before it re-pins (no
/// guard outlives a bounded piece of work, invariant 11).
const PER_GUARD: usize = 1024;

/// One key version committed at `cts`, waiting for stable to reach it.
pub(crate) struct Pending {
    cts: u64,
    entry: NonNull<KeyEntry>,
    /// The named table the key is in (`None`: the default table).
    table: Option<Arc<TableState>>,
}

// SAFETY: an entry names a `KeyEntry` (Sync) that the sweep reads only
// while it is alive (module docs, "Lifetimes"); the rest is owned data.
unsafe impl Send for Pending {}

impl Pending {
    /// An entry for `entry`, a key of table `tb` committed at `cts`.
    pub(crate) fn new(cts: u64, entry: &KeyEntry, tb: Tb<'_>) -> Pending {
        Pending {
            cts,
            entry: NonNull::from(entry),
            table: match tb {
                Tb::Default => None,
                Tb::Named(t) => Some(t.clone()),
            },
        }
    }
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.cts == o.cts
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Cmp> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> Cmp {
        self.cts.cmp(&o.cts)
    }
}

/// One commit's entries on the stack.
struct Batch {
    /// The batch pushed before this one (null: none).
    next: *mut Batch,
    first: Pending,
    rest: Vec<Pending>,
}

/// The queue: the committers' stack, the sweep's heap.
pub(crate) struct StableQueue {
    /// The newest batch pushed and not yet taken (null: none).
    top: AtomicPtr<Batch>,
    /// Entries pushed, ever (with `swept`: the bound on entries held, a
    /// bound that nothing else depends on).
    pushed: AtomicU64,
    /// Entries the sweep passed, ever (written under `heap`'s mutex).
    swept: AtomicU64,
    /// A sweep has run (or recovery armed it): before stable is first set
    /// no sweep comes, and commits push nothing.
    armed: AtomicBool,
    /// The entries taken off the stack, oldest commit first.
    heap: Mutex<BinaryHeap<Reverse<Pending>>>,
}

impl Default for StableQueue {
    fn default() -> Self {
        StableQueue::new()
    }
}

impl StableQueue {
    /// An empty queue, unarmed (commits push nothing before the first
    /// sweep or [`arm`](Self::arm)).
    pub(crate) fn new() -> StableQueue {
        StableQueue {
            top: AtomicPtr::new(ptr::null_mut()),
            pushed: AtomicU64::new(0),
            swept: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            heap: Mutex::new(BinaryHeap::new()),
        }
    }

    /// Lets commits push before the first sweep: recovery's replay, whose
    /// commits stable then passes all at once.
    pub(crate) fn arm(&self) {
        // Relaxed: a flag that only saves work (`push`); the replay that
        // follows runs on this thread.
        self.armed.store(true, Ordering::Relaxed);
    }

    /// Pushes one commit's entries (none: nothing). Lock-free; pushes
    /// nothing before the first sweep, or if the queue holds [`CAP`]
    /// entries. Returns whether it pushed.
    pub(crate) fn push(&self, mut entries: impl Iterator<Item = Pending>) -> bool {
        // Relaxed, all three: a bound (a race lets a few commits past it)
        // and a flag that only saves work; nothing is read through them.
        if !self.armed.load(Ordering::Relaxed) {
            return false;
        }
        let held = (self.pushed.load(Ordering::Relaxed))
            .saturating_sub(self.swept.load(Ordering::Relaxed));
        if held >= CAP {
            return false;
        }
        let Some(first) = entries.next() else {
            return false;
        };
        let rest: Vec<Pending> = entries.collect();
        // Relaxed: a bound, as above.
        self.pushed
            .fetch_add(1 + rest.len() as u64, Ordering::Relaxed);
        let b = Box::into_raw(Box::new(Batch {
            next: ptr::null_mut(),
            first,
            rest,
        }));
        // Relaxed: the compare-and-swap below checks it.
        let mut top = self.top.load(Ordering::Relaxed);
        loop {
            // SAFETY: `b` is ours until the compare-and-swap publishes it.
            unsafe { (*b).next = top };
            if mutant_on(m::SWEEP_PUSH_LOSES_BATCH) {
                // Release, as below; only in the mutant, whose plain store
                // can overwrite a batch another committer pushed meanwhile.
                self.top.store(b, Ordering::Release);
                return true;
            }
            // Release, required: pairs with the sweep's Acquire swap in
            // `take`, which reads the batch's fields. Relaxed on failure:
            // the value is only the next attempt's `next`.
            match self
                .top
                .compare_exchange(top, b, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => top = now,
            }
        }
    }

    /// Moves every batch on the stack into `heap`.
    fn take(&self, heap: &mut BinaryHeap<Reverse<Pending>>) {
        // Acquire, required: pairs with the Release compare-and-swap in
        // `push` (the batches' fields; loom `stable_sweep`).
        let mut p = self.top.swap(ptr::null_mut(), Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: taken off the stack by our swap: no one else can
            // reach it; made by `Box::into_raw` in `push`, freed once here.
            let b = unsafe { Box::from_raw(p) };
            p = b.next;
            let b = *b;
            heap.push(Reverse(b.first));
            heap.extend(b.rest.into_iter().map(Reverse));
        }
    }

    /// Moves the finger of every key committed at or below `stable` up to
    /// it (with `cut`, pruning to `horizon` on the way), oldest commit
    /// first. An entry whose key another thread is pruning goes back into
    /// the heap for the next sweep (that pruner moves the finger only up
    /// to the stable it loaded). Tails go to `collector`, counted by
    /// `on_free`. Returns the work done and the entries passed.
    pub(crate) fn sweep<F: Fn(u64) + Send + 'static>(
        &self,
        stable: u64,
        horizon: Horizon,
        collector: &Collector,
        on_free: impl Fn() -> F,
    ) -> (Pruned, u64) {
        let mut heap = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: a flag that only saves work (`push`).
        self.armed.store(true, Ordering::Relaxed);
        self.take(&mut heap);
        let mut out = Pruned::default();
        let mut passed = 0u64;
        let mut busy = Vec::new();
        let mut batch = tails();
        let mut guard = collector.pin();
        let mut under_guard = 0;
        while heap.peek().is_some_and(|Reverse(p)| p.cts <= stable) {
            let Reverse(p) = heap.pop().expect("peeked");
            if under_guard == PER_GUARD {
                batch.flush(collector, &guard, on_free());
                drop(guard);
                guard = collector.pin();
                under_guard = 0;
            }
            under_guard += 1;
            let live = match &p.table {
                None => true,
                Some(t) => t.slot.get(&guard).is_some(),
            };
            if live {
                // SAFETY: the default table's entries live as long as the
                // store, which owns this queue; a named table's index was
                // in its slot under `guard`, so it and its nodes live until
                // `guard` drops (module docs, "Lifetimes"; invariants 11,
                // 19).
                let e = unsafe { p.entry.as_ref() };
                let n = e.cut(horizon, stable, &mut batch, &guard);
                out.cut += n.cut;
                out.examined += n.examined;
                if n.busy && !mutant_on(m::SWEEP_SKIPS_BUSY_KEY) {
                    busy.push(Reverse(p));
                    continue;
                }
            }
            passed += 1;
        }
        batch.flush(collector, &guard, on_free());
        drop(guard);
        heap.extend(busy);
        // Relaxed: a bound (`push`); only sweeps write it, under the mutex.
        let swept = self.swept.load(Ordering::Relaxed);
        self.swept.store(swept + passed, Ordering::Relaxed);
        (out, passed)
    }

    /// Entries held (for tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn held(&self) -> u64 {
        // Relaxed: tests read it after the threads that pushed joined.
        (self.pushed.load(Ordering::Relaxed)).saturating_sub(self.swept.load(Ordering::Relaxed))
    }
}

impl Drop for StableQueue {
    fn drop(&mut self) {
        // Frees the batches still on the stack; the heap drops itself.
        let mut h = BinaryHeap::new();
        self.take(&mut h);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::store::raw::chain::KeyEntry;

    #[test]
    fn an_entry_is_24_bytes_and_a_batch_56() {
        assert_eq!(std::mem::size_of::<Pending>(), 24);
        assert_eq!(std::mem::size_of::<Batch>(), 56);
    }

    #[test]
    fn commits_before_the_first_sweep_queue_nothing() {
        let (q, e, c) = (StableQueue::new(), KeyEntry::new(), Collector::new());
        let one = || std::iter::once(Pending::new(5, &e, Tb::Default));
        assert!(!q.push(one()), "not armed: no stable set yet");
        assert_eq!(q.held(), 0);
        // A fresh manager's horizon covers nothing committed here.
        let none = crate::machinery::TxnManager::new(4).unwrap().horizon();
        q.sweep(1, none, &c, || |_| {});
        assert!(q.push(one()));
        assert!(!q.push(std::iter::empty()), "no entries: no batch");
        assert_eq!(q.held(), 1);
        // Above stable 4: kept; at 5: passed.
        assert_eq!(q.sweep(4, none, &c, || |_| {}).1, 0);
        assert_eq!(q.sweep(5, none, &c, || |_| {}).1, 1);
        assert_eq!(q.held(), 0);
    }
}
