//! [`TxnManager`] and [`TxnSession`]: the session table, the global
//! timestamps and the reclaim horizon, for any storage.

use super::protocol::Protocol;
use super::raw::descriptor::SessionRetired;
use super::snapshot::Snapshot;
use super::txn::Transaction;
use super::version::{Horizon, PreparedTable, VersionState, VersionStatus};
use super::LockFree;
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::error::Result;
use crate::stats::{Counters, Stats};
use crate::ts::Timestamp;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;

/// The transaction manager: snapshot machinery, session table, global
/// timestamps and reclaim horizon, knowing nothing of keys or values.
/// `Send + Sync`; share it by reference or `Arc`.
///
/// `P` is the snapshot machinery: [`LockFree`] unless you are benchmarking
/// against the read-write-lock baselines (`RwLockBaseline` and
/// `RwLockBaselinePatched`, feature `baseline`).
pub struct TxnManager<P: Protocol = LockFree> {
    pub(super) proto: P,
    /// One block per slot, plus one for the manager's own work.
    pub(super) counters: Box<[CachePadded<Counters>]>,
    /// The prepared transaction open on each slot, to settle the statuses
    /// of one dropped without rollback (`version.rs`, "Orderings").
    pub(super) prepared: PreparedTable,
    max_sessions: usize,
}

impl TxnManager<LockFree> {
    /// A lock-free manager with room for `max_sessions` sessions at once.
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`](crate::Error::ConfigOutOfRange) unless
    /// `max_sessions` is in `1..=`[`EngineConfig::MAX_SESSIONS`].
    pub fn new(max_sessions: usize) -> Result<TxnManager<LockFree>> {
        TxnManager::with_machinery(max_sessions)
    }
}

/// Who pins history, from [`TxnManager::pins`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionPin {
    /// The session's slot.
    pub slot: usize,
    /// The xmin of the snapshot it reads with (`None`: no transaction).
    pub snapshot_xmin: Option<u64>,
    /// Its read timestamp, if any.
    pub read_ts: Option<Timestamp>,
    /// How many transactions have completed since its snapshot's xmin
    /// (how far it holds back id-based pruning).
    pub xmin_lag: u64,
    /// How far its read timestamp is below the oldest timestamp's floor
    /// (how far it holds back timestamp-based pruning; 0 if not below).
    pub ts_lag: u64,
}

/// Counts a storage engine adds to [`TxnManager::stats`] (the machinery
/// counts everything else itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Count {
    /// Reads that met a prepared update and reported a prepare conflict
    /// ([`Stats::prepare_conflicts`]).
    PrepareConflicts,
    /// Failed compare-and-swaps installing a version
    /// ([`Stats::chain_cas_retries`]).
    ChainCasRetries,
    /// Versions unlinked by pruning or rollback and handed to the epoch
    /// collector ([`Stats::versions_pruned`]).
    VersionsPruned,
    /// Keys read: point reads plus keys a scan visited
    /// ([`Stats::reads`]).
    Reads,
    /// Versions those reads examined ([`Stats::versions_read`]).
    VersionsRead,
    /// Versions examined by commits (linking) and pruning
    /// ([`Stats::commit_versions_examined`]).
    CommitVersionsExamined,
}

#[inline]
pub(super) fn count_into(c: &Counters, what: Count, n: u64) {
    match what {
        Count::PrepareConflicts => c.prepare_conflicts.bump(n),
        Count::ChainCasRetries => c.chain_cas_retries.bump(n),
        Count::VersionsPruned => c.versions_pruned.bump(n),
        Count::Reads => c.reads.bump(n),
        Count::VersionsRead => c.versions_read.bump(n),
        Count::CommitVersionsExamined => c.commit_versions_examined.bump(n),
    }
}

impl<P: Protocol> TxnManager<P> {
    /// A manager on machinery `P` with room for `max_sessions` sessions.
    ///
    /// # Errors
    /// As [`TxnManager::new`].
    pub fn with_machinery(max_sessions: usize) -> Result<TxnManager<P>> {
        TxnManager::with_config(&EngineConfig {
            max_sessions,
            ..EngineConfig::default()
        })
    }

    /// A manager on machinery `P` built from `config` (its `max_sessions`
    /// and `asymmetric_fences`; the other fields are the store's).
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`](crate::Error::ConfigOutOfRange) for a
    /// field out of its bounds ([`EngineConfig::validate`], which checks
    /// the store's fields too); nothing is allocated.
    pub fn with_config(config: &EngineConfig) -> Result<TxnManager<P>> {
        config.validate()?;
        let max_sessions = config.max_sessions;
        Ok(TxnManager {
            proto: P::new(config),
            counters: (0..=max_sessions)
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            prepared: PreparedTable::new(max_sessions),
            max_sessions,
        })
    }

    /// The size of the session table.
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// Opens a session: claims a slot in the session table, released when
    /// the session drops. Use one session per thread.
    ///
    /// # Errors
    /// [`Error::SessionTableFull`](crate::Error::SessionTableFull) when
    /// every slot is taken.
    pub fn session(&self) -> Result<TxnSession<'_, P>> {
        let slot = self.proto.open_session()?;
        Ok(TxnSession {
            mgr: self,
            slot,
            snap: Snapshot::default(),
            retired: SessionRetired::default(),
            open: OpenTxn::default(),
            cur: super::txn::TxnCore::default(),
            _not_sync: PhantomData,
        })
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
    pub fn set_timestamps(&self, update: TimestampUpdate) -> Result<()> {
        self.proto.set_timestamps(&update)
    }

    /// Reports a global timestamp (`None` if it is not set / no reader).
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        self.proto.query_timestamp(kind)
    }

    /// Sums every session's counters. `versions_freed` is left at 0 (it is
    /// the storage's count; the bundled store fills it in).
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.counters.iter() {
            s.add(c);
        }
        // Relaxed: a report of owner-only counters.
        s.read_path_rmw = crate::sync::thread_rmw_count().map(|_| {
            self.counters
                .iter()
                .map(|c| c.read_rmw.load(crate::sync::Ordering::Relaxed))
                .sum()
        });
        s.sessions_open = self.proto.sessions_open();
        self.proto.add_stats(None, &mut s);
        s
    }

    /// Adds `n` to one of the storage's counters, in the manager's own
    /// block (for work done outside any session, such as a full prune).
    pub fn count(&self, what: Count, n: u64) {
        count_into(&self.counters[self.max_sessions], what, n);
    }

    /// The stable timestamp now ([`Timestamp::NONE`] if not set): one
    /// Acquire load, cheap enough for every commit (unlike
    /// [`query_timestamp`](Self::query_timestamp), which scans the session
    /// table). A store that keeps a per-key pointer at the newest version at
    /// or below stable (the bundled store's finger) moves it with this.
    #[inline]
    pub fn stable_timestamp(&self) -> Timestamp {
        self.proto.oldest_stable().1
    }

    /// The state of a version, knowing which writers are gone:
    /// [`VersionState::Aborted`] also for a version whose transaction was
    /// dropped without rollback (prepared: the word is settled to aborted
    /// now; in progress: its writer is below the current xmin, so it
    /// completed without committing). Otherwise as
    /// [`VersionStatus::state`]. Use it where you discard rolled-back
    /// versions (pruning); readers and writers need not, their
    /// [`ReadView`](super::ReadView) already knows.
    pub fn version_state(&self, status: &VersionStatus) -> VersionState {
        status.settled_state(&self.prepared, self.proto.current_xmin())
    }

    /// The reclaim horizon as last computed: what may be pruned now.
    #[inline]
    pub fn horizon(&self) -> Horizon {
        self.proto.horizon()
    }

    /// Recomputes the reclaim horizon (a scan of the session table; at most
    /// one runs at a time, a concurrent call returns at once).
    pub fn advance_horizon(&self) {
        self.proto
            .advance_horizon(&self.counters[self.max_sessions]);
    }

    /// Whether handshake 1 (pin versus horizon) runs on the asymmetric
    /// fence pair: see [`EngineConfig::asymmetric_fences`]. Always false for
    /// the lock baselines, which have no handshake.
    pub fn asymmetric_fences(&self) -> bool {
        self.proto.asymmetric_fences()
    }

    /// The pins every open session holds: which sessions hold history back,
    /// and by how much.
    pub fn pins(&self) -> Vec<SessionPin> {
        let h = self.proto.horizon();
        let floor_xmin = self.proto.current_xmin();
        let (oldest, _) = self.proto.oldest_stable();
        self.proto
            .pins()
            .into_iter()
            .map(|(slot, x, r)| SessionPin {
                slot,
                snapshot_xmin: (x != 0).then_some(x),
                read_ts: Timestamp::new(r).to_option(),
                xmin_lag: if x != 0 {
                    floor_xmin.saturating_sub(x)
                } else {
                    0
                },
                ts_lag: if r != 0 {
                    oldest.get().max(h.ts).saturating_sub(r)
                } else {
                    0
                },
            })
            .collect()
    }
}

/// What a session knows of its open transaction.
#[derive(Clone, Copy, Default)]
pub(super) struct OpenTxn {
    /// A transaction began and has not ended.
    pub(super) live: bool,
    /// Its id (0: none yet).
    pub(super) id: u64,
    /// It prepared (its id already left the running set).
    pub(super) prepared: bool,
}

/// A session: one slot in the session table. Begin transactions on it, one
/// at a time. `Send` (move it to the thread that uses it) but not `Sync`.
///
/// ```compile_fail
/// fn is_sync<T: Sync>() {}
/// is_sync::<snapshot_engine::machinery::TxnSession<'static>>();
/// ```
pub struct TxnSession<'m, P: Protocol = LockFree> {
    pub(super) mgr: &'m TxnManager<P>,
    pub(super) slot: usize,
    /// The cached snapshot, reused while the descriptor generation is
    /// unchanged.
    pub(super) snap: Snapshot,
    /// The descriptors this session's completions replaced, not yet handed
    /// to the collector (the lock-free machinery's; owned here, so only
    /// this session touches them).
    pub(super) retired: SessionRetired,
    /// The transaction open on this session, if any (to recover one that
    /// was leaked with `mem::forget`).
    pub(super) open: OpenTxn,
    /// The open transaction's state ([`Transaction`] is a pointer to the
    /// session).
    pub(super) cur: super::txn::TxnCore,
    _not_sync: PhantomData<Cell<()>>,
}

impl<'m, P: Protocol> TxnSession<'m, P> {
    /// Begins a transaction. If the previous one was leaked
    /// (`mem::forget`), it is rolled back first, as
    /// [`recover_leaked`](TxnSession::recover_leaked) with no statuses.
    ///
    /// # Errors
    /// An invalid read timestamp in `options` (out of range, older than
    /// oldest without `roundup_read`, or combined with `read_at_stable`).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Transaction<'_, 'm, P>> {
        Transaction::begin(self, options)
    }

    /// Was the previous transaction on this session leaked with
    /// `mem::forget` (neither commit, rollback nor drop ran)?
    #[inline]
    pub fn has_leaked(&self) -> bool {
        self.open.live
    }

    /// Rolls back a leaked transaction: `flip` gets an abort
    /// [`Completion`](super::Completion) for the statuses it wrote (before
    /// its id leaves the running set), then its claims and pins go. Returns
    /// whether there was one.
    pub fn recover_leaked(&mut self, flip: impl FnOnce(&super::Completion<'_>)) -> bool {
        if !self.open.live {
            return false;
        }
        super::txn::recover_leaked(self, flip);
        true
    }

    /// This session's slot in the session table.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The manager this session belongs to.
    pub fn manager(&self) -> &'m TxnManager<P> {
        self.mgr
    }

    /// Recomputes the reclaim horizon, counting the scan in this session's
    /// block.
    pub fn advance_horizon(&self) {
        self.mgr.proto.advance_horizon(self.ctr());
    }

    /// Adds `n` to one of the storage's counters in this session's block.
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        count_into(self.ctr(), what, n);
    }

    /// This session's own counters (every transaction it ran, since its
    /// slot was first used; blocks are never reset). `read_path_rmw` and
    /// `versions_freed` are engine-wide and left at their defaults here.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        s.add(self.ctr());
        self.mgr.proto.add_stats(Some(self.slot), &mut s);
        s
    }

    #[inline]
    pub(super) fn ctr(&self) -> &'m Counters {
        &self.mgr.counters[self.slot]
    }
}

impl<P: Protocol> Drop for TxnSession<'_, P> {
    fn drop(&mut self) {
        // Invariant 12: every slot is released exactly once; an open
        // transaction borrows the session, so it has already ended.
        if self.open.live {
            super::txn::recover_leaked(self, |_| {});
        }
        self.mgr.proto.close_session(self.slot, &mut self.retired);
    }
}
