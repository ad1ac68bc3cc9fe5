//! [`Txn`]: reads, writes and scans of the bundled store inside a
//! machinery [`Transaction`], which does everything that is not data
//! (timestamps, prepare, commit, rollback).

use super::engine::{SessionData, WriteRec};
use crate::config::{CommitOptions, TxnOptions};
use crate::error::{Error, Result};
use crate::machinery::epoch::RETIRE_BATCH;
use crate::machinery::{
    Completion, Count, LockFree, Protocol, Transaction, TxnSession, VersionState,
};
use crate::store::raw::chain::{Found, Version};
use crate::ts::{Timestamp, TxnId};
use std::ops::{Bound, RangeBounds};

/// A transaction. Reads see one snapshot (or, with `read_at_stable`, the
/// stable watermark); writes are visible to others only after commit.
///
/// Dropping an open transaction rolls it back.
pub struct Txn<'s, 'e, P: Protocol = LockFree> {
    t: Transaction<'s, 'e, P>,
    d: &'s mut SessionData<'e, P>,
}

/// Flips the status of every version in `writes` with `done` (commit,
/// prepare). A commit first links each key's previous committed version to
/// ours (`newer`/`stop`, invariant 13: the link precedes the Release flip
/// that publishes it). Returns the versions the links examined.
#[inline]
fn flip_all<P: Protocol>(d: &SessionData<'_, P>, done: &Completion<'_>) -> u64 {
    let VersionState::Committed(cts) = done.outcome() else {
        for w in &d.writes {
            // SAFETY: our own versions stay linked until we finish (pruning
            // cuts only below committed versions; only we unlink ours), and
            // the store outlives the session.
            done.flip(&unsafe { &*w.version }.status);
        }
        return 0;
    };
    let guard = d.engine.store.rc.pin();
    let mut examined = 0;
    for w in &d.writes {
        // SAFETY: as above: our versions are linked, alive and unfinished,
        // written by us; key entries live until the store drops; we hold
        // `guard`.
        examined += unsafe {
            (*w.entry).commit_version(w.version, cts.get(), |st| {
                done.flip(st);
            })
        };
    }
    drop(guard);
    examined
}

/// Rollback's completion for the store: unlinks its versions, newest
/// first, then flips them to aborted; returns how many it unlinked.
///
/// Unlinking comes first, while the versions are still in progress (or
/// prepared): no other writer can prepend on top of one (its conflict check
/// refuses), so each is its chain's head once our own newer versions above
/// it are gone, and the unlink always succeeds. Flipped to aborted first, a
/// concurrent writer of the key could skip it and prepend on top; the unlink
/// then failed and the aborted version stayed in the chain above the safe
/// point for as long as a reader held the horizon (issue 16).
fn unlink_then_abort<P: Protocol>(d: &SessionData<'_, P>, done: &Completion<'_>) -> u64 {
    let store = &d.engine.store;
    let guard = store.rc.pin();
    let flip = || {
        for w in &d.writes {
            // SAFETY: our versions were linked and alive when `guard` was
            // pinned; those unlinked are retired under it, so none is freed
            // before it drops (invariant 11). Readers that loaded one before
            // the unlink see it aborted (or still in progress: invisible).
            done.flip(&unsafe { &*w.version }.status);
        }
    };
    let flip_first = crate::sync::mutant_on(crate::sync::mutant::ROLLBACK_FLIPS_BEFORE_UNLINK);
    if flip_first {
        flip();
    }
    let mut unlinked = 0;
    for w in d.writes.iter().rev() {
        // SAFETY: key entries live until the store drops; our version is
        // still linked (we have not unlinked it yet).
        if unsafe { &*w.entry }.unlink_head(w.version, &store.rc, &guard) {
            unlinked += 1;
        }
    }
    if !flip_first {
        flip();
    }
    drop(guard);
    unlinked
}

impl<'s, 'e, P: Protocol> Txn<'s, 'e, P> {
    #[inline]
    pub(crate) fn begin(
        msess: &'s mut TxnSession<'e, P>,
        d: &'s mut SessionData<'e, P>,
        opts: &TxnOptions,
    ) -> Result<Self> {
        Ok(Txn {
            t: msess.begin(opts)?,
            d,
        })
    }

    /// This transaction's id: [`TxnId::NONE`] until its first write.
    pub fn id(&self) -> TxnId {
        self.t.id()
    }

    /// The read timestamp in force ([`Timestamp::NONE`] if none). For a
    /// `read_at_stable` transaction, the stable timestamp it reads at.
    pub fn read_timestamp(&self) -> Timestamp {
        self.t.read_timestamp()
    }

    /// The options it began with.
    pub fn options(&self) -> &TxnOptions {
        self.t.options()
    }

    /// Sets the read timestamp after begin (once); see
    /// [`Transaction::set_read_timestamp`].
    ///
    /// # Errors
    /// As [`Transaction::set_read_timestamp`]; the transaction stays usable.
    pub fn set_read_timestamp(&mut self, ts: Timestamp) -> Result<Timestamp> {
        self.t.set_read_timestamp(ts)
    }

    /// Calls `f` with the visible value of `key` (or `None`), borrowed from
    /// the store with no copy. The epoch guard is held only while `f` runs.
    ///
    /// # Errors
    /// The transaction is not usable ([`Transaction::check_usable`]), or
    /// [`Error::PrepareConflict`] on a prepared update at or below the read
    /// timestamp.
    #[inline]
    pub fn get_with<R>(&mut self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        let view = self.t.read_view()?;
        let store = &self.d.engine.store;
        let guard = store.rc.pin();
        let mut examined = 0;
        let found = match store.index.get(key, &guard) {
            Some(e) => e.read_counted(&view, &guard, &mut examined),
            None => Found::Absent,
        };
        self.t.count(Count::Reads, 1);
        self.t.count(Count::VersionsRead, examined);
        match found {
            Found::Value(v) => Ok(f(Some(v))),
            Found::Deleted | Found::Absent => Ok(f(None)),
            Found::PrepareConflict => {
                self.t.count(Count::PrepareConflicts, 1);
                Err(Error::PrepareConflict { key: key.to_vec() })
            }
        }
    }

    /// The visible value of `key`, copied out.
    ///
    /// # Errors
    /// As [`Txn::get_with`].
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// Visits the visible key-value pairs with keys in `range`, in key
    /// order (tombstones hidden), until `f` returns `false`. Values are
    /// borrowed; the epoch guard is held for the scan.
    ///
    /// # Errors
    /// As [`Txn::get_with`]; a prepare conflict stops the scan.
    pub fn scan<Q, R>(&mut self, range: R, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()>
    where
        Q: AsRef<[u8]> + ?Sized,
        R: RangeBounds<Q>,
    {
        let view = self.t.read_view()?;
        let bounds = (map_bound(range.start_bound()), map_bound(range.end_bound()));
        let store = &self.d.engine.store;
        let guard = store.rc.pin();
        let mut conflict: Option<Vec<u8>> = None;
        let (mut reads, mut examined) = (0, 0);
        store.index.range(bounds, &guard, |k, e| {
            reads += 1;
            match e.read_counted(&view, &guard, &mut examined) {
                Found::Value(v) => f(k, v),
                Found::Deleted | Found::Absent => true,
                Found::PrepareConflict => {
                    conflict = Some(k.to_vec());
                    false
                }
            }
        });
        drop(guard);
        self.t.count(Count::Reads, reads);
        self.t.count(Count::VersionsRead, examined);
        match conflict {
            Some(key) => {
                self.t.count(Count::PrepareConflicts, 1);
                Err(Error::PrepareConflict { key })
            }
            None => Ok(()),
        }
    }

    /// The visible key-value pairs with keys in `range`, in key order.
    ///
    /// # Errors
    /// As [`Txn::scan`].
    pub fn range<Q, R>(&mut self, range: R) -> Result<Vec<(Vec<u8>, Vec<u8>)>>
    where
        Q: AsRef<[u8]> + ?Sized,
        R: RangeBounds<Q>,
    {
        let mut out = Vec::new();
        self.scan(range, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Writes `value` under `key`.
    ///
    /// # Errors
    /// [`Error::ValueTooLarge`], or as [`Txn::delete`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let max = self.d.engine.config.max_value_len;
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.write(key, Some(value))
    }

    /// Deletes `key` (writes a tombstone).
    ///
    /// # Errors
    /// The transaction may not write ([`Transaction::check_writable`]),
    /// [`Error::KeyTooLarge`], or [`Error::WriteConflict`] (first updater
    /// wins), after which it must roll back.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.write(key, None)
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.t.check_writable()?;
        let max = self.d.engine.config.max_key_len;
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        let (status, view) = self.t.new_version()?;
        let store = &self.d.engine.store;
        let guard = store.rc.pin();
        let entry = store.index.get_or_insert(key, &store.rc, &guard);
        let v = Version::alloc(status, value);
        match entry.prepend(v, &view, &guard) {
            Ok((version, retries)) => {
                self.t.count(Count::ChainCasRetries, retries);
                self.d.writes.push(WriteRec {
                    entry: entry as *const _,
                    version,
                });
                Ok(())
            }
            Err(_) => {
                self.t.mark_write_conflict();
                Err(Error::WriteConflict { key: key.to_vec() })
            }
        }
    }

    /// Sets the commit timestamp before commit (once); see
    /// [`Transaction::set_commit_timestamp`].
    ///
    /// # Errors
    /// As [`Transaction::set_commit_timestamp`]; the transaction stays
    /// usable.
    pub fn set_commit_timestamp(&mut self, ts: Timestamp) -> Result<()> {
        self.t.set_commit_timestamp(ts)
    }

    /// Announces a prepared transaction's durable timestamp; see
    /// [`Transaction::set_durable_timestamp`].
    ///
    /// # Errors
    /// As [`Transaction::set_durable_timestamp`].
    pub fn set_durable_timestamp(&mut self, ts: Timestamp) -> Result<()> {
        self.t.set_durable_timestamp(ts)
    }

    /// Prepares the transaction (two-phase commit) at `ts`; see
    /// [`Transaction::prepare`]. Returns the prepare timestamp in force.
    ///
    /// # Errors
    /// As [`Transaction::prepare`]; the transaction stays usable.
    pub fn prepare(&mut self, ts: Timestamp) -> Result<Timestamp> {
        let d = &*self.d;
        self.t.prepare(ts, |done| {
            flip_all(d, done);
        })
    }

    /// Commits; see [`Transaction::commit`] for the timestamp rules. Then
    /// prunes the chains it wrote to the reclaim horizon.
    ///
    /// # Errors
    /// A timestamp error leaves the transaction open and usable; a
    /// transaction that hit a write conflict is rolled back and gets
    /// [`Error::MustRollBack`].
    #[inline]
    pub fn commit(&mut self, opts: CommitOptions) -> Result<()> {
        let d = &*self.d;
        let (mut unlinked, mut examined) = (0, 0);
        let r = self.t.commit(opts, |done| {
            if done.outcome() == VersionState::Aborted {
                // Doomed by a write conflict: rolled back.
                unlinked = unlink_then_abort(d, done);
            } else {
                examined = flip_all(d, done);
            }
        });
        if !self.d.writes.is_empty() && !self.t.is_open() {
            if r.is_ok() {
                self.t.count(Count::CommitVersionsExamined, examined);
                self.prune_written();
            } else {
                self.d.writes.clear();
                self.t.count(Count::VersionsPruned, unlinked);
            }
        }
        r
    }

    /// Prunes the chains this transaction wrote, and refreshes the horizon
    /// every `horizon_refresh_commits` commits.
    fn prune_written(&mut self) {
        let d = &mut *self.d;
        let engine = d.engine;
        d.commits += 1;
        if d.commits >= engine.config.horizon_refresh_commits {
            d.commits = 0;
            self.t.session().advance_horizon();
        }
        let h = engine.mgr.horizon();
        let stable = engine.mgr.stable_timestamp().get();
        let store = &engine.store;
        let guard = store.rc.pin();
        let (mut pruned, mut examined) = (0, 0);
        for w in &d.writes {
            // SAFETY: key entries live until the store drops (keys are never
            // removed), and the store outlives the session.
            let n = unsafe { &*w.entry }.cut(h, stable, &mut d.tails, &guard);
            pruned += n.cut;
            examined += n.examined;
        }
        if d.tails.len() >= RETIRE_BATCH {
            d.tails.flush(&store.rc, &guard, store.on_free());
        }
        d.writes.clear();
        self.t.count(Count::VersionsPruned, pruned);
        self.t.count(Count::CommitVersionsExamined, examined);
    }

    /// Rolls back: the transaction's writes are never seen by anyone.
    ///
    /// # Errors
    /// [`Error::TransactionFinished`] if it already ended.
    pub fn rollback(&mut self) -> Result<()> {
        let d = &*self.d;
        let mut unlinked = 0;
        self.t
            .rollback(|done| unlinked = unlink_then_abort(d, done))?;
        self.d.writes.clear();
        self.t.count(Count::VersionsPruned, unlinked);
        Ok(())
    }
}

impl<P: Protocol> Drop for Txn<'_, '_, P> {
    #[inline]
    fn drop(&mut self) {
        if self.t.is_open() {
            self.drop_open();
        }
    }
}

impl<P: Protocol> Txn<'_, '_, P> {
    #[cold]
    #[inline(never)]
    fn drop_open(&mut self) {
        // Dropping an open transaction (including during a panic) rolls it
        // back and clears its pins (invariant 12).
        let _ = self.rollback();
        // Only a transaction whose commit flips unwound (poisoned: it never
        // completes, and its versions stay where they are) still has writes
        // here; the next transaction on this session must not see them.
        self.d.writes.clear();
    }
}

fn map_bound<Q: AsRef<[u8]> + ?Sized>(b: Bound<&Q>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The previous transaction on this session never ended: it was leaked
/// with `mem::forget`, so neither commit, rollback nor drop ran. Roll it
/// back now, as its drop would have, so its versions never become visible,
/// its id leaves the running set and its pins go.
#[cold]
pub(crate) fn recover_leaked<P: Protocol>(
    msess: &mut TxnSession<'_, P>,
    d: &mut SessionData<'_, P>,
) {
    let mut unlinked = 0;
    msess.recover_leaked(|done| unlinked = unlink_then_abort(d, done));
    d.writes.clear();
    msess.count(Count::VersionsPruned, unlinked);
}
