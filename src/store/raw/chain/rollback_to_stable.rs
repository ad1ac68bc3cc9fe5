//! Rollback to stable's chain surgery: with the whole store borrowed
//! exclusively (`&mut Index`, so no reader, writer or pruner can reach a
//! chain), remove chosen committed versions from the middle of chains and
//! rebuild each changed chain's links and per-key pointers.
//!
//! A child of `chain.rs`, so that the surgery's knowledge of the chain's
//! fields stays next to the code that owns them, and the rest of the store
//! sees only the safe functions below.
//!
//! A changed chain is rebuilt from what it keeps: its committed versions
//! not removed, newest first. Aborted versions (and the versions of writers
//! that were dropped, which the caller's `state` settles to aborted) are
//! dropped from it as well: nobody can see them. Then
//! * `next` links the kept versions newest to oldest and `head` is the
//!   newest (invariant 13's shape: nothing unfinished is left, the caller
//!   checked);
//! * `newer`/`stop` link each kept version to the next newer kept one, the
//!   newest has none (`NO_STOP`), so each is again the interval
//!   `[cts, stop)` over what is left;
//! * `floor` is the oldest kept version; `finger` the newest kept
//!   timestamped one at or below `stable` (null if none, or if the key is
//!   unordered, where readers never use it): both linked and committed, as
//!   invariant 13 asks;
//! * `summary` is the head's commit timestamp when it is timestamped and the
//!   key ordered, else 0 (invariant 16);
//! * the hint names the kept version right above the finger (else the
//!   floor), with the gap from the summary (invariant 18), and the
//!   unordered flag in it stays as it was: removing versions keeps an
//!   ordered sequence ordered.
//!
//! The removed versions are linked into one chain of their own by `next`
//! and retired as one tail through the store's collector (invariant 11);
//! nothing else points at them once the chain is rebuilt.

use super::*;
use crate::machinery::epoch::Collector;
use crate::machinery::VersionState;

/// What one rollback did to the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RolledBack {
    /// Committed versions removed.
    pub(crate) versions: u64,
    /// Keys whose chain changed.
    pub(crate) keys: u64,
}

/// Visits every version linked in any chain of `index` (newest first per
/// key), under `guard`.
pub(crate) fn for_each_version(
    index: &crate::store::raw::index::Index,
    guard: &Guard,
    mut f: impl FnMut(&VersionStatus),
) {
    index.for_each(guard, |e| {
        let mut p = e.head_ptr();
        while !p.is_null() {
            // SAFETY: loaded from the head or a `next` link under `guard`
            // (invariant 11).
            let v = unsafe { &*p };
            f(&v.status);
            p = v.next_ptr();
        }
    });
}

/// Removes, from every chain of `index`, each committed version for which
/// `remove` says so, and rebuilds the chains it changed (module docs).
/// `state` gives a version's settled state (a dropped writer's versions
/// aborted); the caller has made sure no version is unfinished. Retired
/// versions go to `collector`; `on_free` counts them once freed.
///
/// The `&mut Index` is the whole argument for the plain loads and stores
/// below: every other access to a chain goes through `&Index`.
pub(crate) fn rebuild<F: Fn(u64) + Send + 'static>(
    index: &mut crate::store::raw::index::Index,
    collector: &Collector,
    stable: u64,
    state: impl Fn(&VersionStatus) -> VersionState,
    remove: impl Fn(&VersionStatus, Timestamp) -> bool,
    on_free: F,
) -> RolledBack {
    let index = &*index;
    let guard = collector.pin();
    let mut out = RolledBack::default();
    let mut batch = tails();
    let mut all: Vec<*mut Version> = Vec::new();
    index.for_each(&guard, |e| {
        all.clear();
        let mut p = e.head_ptr();
        let mut any = false;
        while !p.is_null() {
            all.push(p);
            // SAFETY: loaded from the head or a `next` link under `guard`;
            // with the index borrowed exclusively nothing unlinks or frees
            // a version meanwhile (invariant 11).
            let v = unsafe { &*p };
            if let VersionState::Committed(ts) = state(&v.status) {
                any |= remove(&v.status, ts);
            }
            p = v.next_ptr();
        }
        if !any {
            return;
        }
        // SAFETY: every pointer in `all` is a version of `e`'s chain, and
        // the exclusive borrow of the index keeps every other thread off it.
        let n = unsafe { e.rebuild(&all, stable, &state, &remove, &mut batch) };
        out.versions += n;
        out.keys += 1;
    });
    batch.flush(collector, &guard, on_free);
    collector.flush(&guard);
    out
}

/// Relaxed is enough for every load and store here: no other thread can
/// reach the chain while the surgery runs, and whoever reaches it later
/// does so through the caller's exclusive borrow ending, which orders them
/// after everything done here.
const R: Ordering = Ordering::Relaxed;

impl KeyEntry {
    /// Rebuilds this chain from `all` (its versions, newest first) without
    /// the committed versions `remove` picks and without aborted ones;
    /// hands the dropped ones to `batch` as one tail. Returns the number of
    /// committed versions removed.
    ///
    /// # Safety
    /// `all` is exactly this key's linked versions, newest first, none
    /// unfinished, and no other thread can reach this chain until the
    /// caller's exclusive borrow of the index ends.
    unsafe fn rebuild(
        &self,
        all: &[*mut Version],
        stable: u64,
        state: &impl Fn(&VersionStatus) -> VersionState,
        remove: &impl Fn(&VersionStatus, Timestamp) -> bool,
        batch: &mut Tails,
    ) -> u64 {
        let mut kept: Vec<(*mut Version, &Version, u64)> = Vec::with_capacity(all.len());
        let mut dropped: Vec<(*mut Version, &Version)> = Vec::new();
        let mut removed = 0;
        for &p in all {
            // SAFETY: the caller's contract: a linked version of this key,
            // and no other thread can reach it while we hold the borrow.
            let v = unsafe { &*p };
            match state(&v.status) {
                VersionState::Committed(ts) if !remove(&v.status, ts) => {
                    kept.push((p, v, ts.get()));
                }
                VersionState::Committed(_) => {
                    removed += 1;
                    dropped.push((p, v));
                }
                _ => dropped.push((p, v)),
            }
        }
        for (i, &(_, v, _)) in kept.iter().enumerate() {
            let below = kept.get(i + 1).map_or(ptr::null_mut(), |&(q, ..)| q);
            v.next.store(below, R);
            let (above, stop) = match i.checked_sub(1) {
                Some(j) => (kept[j].0, kept[j].2),
                None => (ptr::null_mut(), NO_STOP),
            };
            v.set_newer(above, R);
            v.stop.store(stop, R);
        }
        for (i, &(_, v)) in dropped.iter().enumerate() {
            let below = dropped.get(i + 1).map_or(ptr::null_mut(), |&(q, _)| q);
            v.next.store(below, R);
        }
        let head = kept.first().map_or(ptr::null_mut(), |&(p, ..)| p);
        let ordered = !hint::unordered(self.hint.load(R));
        self.head.store(head, R);
        self.floor
            .store(kept.last().map_or(ptr::null_mut(), |&(p, ..)| p), R);
        let finger = kept
            .iter()
            .find(|&&(.., ts)| ordered && ts != 0 && ts <= stable)
            .map_or(ptr::null_mut(), |&(p, ..)| p);
        self.finger.store(finger, R);
        let summary = match kept.first() {
            Some(&(.., ts)) if ordered => ts,
            _ => 0,
        };
        self.summary.store(summary, R);
        // The version right above the finger (else the floor): `kept` is
        // newest first, so it is the entry before that one.
        let base = kept
            .iter()
            .position(|&(p, ..)| p == finger)
            .or_else(|| kept.len().checked_sub(1));
        let hint = match base.and_then(|i| i.checked_sub(1)).map(|i| kept[i]) {
            Some((p, _, ts)) => {
                let gap = if ts != 0 && summary > ts {
                    summary - ts
                } else {
                    0
                };
                hint::pack(p, gap, !ordered)
            }
            None => hint::empty(!ordered),
        };
        self.hint.store(hint, R);
        if let Some(&(first, _)) = dropped.first() {
            // SAFETY: the dropped versions are now reachable from nothing
            // but each other (no `next`, `newer`, head, floor or finger of
            // this key points at one) and linked only among themselves, so
            // `free_chain` frees exactly them, once, after every guard that
            // could still hold one drops (invariant 11).
            unsafe { batch.push(first) };
        }
        removed
    }
}
