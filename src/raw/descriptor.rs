//! The snapshot descriptor: an immutable `{generation, xmin, xmax, running}`
//! behind one atomically swapped pointer (PROTOCOL rules 1 and 2).
//!
//! # Orderings
//!
//! * A completer builds the next descriptor from the current one and
//!   installs it with a compare-and-swap whose success ordering is Release.
//!   Everything the completer did before (flipping its versions' status to
//!   committed, aborted or prepared) happens-before any thread that loads the
//!   new pointer with Acquire ([`DescriptorCell::copy_into`],
//!   [`DescriptorCell::xmin`]).
//! * After a successful install the completer raises the published
//!   generation with `fetch_max(Release)`. A reader whose cached copy has the
//!   published generation reuses it with one Acquire load and no pin. The
//!   published generation may lag the pointer (a commit between its CAS and
//!   its `fetch_max`), never lead it, and never moves backwards; a commit
//!   returns only after its `fetch_max`, so a transaction that begins after a
//!   commit returned sees it (invariant 7, real-time order).
//! * Superseded descriptors are retired to the epoch collector; a descriptor
//!   is dereferenced only under a guard (invariant 11).

use super::reclaim::{Reclaimer, SendPtr};
use crate::snapshot::Snapshot;
use crate::sync::{mutant as m, mutant_on, ordering_or_mutant, AtomicPtr, AtomicU64, Ordering};

/// One immutable snapshot descriptor.
#[derive(Debug)]
pub(crate) struct Descriptor {
    pub(crate) generation: u64,
    pub(crate) xmin: u64,
    pub(crate) xmax: u64,
    pub(crate) running: Box<[u64]>,
}

impl Descriptor {
    /// The descriptor that follows `self` once transaction `id` leaves the
    /// running set (PROTOCOL rule 2): remove `id`; if `id >= xmax`, raise
    /// `xmax` to `id + 1` and list every id in `[xmax, id)` as running, since
    /// none of them can have completed without raising `xmax` first.
    pub(crate) fn next_without(&self, id: u64) -> Descriptor {
        let mut running: Vec<u64>;
        let xmax;
        if id < self.xmax {
            running = Vec::with_capacity(self.running.len().saturating_sub(1));
            running.extend(self.running.iter().copied().filter(|&r| r != id));
            xmax = self.xmax;
        } else {
            running = Vec::with_capacity(self.running.len() + (id - self.xmax) as usize);
            running.extend_from_slice(&self.running);
            running.extend(self.xmax..id);
            xmax = id + 1;
        }
        let xmin = running.first().copied().unwrap_or(xmax);
        let generation = if mutant_on(m::SKIP_GENERATION_BUMP) {
            self.generation
        } else {
            self.generation + 1
        };
        Descriptor {
            generation,
            xmin,
            xmax,
            running: running.into_boxed_slice(),
        }
    }
}

/// What one completion cost.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct InstallCost {
    /// Failed compare-and-swaps before the install succeeded.
    pub(crate) cas_retries: u64,
}

/// The atomically swapped pointer to the current descriptor, and the
/// published generation that lets readers skip the pointer.
pub(crate) struct DescriptorCell {
    ptr: AtomicPtr<Descriptor>,
    published: AtomicU64,
}

impl DescriptorCell {
    /// The first descriptor: nothing running, ids start at 1.
    pub(crate) fn new() -> DescriptorCell {
        let first = Box::new(Descriptor {
            generation: 1,
            xmin: 1,
            xmax: 1,
            running: Box::new([]),
        });
        DescriptorCell {
            ptr: AtomicPtr::new(Box::into_raw(first)),
            published: AtomicU64::new(1),
        }
    }

    /// The newest generation whose commit has returned (or is about to).
    #[inline]
    pub(crate) fn published_generation(&self) -> u64 {
        // Acquire: pairs with the Release fetch_max in `complete`.
        self.published.load(Ordering::Acquire)
    }

    /// Copies the current descriptor into `snap` (PROTOCOL rule 1: one
    /// Acquire load of the pointer, under a guard).
    pub(crate) fn copy_into(&self, rc: &Reclaimer, snap: &mut Snapshot) {
        let guard = rc.pin();
        // Acquire: pairs with the Release CAS in `complete`, so the contents
        // of the descriptor and every version-status flip made before it are
        // visible here (invariants 9, 11).
        let p = self.ptr.load(ordering_or_mutant(
            Ordering::Acquire,
            m::RELAXED_DESCRIPTOR_LOAD,
        ));
        // SAFETY: `p` was loaded under `guard`; a descriptor is retired only
        // after it has been replaced, and retired memory is freed only after
        // every guard that could have loaded it drops (invariant 11). The
        // pointer is never null (the cell always holds a descriptor).
        let d = unsafe { &*p };
        snap.assign(d.generation, d.xmin, d.xmax, &d.running);
        drop(guard);
    }

    /// The current descriptor's xmin: every id below it has completed.
    pub(crate) fn xmin(&self, rc: &Reclaimer) -> u64 {
        let guard = rc.pin();
        // Acquire: pairs with the Release CAS in `complete`; the advancer
        // then publishes this xmin with Release as the floor, so whoever
        // acquires the floor sees the completed transactions' flips.
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: as in `copy_into`: loaded under `guard` (invariant 11).
        let x = unsafe { (*p).xmin };
        drop(guard);
        x
    }

    /// Transaction `id` leaves the running set: derive the next descriptor
    /// and install it with a CAS (PROTOCOL rule 2). No scan, no lock.
    pub(crate) fn complete(&self, rc: &Reclaimer, id: u64) -> InstallCost {
        let mut cost = InstallCost::default();
        let guard = rc.pin();
        // Acquire: pairs with the Release CAS of the previous completer; we
        // read the descriptor's contents to derive the next one.
        let mut cur = self.ptr.load(Ordering::Acquire);
        loop {
            // SAFETY: `cur` was loaded (or returned by a failed CAS, which
            // is a load) under `guard` (invariant 11).
            let next = Box::new(unsafe { &*cur }.next_without(id));
            let generation = next.generation;
            let next = Box::into_raw(next);
            // Release on success: publishes the new descriptor and every
            // status flip this transaction made before completing; pairs
            // with the Acquire loads in `copy_into` and `xmin`.
            // Acquire on failure: the failed CAS is our load of the newer
            // descriptor, which we derive from next (STYLE mistake 1).
            match self
                .ptr
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(old) => {
                    let old = SendPtr(old);
                    rc.defer(&guard, move || {
                        let old = old;
                        // SAFETY: `old` was unlinked by our successful CAS, so
                        // no new reader can load it; the collector runs this
                        // only after every guard that might have loaded it
                        // has dropped (invariant 11). It came from
                        // Box::into_raw and is freed exactly once, here.
                        drop(unsafe { Box::from_raw(old.0) });
                    });
                    // Release: pairs with the Acquire load in
                    // `published_generation`. fetch_max keeps the published
                    // generation monotonic when two completers race here
                    // (invariant 4).
                    self.published.fetch_max(generation, Ordering::Release);
                    return cost;
                }
                Err(actual) => {
                    // SAFETY: `next` came from Box::into_raw above and was
                    // never shared.
                    drop(unsafe { Box::from_raw(next) });
                    cur = actual;
                    cost.cas_retries += 1;
                }
            }
        }
    }
}

impl Drop for DescriptorCell {
    fn drop(&mut self) {
        let p = self.ptr.get_mut_ptr();
        // SAFETY: `&mut self`: no other thread can reach the cell, and the
        // current descriptor is never retired, so it is freed once, here.
        drop(unsafe { Box::from_raw(p) });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn d(gen: u64, xmin: u64, xmax: u64, running: &[u64]) -> Descriptor {
        Descriptor {
            generation: gen,
            xmin,
            xmax,
            running: running.into(),
        }
    }

    #[test]
    fn completing_below_xmax_removes_the_id() {
        let n = d(3, 5, 9, &[5, 7]).next_without(5);
        assert_eq!(
            (n.generation, n.xmin, n.xmax, &*n.running),
            (4, 7, 9, &[7][..])
        );
        let n = n.next_without(7);
        assert_eq!((n.xmin, n.xmax, &*n.running), (9, 9, &[][..]));
    }

    #[test]
    fn completing_above_xmax_lists_the_gap_as_running() {
        let n = d(1, 1, 1, &[]).next_without(4);
        assert_eq!((n.xmin, n.xmax, &*n.running), (1, 5, &[1, 2, 3][..]));
        let n = n.next_without(2);
        assert_eq!((n.xmin, n.xmax, &*n.running), (1, 5, &[1, 3][..]));
    }

    #[test]
    fn every_completion_bumps_the_generation_and_publishes_it() {
        let rc = Reclaimer::new();
        let cell = DescriptorCell::new();
        let mut s = Snapshot::default();
        cell.copy_into(&rc, &mut s);
        assert_eq!(s.generation, 1);
        cell.complete(&rc, 1);
        cell.complete(&rc, 3);
        assert_eq!(cell.published_generation(), 3);
        cell.copy_into(&rc, &mut s);
        assert_eq!(
            (s.generation, s.xmin, s.xmax, &s.running[..]),
            (3, 2, 4, &[2][..])
        );
        assert!(s.sees(1) && !s.sees(2) && s.sees(3) && !s.sees(4));
    }
}
