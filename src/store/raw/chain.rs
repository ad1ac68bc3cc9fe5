//! Version chains: per key, a newest-first singly linked list of versions.
//!
//! A version embeds the machinery's [`VersionStatus`] (its writer's id and
//! one word packing state and timestamp, so one Acquire load reads both
//! consistently), the value (or a tombstone) and the link to the next older
//! version.
//!
//! * Writers prepend with a CAS on the head, after checking the newest
//!   non-aborted version for a write-write conflict (first updater wins).
//! * A transaction finishes by having the machinery flip its versions'
//!   statuses (committed, aborted, prepared) through the
//!   [`Completion`](crate::machinery::Completion) its commit, prepare or
//!   rollback hands the store (`kv/txn.rs`).
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
//! * Status words are the machinery's ([`VersionStatus`]): it flips them
//!   with Release stores before the writer's descriptor install (invariant
//!   9) and every read of one is an Acquire load inside the machinery, so
//!   this file names no ordering for them.

use super::SendPtr;
use crate::machinery::epoch::{Collector, Guard, RetireBatch};
use crate::machinery::{Horizon, ReadView, VersionStatus, Visibility, WriteCheck};
use crate::sync::{mutant as m, mutant_on, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::ptr;

/// One version of one key.
pub(crate) struct Version {
    /// The writer and the packed state/timestamp word.
    pub(crate) status: VersionStatus,
    next: AtomicPtr<Version>,
    /// The value; `None` is a tombstone.
    pub(crate) value: Option<Box<[u8]>>,
}

impl Version {
    /// A new version with `status` (fresh from
    /// [`Transaction::new_version`](crate::machinery::Transaction::new_version)).
    pub(crate) fn new(status: VersionStatus, value: Option<Box<[u8]>>) -> Box<Version> {
        Box::new(Version {
            status,
            next: AtomicPtr::new(ptr::null_mut()),
            value,
        })
    }

    #[inline]
    fn next_ptr(&self) -> *mut Version {
        // Acquire: pairs with the Release head CAS that published the next
        // version's contents (it was the head once).
        self.next.load(Ordering::Acquire)
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
    #[inline]
    pub(crate) fn read<'g>(&'g self, view: &ReadView<'_>, _guard: &'g Guard) -> Found<'g> {
        let mut p = self.head_ptr();
        while !p.is_null() {
            // SAFETY: `p` was loaded from the head or a `next` link under
            // `_guard`; versions are retired only after being unlinked and
            // freed only after every such guard drops (invariant 11). Which
            // versions may have been unlinked is bounded by the horizon this
            // reader pinned (invariants 1, 2, 3).
            let v = unsafe { &*p };
            match view.visibility(&v.status) {
                Visibility::Visible => return found(v),
                Visibility::PrepareConflict => return Found::PrepareConflict,
                Visibility::Skip => {}
            }
            p = v.next_ptr();
        }
        Found::Absent
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

    /// Prepends `v` (written by `view.own`) after the conflict check.
    /// Returns the installed version, or the conflict with the version back.
    pub(crate) fn prepend(
        &self,
        v: Box<Version>,
        view: &ReadView<'_>,
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
    pub(crate) fn unlink_head(&self, v: *mut Version, rc: &Collector, guard: &Guard) -> bool {
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
        rc: &Collector,
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
        let (hx, ht) = (horizon.xmin().get(), horizon.timestamp().get());
        if self.pruned_xmin.load(Ordering::Relaxed) == hx
            && self.pruned_ts.load(Ordering::Relaxed) == ht
            && !mutant_on(m::PRUNE_PAST_SAFE_POINT)
        {
            // Release: pairs with the Acquire CAS above.
            self.pruning.store(false, Ordering::Release);
            return 0;
        }
        self.pruned_xmin.store(hx, Ordering::Relaxed);
        self.pruned_ts.store(ht, Ordering::Relaxed);
        let mut p = self.head_ptr();
        while !p.is_null() {
            // SAFETY: loaded under `_guard` (invariant 11).
            let v = unsafe { &*p };
            if horizon.covers(&v.status) {
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
pub(crate) type Tails = RetireBatch<Version>;

/// A batch for pruned chain tails.
pub(crate) fn tails() -> Tails {
    RetireBatch::new(free_chain)
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
    use crate::machinery::{TxnManager, TxnSession};
    use crate::{CommitOptions, Timestamp, TimestampUpdate, TxnOptions};

    /// One transaction on `s` writing `val` to `e`, committed at `ts`.
    fn put(e: &KeyEntry, rc: &Collector, s: &mut TxnSession<'_>, val: &[u8], ts: u64) {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let (status, view) = t.new_version().unwrap();
        let g = rc.pin();
        let v = Version::new(status, Some(val.into()));
        let (v, _) = e.prepend(v, &view, &g).ok().unwrap();
        // SAFETY: our own version, linked and unpruned until we finish.
        let st = &unsafe { &*v }.status;
        t.commit(CommitOptions::at(ts), |d| assert!(d.flip(st)))
            .unwrap();
    }

    fn read(e: &KeyEntry, rc: &Collector, s: &mut TxnSession<'_>, at: u64) -> Option<Vec<u8>> {
        let opts = TxnOptions {
            read_timestamp: (at != 0).then(|| Timestamp::new(at)),
            ..TxnOptions::default()
        };
        let mut t = s.begin(&opts).unwrap();
        let g = rc.pin();
        match e.read(&t.read_view().unwrap(), &g) {
            Found::Value(v) => Some(v.to_vec()),
            _ => None,
        }
    }

    #[test]
    fn readers_see_the_newest_version_their_view_accepts() {
        let (mgr, rc, e) = (TxnManager::new(4), Collector::new(), KeyEntry::new());
        let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
        put(&e, &rc, &mut w, b"a", 10);
        put(&e, &rc, &mut w, b"b", 20);
        assert_eq!(read(&e, &rc, &mut r, 0), Some(b"b".to_vec()));
        assert_eq!(read(&e, &rc, &mut r, 15), Some(b"a".to_vec()));
        assert_eq!(read(&e, &rc, &mut r, 5), None);
    }

    #[test]
    fn a_second_writer_conflicts_until_the_first_is_visible() {
        let (mgr, rc, e) = (TxnManager::new(4), Collector::new(), KeyEntry::new());
        let (mut s1, mut s2) = (mgr.session().unwrap(), mgr.session().unwrap());
        let g = rc.pin();
        let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
        let (st1, view1) = t1.new_version().unwrap();
        let (v1, _) = e.prepend(Version::new(st1, None), &view1, &g).ok().unwrap();
        let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
        let (st2, view2) = t2.new_version().unwrap();
        let v2 = Version::new(st2, None);
        let (v2, _) = e.prepend(v2, &view2, &g).err().unwrap();
        // SAFETY: t1's own version, linked until t1 finishes.
        let st = &unsafe { &*v1 }.status;
        t1.commit(CommitOptions::default(), |d| assert!(d.flip(st)))
            .unwrap();
        // Committed, but after the second writer's snapshot: still a conflict.
        let (_, view2) = t2.new_version().unwrap();
        assert!(e.prepend(v2, &view2, &g).is_err());
        drop(t2);
        let mut t3 = s2.begin(&TxnOptions::default()).unwrap();
        let (st3, view3) = t3.new_version().unwrap();
        assert!(e.prepend(Version::new(st3, None), &view3, &g).is_ok());
    }

    #[test]
    fn pruning_keeps_the_newest_version_at_or_below_the_horizon() {
        let (mgr, rc, e) = (TxnManager::new(4), Collector::new(), KeyEntry::new());
        let mut w = mgr.session().unwrap();
        for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
            put(&e, &rc, &mut w, &[v], ts);
        }
        let at = |o: u64, s: u64| TimestampUpdate {
            oldest: Some(Timestamp::new(o)),
            stable: Some(Timestamp::new(s)),
            ..TimestampUpdate::default()
        };
        // Horizon at ts 25: the version at 20 is the safe point; 10 goes.
        mgr.set_timestamps(at(25, 30)).unwrap();
        mgr.advance_horizon();
        let g = rc.pin();
        assert_eq!(e.prune(mgr.horizon(), &rc, &g, || |_| {}), 1);
        assert_eq!(e.chain_len(&g), 2);
        // The same horizon again skips the walk.
        assert_eq!(e.prune(mgr.horizon(), &rc, &g, || |_| {}), 0);
        mgr.set_timestamps(at(30, 30)).unwrap();
        mgr.advance_horizon();
        assert_eq!(e.prune(mgr.horizon(), &rc, &g, || |_| {}), 1);
        assert_eq!(e.chain_len(&g), 1);
    }
}
