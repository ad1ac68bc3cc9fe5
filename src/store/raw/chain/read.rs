//! Reads of one key's chain (DESIGN.md, "Version chains and the index"):
//! [`KeyEntry::read_counted`] checks the head summary, walks from the head,
//! jumps once to the hint, the finger or the floor and climbs `newer` links
//! from there; [`Found`] is what it returns, and `prefetch_for` starts a
//! batched read's last miss.
//!
//! No lock and no read-modify-write. What a reader may skip rests on the
//! head summary (invariant 16), the chain's order and the finger (13), the
//! hint (18), the safe point and prepared updates (3, 10) and its epoch
//! guard (11); the orderings are in `chain.rs`, `# Orderings`.

use super::{finger_of, timestamped, KeyEntry, Version, NO_STOP};
use crate::machinery::epoch::Guard;
use crate::machinery::{ReadView, VersionState, VersionStatus, Visibility};
use crate::store::raw::{hint, prefetch};
use crate::sync::{mutant as m, mutant_on, Ordering};
use std::ptr;

/// Starts loading `v`'s header line and the next two (a value of up to 80
/// bytes whole; a longer value's rest is the hardware prefetcher's).
#[cfg_attr(loom, allow(dead_code))]
#[inline]
fn prefetch_version(v: *mut Version) {
    let p = v.cast::<u8>();
    prefetch(p);
    prefetch(p.wrapping_add(64));
    prefetch(p.wrapping_add(128));
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

impl KeyEntry {
    /// Starts loading the version a read bounded by `bound` (its read
    /// timestamp; `None`: none) examines first (a batched read's last
    /// miss): the head, or, when the head summary is above the bound, the hint's
    /// version if its gap puts it at or below the bound, else the finger
    /// (the choice `read_from_finger` makes first). A read at a stable
    /// timestamp in a batch then waits for no miss of its own. A few
    /// Relaxed loads of this entry's line, no dereference: reading the
    /// version's length to prefetch exactly its lines would wait for its
    /// header and measured no faster.
    // Under loom the batched lookup (its only caller) is the mutex map's.
    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    pub(crate) fn prefetch_for(&self, bound: Option<u64>) {
        // Relaxed, all of them: these loads only choose what to prefetch,
        // and a prefetch never dereferences; the read that follows loads
        // each word again with its own ordering and judges what it finds.
        // Equivalent mutants (`>=`, `<` below): another version prefetched
        // costs a miss, never a wrong read.
        let s = self.summary.load(Ordering::Relaxed);
        let p = match bound {
            Some(t) if s > t => {
                let w = self.hint.load(Ordering::Relaxed);
                let gap = hint::gap(w);
                if !hint::unordered(w) && gap != 0 && s.saturating_sub(gap) <= t {
                    hint::version(w)
                } else {
                    finger_of(self.finger.load(Ordering::Relaxed))
                }
            }
            _ => self.head.load(Ordering::Relaxed),
        };
        prefetch_version(p);
    }

    /// The newest version `view` accepts, adding the number of versions it
    /// examined (status words loaded) to `examined`. No read-modify-write.
    #[inline(always)]
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

#[inline]
fn found(v: &Version) -> Found<'_> {
    match v.value() {
        Some(b) => Found::Value(b),
        None => Found::Deleted,
    }
}
