//! Version chains: per key, a newest-first singly linked list of versions,
//! plus `newer` links between committed versions and two per-key pointers
//! into the list (DESIGN.md, "Version chains and the index").
//!
//! A version is one allocation: a header (the machinery's
//! [`VersionStatus`]: its writer's id and one word packing state and
//! timestamp, so one Acquire load reads both consistently; the link to the
//! next older version; the link to the next newer *committed* version and
//! that version's commit timestamp) with the value's bytes right behind it.
//!
//! * Writers prepend with a CAS on the head, after checking the newest
//!   non-aborted version for a write-write conflict (first updater wins).
//!   So a key has at most one unfinished version, at the top, and its
//!   committed versions are linked in commit order.
//! * A commit ([`KeyEntry::commit_version`], called from `kv/txn.rs`
//!   inside the machinery's [`Completion`](crate::machinery::Completion))
//!   first links the key's newest committed version to the new one
//!   (`newer`, and `stop` = the new commit timestamp), notes whether the new
//!   timestamp is below the old one (the key then is *unordered* for good),
//!   and then has the completion flip the status. Prepare and rollback only
//!   flip.
//! * A reader whose timestamp bound is below the key's head *summary* (the
//!   head's commit timestamp, kept by writers: cleared by every prepend,
//!   stored by every commit before its flip; DESIGN.md invariant 16) knows
//!   the head is too new without loading it and starts at the finger.
//! * Otherwise readers examine the head first. The first committed version their view
//!   rejects only because its commit timestamp is above the read timestamp
//!   sends them to the key's *finger* (the newest committed version at or
//!   below a recently published stable timestamp) or *floor* (the last safe
//!   point), or first to the key's *hint* (the version right above the
//!   finger) when the hint's gap puts it at or below the read timestamp:
//!   from there they climb `newer` links to the newest version they
//!   accept; `stop` tells them without a load of the next version when it
//!   is already too new. In read-ts that is one version (finger or hint)
//!   for three reads in four whatever the read timestamp's age. A point
//!   read does no read-modify-write.
//! * Pruning climbs from the floor along `newer` links to the newest
//!   version covered by the reclaim horizon (the safe point, invariant 3),
//!   cuts the chain below it and retires the tail to the epoch collector
//!   (a reader that skipped the safe point while it was prepared and
//!   finds the cut judges it again: it is visible to that reader now);
//!   then it moves the finger up to the published stable timestamp and
//!   points the hint above it (invariant 18). Each version is stepped over
//!   once by each pointer, so the work per commit is O(1) amortized.
//!   Pruning is logical; freeing is the collector's. The key's pruning
//!   lock is the finger word's low bit.
//!
//! # Orderings
//!
//! * Head CAS (Release) pairs with every Acquire load of the head and of
//!   `next` links: a reader that reaches a version sees its fields.
//! * Status words are the machinery's ([`VersionStatus`]): it flips them
//!   with Release stores before the writer's descriptor install (invariant
//!   9) and every read of one is an Acquire load inside the machinery, so
//!   this file names no ordering for them. A reader that sees
//!   `Committed(ts)` sees the version exactly as written and everything its
//!   committer wrote before the flip: the `newer`/`stop` link into it and
//!   the unordered flag.
//! * `newer` stores (Release) pair with the Acquire `newer` loads in the
//!   climbs; finger and floor stores (Release) pair with their Acquire
//!   loads in readers. Both only ever point at versions already published
//!   by a head CAS, so the pairing carries the version's contents.
//! * The cut's swap of the link below the safe point is a Release store
//!   (AcqRel) paired with the Acquire `next` loads: a reader that skipped
//!   the safe point while it was still prepared and then finds that link
//!   null judges the version again and sees the commit the cutter saw
//!   (`skipped_into_cut`, invariants 3 and 10).
//! * The hint's refresh (a CAS under the pruning lock, keeping the
//!   unordered flag that committers set with `fetch_or`) is a Release
//!   paired with the readers' Acquire hint load: the hinted version can be
//!   newer than what the reader's head or summary load ordered it after.
//! * `stop` and the unordered flag are Relaxed: a reader acts on them only
//!   after an Acquire status load of a committed version at or above the
//!   version that wrote them, or an Acquire load of the head summary, which
//!   that version's committer (or a later one) stored with Release after
//!   them (invariants 13, 16).
//! * The summary's clearing store in `prepend` is Relaxed: it is sequenced
//!   before the Release head CAS and any later flip of that writer, and
//!   after its Acquire load of the head's committed status (invariant 16).

use super::{hint, SendPtr};
use crate::machinery::epoch::{Collector, Guard, RetireBatch};
use crate::machinery::{Horizon, ReadView, VersionState, VersionStatus, Visibility, WriteCheck};
use crate::sync::{mutant as m, mutant_on, ordering_or_mutant, AtomicPtr, AtomicU64, Ordering};
use crate::ts::Timestamp;
use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

/// `stop` before a newer committed version is linked.
const NO_STOP: u64 = u64::MAX;
/// `len` of a tombstone.
const TOMBSTONE: usize = usize::MAX;
/// The finger word's low bit: a prune of this key is under way (the key's
/// pruning lock; versions are 8-aligned, so an address never has it).
const PRUNING: usize = 1;

/// The finger of a finger word (the pruning bit masked off).
#[inline]
fn finger_of(p: *mut Version) -> *mut Version {
    p.map_addr(|a| a & !PRUNING)
}

/// `p` with the pruning bit set.
#[inline]
fn locked(p: *mut Version) -> *mut Version {
    p.map_addr(|a| a | PRUNING)
}

/// One version of one key: this header, then `len` value bytes in the same
/// allocation (made by [`Version::alloc`], freed by [`free_version`]).
#[repr(C)]
pub(crate) struct Version {
    /// The writer and the packed state/timestamp word.
    pub(crate) status: VersionStatus,
    next: AtomicPtr<Version>,
    /// The next newer committed version (null: none linked yet). Written
    /// once, by that version's committer before its status flip.
    newer: AtomicPtr<Version>,
    /// The commit timestamp of `newer` ([`NO_STOP`] until it is linked):
    /// this version is the one visible at timestamps in `[cts, stop)`.
    stop: AtomicU64,
    /// Value length, or [`TOMBSTONE`].
    len: usize,
}

/// A version not yet shared: frees itself on drop.
pub(crate) struct OwnedVersion(NonNull<Version>);

impl Drop for OwnedVersion {
    fn drop(&mut self) {
        // SAFETY: an OwnedVersion is the only reference to its version,
        // made by `Version::alloc` and never linked.
        unsafe { free_version(self.0.as_ptr()) };
    }
}

impl OwnedVersion {
    fn into_raw(self) -> *mut Version {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

#[inline]
fn layout_for(len: usize) -> Layout {
    let bytes = if len == TOMBSTONE { 0 } else { len };
    let (l, _) = Layout::new::<Version>()
        .extend(Layout::array::<u8>(bytes).expect("value length is bounded by the config"))
        .expect("value length is bounded by the config");
    l.pad_to_align()
}

impl Version {
    /// A new version with `status` (fresh from
    /// [`Transaction::new_version`](crate::machinery::Transaction::new_version))
    /// holding `value` (`None`: a tombstone), header and bytes in one
    /// allocation.
    pub(crate) fn alloc(status: VersionStatus, value: Option<&[u8]>) -> OwnedVersion {
        let len = value.map_or(TOMBSTONE, <[u8]>::len);
        let layout = layout_for(len);
        // SAFETY: the layout has a non-zero size (the header).
        let p = unsafe { alloc::alloc(layout) } as *mut Version;
        let Some(nn) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        // The hint word (`hint.rs`) keeps a version's address in 48
        // bits; user-space addresses on the targets this builds for fit.
        assert!(
            p.addr() >> hint::ADDR_BITS == 0,
            "a version's address fits in {} bits",
            hint::ADDR_BITS
        );
        // SAFETY: `p` is a fresh allocation of `layout`, which starts with a
        // `Version` and has `len` bytes after it.
        unsafe {
            p.write(Version {
                status,
                next: AtomicPtr::new(ptr::null_mut()),
                newer: AtomicPtr::new(ptr::null_mut()),
                stop: AtomicU64::new(NO_STOP),
                len,
            });
            if let Some(v) = value {
                ptr::copy_nonoverlapping(v.as_ptr(), p.add(1) as *mut u8, v.len());
            }
        }
        OwnedVersion(nn)
    }

    /// The value (`None`: a tombstone).
    #[inline]
    pub(crate) fn value(&self) -> Option<&[u8]> {
        if self.len == TOMBSTONE {
            return None;
        }
        // SAFETY: `Version::alloc` wrote `len` bytes right after the header in
        // the same allocation; they are never written again.
        Some(unsafe {
            std::slice::from_raw_parts((self as *const Version).add(1) as *const u8, self.len)
        })
    }

    #[inline]
    fn next_ptr(&self) -> *mut Version {
        // Acquire, required: pairs with the Release of the cut's swap in
        // `cut`, so a reader that loads the null a cut left below a version
        // it skipped sees that version's commit when it judges it again
        // (`skipped_into_cut`; loom `skipped_prepared`). For a non-null link
        // it also pairs with the Release head CAS that published the next
        // version (it was the head once), which is stronger than needed
        // there: every walk starts at an Acquire-loaded head, floor or
        // finger, and each prepender acquired the head it linked below its
        // own Release CAS, so what lies below is already ordered.
        self.next.load(Ordering::Acquire)
    }

    #[inline]
    fn newer_ptr(&self) -> *mut Version {
        // Acquire, required: pairs with the Release `newer` store in
        // `link_committed` (the newer version's contents; loom `prune_race`).
        self.newer.load(Ordering::Acquire)
    }
}

/// Frees one version.
///
/// # Safety
/// `p` was made by [`Version::alloc`], no other thread can reach it, and it is
/// freed nowhere else.
unsafe fn free_version(p: *mut Version) {
    // SAFETY: the caller guarantees exclusive ownership; `len` is immutable.
    unsafe {
        let layout = layout_for((*p).len);
        ptr::drop_in_place(p);
        alloc::dealloc(p as *mut u8, layout);
    }
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found<'g> {
    /// The visible value.
    Value(&'g [u8]),
    /// The visible version is a tombstone.
    Deleted,
    /// No visible version.
    Absent,
    /// A prepared update at or below the read timestamp.
    PrepareConflict,
}

/// Why a prepend failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// Another transaction's update is in progress, prepared, or committed
    /// after the writer's snapshot.
    Write,
}

/// A key's version chain.
pub(crate) struct KeyEntry {
    /// The newest version (any state): the newest committed one is the head
    /// or right below an unfinished head, one step from the key's node.
    head: AtomicPtr<Version>,
    /// The head summary (invariant 16): `0`, or a timestamp `s` meaning
    /// that the head is a version committed (or, its committer having
    /// decided, committing) at `s`, that nothing unfinished lies above it
    /// but its own transaction's versions committing at `s`, and that the
    /// key was ordered when it was stored. A reader whose timestamp bound
    /// is below `s` rejects the head without loading it and starts at the
    /// finger. Cleared by every prepend before its head CAS; stored by
    /// every commit before its status flip.
    summary: AtomicU64,
    /// The newest timestamped committed version at or below the stable
    /// timestamp published when it was last moved (null: none). Always at
    /// or above `floor`, so never retired while it points there
    /// (invariant 13). Its low bit ([`PRUNING`]) is the key's pruning
    /// lock: set by a pruner's compare-and-swap, cleared by its last store;
    /// only a pruner holding it writes the word.
    finger: AtomicPtr<Version>,
    /// The oldest committed version still linked: the last safe point the
    /// chain was cut at, or the key's first committed version (null: none
    /// committed yet). Written under the pruning lock, or once by the
    /// first commit.
    floor: AtomicPtr<Version>,
    /// The hint word (`hint.rs`): the version right above the finger (or
    /// the floor, with no finger), the one a reader at a stable timestamp
    /// that has passed the finger reads; a lower bound on the gap between
    /// the head's commit timestamp and its own; and the *unordered* flag,
    /// set for good when a commit's timestamp is below the key's newest
    /// committed version's (untimestamped counts as below any timestamp):
    /// the committed versions are then not ordered by timestamp, and
    /// readers walk from the head only. Every cut refreshes the version
    /// and gap under the pruning lock before it retires anything, so the
    /// hint never names a retired version; committers only set the flag
    /// (invariant 18).
    hint: AtomicU64,
}

impl Default for KeyEntry {
    fn default() -> Self {
        KeyEntry::new()
    }
}

/// Work counts of one prune (for `Stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// Versions cut off and handed to the collector.
    pub(crate) cut: u64,
    /// Versions examined (status loaded) by the climbs.
    pub(crate) examined: u64,
}

impl KeyEntry {
    pub(crate) fn new() -> KeyEntry {
        KeyEntry {
            head: AtomicPtr::new(ptr::null_mut()),
            summary: AtomicU64::new(0),
            finger: AtomicPtr::new(ptr::null_mut()),
            floor: AtomicPtr::new(ptr::null_mut()),
            hint: AtomicU64::new(hint::empty(false)),
        }
    }

    #[inline]
    fn head_ptr(&self) -> *mut Version {
        // Acquire, required: pairs with the Release head CAS in `prepend`
        // (the new version's fields) and in `unlink_head`.
        self.head.load(Ordering::Acquire)
    }

    /// Starts loading the head version: the line of its header and the
    /// next two, which hold a value of up to 80 bytes whole and the start
    /// of a longer one (a batched read's last miss; a longer value's rest
    /// is the hardware prefetcher's, as it is read in order). One Acquire
    /// load, no dereference: reading the head's length to prefetch exactly
    /// its lines would wait for the header and measured no faster.
    // Under loom the batched lookup (its only caller) is the mutex map's.
    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    pub(crate) fn prefetch_head(&self) {
        let p = self.head_ptr().cast::<u8>();
        super::prefetch(p);
        super::prefetch(p.wrapping_add(64));
        super::prefetch(p.wrapping_add(128));
    }

    /// The newest version `view` accepts, adding the number of versions it
    /// examined (status words loaded) to `examined`. No read-modify-write.
    #[inline]
    pub(crate) fn read_counted<'g>(
        &'g self,
        view: &ReadView<'_>,
        _guard: &'g Guard,
        examined: &mut u64,
    ) -> Found<'g> {
        let mut tried_finger = false;
        if let Some(t) = view.timestamp_bound() {
            // Acquire, required: pairs with the Release summary store in
            // `commit_version`, so
            // we see what the head's committer (and every committer before
            // it) linked below the head, as the head's Acquire status load
            // would have shown us: the `stop` of the finger among them, which
            // `climb` loads Relaxed (invariant 16; loom `summary/publish`).
            let s = self.summary.load(Ordering::Acquire);
            if s > t.get() {
                // The head is committed above `t`: rejected for its
                // timestamp, exactly as if we had loaded it (invariant 16).
                tried_finger = true;
                // SAFETY: we hold `_guard` (invariants 11, 13, 17).
                if let Some(f) = unsafe { self.read_from_finger(view, examined, s) } {
                    return f;
                }
            }
        }
        let mut p = self.head_ptr();
        if mutant_on(m::READ_SKIPS_HEAD) && view.own().get() == 0 {
            tried_finger = true;
            // SAFETY: we hold `_guard` (invariants 11, 13, 17).
            if let Some(f) = unsafe { self.read_from_finger(view, examined, u64::MAX) } {
                return f;
            }
        }
        while !p.is_null() {
            // SAFETY: `p` was loaded from the head or a `next` link under
            // `_guard`; versions are retired only after being unlinked and
            // freed only after every such guard drops (invariant 11), and a
            // cut leaves the links inside the tail it retires as they were.
            // Which versions may have been unlinked is bounded by the
            // horizon this reader pinned (invariants 1, 2, 3, 10).
            let v = unsafe { &*p };
            *examined += 1;
            match view.visibility(&v.status) {
                Visibility::Visible => return found(v),
                Visibility::PrepareConflict => return Found::PrepareConflict,
                Visibility::Skip => {
                    // Rejected for its timestamp (committed above the
                    // reader's bound): every version the reader could accept
                    // is older. Jump (once).
                    if let (false, Some(cts)) =
                        (tried_finger, rejected_for_timestamp(view, &v.status))
                    {
                        tried_finger = true;
                        // SAFETY: we hold `_guard` (invariants 11, 13, 17).
                        if let Some(f) = unsafe { self.read_from_finger(view, examined, cts) } {
                            return f;
                        }
                    }
                }
            }
            p = v.next_ptr();
            if p.is_null() && !mutant_on(m::SKIPPED_NOT_REJUDGED) && skipped_into_cut(view, v) {
                return found(v);
            }
        }
        Found::Absent
    }

    /// The read from the hint, the finger or the floor, if one of
    /// them is a timestamped version `view` accepts; `None`: walk on from
    /// the head.
    ///
    /// Called only after the reader met a committed version `r` that it
    /// rejects for its timestamp (above the read timestamp `t`), or a head
    /// summary above `t`; `above` is that commit timestamp (`u64::MAX`:
    /// none to compare the hint's gap with). If the key is ordered, every
    /// committed version it accepts lies below `r`, they are exactly the
    /// committed versions from the oldest up to some version (invariant 13:
    /// visibility is downward closed), and the climb from an accepted start
    /// ends at the newest of them, below `r`. The hint is tried first when
    /// its gap says its version is at or below `t` (a read at a stable
    /// timestamp that has passed one version above the finger then examines
    /// one version); it is a start like the others, judged before use.
    ///
    /// # Safety
    /// The caller holds an epoch guard for the whole call and afterwards
    /// while it uses the result.
    #[inline]
    unsafe fn read_from_finger<'g>(
        &'g self,
        view: &ReadView<'_>,
        examined: &mut u64,
        above: u64,
    ) -> Option<Found<'g>> {
        // Acquire, required: pairs with the Release hint store in
        // `refresh_hint`, so we see the fields of the version it names,
        // which may be above the commit our summary or head load ordered us
        // after (invariant 18). The unordered flag in it: a flag set by a
        // committer of a version at or below `r` was set before that
        // version's status flip (or summary store), which happens-before
        // our Acquire load of `r`'s status (or of the summary) (invariant
        // 13); later flags are above `r`, where the climb never goes.
        let w = self.hint.load(Ordering::Acquire);
        if hint::unordered(w) {
            return None;
        }
        let t = view.timestamp_bound()?.get();
        let gap = hint::gap(w);
        let hinted = if gap != 0 && above.saturating_sub(gap) <= t {
            hint::version(w)
        } else {
            ptr::null_mut()
        };
        let mut tried = [ptr::null_mut(); 2];
        for i in 0..3 {
            let p = match i {
                0 => hinted,
                // Acquire, stronger than needed: pairs with the Release
                // finger/floor stores in `cut` and `commit_version` (the
                // target's contents), but a reader comes only after an
                // Acquire load of the head or the summary, above the target,
                // so its contents are already ordered; `cut`'s floor load,
                // which has no head load before it, is the one that needs it
                // (loom `prune_race`).
                1 => finger_of(self.finger.load(Ordering::Acquire)),
                // Acquire, stronger than needed: as for the finger.
                _ => self.floor.load(Ordering::Acquire),
            };
            if p.is_null() || tried.contains(&p) {
                continue;
            }
            tried[i.min(1)] = p;
            // SAFETY: the hint, finger and floor point at linked versions
            // (the hint's may not be committed yet: judged below), or (one
            // loaded just before a cut moved it) at versions retired after
            // our guard was pinned; we hold the guard (invariants 11, 13,
            // 17).
            let v = unsafe { &*p };
            *examined += 1;
            if view.visibility(&v.status) == Visibility::Visible && timestamped(&v.status) {
                // SAFETY: as above.
                return Some(unsafe { climb(v, view, t, examined) });
            }
        }
        None
    }

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
            u.newer.store(
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

    /// Versions in the chain (for tests and stats).
    pub(crate) fn chain_len(&self, _guard: &Guard) -> usize {
        let mut n = 0;
        let mut p = self.head_ptr();
        while !p.is_null() {
            n += 1;
            // SAFETY: loaded under `_guard` (invariant 11).
            p = unsafe { &*p }.next_ptr();
        }
        n
    }
}

/// Climbs `newer` links from `v` (a version `view` accepts, timestamped,
/// in an ordered key) to the newest version `view` accepts.
///
/// # Safety
/// The caller holds an epoch guard for the whole call and while it uses the
/// result.
#[inline]
unsafe fn climb<'g>(
    mut v: &'g Version,
    view: &ReadView<'_>,
    t: u64,
    examined: &mut u64,
) -> Found<'g> {
    loop {
        // Relaxed: see the module docs; `NO_STOP` means no newer committed
        // version is linked, and above one is the too-new version that sent
        // us here.
        let stop = v.stop.load(Ordering::Relaxed);
        if stop == NO_STOP || stop > t {
            return found(v);
        }
        let n = v.newer_ptr();
        if n.is_null() {
            return found(v);
        }
        // SAFETY: a `newer` target is linked above `v`; the caller's guard
        // protects it (invariant 11).
        let nv = unsafe { &*n };
        *examined += 1;
        // A `newer` target not yet flipped (its committer links before it
        // flips) is not visible: the climb stops below it.
        if view.visibility(&nv.status) == Visibility::Visible {
            v = nv;
        } else {
            // Visibility is downward closed (invariant 13): nothing newer
            // is accepted either.
            return found(v);
        }
    }
}

/// Did a cut take the link below `v`, a version `view` skipped, after it
/// became visible to `view`? Called when the walk finds nothing below `v`
/// (the chain's end, or a cut): judges `v` again, one more Acquire load,
/// only on that path.
///
/// The reader that needs it is one that skipped a prepared update
/// (ignoring prepared updates) whose transaction then committed at a
/// timestamp the horizon covers: the update became the key's safe point and
/// the cut below it took what the reader was about to read. Every other
/// version a reader skips is one no horizon it holds can cover (its
/// snapshot sees the writer running, or the commit is above its read
/// timestamp), or one it saw final (committed or aborted), so the walk
/// stops at the safe point or above, as invariant 3 says (invariant 10).
/// A null written by the cut was read with the Acquire load in
/// `next_ptr` from the cut's Release swap, which the cutter made after its
/// Acquire load of `v`'s committed status in `Horizon::covers`: so this
/// judgement sees the commit, and the horizon that covered `v` is one the
/// reader's pins hold (invariant 1), so `v` is visible to `view`. A null
/// that is the chain's real end leaves `v` skipped, and the read absent.
#[inline]
fn skipped_into_cut(view: &ReadView<'_>, v: &Version) -> bool {
    view.visibility(&v.status) == Visibility::Visible
}

/// The commit timestamp of `status` if it is committed above `view`'s
/// timestamp bound (rejected for its timestamp alone). One Acquire load.
#[inline]
fn rejected_for_timestamp(view: &ReadView<'_>, status: &VersionStatus) -> Option<u64> {
    match (view.timestamp_bound(), status.state()) {
        // `>=` survives loom and the tests: it would also try the
        // finger jump below a version at exactly `t` skipped for another
        // reason; the climb stops below that version (visibility is
        // downward closed, invariant 13), so the answer is the same.
        (Some(t), VersionState::Committed(cts)) if cts > t => Some(cts.get()),
        _ => None,
    }
}

/// Is `status` committed with a timestamp? One Acquire load.
#[inline]
fn timestamped(status: &VersionStatus) -> bool {
    matches!(status.state(), VersionState::Committed(ts) if ts != Timestamp::NONE)
}

/// The timestamp of a committed or prepared state (0 otherwise).
#[inline]
fn ts_get(st: VersionState) -> u64 {
    match st {
        VersionState::Committed(ts) | VersionState::Prepared(ts) => ts.get(),
        _ => 0,
    }
}

#[inline]
fn found(v: &Version) -> Found<'_> {
    match v.value() {
        Some(b) => Found::Value(b),
        None => Found::Deleted,
    }
}

/// Chain tails cut off by pruning, waiting for the collector.
pub(crate) type Tails = RetireBatch<Version>;

/// A batch for pruned chain tails.
pub(crate) fn tails() -> Tails {
    RetireBatch::new(free_chain)
}

/// Frees every version from `p` down.
///
/// # Safety
/// No other thread may reach any version of the chain, and each was made by
/// `Version::alloc` and is freed nowhere else.
pub(crate) unsafe fn free_chain(mut p: *mut Version) -> u64 {
    let mut n = 0;
    while !p.is_null() {
        // SAFETY: the caller guarantees exclusive ownership of the chain.
        let next = unsafe { &mut *p }.next.get_mut_ptr();
        // SAFETY: as above; `p` is freed once and not used again.
        unsafe { free_version(p) };
        p = next;
        n += 1;
    }
    n
}

impl Drop for KeyEntry {
    fn drop(&mut self) {
        let p = self.head.get_mut_ptr();
        // SAFETY: `&mut self`: nobody else can reach the chain; pruned tails
        // were cut off (their links nulled) before retirement, so nothing
        // here is also owned by the collector.
        unsafe { free_chain(p) };
    }
}

/// Rollback to stable's surgery on whole chains (its module docs).
#[path = "rollback_to_stable.rs"]
pub(crate) mod rollback_to_stable;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::machinery::{TxnManager, TxnSession};
    use crate::{CommitOptions, TimestampUpdate, TxnOptions};

    /// One transaction on `s` writing `val` to `e`, committed at `ts` (0:
    /// untimestamped) as `kv/txn.rs` commits; returns the versions the
    /// commit examined.
    fn put(
        e: &KeyEntry,
        collector: &Collector,
        s: &mut TxnSession<'_>,
        val: &[u8],
        ts: u64,
    ) -> u64 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let (status, view) = t.new_version().unwrap();
        let g = collector.pin();
        let v = Version::alloc(status, Some(val));
        let (v, _) = e.prepend(v, &view, &g).ok().unwrap();
        let opts = if ts == 0 {
            CommitOptions::default()
        } else {
            CommitOptions::at(ts)
        };
        let mut examined = 0;
        t.commit(opts, |d| {
            // SAFETY: our own version, linked and unfinished; we hold `g`.
            examined = unsafe { e.commit_version(v, ts, |st| assert!(d.flip(st))) };
        })
        .unwrap();
        examined
    }

    /// Reads at `at` (0: no read timestamp): the value and the versions
    /// examined.
    fn read_n(
        e: &KeyEntry,
        collector: &Collector,
        s: &mut TxnSession<'_>,
        at: u64,
    ) -> (Option<Vec<u8>>, u64) {
        let opts = TxnOptions {
            read_timestamp: (at != 0).then(|| Timestamp::new(at)),
            ..TxnOptions::default()
        };
        let mut t = s.begin(&opts).unwrap();
        let g = collector.pin();
        let mut n = 0;
        let v = match e.read_counted(&t.read_view().unwrap(), &g, &mut n) {
            Found::Value(v) => Some(v.to_vec()),
            _ => None,
        };
        (v, n)
    }

    fn read(
        e: &KeyEntry,
        collector: &Collector,
        s: &mut TxnSession<'_>,
        at: u64,
    ) -> Option<Vec<u8>> {
        read_n(e, collector, s, at).0
    }

    fn at(o: u64, s: u64) -> TimestampUpdate {
        TimestampUpdate {
            // 0: leave it unset (0 is not a valid timestamp).
            oldest: Timestamp::new(o).to_option(),
            stable: Timestamp::new(s).to_option(),
            ..TimestampUpdate::default()
        }
    }

    /// Sets oldest/stable, recomputes the horizon and prunes `e` with it.
    fn prune_at(e: &KeyEntry, collector: &Collector, mgr: &TxnManager, o: u64, s: u64) -> Pruned {
        mgr.set_timestamps(at(o, s)).unwrap();
        mgr.advance_horizon();
        let g = collector.pin();
        e.prune(mgr.horizon(), s, collector, &g, || |_| {})
    }

    #[test]
    fn readers_see_the_newest_version_their_view_accepts() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        put(&e, &collector, &mut w, b"a", 10);
        put(&e, &collector, &mut w, b"b", 20);
        assert_eq!(read(&e, &collector, &mut r, 0), Some(b"b".to_vec()));
        assert_eq!(read(&e, &collector, &mut r, 15), Some(b"a".to_vec()));
        assert_eq!(read(&e, &collector, &mut r, 5), None);
    }

    #[test]
    fn a_second_writer_conflicts_until_the_first_is_visible() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut s1, mut s2) = (mgr.session().unwrap(), mgr.session().unwrap());
        let g = collector.pin();
        let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
        let (st1, view1) = t1.new_version().unwrap();
        let (v1, _) = e
            .prepend(Version::alloc(st1, None), &view1, &g)
            .ok()
            .unwrap();
        let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
        let (st2, view2) = t2.new_version().unwrap();
        let v2 = Version::alloc(st2, None);
        let (v2, _) = e.prepend(v2, &view2, &g).err().unwrap();
        t1.commit(CommitOptions::default(), |d| {
            // SAFETY: t1's own version, linked and unfinished; we hold `g`.
            unsafe { e.commit_version(v1, 0, |st| assert!(d.flip(st))) };
        })
        .unwrap();
        // Committed, but after the second writer's snapshot: still a conflict.
        let (_, view2) = t2.new_version().unwrap();
        assert!(e.prepend(v2, &view2, &g).is_err());
        drop(t2);
        let mut t3 = s2.begin(&TxnOptions::default()).unwrap();
        let (st3, view3) = t3.new_version().unwrap();
        assert!(e.prepend(Version::alloc(st3, None), &view3, &g).is_ok());
    }

    #[test]
    fn pruning_keeps_the_newest_version_at_or_below_the_horizon() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
            put(&e, &collector, &mut w, &[v], ts);
        }
        // Horizon at ts 25: the version at 20 is the safe point; 10 goes.
        assert_eq!(prune_at(&e, &collector, &mgr, 25, 30).cut, 1);
        let g = collector.pin();
        assert_eq!(e.chain_len(&g), 2);
        assert_eq!(read(&e, &collector, &mut r, 25), Some(vec![2]));
        // The same horizon again cuts nothing.
        assert_eq!(prune_at(&e, &collector, &mgr, 25, 30).cut, 0);
        assert_eq!(prune_at(&e, &collector, &mgr, 30, 30).cut, 1);
        assert_eq!(e.chain_len(&g), 1);
        assert!(e.finger_linked(&g));
    }

    #[test]
    fn an_old_read_timestamp_costs_one_version_from_the_finger() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        put(&e, &collector, &mut w, &[1], 10);
        put(&e, &collector, &mut w, &[2], 20);
        // Stable 15: the finger goes to the version at 10; the horizon (5)
        // covers nothing, so nothing is cut.
        prune_at(&e, &collector, &mgr, 5, 15);
        for i in 3..=40u64 {
            put(&e, &collector, &mut w, &[i as u8], i * 10);
            prune_at(&e, &collector, &mgr, 5, 15);
        }
        let g = collector.pin();
        assert_eq!(e.chain_len(&g), 40);
        // The head summary (400) says the head is too new without loading
        // it; the finger (10) answers.
        assert_eq!(read_n(&e, &collector, &mut r, 15), (Some(vec![1]), 1));
        // At the head's own timestamp the summary does not reject it: the
        // head alone.
        assert_eq!(read_n(&e, &collector, &mut r, 400), (Some(vec![40]), 1));
        // Between: the climb from the finger, still correct.
        assert_eq!(read(&e, &collector, &mut r, 35), Some(vec![3]));
        assert_eq!(read(&e, &collector, &mut r, 399), Some(vec![39]));
        // Below every version: the floor and finger reject it; the walk
        // from the head finds nothing.
        assert_eq!(read(&e, &collector, &mut r, 5), None);
        assert!(e.finger_linked(&g));
    }

    #[test]
    fn a_read_at_a_stable_past_the_finger_takes_the_hint() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        // Stable 15 keeps the finger on the version at 10; nothing is cut.
        // The hint names the version above it, at 20.
        for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
            put(&e, &collector, &mut w, &[v], ts);
            prune_at(&e, &collector, &mgr, 5, 15);
        }
        // The summary (30) rejects the head; the hint's gap (10) puts its
        // version at or below 25: one version, no climb from the finger.
        assert_eq!(read_n(&e, &collector, &mut r, 25), (Some(vec![2]), 1));
        assert_eq!(read_n(&e, &collector, &mut r, 20), (Some(vec![2]), 1));
        // Below the hint's version: the finger answers, after the hint was
        // passed over unread (its gap says it is too new).
        assert_eq!(read_n(&e, &collector, &mut r, 19), (Some(vec![1]), 1));
        // Two versions past the finger: from the hint, one climb.
        put(&e, &collector, &mut w, &[4], 40);
        prune_at(&e, &collector, &mgr, 5, 15);
        assert_eq!(read_n(&e, &collector, &mut r, 35), (Some(vec![3]), 2));
        let g = collector.pin();
        assert!(e.hint_linked(&g));
    }

    #[test]
    fn every_cut_leaves_the_hint_at_or_above_the_floor() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
            put(&e, &collector, &mut w, &[v], ts);
        }
        let g = collector.pin();
        // The safe point is 20: the finger moves there, the hint above it.
        assert_eq!(prune_at(&e, &collector, &mgr, 25, 25).cut, 1);
        assert!(!hint::version(e.hint.load(Ordering::Relaxed)).is_null());
        assert!(e.hint_linked(&g));
        // The safe point is the head (30): nothing above the finger.
        assert_eq!(prune_at(&e, &collector, &mgr, 30, 30).cut, 1);
        assert!(hint::version(e.hint.load(Ordering::Relaxed)).is_null());
        assert!(e.hint_linked(&g));
        assert_eq!(read(&e, &collector, &mut r, 30), Some(vec![3]));
        // An out-of-order commit sets the flag; a later cut keeps it.
        put(&e, &collector, &mut w, &[4], 40);
        put(&e, &collector, &mut w, &[5], 35);
        put(&e, &collector, &mut w, &[6], 50);
        assert!(e.is_unordered());
        prune_at(&e, &collector, &mgr, 50, 50);
        assert!(e.is_unordered());
        assert!(e.hint_linked(&g));
    }

    #[test]
    fn pruning_climbs_from_the_floor_without_walking_the_chain() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        let mut examined = 0;
        for i in 1..=1000u64 {
            examined += put(&e, &collector, &mut w, &[i as u8], i * 10);
            // The horizon trails the newest commit by 100 versions.
            let h = i.saturating_sub(100) * 10;
            examined += prune_at(&e, &collector, &mgr, h, h).examined;
        }
        // About 100 versions kept; a full walk per commit would have
        // examined ~100 versions per commit. Per commit: one to link, and
        // for each of floor and finger one per version passed plus the one
        // that stops it: at most 5.
        let g = collector.pin();
        assert!(e.chain_len(&g) <= 102, "chain {}", e.chain_len(&g));
        assert!(examined <= 5 * 1000, "examined {examined} for 1000 commits");
        assert_eq!(
            read(&e, &collector, &mut r, 9000),
            Some(vec![(900 % 256) as u8])
        );
        assert!(e.finger_linked(&g));
    }

    #[test]
    fn an_out_of_order_commit_sends_readers_back_to_the_head_walk() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        // 10, 50, then 30 (below 50: the key becomes unordered), then 70.
        for (v, ts) in [(1u8, 10u64), (2, 50), (3, 30), (4, 70)] {
            put(&e, &collector, &mut w, &[v], ts);
        }
        prune_at(&e, &collector, &mgr, 5, 10);
        // At 40 the newest accepted version from the head is the one at 30,
        // above the rejected one at 50: a climb from the finger (10) would
        // stop at 50 and answer the one at 10.
        assert_eq!(read(&e, &collector, &mut r, 40), Some(vec![3]));
    }

    #[test]
    fn an_untimestamped_commit_over_timestamped_ones_is_read_from_the_head() {
        let (mgr, collector, e) = (
            TxnManager::new(4).unwrap(),
            Collector::new(),
            KeyEntry::new(),
        );
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        for (v, ts) in [(1u8, 10u64), (2, 50), (3, 0), (4, 70)] {
            put(&e, &collector, &mut w, &[v], ts);
        }
        prune_at(&e, &collector, &mgr, 5, 10);
        assert_eq!(read(&e, &collector, &mut r, 40), Some(vec![3]));
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn memory_per_version_and_per_key_entry() {
        // A version: 48-byte header (status 16, next, newer, stop, len) +
        // the value, one allocation. A key's entry (inside its index node,
        // which is one 64-byte line with the key bytes): head, summary,
        // finger, floor, two flags.
        assert_eq!(std::mem::size_of::<Version>(), 48);
        assert_eq!(layout_for(100).size(), 152);
        assert_eq!(std::mem::size_of::<KeyEntry>(), 40);
    }

    #[test]
    fn a_value_lives_in_its_version_allocation() {
        let mgr = TxnManager::new(2).unwrap();
        let mut s = mgr.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let mut status = || t.new_version().unwrap().0;
        let v = Version::alloc(status(), Some(&[1, 2, 3][..]));
        // SAFETY: test-local owned version.
        let r = unsafe { v.0.as_ref() };
        assert_eq!(r.value(), Some(&[1u8, 2, 3][..]));
        let p = r.value().unwrap().as_ptr() as usize;
        let h = r as *const Version as usize;
        assert_eq!(p, h + std::mem::size_of::<Version>());
        let tomb = Version::alloc(status(), None);
        // SAFETY: as above.
        assert_eq!(unsafe { tomb.0.as_ref() }.value(), None);
        let empty = Version::alloc(status(), Some(&[][..]));
        // SAFETY: as above.
        assert_eq!(unsafe { empty.0.as_ref() }.value(), Some(&[][..]));
    }
}
