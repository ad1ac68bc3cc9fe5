//! The last setting of the all-durable timestamp, as an immutable record
//! behind one pointer.
//!
//! A commit raises only its own slot's `durable` word (`LockFree::
//! release_claim`). A durable set records its value and every slot's word
//! as it found them; a report takes the max of the value and every word
//! that has changed since. The record is replaced whole, so a report never
//! sees one set's value with another set's words, and it takes no lock:
//! the setter holds the timestamp lock while it waits for commit claims,
//! and a report made inside a commit (a machinery user's flip closure)
//! must not wait for that.
//!
//! # Orderings
//!
//! * The setter (serialized by the timestamp lock) stores the new record's
//!   pointer with Release; a report loads it with Acquire under an epoch
//!   guard, so the record's fields are visible to it (the record's
//!   causality witness checks this under loom: mutant
//!   RELAXED_ALL_DURABLE_SET_LOAD, model `all_durable_report`).
//! * A replaced record is retired to the epoch collector and freed only
//!   after every guard that could have loaded it drops (invariant 11).

use super::reclaim::{Collector, SendPtr};
use crate::sync::{mutant as m, mutant_on, ordering_or_mutant, AtomicPtr, Ordering, Witness};

/// One setting of the all-durable timestamp.
struct DurableSet {
    /// The value set (0: never set).
    value: u64,
    /// Each slot's `durable` word when it was set.
    words: Box<[u64]>,
    /// Under loom, written with the fields and checked where a report
    /// reads them (`sync::Witness`).
    witness: Witness,
}

/// The pointer to the last [`DurableSet`].
pub(crate) struct AllDurableCell {
    ptr: AtomicPtr<DurableSet>,
}

impl AllDurableCell {
    /// Never set: value 0, every slot's word 0.
    pub(crate) fn new(slots: usize) -> AllDurableCell {
        AllDurableCell {
            ptr: AtomicPtr::new(Box::into_raw(Box::new(DurableSet {
                value: 0,
                words: vec![0; slots].into_boxed_slice(),
                witness: Witness::new(),
            }))),
        }
    }

    /// Records a setting: `value`, and the slots' words as `words` yields
    /// them (one per slot, in order).
    ///
    /// Callers are serialized (the timestamp lock): only one thread replaces
    /// the record at a time.
    pub(crate) fn set(&self, collector: &Collector, value: u64, words: impl Iterator<Item = u64>) {
        let new = Box::into_raw(Box::new(DurableSet {
            value,
            words: words.collect(),
            witness: Witness::new(),
        }));
        // Relaxed: the only writer is this function, serialized by the
        // caller's lock, whose acquisition orders the previous store first.
        let old = self.ptr.load(Ordering::Relaxed);
        // Release: publishes the new record's fields; pairs with the Acquire
        // load in `report`.
        self.ptr.store(new, Ordering::Release);
        let guard = collector.pin();
        let old = SendPtr(old);
        collector.defer(&guard, move || {
            let old = old;
            // SAFETY: `old` came from Box::into_raw, is unlinked by the
            // store above (no new report can load it), is retired once, and
            // the collector runs this only after every guard that could have
            // loaded it drops (invariant 11).
            drop(unsafe { Box::from_raw(old.0) });
        });
    }

    /// The reported all-durable timestamp before unfinished commits hold
    /// it down: the last set value, raised by every slot word `words` yields
    /// that differs from the word the set recorded for that slot (`tag` masks
    /// the words' tag bits off the value).
    pub(crate) fn report(
        &self,
        collector: &Collector,
        words: impl Iterator<Item = u64>,
        tag: u64,
    ) -> u64 {
        let guard = collector.pin();
        // Acquire: pairs with the Release store in `set`, so the record's
        // fields are visible (invariant 11).
        let p = self.ptr.load(ordering_or_mutant(
            Ordering::Acquire,
            m::RELAXED_ALL_DURABLE_SET_LOAD,
        ));
        // SAFETY: loaded under `guard`; a record is retired only after it is
        // replaced and freed only after every guard that could have loaded it
        // drops (invariant 11); the pointer is never null.
        let set = unsafe { &*p };
        // Loom: the fields below must happen-after their writer.
        set.witness.check();
        let mut v = set.value;
        for (then, now) in set.words.iter().zip(words) {
            let changed = if mutant_on(m::ALL_DURABLE_REPORT_COUNTS_GROWTH) {
                now > *then
            } else {
                now != *then
            };
            if changed {
                v = v.max(now & !tag);
            }
        }
        drop(guard);
        v
    }
}

impl Drop for AllDurableCell {
    fn drop(&mut self) {
        let p = self.ptr.get_mut_ptr();
        // SAFETY: `&mut self`: nobody else can reach the cell; the current
        // record is never retired, so it is freed once, here.
        drop(unsafe { Box::from_raw(p) });
    }
}
