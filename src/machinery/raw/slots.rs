//! The session table: one cache-padded slot per session, where the session
//! publishes what it pins in its own slot; nobody else writes it.
//!
//! Every word of a slot except `in_use` has exactly one writer, the session
//! that owns the slot; scanners only load. Readers therefore never write a
//! word another thread writes. `in_use` is claimed with a CAS when a session
//! opens (not per transaction).
//!
//! # Orderings
//!
//! The pins take part in store-fence-load handshakes with whoever advances a
//! horizon; the fences live at the call sites in `lockfree/`, which name
//! both sides. Here:
//! * claiming a slot is an Acquire CAS on `in_use`, pairing with the Release
//!   store in [`SlotTable::release`], so a new owner starts after the old
//!   owner's last write to the slot;
//! * [`SlotTable::release`] clears every pin before it frees the slot
//!   (invariant 12), so a released slot never pins history.

use crate::sync::{mutant as m, mutant_on, AtomicBool, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// One session's published state. `0` in any pin means "none".
#[derive(Debug)]
pub(crate) struct Slot {
    in_use: AtomicBool,
    /// The xmin of the snapshot the session reads with.
    pub(crate) xmin: AtomicU64,
    /// The session's read timestamp.
    pub(crate) read_ts: AtomicU64,
    /// The smallest timestamp an unfinished commit of this session will make
    /// durable (its commit or durable timestamp), from the moment it is
    /// validated against stable until the commit is fully installed.
    pub(crate) claim: AtomicU64,
    /// The prepare timestamp of this session's prepared, unresolved
    /// transaction.
    pub(crate) prepared: AtomicU64,
    /// A timestamp this session's unfinished transaction has announced ahead
    /// of its commit: a commit timestamp set early, or a prepared
    /// transaction's durable timestamp. Counted by `all_durable`.
    pub(crate) announced: AtomicU64,
    /// The largest durable timestamp this slot's commits made since the
    /// slot last saw the application set the all-durable timestamp
    /// (low 62 bits), and a 2-bit tag in the top bits that the owner
    /// advances at each restart (`LockFree::release_claim`).
    /// Owner-written with plain stores; kept across sessions (a released
    /// slot's commits still count).
    pub(crate) durable: AtomicU64,
    /// The reset count (`durable_resets`) this slot's `durable` word
    /// restarted at. Only the owner touches it.
    pub(crate) durable_seen: AtomicU64,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            in_use: AtomicBool::new(false),
            xmin: AtomicU64::new(0),
            read_ts: AtomicU64::new(0),
            claim: AtomicU64::new(0),
            prepared: AtomicU64::new(0),
            announced: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            durable_seen: AtomicU64::new(0),
        }
    }

    /// Clears every pin this slot holds.
    #[inline]
    pub(crate) fn clear_pins(&self) {
        // Release: pairs with the Acquire loads of reports (`pins`,
        // `query_timestamp`). Stronger than needed: the horizon scan loads
        // pins Relaxed after its fence, so it acquires nothing from these
        // stores; what a pruned version's last reader needs is its epoch
        // guard (invariant 11).
        self.xmin.store(0, Ordering::Release);
        self.read_ts.store(0, Ordering::Release);
    }
}

/// A fixed table of slots.
pub(crate) struct SlotTable {
    slots: Box<[CachePadded<Slot>]>,
}

impl SlotTable {
    pub(crate) fn new(n: usize) -> SlotTable {
        SlotTable {
            slots: (0..n).map(|_| CachePadded::new(Slot::new())).collect(),
        }
    }

    /// The number of slots.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slot `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// Every slot, for scans.
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().map(|s| &**s)
    }

    /// Claims a free slot, or `None` if all are taken.
    pub(crate) fn claim(&self) -> Option<usize> {
        for (i, s) in self.slots.iter().enumerate() {
            // Relaxed pre-check avoids a CAS on slots that are visibly taken;
            // the CAS below decides.
            if !s.in_use.load(Ordering::Relaxed)
                // Acquire: pairs with the Release store in `release`: the
                // previous owner's clears come before our pin stores, or a
                // late clear could erase a new pin (invariants 12, then 1).
                // Required (loom model `pin_horizon`).
                && s
                    .in_use
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Some(i);
            }
        }
        None
    }

    /// Releases slot `i`, clearing its pins first (invariant 12).
    pub(crate) fn release(&self, i: usize) {
        let s = &self.slots[i];
        if !mutant_on(m::SLOT_KEEPS_PINS) {
            s.clear_pins();
            // Release: pairs with the stable setter's Acquire loads. The
            // claim clear is required (loom model `stable`): the setter
            // waiting on it must see the commit. Stronger than needed for
            // `prepared` and `announced`: values the setter compares,
            // nothing is read through them.
            s.claim.store(0, Ordering::Release);
            s.prepared.store(0, Ordering::Release);
            s.announced.store(0, Ordering::Release);
        }
        // Release: pairs with the Acquire CAS in `claim`.
        s.in_use.store(false, Ordering::Release);
    }

    /// Is slot `i` claimed?
    pub(crate) fn in_use(&self, i: usize) -> bool {
        // Acquire: pairs with the Release store in `release`. Stronger than
        // needed: only reports use it (`sessions_open`, `pins`).
        self.slots[i].in_use.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_refuses_and_a_freed_slot_is_reused_clean() {
        let t = SlotTable::new(2);
        let a = t.claim().unwrap();
        let b = t.claim().unwrap();
        assert_ne!(a, b);
        assert_eq!(t.claim(), None);
        t.get(a).xmin.store(7, Ordering::Relaxed);
        t.get(a).read_ts.store(9, Ordering::Relaxed);
        t.release(a);
        assert!(!t.in_use(a));
        assert_eq!(t.claim(), Some(a));
        assert_eq!(t.get(a).xmin.load(Ordering::Relaxed), 0);
        assert_eq!(t.get(a).read_ts.load(Ordering::Relaxed), 0);
    }
}
