//! [`TxnManager`], [`TxnSession`] and [`Transaction`] as users name them:
//! each a `repr(transparent)` newtype over its generic form (`manager.rs`,
//! `txn.rs`) on the lock-free machinery. The generic forms take the
//! snapshot protocol as a type parameter so that the workload driver and
//! the tests can run the read-write-lock baselines through the same code
//! (`with_machinery`); no user chooses one, so these carry none. Every
//! method forwards, `#[inline]`: the code that runs is the generic form's.

use super::raw::plain as cast;
use super::with_machinery as generic;
use super::with_machinery::LockFree;
use super::{Completion, Count, Horizon, ReadView, SessionPin};
use super::{VersionState, VersionStatus};
use crate::config::{CommitOptions, EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::error::Result;
use crate::stats::Stats;
use crate::ts::{Timestamp, TxnId};

/// The transaction manager: snapshot machinery, session table, global
/// timestamps and reclaim horizon, knowing nothing of keys or values.
/// `Send + Sync`; share it by reference or `Arc`.
#[repr(transparent)]
pub struct TxnManager(generic::TxnManager<LockFree>);

impl TxnManager {
    /// The plain manager `g` is (the same object).
    #[inline]
    pub(crate) fn from_generic(g: &generic::TxnManager<LockFree>) -> &TxnManager {
        cast::manager(g)
    }

    /// A lock-free manager with room for `max_sessions` sessions at once.
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`](crate::Error::ConfigOutOfRange) unless
    /// `max_sessions` is in `1..=`[`EngineConfig::MAX_SESSIONS`].
    #[inline]
    pub fn new(max_sessions: usize) -> Result<TxnManager> {
        generic::TxnManager::new(max_sessions).map(TxnManager)
    }

    /// A lock-free manager built from `config` (its `max_sessions`
    /// and `asymmetric_fences`; the other fields are the store's).
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`](crate::Error::ConfigOutOfRange) for a
    /// field out of its bounds ([`EngineConfig::validate`], which checks
    /// the store's fields too); nothing is allocated.
    #[inline]
    pub fn with_config(config: &EngineConfig) -> Result<TxnManager> {
        generic::TxnManager::with_config(config).map(TxnManager)
    }

    /// The size of the session table.
    #[inline]
    pub fn max_sessions(&self) -> usize {
        self.0.max_sessions()
    }

    /// Opens a session: claims a slot in the session table, released when
    /// the session drops. Use one session per thread.
    ///
    /// # Errors
    /// [`Error::SessionTableFull`](crate::Error::SessionTableFull) when
    /// every slot is taken.
    #[inline]
    pub fn session(&self) -> Result<TxnSession<'_>> {
        self.0.session().map(TxnSession)
    }

    /// Sets global timestamps, with WiredTiger's rules: oldest and stable
    /// never move backwards and oldest never passes stable; stable never
    /// passes a prepared transaction's announced durable timestamp. Raising
    /// stable waits for commits in flight at or below it.
    ///
    /// # Errors
    /// A timestamp out of range or moving backwards, oldest after stable, or
    /// stable past a prepared transaction's durable timestamp; nothing
    /// changes.
    #[inline]
    pub fn set_timestamps(&self, update: TimestampUpdate) -> Result<()> {
        self.0.set_timestamps(update)
    }

    /// Reports a global timestamp (`None` if it is not set / no reader).
    #[inline]
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        self.0.query_timestamp(kind)
    }

    /// Sums every session's counters. `versions_freed` is left at 0 (it is
    /// the storage's count; the bundled store fills it in).
    #[inline]
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }

    /// Adds `n` to one of the storage's counters, in the manager's own
    /// block (for work done outside any session, such as a full prune).
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        self.0.count(what, n)
    }

    /// The stable timestamp now ([`Timestamp::NONE`] if not set): one
    /// Acquire load, cheap enough for every commit (unlike
    /// [`query_timestamp`](Self::query_timestamp), which scans the session
    /// table). A store that keeps a per-key pointer at the newest version at
    /// or below stable (the bundled store's finger) moves it with this.
    #[inline]
    pub fn stable_timestamp(&self) -> Timestamp {
        self.0.stable_timestamp()
    }

    /// The state of a version, knowing which writers are gone:
    /// [`VersionState::Aborted`] also for a version whose transaction was
    /// dropped without rollback (prepared: the word is settled to aborted
    /// now; in progress: its writer is below the current xmin, so it
    /// completed without committing). Otherwise as
    /// [`VersionStatus::state`]. Use it where you discard rolled-back
    /// versions (pruning); readers and writers need not, their
    /// [`ReadView`](super::ReadView) already knows.
    #[inline]
    pub fn version_state(&self, status: &VersionStatus) -> VersionState {
        self.0.version_state(status)
    }

    /// The reclaim horizon as last computed: what may be pruned now.
    #[inline]
    pub fn horizon(&self) -> Horizon {
        self.0.horizon()
    }

    /// Recomputes the reclaim horizon (a scan of the session table; at most
    /// one runs at a time, a concurrent call returns at once).
    #[inline]
    pub fn advance_horizon(&self) {
        self.0.advance_horizon()
    }

    /// Whether handshake 1 (pin versus horizon) runs on the asymmetric
    /// fence pair: see [`EngineConfig::asymmetric_fences`]. Always false for
    /// the lock baselines, which have no handshake.
    #[inline]
    pub fn asymmetric_fences(&self) -> bool {
        self.0.asymmetric_fences()
    }

    /// The pins every open session holds: which sessions hold history back,
    /// and by how much.
    #[inline]
    pub fn pins(&self) -> Vec<SessionPin> {
        self.0.pins()
    }
}

/// A session: one slot in the session table. Begin transactions on it, one
/// at a time. `Send` (move it to the thread that uses it) but not `Sync`.
///
/// ```compile_fail
/// fn is_sync<T: Sync>() {}
/// is_sync::<snapshot_engine::machinery::TxnSession<'static>>();
/// ```
#[repr(transparent)]
pub struct TxnSession<'m>(generic::TxnSession<'m, LockFree>);

impl<'m> TxnSession<'m> {
    /// Begins a transaction. If the previous one was leaked
    /// (`mem::forget`), it is rolled back first, as
    /// [`recover_leaked`](TxnSession::recover_leaked) with no statuses.
    ///
    /// # Errors
    /// An invalid read timestamp in `options` (out of range, older than
    /// oldest without `roundup_read`, or combined with `read_at_stable`).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Transaction<'_, 'm>> {
        self.0.begin(options).map(Transaction)
    }

    /// Was the previous transaction on this session leaked with
    /// `mem::forget` (neither commit, rollback nor drop ran)?
    #[inline]
    pub fn has_leaked(&self) -> bool {
        self.0.has_leaked()
    }

    /// Rolls back a leaked transaction: `flip` gets a rollback
    /// [`Completion`](super::Completion) for the statuses it wrote (before
    /// its id leaves the running set), then its claims and pins go. Returns
    /// whether there was one.
    #[inline]
    pub fn recover_leaked(&mut self, flip: impl FnOnce(&Completion<'_>)) -> bool {
        self.0.recover_leaked(flip)
    }

    /// This session's slot in the session table.
    #[inline]
    pub fn slot(&self) -> usize {
        self.0.slot()
    }

    /// The manager this session belongs to.
    #[inline]
    pub fn manager(&self) -> &'m TxnManager {
        TxnManager::from_generic(self.0.manager())
    }

    /// Recomputes the reclaim horizon, counting the scan in this session's
    /// block.
    #[inline]
    pub fn advance_horizon(&self) {
        self.0.advance_horizon()
    }

    /// Adds `n` to one of the storage's counters in this session's block.
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        self.0.count(what, n)
    }

    /// This session's own counters (every transaction it ran, since its
    /// slot was first used; blocks are never reset). `read_path_rmw` and
    /// `versions_freed` are engine-wide and left at their defaults here.
    #[inline]
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }
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
#[repr(transparent)]
pub struct Transaction<'s, 'm>(generic::Transaction<'s, 'm, LockFree>);

impl<'m> Transaction<'_, 'm> {
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
    #[inline]
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.0.take_snapshot()
    }

    /// Has the transaction taken its snapshot (or, with `read_at_stable`,
    /// its stable view) yet? See [`Transaction::take_snapshot`].
    #[inline]
    pub fn has_snapshot(&self) -> bool {
        self.0.has_snapshot()
    }

    /// This transaction's id: [`TxnId::NONE`] until its first write.
    #[inline]
    pub fn id(&self) -> TxnId {
        self.0.id()
    }

    /// The read timestamp in force ([`Timestamp::NONE`] if none). For a
    /// `read_at_stable` transaction, the stable timestamp it reads at.
    #[inline]
    pub fn read_timestamp(&self) -> Timestamp {
        self.0.read_timestamp()
    }

    /// The options it began with.
    #[inline]
    pub fn options(&self) -> &TxnOptions {
        self.0.options()
    }

    /// Is the transaction still open (not committed, rolled back or
    /// prepared-and-resolved)?
    #[inline]
    pub fn is_open(&self) -> bool {
        self.0.is_open()
    }

    /// Is it prepared ([`Transaction::prepare`] succeeded) and not yet
    /// committed or rolled back?
    #[inline]
    pub fn is_prepared(&self) -> bool {
        self.0.is_prepared()
    }

    /// The durable timestamp set with
    /// [`Transaction::set_durable_timestamp`] ([`Timestamp::NONE`]: none),
    /// which a prepared commit uses unless [`CommitOptions::durable_ts`]
    /// gives another.
    #[inline]
    pub fn durable_timestamp(&self) -> Timestamp {
        self.0.durable_timestamp()
    }

    /// The session it runs on.
    #[inline]
    pub fn session(&self) -> &TxnSession<'m> {
        cast::session(self.0.session())
    }

    /// The manager it belongs to.
    #[inline]
    pub fn manager(&self) -> &'m TxnManager {
        TxnManager::from_generic(self.0.manager())
    }

    /// Adds `n` to one of the storage's counters in the session's block.
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        self.0.count(what, n)
    }

    /// Is the transaction usable for reads and writes?
    ///
    /// # Errors
    /// [`Error::MustRollBack`](crate::Error::MustRollBack) after a write conflict,
    /// [`Error::TransactionPrepared`](crate::Error::TransactionPrepared) after prepare,
    /// [`Error::TransactionFinished`](crate::Error::TransactionFinished) after commit or rollback.
    #[inline]
    pub fn check_usable(&self) -> Result<()> {
        self.0.check_usable()
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
        self.0.set_read_timestamp(ts)
    }

    /// The view to read with now. The transaction's first call takes its snapshot
    /// (and publishes its pin); with
    /// [`Isolation::ReadCommitted`](crate::Isolation::ReadCommitted) every later
    /// call takes a fresh one (one load when nothing completed since).
    ///
    /// # Errors
    /// As [`Transaction::check_usable`].
    #[inline]
    pub fn read_view(&mut self) -> Result<ReadView<'_>> {
        self.0.read_view()
    }

    /// May this transaction write?
    ///
    /// # Errors
    /// As [`Transaction::check_usable`], and
    /// [`Error::ReadOnlyTransaction`](crate::Error::ReadOnlyTransaction) for a
    /// `read_only` or `read_at_stable` transaction or one that ignores prepared
    /// updates.
    #[inline]
    pub fn check_writable(&self) -> Result<()> {
        self.0.check_writable()
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
        self.0.new_version()
    }

    /// Records a write-write conflict ([`WriteCheck::Conflict`](super::WriteCheck::Conflict)):
    /// from now on the transaction may only roll back (every other call is
    /// [`Error::MustRollBack`](crate::Error::MustRollBack)).
    #[inline]
    pub fn mark_write_conflict(&mut self) {
        self.0.mark_write_conflict()
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
    /// [`Error::CommitTimestampAlreadySet`](crate::Error::CommitTimestampAlreadySet)
    /// for a value other than the one already set (after rounding), prepared or
    /// not; otherwise the commit-timestamp errors of the rules above.
    #[inline]
    pub fn set_commit_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.0.set_commit_timestamp(ts)
    }

    /// Announces a prepared transaction's durable timestamp before it
    /// resolves: it must be after stable and at or above a commit timestamp
    /// already set, and becomes the durable timestamp `commit` uses unless
    /// [`CommitOptions::durable_ts`] gives another. Stable may not pass it until
    /// the transaction commits or rolls back
    /// ([`Error::StablePastPreparedDurable`](crate::Error::StablePastPreparedDurable));
    /// `all_durable` stays below it. Setting it again replaces it (a refused value
    /// keeps the old one).
    ///
    /// # Errors
    /// The transaction is not prepared; the timestamp is 0 or out of range,
    /// below the commit timestamp, or not after stable.
    #[inline]
    pub fn set_durable_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.0.set_durable_timestamp(ts)
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
    #[inline]
    pub fn prepare(
        &mut self,
        ts: impl Into<Timestamp>,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<Timestamp> {
        self.0.prepare(ts, flip)
    }

    /// Commits. With a commit timestamp (here or set earlier) it must be
    /// after stable and at or above oldest and the read timestamp; a
    /// prepared transaction needs one at or above its prepare timestamp
    /// (stable and oldest do not bound it), and its durable timestamp (given
    /// here, else the one set with `set_durable_timestamp`, else the commit
    /// timestamp) must be at or above it and after stable. A timestamp error
    /// leaves the transaction open and usable;
    /// a transaction that hit a write conflict is rolled back (`flip` gets
    /// a rollback completion) and gets [`Error::MustRollBack`](crate::Error::MustRollBack).
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
    /// A timestamp that breaks a rule above (the transaction stays open
    /// and usable, `flip` not called);
    /// [`Error::MustRollBack`](crate::Error::MustRollBack) after a write conflict;
    /// [`Error::TransactionFinished`](crate::Error::TransactionFinished).
    #[inline]
    pub fn commit(
        &mut self,
        opts: CommitOptions,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<()> {
        self.0.commit(opts, flip)
    }

    /// Rolls back: the transaction's writes are never seen by anyone.
    /// `flip` gets a [`Completion`] that marks the statuses it is given
    /// aborted, before the transaction leaves the running set; afterwards
    /// you may unlink and retire those versions ([`epoch`](super::epoch)).
    /// A transaction with no id (it never called
    /// [`new_version`](Transaction::new_version)) and nothing announced
    /// rolls back on the fast path, without calling `flip`.
    ///
    /// # Errors
    /// [`Error::TransactionFinished`](crate::Error::TransactionFinished) if it already ended.
    #[inline]
    pub fn rollback(&mut self, flip: impl FnOnce(&Completion<'_>)) -> Result<()> {
        self.0.rollback(flip)
    }
}
