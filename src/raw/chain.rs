//! Version chains: per key, a newest-first singly linked list of versions.
//!
//! A version carries its writer's id, a status word (state and timestamp
//! packed in one `u64`, so one Acquire load reads both consistently), the
//! value (or a tombstone) and the link to the next older version.
//!
//! * Writers prepend with a CAS on the head, after checking the newest
//!   non-aborted version for a write-write conflict (first updater wins).
//! * A transaction finishes by flipping its versions' status (committed,
//!   aborted, prepared) with Release stores.
//! * Readers walk from the head and return the first version their view
//!   accepts. A point read does no read-modify-write at all.
//! * Pruning cuts the chain below the newest version at or below the reclaim
//!   horizon (the safe point, invariant 3) and retires the tail to the epoch
//!   collector. Pruning is logical; freeing is the collector's.
//!
//! # Orderings
//!
//! * Head CAS (Release) pairs with every Acquire load of the head and of
//!   `next` links: a reader that reaches a version sees its fields.
//! * Status stores (Release) pair with the Acquire status load in readers:
//!   a reader that sees `Committed(ts)` sees the version exactly as written.
//!   The completer's descriptor CAS comes after its flips, so any snapshot
//!   that treats the writer as completed sees the final status (invariant 9).

use super::reclaim::{Batch, Guard, Reclaimer, SendPtr};
use crate::snapshot::Snapshot;
use crate::sync::{
    mutant as m, mutant_on, ordering_or_mutant, AtomicBool, AtomicPtr, AtomicU64, Ordering,
};
use std::ptr;

/// Version states, in the top two bits of the status word.
pub(crate) const IN_PROGRESS: u64 = 0;
/// Prepared: the timestamp bits hold the prepare timestamp.
pub(crate) const PREPARED: u64 = 1;
/// Committed: the timestamp bits hold the commit timestamp (0: none).
pub(crate) const COMMITTED: u64 = 2;
/// Aborted: never visible to anyone.
pub(crate) const ABORTED: u64 = 3;
const SHIFT: u32 = 62;
const TS_MASK: u64 = (1 << SHIFT) - 1;

#[inline]
pub(crate) const fn pack(state: u64, ts: u64) -> u64 {
    (state << SHIFT) | (ts & TS_MASK)
}
#[inline]
pub(crate) const fn state_of(w: u64) -> u64 {
    w >> SHIFT
}
#[inline]
pub(crate) const fn ts_of(w: u64) -> u64 {
    w & TS_MASK
}

/// One version of one key.
pub(crate) struct Version {
    /// The writer's transaction id.
    pub(crate) txn: u64,
    status: AtomicU64,
    next: AtomicPtr<Version>,
    /// The value; `None` is a tombstone.
    pub(crate) value: Option<Box<[u8]>>,
}

impl Version {
    /// A new in-progress version by `txn`.
    pub(crate) fn new(txn: u64, value: Option<Box<[u8]>>) -> Box<Version> {
        Box::new(Version {
            txn,
            status: AtomicU64::new(pack(IN_PROGRESS, 0)),
            next: AtomicPtr::new(ptr::null_mut()),
            value,
        })
    }

    /// Sets the status word (commit, abort, prepare).
    #[inline]
    pub(crate) fn set_status(&self, state: u64, ts: u64) {
        // Release: pairs with the Acquire status loads in `read`,
        // `check_conflict` and `prune` (invariant 9).
        self.status.store(
            pack(state, ts),
            ordering_or_mutant(Ordering::Release, m::RELAXED_STATUS_STORE),
        );
    }

    /// The status word.
    #[inline]
    pub(crate) fn status(&self) -> u64 {
        // Acquire: pairs with the Release store in `set_status`.
        self.status.load(Ordering::Acquire)
    }

    #[inline]
    fn next_ptr(&self) -> *mut Version {
        // Acquire: pairs with the Release head CAS that published the next
        // version's contents (it was the head once).
        self.next.load(Ordering::Acquire)
    }
}

/// How a reader decides visibility.
#[derive(Clone, Copy)]
pub(crate) enum ReadAs<'a> {
    /// A snapshot, optionally with a read timestamp (0: none).
    Snapshot { snap: &'a Snapshot, read_ts: u64 },
    /// The read-only fast path (PROTOCOL rule 7): committed at or below
    /// `stable`; untimestamped versions only when their writer is below
    /// `complete_below` (completed before the reader began).
    Stable { stable: u64, complete_below: u64 },
}

/// A reader's view: who it is and how it sees.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    /// The reader's own transaction id (0: none).
    pub(crate) own: u64,
    /// Visibility rule.
    pub(crate) how: ReadAs<'a>,
    /// Skip prepared updates instead of reporting a conflict.
    pub(crate) ignore_prepared: bool,
}

impl View<'_> {
    /// Is a committed version by `txn` at `cts` visible?
    #[inline]
    fn committed_visible(&self, txn: u64, cts: u64) -> bool {
        match self.how {
            ReadAs::Snapshot { snap, read_ts } => {
                snap.sees(txn) && (read_ts == 0 || cts == 0 || cts <= read_ts)
            }
            ReadAs::Stable {
                stable,
                complete_below,
            } => {
                if cts == 0 {
                    if mutant_on(m::FAST_PATH_BELOW_INCLUSIVE) {
                        return txn <= complete_below;
                    }
                    txn < complete_below
                } else {
                    cts <= stable
                }
            }
        }
    }

    /// Does a prepared version by `txn` at `pts` conflict with this read?
    /// (`false`: it is invisible and the reader moves on.)
    #[inline]
    fn prepared_conflicts(&self, txn: u64, pts: u64) -> bool {
        match self.how {
            // A snapshot taken before the prepare treats the writer as
            // running: invisible, no conflict.
            ReadAs::Snapshot { snap, read_ts } => {
                snap.sees(txn) && (read_ts == 0 || pts <= read_ts)
            }
            ReadAs::Stable { stable, .. } => pts <= stable,
        }
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

/// The reclaim horizon: a committed version is visible to every current and
/// future reader when its writer is below `xmin` and its commit timestamp is
/// `0` or at most `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Horizon {
    pub(crate) xmin: u64,
    pub(crate) ts: u64,
}

impl Horizon {
    #[inline]
    fn covers(&self, txn: u64, cts: u64) -> bool {
        txn < self.xmin && (cts == 0 || cts <= self.ts)
    }
}

/// A key's version chain.
pub(crate) struct KeyEntry {
    head: AtomicPtr<Version>,
    pruning: AtomicBool,
    /// The horizon this key was last pruned to (written under `pruning`).
    /// Versions committed since were written by transactions at or above
    /// that horizon's xmin, so the same horizon finds the same safe point:
    /// the walk is skipped. Keeps commits cheap while a long reader holds
    /// the horizon still.
    pruned_xmin: AtomicU64,
    pruned_ts: AtomicU64,
}

impl Default for KeyEntry {
    fn default() -> Self {
        KeyEntry::new()
    }
}

impl KeyEntry {
    pub(crate) fn new() -> KeyEntry {
        KeyEntry {
            head: AtomicPtr::new(ptr::null_mut()),
            pruning: AtomicBool::new(false),
            pruned_xmin: AtomicU64::new(0),
            pruned_ts: AtomicU64::new(0),
        }
    }

    #[inline]
    fn head_ptr(&self) -> *mut Version {
        // Acquire: pairs with the Release head CAS in `prepend` and
        // `unlink_head`.
        self.head.load(Ordering::Acquire)
    }

    /// The newest version `view` accepts. No read-modify-write.
    pub(crate) fn read<'g>(&'g self, view: &View<'_>, _guard: &'g Guard) -> Found<'g> {
        let mut p = self.head_ptr();
        while !p.is_null() {
            // SAFETY: `p` was loaded from the head or a `next` link under
            // `_guard`; versions are retired only after being unlinked and
            // freed only after every such guard drops (invariant 11). Which
            // versions may have been unlinked is bounded by the horizon this
            // reader pinned (invariants 1, 2, 3).
            let v = unsafe { &*p };
            let w = v.status();
            if view.own != 0 && v.txn == view.own {
                if state_of(w) != ABORTED {
                    return found(v);
                }
            } else {
                match state_of(w) {
                    COMMITTED if view.committed_visible(v.txn, ts_of(w)) => return found(v),
                    PREPARED
                        if !view.ignore_prepared && view.prepared_conflicts(v.txn, ts_of(w)) =>
                    {
                        return Found::PrepareConflict
                    }
                    _ => {}
                }
            }
            p = v.next_ptr();
        }
        Found::Absent
    }

    /// First updater wins: may a transaction with `view` write this key?
    fn check_conflict(&self, head: *mut Version, view: &View<'_>) -> Result<(), Conflict> {
        let mut p = head;
        while !p.is_null() {
            // SAFETY: as in `read`; the caller holds a guard (invariant 11).
            let v = unsafe { &*p };
            if v.txn == view.own {
                return Ok(());
            }
            let w = v.status();
            match state_of(w) {
                ABORTED => p = v.next_ptr(),
                COMMITTED if view.committed_visible(v.txn, ts_of(w)) => return Ok(()),
                _ => return Err(Conflict::Write),
            }
        }
        Ok(())
    }

    /// Prepends `v` (written by `view.own`) after the conflict check.
    /// Returns the installed version, or the conflict with the version back.
    pub(crate) fn prepend(
        &self,
        v: Box<Version>,
        view: &View<'_>,
        _guard: &Guard,
    ) -> Result<(*mut Version, u64), (Box<Version>, Conflict)> {
        let mut retries = 0;
        let new = Box::into_raw(v);
        let mut head = self.head_ptr();
        loop {
            if let Err(c) = self.check_conflict(head, view) {
                // SAFETY: `new` came from Box::into_raw and was never shared.
                return Err((unsafe { Box::from_raw(new) }, c));
            }
            // SAFETY: `new` is still private to this thread.
            unsafe { &*new }.next.store(head, Ordering::Relaxed);
            // Release: publishes the new version (and its `next`) to readers
            // that Acquire-load the head. Acquire on failure: the failed CAS
            // is our load of the newer head, which we check next.
            match self
                .head
                .compare_exchange(head, new, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => return Ok((new, retries)),
                Err(actual) => {
                    head = actual;
                    retries += 1;
                }
            }
        }
    }

    /// Unlinks `v` if it is still the head (a rolled-back version nobody
    /// wrote on top of) and retires it. Returns whether it did.
    pub(crate) fn unlink_head(&self, v: *mut Version, rc: &Reclaimer, guard: &Guard) -> bool {
        // SAFETY: `v` is a version of the calling transaction, still linked
        // (only this transaction unlinks its own versions, and pruning never
        // cuts at an aborted version), read under `guard`.
        let next = unsafe { &*v }.next_ptr();
        // Release: pairs with the Acquire head loads; readers that load the
        // new head see `next`'s contents (they were published before).
        if self
            .head
            .compare_exchange(v, next, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let sp = SendPtr(v);
        rc.defer(guard, move || {
            let sp = sp;
            // SAFETY: unlinked by our CAS (no new reader can reach it); freed
            // after every guard that could still hold it drops (invariant
            // 11). Version's Drop does not follow `next`, so only `v` goes.
            drop(unsafe { Box::from_raw(sp.0) });
        });
        true
    }

    /// Cuts the chain below the newest version covered by `horizon` and
    /// retires the tail. Returns the number of versions retired. Skips (0)
    /// if another thread is pruning this key.
    pub(crate) fn prune<F: Fn(u64) + Send + 'static>(
        &self,
        horizon: Horizon,
        rc: &Reclaimer,
        guard: &Guard,
        on_free: impl FnOnce() -> F,
    ) -> u64 {
        let mut batch = tails();
        let n = self.cut(horizon, &mut batch, guard);
        batch.flush(rc, guard, on_free());
        n
    }

    /// Cuts the chain below the newest version covered by `horizon` (the
    /// safe point) and hands the detached tail to `batch`. Returns how many
    /// versions it cut (0 without cutting if another thread is pruning this
    /// key).
    pub(crate) fn cut(&self, horizon: Horizon, batch: &mut Tails, _guard: &Guard) -> u64 {
        // Acquire: pairs with the Release store below by the previous pruner
        // of this key, so cuts are serialized per key.
        if self
            .pruning
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return 0;
        }
        let mut tail = ptr::null_mut();
        // Relaxed: written only under `pruning`, which we hold (its Acquire
        // CAS orders us after the previous holder's stores).
        if self.pruned_xmin.load(Ordering::Relaxed) == horizon.xmin
            && self.pruned_ts.load(Ordering::Relaxed) == horizon.ts
            && !mutant_on(m::PRUNE_PAST_SAFE_POINT)
        {
            // Release: pairs with the Acquire CAS above.
            self.pruning.store(false, Ordering::Release);
            return 0;
        }
        self.pruned_xmin.store(horizon.xmin, Ordering::Relaxed);
        self.pruned_ts.store(horizon.ts, Ordering::Relaxed);
        let mut p = self.head_ptr();
        while !p.is_null() {
            // SAFETY: loaded under `_guard` (invariant 11).
            let v = unsafe { &*p };
            let w = v.status();
            let cut_here = state_of(w) == COMMITTED
                && (horizon.covers(v.txn, ts_of(w)) || mutant_on(m::PRUNE_PAST_SAFE_POINT));
            if cut_here {
                // The safe point (invariant 3): `v` is visible to every
                // current and future reader, so every reader stops at `v` or
                // above, and nothing below it can be read again.
                // Acquire: we free the tail, so we must see its contents.
                tail = v.next.swap(ptr::null_mut(), Ordering::Acquire);
                break;
            }
            p = v.next_ptr();
        }
        // Release: pairs with the Acquire CAS above.
        self.pruning.store(false, Ordering::Release);
        let mut n = 0;
        let mut p = tail;
        while !p.is_null() {
            n += 1;
            // SAFETY: the tail is unlinked but not yet retired, so nothing
            // frees it; we hold `_guard`.
            p = unsafe { &*p }.next_ptr();
        }
        if !tail.is_null() {
            // SAFETY: unlinked by the swap under this key's pruning flag, so
            // pushed exactly once; `free_chain` frees a whole tail.
            unsafe { batch.push(tail) };
        }
        n
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

#[inline]
fn found(v: &Version) -> Found<'_> {
    match &v.value {
        Some(b) => Found::Value(b),
        None => Found::Deleted,
    }
}

/// Chain tails cut off by pruning, waiting for the collector.
pub(crate) type Tails = Batch<Version>;

/// A batch for pruned chain tails.
pub(crate) fn tails() -> Tails {
    Batch::new(free_chain)
}

/// Frees every version from `p` down.
///
/// # Safety
/// No other thread may reach any version of the chain, and each was made by
/// `Box::into_raw` and is freed nowhere else.
pub(crate) unsafe fn free_chain(mut p: *mut Version) -> u64 {
    let mut n = 0;
    while !p.is_null() {
        // SAFETY: the caller guarantees exclusive ownership of the chain.
        let mut b = unsafe { Box::from_raw(p) };
        p = b.next.get_mut_ptr();
        drop(b);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn snap(xmin: u64, xmax: u64, running: &[u64]) -> Snapshot {
        Snapshot {
            generation: 1,
            xmin,
            xmax,
            running: running.to_vec(),
        }
    }

    fn put(e: &KeyEntry, rc: &Reclaimer, txn: u64, s: &Snapshot, val: &[u8]) -> *mut Version {
        let g = rc.pin();
        let view = View {
            own: txn,
            how: ReadAs::Snapshot {
                snap: s,
                read_ts: 0,
            },
            ignore_prepared: false,
        };
        e.prepend(Version::new(txn, Some(val.into())), &view, &g)
            .ok()
            .unwrap()
            .0
    }

    fn read(e: &KeyEntry, rc: &Reclaimer, s: &Snapshot, read_ts: u64) -> Option<Vec<u8>> {
        let g = rc.pin();
        let view = View {
            own: 0,
            how: ReadAs::Snapshot { snap: s, read_ts },
            ignore_prepared: false,
        };
        match e.read(&view, &g) {
            Found::Value(v) => Some(v.to_vec()),
            _ => None,
        }
    }

    #[test]
    fn readers_see_the_newest_version_their_view_accepts() {
        let rc = Reclaimer::new();
        let e = KeyEntry::new();
        let s0 = snap(1, 1, &[]);
        let v1 = put(&e, &rc, 1, &s0, b"a");
        // SAFETY: test-local version, still linked.
        unsafe { &*v1 }.set_status(COMMITTED, 10);
        let s1 = snap(2, 2, &[]);
        let v2 = put(&e, &rc, 2, &s1, b"b");
        assert_eq!(read(&e, &rc, &snap(2, 2, &[]), 0), Some(b"a".to_vec()));
        unsafe { &*v2 }.set_status(COMMITTED, 20);
        let s3 = snap(3, 3, &[]);
        assert_eq!(read(&e, &rc, &s3, 0), Some(b"b".to_vec()));
        assert_eq!(read(&e, &rc, &s3, 15), Some(b"a".to_vec()));
        assert_eq!(read(&e, &rc, &s3, 5), None);
    }

    #[test]
    fn a_second_writer_conflicts_until_the_first_is_visible() {
        let rc = Reclaimer::new();
        let e = KeyEntry::new();
        let s = snap(1, 1, &[]);
        let v1 = put(&e, &rc, 1, &s, b"a");
        let g = rc.pin();
        let view = View {
            own: 2,
            how: ReadAs::Snapshot {
                snap: &s,
                read_ts: 0,
            },
            ignore_prepared: false,
        };
        assert!(e.prepend(Version::new(2, None), &view, &g).is_err());
        unsafe { &*v1 }.set_status(COMMITTED, 0);
        // Committed, but after the second writer's snapshot: still a conflict.
        assert!(e.prepend(Version::new(2, None), &view, &g).is_err());
        let s2 = snap(2, 2, &[]);
        let view2 = View {
            own: 2,
            how: ReadAs::Snapshot {
                snap: &s2,
                read_ts: 0,
            },
            ignore_prepared: false,
        };
        assert!(e.prepend(Version::new(2, None), &view2, &g).is_ok());
    }

    #[test]
    fn pruning_keeps_the_newest_version_at_or_below_the_horizon() {
        let rc = Reclaimer::new();
        let e = KeyEntry::new();
        for (txn, ts) in [(1u64, 10u64), (2, 20), (3, 30)] {
            let v = put(&e, &rc, txn, &snap(txn, txn, &[]), &[txn as u8]);
            unsafe { &*v }.set_status(COMMITTED, ts);
        }
        let g = rc.pin();
        // Horizon at ts 25: version 2 (ts 20) is the safe point; 1 goes.
        let n = e.prune(Horizon { xmin: 4, ts: 25 }, &rc, &g, || |_| {});
        assert_eq!(n, 1);
        assert_eq!(e.chain_len(&g), 2);
        assert_eq!(read(&e, &rc, &snap(4, 4, &[]), 25), Some(vec![2]));
        // A tombstone at the safe point stays, with nothing below it.
        let v = put(&e, &rc, 4, &snap(4, 4, &[]), b"x");
        unsafe { &*v }.set_status(COMMITTED, 40);
        let n = e.prune(Horizon { xmin: 5, ts: 40 }, &rc, &g, || |_| {});
        assert_eq!(n, 2);
        assert_eq!(e.chain_len(&g), 1);
    }
}
