//! Writes and commit on one key's chain (DESIGN.md, "Version chains and
//! the index"): the first-updater-wins check (`check_conflict`, and
//! `changed_since` for a serializable transaction's validation), `prepend`
//! (clearing the head summary, then the head CAS), `commit_version` (the
//! `newer`/`stop` link from the key's newest committed version, the
//! unordered flag and the summary, all before the status flip) and
//! `unlink_head` (a rolled-back version leaving the top); [`Conflict`] is
//! why a prepend fails.
//!
//! Called through [`WriteSet`](crate::store::raw::writes::WriteSet) and the
//! loom models' hooks. It keeps the chain's shape and order (invariant 13),
//! the head summary (16) and savepoint undo (15), and retires by epoch
//! (11); the orderings are in `chain.rs`, `# Orderings`.

use super::{free_version, ts_get, KeyEntry, OwnedVersion, Version};
use crate::machinery::epoch::{Collector, Guard};
use crate::machinery::{ReadView, VersionState, VersionStatus, WriteCheck};
use crate::store::raw::{hint, SendPtr};
use crate::sync::{mutant as m, mutant_on, ordering_or_mutant, Ordering};

/// Why a prepend failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// Another transaction's update is in progress, prepared, or committed
    /// after the writer's snapshot.
    Write,
}

impl KeyEntry {
    /// First updater wins: may a transaction with `view` write this key?
    fn check_conflict(&self, head: *mut Version, view: &ReadView<'_>) -> Result<(), Conflict> {
        let mut p = head;
        while !p.is_null() {
            // SAFETY: as in `read`; the caller holds a guard (invariant 11).
            let v = unsafe { &*p };
            match view.write_check(&v.status) {
                WriteCheck::Allowed => return Ok(()),
                WriteCheck::Skip => p = v.next_ptr(),
                WriteCheck::Conflict => return Err(Conflict::Write),
            }
        }
        Ok(())
    }

    /// Has this key a version newer than `view`'s, not in progress
    /// ([`ReadView::read_check`]: a serializable transaction's validation
    /// of a key it read, `kv/serializable.rs`)?
    pub(crate) fn changed_since(&self, view: &ReadView<'_>, _guard: &Guard) -> bool {
        let mut p = self.head_ptr();
        while !p.is_null() {
            // SAFETY: as in `read`; the caller holds a guard (invariant 11).
            let v = unsafe { &*p };
            match view.read_check(&v.status) {
                WriteCheck::Allowed => return false,
                WriteCheck::Skip => p = v.next_ptr(),
                WriteCheck::Conflict => return true,
            }
        }
        false
    }

    /// Prepends `v` (written by `view.own()`) after the conflict check.
    /// Returns the installed version, or the conflict with the version back.
    pub(crate) fn prepend(
        &self,
        v: OwnedVersion,
        view: &ReadView<'_>,
        _guard: &Guard,
    ) -> Result<(*mut Version, u64), (OwnedVersion, Conflict)> {
        let mut retries = 0;
        let mut head = self.head_ptr();
        loop {
            if let Err(c) = self.check_conflict(head, view) {
                return Err((v, c));
            }
            // SAFETY: `v` is still private to this thread.
            unsafe { v.0.as_ref() }.next.store(head, Ordering::Relaxed);
            if !mutant_on(m::PREPEND_KEEPS_SUMMARY) {
                // Relaxed: sequenced before our Release head CAS and before
                // any later flip of ours (prepare, commit), so whoever sees
                // our version, or anything we do after, sees the summary
                // cleared or a later value. It comes after the Acquire load
                // of the head's committed status in `check_conflict`, which
                // the head's committer stored after its summary, so it is
                // later than that summary in the word's modification order
                // (invariant 16).
                self.summary.store(0, Ordering::Relaxed);
            }
            // Release, required: pairs with the Acquire head loads, so
            // readers see the new version and its `next`. Acquire on
            // failure, required: the failed CAS is our load of the newer
            // head, whose version we check next.
            match self.head.compare_exchange(
                head,
                v.0.as_ptr(),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok((v.into_raw(), retries)),
                Err(actual) => {
                    head = actual;
                    retries += 1;
                }
            }
        }
    }

    /// Commits `v` (a version of the calling transaction, still in
    /// progress or prepared) at `cts` (0: none): links the key's newest
    /// committed version to it, marks the key unordered if `cts` is below
    /// that version's timestamp, then calls `flip`, which must flip `v`'s
    /// status to committed at `cts` (the machinery's
    /// [`Completion::flip`](crate::machinery::Completion::flip): the Release
    /// store that publishes the link, invariant 13). Returns the number of
    /// versions examined.
    ///
    /// # Safety
    /// `v` came from [`prepend`](Self::prepend) on this key by the calling
    /// transaction, which has not finished; the caller holds an epoch guard.
    pub(crate) unsafe fn commit_version(
        &self,
        v: *mut Version,
        cts: u64,
        flip: impl FnOnce(&VersionStatus),
    ) -> u64 {
        // SAFETY: the caller guarantees `v` is linked and unfinished (an
        // unfinished version is never pruned, invariant 3).
        let me = unsafe { &*v };
        let mut examined = 0;
        let late = mutant_on(m::LINK_AFTER_FLIP);
        if !late {
            // SAFETY: as above.
            examined = unsafe { self.link_committed(me, v, cts) };
        }
        // Relaxed: set by us in `link_committed` or by an earlier
        // committer before its flip, which our prepend's conflict check
        // loaded with Acquire.
        let ordered = !hint::unordered(self.hint.load(Ordering::Relaxed));
        let summary = if cts != 0 && ordered { cts } else { 0 };
        let summary_late = mutant_on(m::SUMMARY_AFTER_FLIP);
        if !summary_late {
            // Before the flip: a writer can prepend on top only after it
            // has seen our flip, so its clearing store comes after this one
            // (invariant 16). Release, required: pairs with the Acquire
            // summary load in `read_counted` (our `newer`/`stop` links, the
            // links below them and the flag; loom `summary/publish`, mutant
            // `RELAXED_SUMMARY_STORE`).
            self.summary.store(
                summary,
                ordering_or_mutant(Ordering::Release, m::RELAXED_SUMMARY_STORE),
            );
        }
        flip(&me.status);
        if summary_late {
            // Release, as above (pairs with the Acquire summary load); this
            // branch runs only in the SUMMARY_AFTER_FLIP mutant, and keeps
            // the real store's ordering so only the placement differs.
            self.summary.store(summary, Ordering::Release);
        }
        if late {
            // SAFETY: as above.
            examined = unsafe { self.link_committed(me, v, cts) };
        }
        examined
    }

    /// The link step of `commit_version`: links the key's newest committed
    /// version to `v` (or makes `v` the floor), and sets the key's
    /// unordered flag if `cts` is below that version's timestamp. Returns
    /// the versions examined.
    ///
    /// # Safety
    /// As for `commit_version`.
    unsafe fn link_committed(&self, me: &Version, v: *mut Version, cts: u64) -> u64 {
        let mut examined = 0;
        // Our version is the key's only unfinished one and everything below
        // it is committed or aborted (first updater wins), so the first
        // non-aborted version below is the newest committed one, and no one
        // else links to ours or from it until we flip.
        let mut p = me.next_ptr();
        while !p.is_null() {
            // SAFETY: linked below our unfinished version, at or above the
            // floor (pruning cuts only below the newest covered committed
            // version); we hold a guard (invariant 11).
            let u = unsafe { &*p };
            examined += 1;
            let ucts = match u.status.state() {
                VersionState::Aborted => {
                    p = u.next_ptr();
                    continue;
                }
                st => ts_get(st),
            };
            // Equivalent mutant (`<=`: an equal-timestamp commit would mark
            // the key unordered, which only sends readers to the head walk;
            // same answers).
            if ucts != 0 && (cts == 0 || cts < ucts) {
                // Relaxed: published by our Release status flip (invariant
                // 13). A read-modify-write: a pruner may be refreshing the
                // rest of the word (its compare-and-swap keeps the flag).
                self.hint.fetch_or(hint::empty(true), Ordering::Relaxed);
            }
            // Relaxed: readers act on `stop` only after an Acquire load of
            // a status at or above ours, or of the summary or hint stored
            // after it (invariants 13, 17).
            u.stop.store(cts, Ordering::Relaxed);
            // Release, required: pairs with the Acquire `newer` loads in
            // the climbs, in `cut` and in `refresh_hint`. A reader
            // also gets our version's contents through the status it loaded
            // above, but `collect()`'s prune reaches versions through the
            // floor and `newer` alone.
            // Loom model `prune_race` (RELAXED_NEWER_STORE) races that prune.
            u.set_newer(
                v,
                ordering_or_mutant(Ordering::Release, m::RELAXED_NEWER_STORE),
            );
            return examined;
        }
        // The key's first committed version: it is the floor. No one prunes
        // a key with no committed version, so no one else writes `floor`
        // now. Release, required: pairs with the Acquire floor load in
        // `cut` (loom `prune_race`) and in readers.
        self.floor.store(v, Ordering::Release);
        examined
    }

    /// Unlinks `v` if it is still the head (a rolled-back version nobody
    /// wrote on top of) and retires it to `collector`. Returns whether it did.
    ///
    /// # Safety
    /// `v` came from [`prepend`](Self::prepend) on this key by the calling
    /// transaction, which has not finished and has not unlinked it; `guard`
    /// and `collector` are the store's collector's.
    pub(crate) unsafe fn unlink_head(
        &self,
        v: *mut Version,
        collector: &Collector,
        guard: &Guard,
    ) -> bool {
        // SAFETY: `v` is a version of the calling transaction, still linked
        // (only this transaction unlinks its own versions, and pruning never
        // cuts at an unfinished version), read under `guard`.
        let next = unsafe { &*v }.next_ptr();
        // Release, stronger than needed: pairs with the Acquire head loads,
        // but this CAS is a read-modify-write, so it continues the release
        // sequence of the head CAS that installed `v`, whose writer acquired
        // `next` first; a reader that acquires the new head is ordered after
        // `next` even with Relaxed here.
        if self
            .head
            .compare_exchange(v, next, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let sp = SendPtr(v);
        collector.defer(guard, move || {
            let sp = sp;
            // SAFETY: unlinked by our CAS (no new reader can reach it; an
            // aborted version is never a finger, floor or `newer` target);
            // freed after every guard that could still hold it drops
            // (invariant 11). Only `v` goes, not what it links to.
            unsafe { free_version(sp.0) };
        });
        true
    }
}
