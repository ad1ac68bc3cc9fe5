//! Pruning one key's chain (DESIGN.md, "Reclaim horizon and pruning"):
//! under the key's pruning lock (the finger word's low bit), `cut` climbs
//! from the floor along `newer` links to the safe point, the newest version
//! the horizon covers (invariant 3), makes it the floor and detaches the
//! tail below it, moves the finger up to the published stable timestamp
//! (13) and refreshes the hint above the finger (18), all before the tail
//! is retired; `prune` hands the tail to the collector ([`Tails`]). Each
//! pointer steps over each version once: O(1) amortized per commit.
//!
//! Also here, for the tests and loom models: the checks of what a cut
//! keeps (`finger_linked`, `hint_linked`, `is_unordered`). The orderings
//! are in `chain.rs`, `# Orderings`.

use super::{finger_of, free_chain, locked, timestamped, ts_get, KeyEntry, Version};
use crate::machinery::epoch::{Collector, Guard, RetireBatch};
use crate::machinery::{Horizon, VersionState};
use crate::store::raw::hint;
use crate::sync::{mutant as m, mutant_on, Ordering};
use std::ptr;

/// Work counts of one prune (for `Stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// Versions cut off and handed to the collector.
    pub(crate) cut: u64,
    /// Versions examined (status loaded) by the climbs.
    pub(crate) examined: u64,
}

impl KeyEntry {
    /// Cuts the chain below the newest version covered by `horizon` and
    /// retires the tail, then moves the finger up to `stable`. Returns the
    /// work done. Skips (no work) if another thread is pruning this key.
    pub(crate) fn prune<F: Fn(u64) + Send + 'static>(
        &self,
        horizon: Horizon,
        stable: u64,
        collector: &Collector,
        guard: &Guard,
        on_free: impl FnOnce() -> F,
    ) -> Pruned {
        let mut batch = tails();
        let n = self.cut(horizon, stable, &mut batch, guard);
        batch.flush(collector, guard, on_free());
        n
    }

    /// Climbs the floor to the newest version covered by `horizon` (the
    /// safe point), hands the detached tail below it to `batch`, and moves
    /// the finger up to the newest timestamped version at or below
    /// `stable`. Each step passes a version once, so this is O(1) amortized
    /// per commit. Does nothing if another thread is pruning this key.
    pub(crate) fn cut(
        &self,
        horizon: Horizon,
        stable: u64,
        batch: &mut Tails,
        _guard: &Guard,
    ) -> Pruned {
        let mut out = Pruned::default();
        // Relaxed: the compare-and-swap below checks it.
        let mut finger = self.finger.load(Ordering::Relaxed);
        loop {
            if finger != finger_of(finger) {
                // Another thread is pruning this key.
                return out;
            }
            // Acquire, required: pairs with the Release store that ends the
            // previous pruner's hold (and every finger store), so cuts are
            // serialized per key: without it a pruner need not see the
            // previous one's finger and floor and could climb from one below
            // the floor, already retired. No model runs two pruners of one
            // key in different threads, so the argument, not a check, holds
            // it.
            match self.finger.compare_exchange(
                finger,
                locked(finger),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => finger = now,
            }
        }
        // Acquire, required: pairs with the first commit's Release floor
        // store (later stores are ours, under the lock; loom `prune_race`).
        let fl = self.floor.load(Ordering::Acquire);
        if fl.is_null() {
            // Release, stronger than needed: pairs with the Acquire CAS
            // above, but nothing was written under the lock on this path.
            self.finger.store(finger, Ordering::Release);
            return out;
        }
        // SAFETY: the floor is linked and committed; we hold `_guard` and
        // the pruning lock, so nobody else moves or retires it (invariants 11, 13).
        let mut sp = unsafe { &*fl };
        let mut moved_finger = false;
        loop {
            let n = sp.newer_ptr();
            if n.is_null() {
                break;
            }
            // SAFETY: a `newer` target is linked above the floor.
            let nv = unsafe { &*n };
            out.examined += 1;
            // (`covers` includes the PRUNE_PAST_SAFE_POINT mutant.)
            if !horizon.covers(&nv.status) {
                break;
            }
            // Stopping at the first version the horizon does not cover
            // keeps at least the newest covered one (invariant 3); a newer
            // covered one (ids are not in commit order) waits a round.
            if ptr::eq(sp, finger) {
                moved_finger = true;
            }
            sp = nv;
        }
        let mut tail = ptr::null_mut();
        let spp = sp as *const Version as *mut Version;
        if spp != fl {
            if moved_finger {
                // The finger never points below the floor (invariant 13):
                // what is below is about to be retired.
                finger = if timestamped(&sp.status) {
                    spp
                } else {
                    ptr::null_mut()
                };
                // Release, stronger than needed: pairs with the Acquire
                // finger load in readers, who come through the head (the
                // next pruner, through the lock's release below).
                self.finger.store(locked(finger), Ordering::Release);
            }
            // Release, stronger than needed: pairs with the Acquire floor
            // loads, but readers come through the head and the next pruner
            // through the lock (the first commit's store is the one loom
            // `prune_race` needs).
            self.floor.store(spp, Ordering::Release);
            // The safe point (invariant 3): `sp` is visible to every current
            // and future reader, so every reader that judges it now stops at
            // `sp` or above. One that judged it while it was still prepared
            // and skipped it may be on its way below: it finds this null
            // and judges `sp` again (`skipped_into_cut`, invariant 10).
            // Release, required: pairs with the Acquire `next` load in
            // `next_ptr`, and comes after our Acquire load of `sp`'s
            // committed status in `covers`, so that reader sees the commit
            // (loom `skipped_prepared`). Acquire: stronger than needed; we
            // free the tail, but we reached `sp` by Acquire loads from
            // versions whose writers had acquired everything older, so the
            // tail is already ordered.
            tail = sp.next.swap(ptr::null_mut(), Ordering::AcqRel);
        }
        // Relaxed: our own key's flag, written before status flips we saw.
        if !hint::unordered(self.hint.load(Ordering::Relaxed)) {
            let mut f = if finger.is_null() { spp } else { finger };
            loop {
                // SAFETY: `f` is the finger or the floor: linked, committed.
                let n = unsafe { &*f }.newer_ptr();
                if n.is_null() {
                    break;
                }
                // SAFETY: a `newer` target is linked above the floor.
                let nv = unsafe { &*n };
                out.examined += 1;
                match nv.status.state() {
                    // Equivalent mutant (`<`: the finger stops one version
                    // lower, a read from it climbs one more; same answers,
                    // under loom and the tests).
                    VersionState::Committed(ts) if ts.get() <= stable => {}
                    _ => break,
                }
                f = n;
            }
            // SAFETY: as above.
            let fts = ts_get(unsafe { &*f }.status.state());
            // Equivalent mutant (`<`: the finger is not moved onto a version
            // exactly at stable; reads climb one more, same answers).
            if f != finger && fts != 0 && fts <= stable {
                finger = f;
            }
        }
        let skip = if tail.is_null() {
            mutant_on(m::HINT_REFRESHED_ONLY_ON_CUT)
        } else {
            mutant_on(m::PRUNE_KEEPS_HINT)
        };
        if !skip {
            // Before the tail below `sp` is retired (by our caller): the
            // hint names `sp` or a version above it (invariant 18).
            // SAFETY: the finger (if any) is at or above the floor `spp`,
            // both linked and committed; we hold the lock and `_guard`.
            unsafe { self.refresh_hint(if finger.is_null() { spp } else { finger }) };
        }
        // Release, required: pairs with the Acquire CAS above by the next
        // pruner of this key, which must see our finger and floor; and with
        // the Acquire finger load in readers (stronger than needed there:
        // they come through the head). Ends our hold of the lock.
        self.finger.store(finger, Ordering::Release);
        let mut p = tail;
        while !p.is_null() {
            out.cut += 1;
            // SAFETY: the tail is unlinked but not yet retired, so nothing
            // frees it; we hold `_guard`.
            p = unsafe { &*p }.next_ptr();
        }
        if !tail.is_null() {
            // SAFETY: unlinked by the swap under this key's pruning flag, so
            // pushed exactly once; `free_chain` frees a whole tail.
            unsafe { batch.push(tail) };
        }
        out
    }

    /// Starts loading what a prune of this key reads next, so a batch of
    /// prunes (the stable sweep, `sweep.rs`) overlaps its misses. `first`:
    /// the floor's and the finger's versions; else (once those lines are
    /// in) the versions right above them, where both climbs go next.
    #[inline]
    pub(crate) fn prefetch_prune(&self, first: bool, _guard: &Guard) {
        // Relaxed, all of them: these loads only choose what to prefetch,
        // and a prefetch never dereferences; the prune that follows loads
        // each word again under the lock.
        let floor = self.floor.load(Ordering::Relaxed);
        let finger = finger_of(self.finger.load(Ordering::Relaxed));
        for v in [floor, finger] {
            if v.is_null() {
                continue;
            }
            if first {
                crate::store::raw::prefetch(v);
                continue;
            }
            // SAFETY: the floor and the finger point at linked versions,
            // or (one loaded just before a cut moved it) at versions
            // retired after `_guard` was pinned, as a reader's starts
            // (invariants 11, 13).
            let w = unsafe { &*v }.newer.load(Ordering::Relaxed);
            crate::store::raw::prefetch(ptr::without_provenance::<u8>(
                (w & super::LINK_MASK) as usize,
            ));
        }
    }

    /// Is the key's head committed at `cts` with nothing unfinished above
    /// it (the head summary, invariant 16)? Then a read at `cts` or later
    /// takes the head and no finger (the stable sweep's test, `sweep.rs`).
    /// Relaxed: a hint; a stale answer costs a read a climb or the sweep a
    /// prune, never a wrong read.
    #[inline]
    pub(crate) fn newest_at(&self, cts: u64) -> bool {
        self.summary.load(Ordering::Relaxed) == cts
    }

    /// The key's head and the version a read at the stable timestamp of
    /// its last prune starts from (the finger, else the floor; none for an
    /// unordered key, whose readers walk from the head): the index slot's
    /// hints (`hashindex.rs`), only ever prefetched.
    // Under loom the index is a mutex map with no slots.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn hinted(&self) -> (*mut Version, *mut Version) {
        // Relaxed, all of them: the pointers are named, never dereferenced
        // here or by whoever prefetches them.
        let head = self.head.load(Ordering::Relaxed);
        if hint::unordered(self.hint.load(Ordering::Relaxed)) {
            return (head, ptr::null_mut());
        }
        let f = finger_of(self.finger.load(Ordering::Relaxed));
        let stable = if f.is_null() {
            self.floor.load(Ordering::Relaxed)
        } else {
            f
        };
        (head, stable)
    }

    /// Points the hint at the version right above `base` (the finger, or
    /// the floor with no finger), with the gap from the head summary, and
    /// keeps the unordered flag.
    ///
    /// # Safety
    /// The caller holds the key's pruning lock and an epoch guard; `base`
    /// is linked and committed, at or above the floor.
    unsafe fn refresh_hint(&self, base: *mut Version) {
        // SAFETY: the caller's contract (invariants 11, 13).
        let n = unsafe { &*base }.newer_ptr();
        let gap = if n.is_null() {
            0
        } else {
            // Relaxed: the gap is a hint; an older summary gives a smaller
            // (safe) gap, and a reader judges what it lands on.
            let s = self.summary.load(Ordering::Relaxed);
            // SAFETY: a `newer` target is linked above `base`.
            match unsafe { &*n }.status.state() {
                // Equivalent mutant (`>=`: at `s == ts` the gap is 0 either way).
                VersionState::Committed(ts) if ts.get() != 0 && s > ts.get() => s - ts.get(),
                _ => 0,
            }
        };
        // Relaxed: the compare-and-swap below checks it.
        let mut w = self.hint.load(Ordering::Relaxed);
        loop {
            let new = if n.is_null() {
                hint::empty(hint::unordered(w))
            } else {
                hint::pack(n, gap, hint::unordered(w))
            };
            if mutant_on(m::HINT_STORE_LOSES_FLAG) {
                // Release, as below; only in the mutant, whose plain store
                // can overwrite a committer's flag.
                self.hint.store(new, Ordering::Release);
                return;
            }
            // Release, required: pairs with the Acquire hint load in
            // `read_from_finger`, whose reader may not otherwise be ordered
            // after the named version's fields (it can be above the commit
            // the reader synchronized with). A failure: a committer set the
            // flag meanwhile (loom `hint/flag`, mutant
            // `HINT_STORE_LOSES_FLAG`).
            match self
                .hint
                .compare_exchange(w, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// Is the hint null or a version linked from the head? For tests and
    /// the loom models (invariant 18).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn hint_linked(&self, _guard: &Guard) -> bool {
        // Acquire, stronger than needed: only tests and models call this,
        // after the threads that wrote the hint joined.
        let s = hint::version(self.hint.load(Ordering::Acquire));
        let mut p = self.head_ptr();
        while !p.is_null() {
            if p == s {
                return true;
            }
            // SAFETY: loaded under `_guard` (invariant 11).
            p = unsafe { &*p }.next_ptr();
        }
        s.is_null()
    }

    /// Is the key unordered? For tests and the loom models.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_unordered(&self) -> bool {
        // Relaxed: only tests and models call this, after the threads that
        // wrote the flag joined.
        hint::unordered(self.hint.load(Ordering::Relaxed))
    }

    /// Is the finger null or a version linked from the head (at or above
    /// the floor)? For tests and the loom models (invariant 13).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn finger_linked(&self, _guard: &Guard) -> bool {
        // Acquire, stronger than needed: as in `read_from_finger`; only
        // tests and models call this.
        let f = finger_of(self.finger.load(Ordering::Acquire));
        let mut p = self.head_ptr();
        while !p.is_null() {
            if p == f {
                return true;
            }
            // SAFETY: loaded under `_guard` (invariant 11).
            p = unsafe { &*p }.next_ptr();
        }
        f.is_null()
    }
}

/// Chain tails cut off by pruning, waiting for the collector.
pub(crate) type Tails = RetireBatch<Version>;

/// A batch for pruned chain tails.
pub(crate) fn tails() -> Tails {
    RetireBatch::new(free_chain)
}
