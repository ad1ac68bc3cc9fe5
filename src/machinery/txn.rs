//! [`Transaction`]: everything about a transaction that is not data —
//! options, read timestamp, the read-only fast path, the lazy id, commit,
//! durable and prepare timestamps with their rules, and the completion that
//! flips the statuses of the versions it wrote (invariant 9).

use super::manager::{count_into, Count, OpenTxn, TxnSession};
use super::protocol::{Protocol, StableView};
use super::version::{ReadView, VersionState, VersionStatus, ABORTED, COMMITTED, PREPARED};
use super::LockFree;
use crate::config::{CommitOptions, Isolation, PrepareConflicts, TxnOptions};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::sync::{mutant as m, mutant_on};
use crate::ts::{Timestamp, TxnId};
use std::marker::PhantomData;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Active,
    /// A write conflict: only rollback is allowed.
    Doomed,
    Prepared,
    /// A commit's status flips unwound: the transaction never completes.
    Poisoned,
    Finished,
}

/// A transaction on a [`TxnSession`]. Reads see one snapshot (or, with
/// `read_at_stable`, the stable watermark) through [`Transaction::read_view`].
/// The snapshot is taken lazily: at the first
/// [`read_view`](Transaction::read_view) or
/// [`new_version`](Transaction::new_version), or with the read timestamp
/// (in the options or [`set_read_timestamp`](Transaction::set_read_timestamp)),
/// or by [`take_snapshot`](Transaction::take_snapshot); until then the
/// transaction publishes no pin, and one that never reads commits having
/// taken none. There is no other way to get a [`ReadView`], so no view can
/// judge a version before the snapshot it borrows was taken;
/// the versions it writes carry a [`VersionStatus`] from
/// [`Transaction::new_version`] and become visible to others only when
/// commit flips them.
///
/// Dropping an open transaction rolls it back: it leaves the running set,
/// its pins and any prepare claim go, and the statuses it wrote (which no
/// completion flips on drop) count as aborted from then on:
///
/// * unprepared, they stay [`VersionState::InProgress`] by a writer that
///   completed without committing: every later [`ReadView`] skips them, for
///   reads and for [`ReadView::write_check`] alike;
/// * prepared, they stay [`VersionState::Prepared`] in the word, but the
///   manager no longer lists the transaction as prepared: a reader or
///   writer that meets one settles it to [`VersionState::Aborted`] instead
///   of reporting a conflict (a scan of the session table, paid only then).
///
/// [`TxnManager::version_state`](super::TxnManager::version_state) reports
/// both as aborted, for pruning. [`Transaction::rollback`] with a closure
/// that flips (and unlinks) them is still the cheaper way: nothing is left
/// for anyone to settle.
pub struct Transaction<'s, 'm, P: Protocol = LockFree> {
    /// Everything else the transaction is lives in `sess.cur`: a
    /// `Transaction` is one pointer, so `begin`'s result moves through its
    /// `Result` layers (machinery, KV `Txn`, caller) as a pointer, not as a
    /// 120-byte struct whose copies stall on store forwarding.
    sess: &'s mut TxnSession<'m, P>,
}

/// The state of the transaction open on a session ([`Transaction`] points
/// at it through the session).
#[derive(Clone, Copy)]
pub(super) struct TxnCore {
    opts: TxnOptions,
    state: State,
    id: u64,
    read_ts: Timestamp,
    commit_ts: Timestamp,
    prepare_ts: Timestamp,
    /// A prepared transaction's durable timestamp from
    /// `set_durable_timestamp` (the default for its commit).
    durable_ts: Timestamp,
    stable: Option<StableView>,
    /// Has it taken its view (a snapshot, or the stable view)? A
    /// transaction takes its snapshot lazily, at its first read, write or
    /// read timestamp.
    snapped: bool,
    /// Has it published a pin that `finish` must clear?
    pinned: bool,
    rmw_at_begin: u64,
}

impl Default for TxnCore {
    fn default() -> Self {
        TxnCore {
            opts: TxnOptions::default(),
            state: State::Finished,
            id: 0,
            read_ts: Timestamp::NONE,
            commit_ts: Timestamp::NONE,
            prepare_ts: Timestamp::NONE,
            durable_ts: Timestamp::NONE,
            stable: None,
            snapped: false,
            pinned: false,
            rmw_at_begin: 0,
        }
    }
}

impl<'s, 'm, P: Protocol> Transaction<'s, 'm, P> {
    #[inline]
    pub(super) fn begin(sess: &'s mut TxnSession<'m, P>, opts: &TxnOptions) -> Result<Self> {
        let opts = *opts;
        if let Some(ts) = opts.read_timestamp {
            check_ts(TimestampRole::Read, ts)?;
            if opts.read_at_stable {
                return Err(Error::IncompatibleOptions {
                    first: "read_at_stable",
                    second: "read_timestamp",
                });
            }
        }
        if sess.open.live {
            recover_leaked(sess, |_| {});
        }
        sess.open.live = true;
        let rmw_at_begin = crate::sync::thread_rmw_count().unwrap_or(0);
        let mgr = sess.mgr;
        let ctr = sess.ctr();
        ctr.begins.bump(1);
        // Field by field, in place in the session (no struct built on the
        // stack and copied).
        let c = &mut sess.cur;
        c.opts = opts;
        c.state = State::Active;
        c.id = 0;
        c.read_ts = Timestamp::NONE;
        c.commit_ts = Timestamp::NONE;
        c.prepare_ts = Timestamp::NONE;
        c.durable_ts = Timestamp::NONE;
        c.stable = None;
        c.snapped = false;
        c.pinned = false;
        c.rmw_at_begin = rmw_at_begin;
        let mut t = Transaction { sess };
        if opts.read_at_stable {
            let sv = mgr.proto.begin_at_stable(t.sess.slot, ctr);
            t.sess.cur.pinned = true;
            // With no stable timestamp set, a view "at stable 0" would see
            // untimestamped versions that pruning may cut once oldest is set
            // (no pin can hold the timestamp horizon at 0): read the latest
            // committed snapshot instead (still read-only). Found by the
            // differential fuzzer (tests/fuzz_corpus_replay.rs).
            if sv.stable != 0 {
                t.sess.cur.read_ts = Timestamp::new(sv.stable);
                t.sess.cur.stable = Some(sv);
                t.sess.cur.snapped = true;
                return Ok(t);
            }
            // The snapshot comes later, lazily, with its own pin; until
            // then this one publishes nothing (as any lazy begin).
            mgr.proto.end(t.sess.slot);
            t.sess.cur.pinned = false;
        }
        if let Some(ts) = opts.read_timestamp {
            // One handshake for the snapshot and the read timestamp
            // (`begin_at_read_ts`). On error `t` drops here, which ends it
            // and clears its pins.
            t.set_read_timestamp(ts)?;
        }
        Ok(t)
    }

    /// Takes the snapshot and publishes its pin (handshake 1).
    #[inline]
    fn take_snapshot_now(&mut self) {
        self.sess.cur.snapped = true;
        if mutant_on(m::LAZY_VIEW_SKIPS_SNAPSHOT) && self.sess.snap.generation != 0 {
            // Broken on purpose (loom only): read with the session's cached
            // snapshot from an earlier transaction.
            return;
        }
        let ctr = self.sess.ctr();
        self.sess
            .mgr
            .proto
            .begin(self.sess.slot, &mut self.sess.snap, ctr);
        self.sess.cur.pinned = true;
    }

    /// Takes the transaction's snapshot now, if it has none yet. A
    /// transaction takes its snapshot at its first read
    /// ([`read_view`](Self::read_view)), write
    /// ([`new_version`](Self::new_version)) or read timestamp, not at
    /// begin; call this to fix its point in time earlier (for instance
    /// before waiting for another thread), at the cost begin used to pay.
    /// A no-op once it has one.
    ///
    /// # Errors
    /// As [`Transaction::check_usable`].
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.check_usable()?;
        if !self.sess.cur.snapped {
            self.take_snapshot_now();
        }
        Ok(())
    }

    /// Has the transaction taken its snapshot (or, with `read_at_stable`,
    /// its stable view) yet? See [`Transaction::take_snapshot`].
    #[inline]
    pub fn has_snapshot(&self) -> bool {
        self.sess.cur.snapped
    }

    /// This transaction's id: [`TxnId::NONE`] until its first write.
    pub fn id(&self) -> TxnId {
        TxnId(self.sess.cur.id)
    }

    /// The read timestamp in force ([`Timestamp::NONE`] if none). For a
    /// `read_at_stable` transaction, the stable timestamp it reads at.
    pub fn read_timestamp(&self) -> Timestamp {
        self.sess.cur.read_ts
    }

    /// The options it began with.
    pub fn options(&self) -> &TxnOptions {
        &self.sess.cur.opts
    }

    /// Is the transaction still open (not committed, rolled back or
    /// prepared-and-resolved)?
    #[inline]
    pub fn is_open(&self) -> bool {
        self.sess.cur.state != State::Finished
    }

    /// The session it runs on.
    pub fn session(&self) -> &TxnSession<'m, P> {
        self.sess
    }

    /// The manager it belongs to.
    pub fn manager(&self) -> &'m super::TxnManager<P> {
        self.sess.mgr
    }

    /// Adds `n` to one of the storage's counters in the session's block.
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        count_into(self.sess.ctr(), what, n);
    }

    /// Is the transaction usable for reads and writes?
    ///
    /// # Errors
    /// [`Error::MustRollBack`] after a write conflict,
    /// [`Error::TransactionPrepared`] after prepare,
    /// [`Error::TransactionFinished`] after commit or rollback.
    pub fn check_usable(&self) -> Result<()> {
        match self.sess.cur.state {
            State::Active => Ok(()),
            State::Doomed => Err(Error::MustRollBack),
            State::Prepared => Err(Error::TransactionPrepared),
            State::Finished | State::Poisoned => Err(Error::TransactionFinished),
        }
    }

    /// Sets the read timestamp after begin (once). Publishes it, validates
    /// it against oldest (an error, or round up to oldest with
    /// `roundup_read`), and takes a fresh snapshot: a commit that landed
    /// since begin is seen if its commit timestamp is at or below `ts`. No
    /// lock. Returns the timestamp in force.
    ///
    /// After an error the transaction is still usable and may set a valid
    /// read timestamp.
    ///
    /// # Errors
    /// The transaction is not usable; `ts` is 0 or out of range; a read
    /// timestamp is already set; `ts` is below oldest (without
    /// `roundup_read`).
    #[inline]
    pub fn set_read_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        let ts = ts.into();
        self.check_usable()?;
        check_ts(TimestampRole::Read, ts)?;
        if !self.sess.cur.read_ts.is_none() {
            return Err(Error::ReadTimestampAlreadySet {
                current: self.sess.cur.read_ts,
            });
        }
        let ctr = self.sess.ctr();
        let proto = &self.sess.mgr.proto;
        let r = if self.sess.cur.snapped {
            proto.set_read_timestamp(
                self.sess.slot,
                &mut self.sess.snap,
                ts,
                self.sess.cur.opts.roundup_read,
                ctr,
            )?
        } else {
            // The lazy snapshot comes with the read timestamp: one
            // handshake for both pins.
            let r = proto.begin_at_read_ts(
                self.sess.slot,
                &mut self.sess.snap,
                ts,
                self.sess.cur.opts.roundup_read,
                ctr,
            )?;
            self.sess.cur.snapped = true;
            self.sess.cur.pinned = true;
            r
        };
        self.sess.cur.read_ts = r;
        Ok(r)
    }

    /// The view, once taken (`snapped`): only `read_view` and
    /// `new_version` call it, after taking the snapshot.
    #[inline]
    fn view(&self) -> ReadView<'_> {
        debug_assert!(
            self.sess.cur.snapped,
            "a view is only built after the snapshot"
        );
        let ignore = self.sess.cur.opts.prepare_conflicts != PrepareConflicts::Enforce;
        let prepared = &self.sess.mgr.prepared;
        let id = self.sess.cur.id;
        match self.sess.cur.stable {
            Some(sv) => ReadView::stable(id, sv.stable, sv.complete_below, ignore, prepared),
            None => {
                let (snap, read_ts) = (&self.sess.snap, self.sess.cur.read_ts.get());
                ReadView::snapshot(id, snap, read_ts, ignore, prepared)
            }
        }
    }

    /// The view to read with now. The transaction's first call takes its
    /// snapshot (and publishes its pin); with [`Isolation::ReadCommitted`]
    /// every later call takes a fresh one (one load when nothing completed
    /// since).
    ///
    /// # Errors
    /// As [`Transaction::check_usable`].
    #[inline]
    pub fn read_view(&mut self) -> Result<ReadView<'_>> {
        self.check_usable()?;
        if !self.sess.cur.snapped {
            self.take_snapshot_now();
        } else if self.sess.cur.opts.isolation == Isolation::ReadCommitted
            && self.sess.cur.stable.is_none()
        {
            let ctr = self.sess.ctr();
            self.sess
                .mgr
                .proto
                .refresh(self.sess.slot, &mut self.sess.snap, ctr);
        }
        Ok(self.view())
    }

    /// May this transaction write?
    ///
    /// # Errors
    /// As [`Transaction::check_usable`], and [`Error::ReadOnlyTransaction`]
    /// for a `read_only` or `read_at_stable` transaction or one that ignores
    /// prepared updates.
    #[inline]
    pub fn check_writable(&self) -> Result<()> {
        self.check_usable()?;
        if self.sess.cur.opts.read_only
            || self.sess.cur.opts.read_at_stable
            || self.sess.cur.opts.prepare_conflicts == PrepareConflicts::Ignore
        {
            return Err(Error::ReadOnlyTransaction);
        }
        Ok(())
    }

    /// Starts a write: the transaction gets its id now if this is its first
    /// write, and you get the [`VersionStatus`] to embed
    /// in the new version, with the view to check the key's existing
    /// versions against ([`ReadView::write_check`], first updater wins)
    /// before you link it.
    ///
    /// # Errors
    /// As [`Transaction::check_writable`].
    #[inline]
    pub fn new_version(&mut self) -> Result<(VersionStatus, ReadView<'_>)> {
        self.check_writable()?;
        self.read_view()?;
        if self.sess.cur.id == 0 {
            // The id comes with the first write: a read-only transaction never
            // allocates one.
            self.sess.cur.id = self.sess.mgr.proto.allocate_id(self.sess.slot);
            self.sess.open.id = self.sess.cur.id;
        }
        Ok((VersionStatus::new(self.sess.cur.id), self.view()))
    }

    /// Records a write-write conflict ([`WriteCheck::Conflict`](super::WriteCheck::Conflict)):
    /// from now on the transaction may only roll back (every other call is
    /// [`Error::MustRollBack`]).
    pub fn mark_write_conflict(&mut self) {
        if self.sess.cur.state == State::Active {
            self.sess.cur.state = State::Doomed;
            self.sess.ctr().write_conflicts.bump(1);
        }
    }

    /// With `roundup_prepared`, a prepared transaction's commit timestamp
    /// below its prepare timestamp is rounded up to it (as WiredTiger's
    /// `roundup_timestamps=(prepared=true)` does).
    fn round_commit_ts(&self, commit: Timestamp) -> Timestamp {
        // Equivalent: `<=` (at equality both arms return the prepare
        // timestamp).
        if self.sess.cur.state == State::Prepared
            && self.sess.cur.opts.roundup_prepared
            && commit < self.sess.cur.prepare_ts
        {
            self.sess.cur.prepare_ts
        } else {
            commit
        }
    }

    /// Validates a commit timestamp against oldest (unprepared only), the
    /// read timestamp and the prepare timestamp. Stable is checked where the
    /// timestamp is claimed or announced.
    fn check_commit_ts(&self, commit: Timestamp) -> Result<()> {
        check_ts(TimestampRole::Commit, commit)?;
        let (oldest, _) = self.sess.mgr.proto.oldest_stable();
        // A prepared transaction's commit timestamp is bounded by its prepare
        // timestamp, not by oldest: oldest and stable may move past a
        // prepared transaction, and a two-phase commit's timestamp is chosen
        // by its coordinator (WiredTiger checks only `commit >= prepare`).
        if self.sess.cur.prepare_ts.is_none() && commit < oldest {
            return Err(Error::CommitTimestampBeforeOldest { commit, oldest });
        }
        if !self.sess.cur.read_ts.is_none() && commit < self.sess.cur.read_ts {
            return Err(Error::CommitTimestampBeforeRead {
                commit,
                read: self.sess.cur.read_ts,
            });
        }
        if !self.sess.cur.prepare_ts.is_none() && commit < self.sess.cur.prepare_ts {
            return Err(Error::CommitTimestampBeforePrepare {
                commit,
                prepare: self.sess.cur.prepare_ts,
            });
        }
        Ok(())
    }

    /// Sets the commit timestamp before commit (one per transaction; the
    /// same value again is accepted and validated again, as WiredTiger
    /// does). Unprepared: it must
    /// be after stable and at or above oldest and the read timestamp, and is
    /// counted by `all_durable` from now until the transaction ends.
    /// Prepared: it must be at or above the prepare timestamp (rounded up to
    /// it with `roundup_prepared`) and at or below a durable timestamp
    /// already set; it may be at or below stable and oldest, and is not
    /// counted by `all_durable` (the durable timestamp is). After an error
    /// the transaction is still usable.
    ///
    /// # Errors
    /// The transaction is finished or doomed;
    /// [`Error::CommitTimestampAlreadySet`] for a value other than the one
    /// already set (after rounding), prepared or not; otherwise the
    /// commit-timestamp errors of the rules above.
    pub fn set_commit_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        let ts = ts.into();
        match self.sess.cur.state {
            State::Active | State::Prepared => {}
            _ => self.check_usable()?,
        }
        let ts = self.round_commit_ts(check_ts(TimestampRole::Commit, ts)?);
        // A second, different value is refused (deliberate difference 6);
        // the same one again goes through the checks below as the first
        // did (re-announcing it is idempotent).
        if !self.sess.cur.commit_ts.is_none() && ts != self.sess.cur.commit_ts {
            return Err(Error::CommitTimestampAlreadySet {
                current: self.sess.cur.commit_ts,
            });
        }
        self.check_commit_ts(ts)?;
        if !self.sess.cur.durable_ts.is_none() && self.sess.cur.durable_ts < ts {
            return Err(Error::DurableTimestampBeforeCommit {
                durable: self.sess.cur.durable_ts,
                commit: ts,
            });
        }
        if self.sess.cur.state != State::Prepared {
            self.sess.mgr.proto.announce(self.sess.slot, ts, false)?;
        }
        self.sess.cur.commit_ts = ts;
        Ok(())
    }

    /// Announces a prepared transaction's durable timestamp before it
    /// resolves: it must be after stable and at or above a commit timestamp
    /// already set, and becomes the durable timestamp `commit` uses unless
    /// [`CommitOptions::durable_ts`] gives another. Stable may not pass it
    /// until the transaction commits or rolls back
    /// ([`Error::StablePastPreparedDurable`]); `all_durable` stays below it.
    /// Setting it again replaces it (a refused value keeps the old one).
    ///
    /// # Errors
    /// The transaction is not prepared; the timestamp is 0 or out of range,
    /// below the commit timestamp, or not after stable.
    pub fn set_durable_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        let ts = ts.into();
        if self.sess.cur.state != State::Prepared {
            self.check_usable()?;
            check_ts(TimestampRole::Durable, ts)?;
            return Err(Error::DurableTimestampWithoutPrepare { durable: ts });
        }
        check_ts(TimestampRole::Durable, ts)?;
        if !self.sess.cur.commit_ts.is_none() && ts < self.sess.cur.commit_ts {
            return Err(Error::DurableTimestampBeforeCommit {
                durable: ts,
                commit: self.sess.cur.commit_ts,
            });
        }
        self.sess.mgr.proto.announce(self.sess.slot, ts, true)?;
        self.sess.cur.durable_ts = ts;
        Ok(())
    }

    /// Prepares the transaction (two-phase commit) at `ts`: it must be after
    /// stable and at or above oldest (or rounded up to the first timestamp
    /// that is, with `roundup_prepared`) and not below any active read
    /// timestamp, this transaction's own included. Afterwards the
    /// transaction may only commit (with `commit_ts >= prepare_ts` and
    /// `durable_ts >= commit_ts`, `durable_ts` after stable) or roll back;
    /// readers at or above `ts` meet its updates as prepare conflicts.
    /// Returns the prepare timestamp in force.
    ///
    /// Once every check has passed, `flip` gets a
    /// [`Completion`] that marks the statuses it is given prepared; call
    /// [`Completion::flip`] on every version this transaction wrote. It runs
    /// before the transaction leaves the running set (invariants 5, 9).
    ///
    /// # Errors
    /// Already prepared, not usable, a commit timestamp already set, or a
    /// prepare timestamp that breaks a rule above; `flip` is not called and
    /// the transaction stays usable.
    pub fn prepare(
        &mut self,
        ts: impl Into<Timestamp>,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<Timestamp> {
        let ts = ts.into();
        if self.sess.cur.state == State::Prepared {
            return Err(Error::AlreadyPrepared);
        }
        self.check_usable()?;
        if !self.sess.cur.commit_ts.is_none() {
            return Err(Error::PrepareAfterCommitTimestamp {
                commit: self.sess.cur.commit_ts,
            });
        }
        check_ts(TimestampRole::Prepare, ts)?;
        let mgr = self.sess.mgr;
        let (oldest, stable) = mgr.proto.oldest_stable();
        let mut want = ts;
        if want < oldest {
            if !self.sess.cur.opts.roundup_prepared {
                // Stable is checked first: with stable set, oldest <= stable,
                // so a prepare below oldest is also not after stable, and
                // that is the error the rules promise (DESIGN.md, "The timestamp contract").
                // `PrepareTimestampBeforeOldest` is for no stable set.
                if !stable.is_none() {
                    return Err(Error::PrepareTimestampNotAfterStable {
                        prepare: ts,
                        stable,
                    });
                }
                return Err(Error::PrepareTimestampBeforeOldest {
                    prepare: ts,
                    oldest,
                });
            }
            // Rounded up to oldest here; `claim_prepare` rounds it further
            // up past stable.
            want = oldest;
        }
        let p =
            mgr.proto
                .claim_prepare(self.sess.slot, want, self.sess.cur.opts.roundup_prepared)?;
        let refused = if p > Timestamp::MAX {
            // Rounded up past the largest timestamp: stable is at MAX.
            Some(Error::PrepareTimestampNotAfterStable {
                prepare: ts,
                stable: Timestamp::MAX,
            })
        } else if !self.sess.cur.read_ts.is_none() && p < self.sess.cur.read_ts {
            Some(Error::PrepareTimestampBeforeActiveRead {
                prepare: p,
                read: self.sess.cur.read_ts,
            })
        } else {
            None
        };
        if let Some(e) = refused {
            // Nothing else was published yet: no announcement exists before
            // prepare (a commit timestamp refuses prepare above).
            mgr.proto.release_prepare(self.sess.slot);
            return Err(e);
        }
        // The flips to prepared happen under a commit claim at `p`, so
        // raising stable to `p` or past waits for them (handshake 2,
        // invariant 8): a read-at-stable reader, which has no snapshot to
        // hide this transaction, never reads one of its versions still in
        // progress and, after the flips and a commit at or below stable,
        // another one committed (a torn read found by tests/own_storage.rs).
        let slot = self.sess.slot;
        let claim = !mutant_on(m::PREPARE_WITHOUT_CLAIM);
        let claimed = if claim {
            mgr.proto.claim_commit(slot, p, false)
        } else {
            Ok(())
        };
        if let Err(e) = claimed {
            mgr.proto.release_prepare(slot);
            return Err(match e {
                Error::CommitTimestampNotAfterStable { stable, .. } => {
                    Error::PrepareTimestampNotAfterStable { prepare: p, stable }
                }
                e => e,
            });
        }
        let publish_late = mutant_on(m::PREPARED_PUBLISHED_AFTER_FLIP);
        if self.sess.cur.id != 0 && !publish_late {
            // Before the flips: a reader or writer that meets a prepared
            // status finds its writer listed until it resolves
            // (`version.rs`, "Orderings"; loom model
            // `dropped_prepared/write_check`).
            mgr.prepared.publish(slot, self.sess.cur.id);
        }
        let poisoned = PoisonOnUnwind(&mut self.sess.cur.state);
        flip(&Completion::new(self.sess.cur.id, PREPARED, p.get()));
        std::mem::forget(poisoned);
        if self.sess.cur.id != 0 && publish_late {
            mgr.prepared.publish(slot, self.sess.cur.id);
        }
        if self.sess.cur.id != 0 && !mutant_on(m::PREPARE_SKIPS_EXIT) {
            // Prepare is an exit from the running set: the generation is
            // bumped (invariant 5; PostgreSQL's two-phase-commit bug).
            let ctr = self.sess.ctr();
            mgr.proto.complete(
                self.sess.slot,
                self.sess.cur.id,
                None,
                &mut self.sess.retired,
                ctr,
            );
        }
        if claim {
            mgr.proto.release_claim(slot, Timestamp::NONE);
        }
        self.sess.cur.prepare_ts = p;
        self.sess.cur.state = State::Prepared;
        self.sess.open.prepared = true;
        Ok(p)
    }

    /// Commits. With a commit timestamp (here or set earlier) it must be
    /// after stable and at or above oldest and the read timestamp; a
    /// prepared transaction needs one at or above its prepare timestamp
    /// (stable and oldest do not bound it), and its durable timestamp (given
    /// here, else the one set with `set_durable_timestamp`, else the commit
    /// timestamp) must be at or above it and after stable. A timestamp error
    /// leaves the transaction open and usable;
    /// a transaction that hit a write conflict is rolled back (`flip` gets
    /// an abort completion) and gets [`Error::MustRollBack`].
    ///
    /// Once the timestamps are validated and claimed, `flip` gets a
    /// [`Completion`] that marks the statuses it is given committed; call
    /// [`Completion::flip`] on every version this transaction wrote. It runs
    /// before the descriptor install that makes the transaction completed to
    /// other snapshots (invariant 9), so no snapshot sees it half-done. A
    /// transaction with no id (it never called
    /// [`new_version`](Transaction::new_version)) and nothing announced
    /// commits on the fast path, without calling `flip`.
    ///
    /// # Errors
    /// A timestamp that breaks a rule above (the transaction stays open and
    /// usable, `flip` not called); [`Error::MustRollBack`] after a write
    /// conflict; [`Error::TransactionFinished`].
    #[inline]
    pub fn commit(
        &mut self,
        opts: CommitOptions,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<()> {
        if self.sess.cur.id == 0
            && self.sess.cur.state == State::Active
            && self.sess.cur.commit_ts.is_none()
            && opts == CommitOptions::default()
        {
            // Read-only, nothing announced: no validation, nothing to
            // install; clear the pins and count it.
            self.sess.ctr().commits.bump(1);
            self.finish();
            return Ok(());
        }
        self.commit_slow(opts, flip)
    }

    fn commit_slow(
        &mut self,
        opts: CommitOptions,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<()> {
        match self.sess.cur.state {
            State::Doomed => {
                self.abort(flip);
                return Err(Error::MustRollBack);
            }
            State::Finished | State::Poisoned => return Err(Error::TransactionFinished),
            State::Active | State::Prepared => {}
        }
        let prepared = self.sess.cur.state == State::Prepared;
        let given = match opts.commit_ts {
            // An explicit 0 is an error, not "untimestamped".
            Some(t) => Some(self.round_commit_ts(check_ts(TimestampRole::Commit, t)?)),
            None => None,
        };
        let commit = match (given, self.sess.cur.commit_ts.to_option()) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::CommitTimestampAlreadySet { current: b })
            }
            (a, b) => a.or(b).unwrap_or(Timestamp::NONE),
        };
        let durable = match (prepared, opts.durable_ts) {
            (false, Some(d)) => return Err(Error::DurableTimestampWithoutPrepare { durable: d }),
            (false, None) => commit,
            (true, d) => {
                if commit.is_none() {
                    return Err(Error::PreparedCommitNeedsTimestamp);
                }
                let d = d.or(self.sess.cur.durable_ts.to_option()).unwrap_or(commit);
                check_ts(TimestampRole::Durable, d)?;
                if d < commit {
                    return Err(Error::DurableTimestampBeforeCommit { durable: d, commit });
                }
                d
            }
        };
        if !commit.is_none() {
            self.check_commit_ts(commit)?;
        }
        let mgr = self.sess.mgr;
        let slot = self.sess.slot;
        let ctr = self.sess.ctr();
        if self.sess.cur.id != 0 || prepared {
            let claim = if prepared { durable } else { commit };
            if !claim.is_none() {
                mgr.proto.claim_commit(slot, claim, prepared)?;
            }
            let done = Completion::new(self.sess.cur.id, COMMITTED, commit.get());
            let clear_early = prepared && mutant_on(m::PREPARED_CLEARED_BEFORE_FLIP);
            if clear_early {
                mgr.prepared.clear(slot);
            }
            let poisoned = PoisonOnUnwind(&mut self.sess.cur.state);
            flip(&done);
            std::mem::forget(poisoned);
            if prepared && !clear_early {
                // After the flips: a settler that sees the entry cleared sees
                // them (`version.rs`, "Orderings").
                mgr.prepared.clear(slot);
            }
            let early = mutant_on(m::CLAIM_RELEASED_BEFORE_INSTALL);
            if early {
                mgr.proto.release_claim(slot, durable);
            }
            if self.sess.cur.id != 0 && !prepared {
                // The status flips above happen-before the Release CAS that
                // installs the next descriptor (invariant 9). The session's
                // snapshot cache gets the installed descriptor: this
                // transaction reads nothing more, and the next one reuses
                // it if no other completion is published by then
                // (invariants 5, 7).
                mgr.proto.complete(
                    slot,
                    self.sess.cur.id,
                    Some(&mut self.sess.snap),
                    &mut self.sess.retired,
                    ctr,
                );
            }
            if !early {
                // After the install: a stable setter waiting for this claim
                // publishes stable only once a snapshot taken at it sees
                // this commit (handshake 2, invariant 8; loom model
                // `stable/snapshot`).
                mgr.proto.release_claim(slot, durable);
            }
        }
        if self.announced() {
            mgr.proto.release_prepare(slot);
        }
        ctr.commits.bump(1);
        self.finish();
        Ok(())
    }

    /// Rolls back: the transaction's writes are never seen by anyone.
    /// `flip` gets a [`Completion`] that marks the statuses it is given
    /// aborted, before the transaction leaves the running set; afterwards
    /// you may unlink and retire those versions ([`epoch`](super::epoch)).
    ///
    /// # Errors
    /// [`Error::TransactionFinished`] if it already ended.
    pub fn rollback(&mut self, flip: impl FnOnce(&Completion<'_>)) -> Result<()> {
        if matches!(self.sess.cur.state, State::Finished | State::Poisoned) {
            return Err(Error::TransactionFinished);
        }
        self.abort(flip);
        Ok(())
    }

    fn abort(&mut self, flip: impl FnOnce(&Completion<'_>)) {
        let announced = self.announced();
        roll_back(
            self.sess,
            self.sess.cur.id,
            self.sess.cur.state == State::Prepared,
            announced,
            flip,
        );
        self.finish();
    }

    /// Has this transaction published a prepare claim or an announcement
    /// in its slot (prepare, or a commit timestamp set before commit)?
    #[inline]
    fn announced(&self) -> bool {
        self.sess.cur.state == State::Prepared || !self.sess.cur.commit_ts.is_none()
    }

    #[inline]
    fn finish(&mut self) {
        let ctr = self.sess.ctr();
        if self.sess.cur.id == 0 {
            ctr.read_only_txns.bump(1);
            if let Some(now) = crate::sync::thread_rmw_count() {
                ctr.read_rmw.bump(now - self.sess.cur.rmw_at_begin);
            }
        }
        if self.sess.cur.pinned {
            self.sess.mgr.proto.end(self.sess.slot);
        }
        self.sess.open = OpenTxn::default();
        self.sess.cur.state = State::Finished;
    }
}

impl<P: Protocol> Drop for Transaction<'_, '_, P> {
    #[inline]
    fn drop(&mut self) {
        // Inline and cheap for a finished transaction (the common case: the
        // begin workload's hot loop drops one per iteration).
        if self.sess.cur.state != State::Finished {
            self.drop_open();
        }
    }
}

impl<P: Protocol> Transaction<'_, '_, P> {
    #[cold]
    #[inline(never)]
    fn drop_open(&mut self) {
        // Dropping an open transaction (including during a panic) rolls it
        // back and clears its pins (invariant 12). A commit whose status
        // flips panicked part-way never leaves the running set (its
        // versions stay invisible): only its claims and pins go.
        match self.sess.cur.state {
            State::Finished => {}
            State::Poisoned => {
                let slot = self.sess.slot;
                // A prepare whose flips unwound: nobody flips the ones that
                // were done; readers settle them as aborted.
                self.sess.mgr.prepared.clear(slot);
                self.sess.mgr.proto.release_claim(slot, Timestamp::NONE);
                self.sess.mgr.proto.release_prepare(slot);
                self.finish();
            }
            _ => self.abort(|_| {}),
        }
    }
}

/// Marks the transaction poisoned if the status flips of a commit unwind
/// (defused with `mem::forget` when they return).
struct PoisonOnUnwind<'a>(&'a mut State);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        *self.0 = State::Poisoned;
    }
}

/// The moment a transaction's outcome is decided, handed to the closure
/// given to [`Transaction::commit`], [`Transaction::prepare`] or
/// [`Transaction::rollback`]: [`flip`](Completion::flip) every status the
/// transaction wrote. It exists only while that closure runs, which is
/// before the writer leaves the running set, so a flip can never come too
/// late (invariant 9); there is no other way to change a status (the
/// machinery itself settles only a dropped prepared transaction's statuses
/// to aborted, see [`Transaction`]).
pub struct Completion<'a> {
    own: u64,
    state: u64,
    ts: u64,
    _only_here: PhantomData<&'a mut ()>,
}

impl Completion<'_> {
    #[inline]
    fn new(own: u64, state: u64, ts: u64) -> Self {
        Completion {
            own,
            state,
            ts,
            _only_here: PhantomData,
        }
    }

    /// Sets `status` to this outcome (a Release store). Returns `false`,
    /// changing nothing, if `status` was not written by this transaction.
    #[inline]
    pub fn flip(&self, status: &VersionStatus) -> bool {
        if status.writer().get() != self.own || self.own == 0 {
            return false;
        }
        status.set(self.state, self.ts);
        true
    }

    /// The state `flip` sets.
    pub fn outcome(&self) -> VersionState {
        let ts = Timestamp::new(self.ts);
        match self.state {
            PREPARED => VersionState::Prepared(ts),
            COMMITTED => VersionState::Committed(ts),
            _ => VersionState::Aborted,
        }
    }
}

/// Rolls back transaction `id`: `flip` marks its statuses aborted (a
/// storage that unlinks rolled-back versions does it inside `flip`, before
/// flipping each, while no other writer can prepend on top of one: see
/// `kv/txn.rs` `unlink_then_abort`), it leaves the running set
/// (unless prepare already took it out), and any prepare claim or
/// announcement is released.
fn roll_back<P: Protocol>(
    sess: &mut TxnSession<'_, P>,
    id: u64,
    prepared: bool,
    announced: bool,
    flip: impl FnOnce(&Completion<'_>),
) {
    let mgr = sess.mgr;
    let slot = sess.slot;
    let ctr = sess.ctr();
    flip(&Completion::new(id, ABORTED, 0));
    if prepared {
        // After the flips (none when dropped): a settler that sees the
        // entry cleared and the status still prepared knows nobody flipped
        // it, and settles it as aborted (`version.rs`, "Orderings").
        mgr.prepared.clear(slot);
    }
    if id != 0 && !prepared {
        mgr.proto.complete(slot, id, None, &mut sess.retired, ctr);
    }
    if announced {
        mgr.proto.release_prepare(slot);
    }
    ctr.rollbacks.bump(1);
}

/// The previous transaction on this session never ended: it was leaked
/// with `mem::forget`, so neither commit, rollback nor drop ran. Roll it
/// back now, as its drop would have, so its versions never become visible,
/// its id leaves the running set and its pins go.
#[cold]
pub(super) fn recover_leaked<P: Protocol>(
    sess: &mut TxnSession<'_, P>,
    flip: impl FnOnce(&Completion<'_>),
) {
    let open = sess.open;
    roll_back(sess, open.id, open.prepared, true, flip);
    sess.mgr.proto.end(sess.slot);
    sess.open = OpenTxn::default();
}
