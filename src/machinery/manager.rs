//! [`TxnManager`] and [`TxnSession`]: the session table, the global
//! timestamps and the reclaim horizon, for any storage.

use super::lockfree::LockFree;
use super::raw::descriptor::SessionRetired;
use super::rules::Machinery;
use super::snapshot::Snapshot;
use super::txn::Transaction;
use super::version::{Horizon, PreparedTable, VersionState, VersionStatus};
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::error::Result;
use crate::stats::{Counters, Stats};
use crate::ts::Timestamp;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;

/// The generic form of [`TxnManager`](crate::machinery::TxnManager), on
/// snapshot protocol `M` (only the workload driver and the tests choose
/// one).
pub struct TxnManager<M: Machinery = LockFree> {
    pub(super) machinery: M,
    /// One block per slot, plus one for the manager's own work.
    pub(super) counters: Box<[CachePadded<Counters>]>,
    /// The prepared transaction open on each slot, to settle the statuses
    /// of one dropped without rollback (`version.rs`, "Orderings").
    pub(super) prepared: PreparedTable,
    max_sessions: usize,
}

impl TxnManager<LockFree> {
    /// See [`TxnManager::new`](crate::machinery::TxnManager::new).
    pub fn new(max_sessions: usize) -> Result<TxnManager<LockFree>> {
        TxnManager::with_machinery(max_sessions)
    }
}

/// Who pins history, from
/// [`TxnManager::pins`](crate::machinery::TxnManager::pins).
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

/// Counts a storage engine adds to
/// [`TxnManager::stats`](crate::machinery::TxnManager::stats) (the
/// machinery counts everything else itself).
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
    /// Gated commits and prepares that waited for the serializable gate
    /// ([`Stats::gate_waits`]).
    GateWaits,
    /// Nanoseconds they waited ([`Stats::gate_wait_ns`]).
    GateWaitNs,
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
        Count::GateWaits => c.gate_waits.bump(n),
        Count::GateWaitNs => c.gate_wait_ns.bump(n),
    }
}

impl<M: Machinery> TxnManager<M> {
    /// A manager on machinery `M` with room for `max_sessions` sessions.
    ///
    /// # Errors
    /// As [`TxnManager::new`].
    pub fn with_machinery(max_sessions: usize) -> Result<TxnManager<M>> {
        TxnManager::with_config(&EngineConfig {
            max_sessions,
            ..EngineConfig::default()
        })
    }

    /// See [`TxnManager::with_config`](crate::machinery::TxnManager::with_config).
    pub fn with_config(config: &EngineConfig) -> Result<TxnManager<M>> {
        config.validate()?;
        let max_sessions = config.max_sessions;
        Ok(TxnManager {
            machinery: M::new(config),
            counters: (0..=max_sessions)
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            prepared: PreparedTable::new(max_sessions),
            max_sessions,
        })
    }

    /// See [`TxnManager::max_sessions`](crate::machinery::TxnManager::max_sessions).
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// See [`TxnManager::session`](crate::machinery::TxnManager::session).
    pub fn session(&self) -> Result<TxnSession<'_, M>> {
        let slot = self.machinery.open_session()?;
        Ok(TxnSession {
            mgr: self,
            slot,
            ctr: &self.counters[slot],
            snap: Snapshot::default(),
            retired: SessionRetired::default(),
            open: OpenTxn::default(),
            cur: super::txn::TxnCore::default(),
            _not_sync: PhantomData,
        })
    }

    /// See [`TxnManager::set_timestamps`](crate::machinery::TxnManager::set_timestamps).
    pub fn set_timestamps(&self, update: TimestampUpdate) -> Result<()> {
        self.machinery.set_timestamps(&update)
    }

    /// See [`TxnManager::query_timestamp`](crate::machinery::TxnManager::query_timestamp).
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        self.machinery.query_timestamp(kind)
    }

    /// See [`TxnManager::stats`](crate::machinery::TxnManager::stats).
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
        s.sessions_open = self.machinery.sessions_open();
        self.machinery.add_stats(None, &mut s);
        s
    }

    /// See [`TxnManager::count`](crate::machinery::TxnManager::count).
    pub fn count(&self, what: Count, n: u64) {
        count_into(&self.counters[self.max_sessions], what, n);
    }

    /// See [`TxnManager::stable_timestamp`](crate::machinery::TxnManager::stable_timestamp).
    #[inline]
    pub fn stable_timestamp(&self) -> Timestamp {
        self.machinery.oldest_stable().1
    }

    /// See [`TxnManager::version_state`](crate::machinery::TxnManager::version_state).
    pub fn version_state(&self, status: &VersionStatus) -> VersionState {
        status.settled_state(&self.prepared, self.machinery.current_xmin())
    }

    /// See [`TxnManager::horizon`](crate::machinery::TxnManager::horizon).
    #[inline]
    pub fn horizon(&self) -> Horizon {
        self.machinery.horizon()
    }

    /// See [`TxnManager::advance_horizon`](crate::machinery::TxnManager::advance_horizon).
    pub fn advance_horizon(&self) {
        self.machinery
            .advance_horizon(&self.counters[self.max_sessions]);
    }

    /// See [`TxnManager::asymmetric_fences`](crate::machinery::TxnManager::asymmetric_fences).
    pub fn asymmetric_fences(&self) -> bool {
        self.machinery.asymmetric_fences()
    }

    /// See [`TxnManager::pins`](crate::machinery::TxnManager::pins).
    pub fn pins(&self) -> Vec<SessionPin> {
        let h = self.machinery.horizon();
        let floor_xmin = self.machinery.current_xmin();
        let (oldest, _) = self.machinery.oldest_stable();
        self.machinery
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

/// The generic form of [`TxnSession`](crate::machinery::TxnSession), on
/// snapshot protocol `M`.
pub struct TxnSession<'m, M: Machinery = LockFree> {
    pub(super) mgr: &'m TxnManager<M>,
    pub(super) slot: usize,
    /// The slot's counters (`mgr.counters[slot]`), found once.
    ctr: &'m Counters,
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

impl<'m, M: Machinery> TxnSession<'m, M> {
    /// See [`TxnSession::begin`](crate::machinery::TxnSession::begin).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Transaction<'_, 'm, M>> {
        Transaction::begin(self, options)
    }

    /// See [`TxnSession::has_leaked`](crate::machinery::TxnSession::has_leaked).
    #[inline]
    pub fn has_leaked(&self) -> bool {
        self.open.live
    }

    /// See [`TxnSession::recover_leaked`](crate::machinery::TxnSession::recover_leaked).
    pub fn recover_leaked(&mut self, flip: impl FnOnce(&super::Completion<'_>)) -> bool {
        if !self.open.live {
            return false;
        }
        super::txn::recover_leaked(self, flip);
        true
    }

    /// See [`TxnSession::slot`](crate::machinery::TxnSession::slot).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// See [`TxnSession::manager`](crate::machinery::TxnSession::manager).
    pub fn manager(&self) -> &'m TxnManager<M> {
        self.mgr
    }

    /// See [`TxnSession::advance_horizon`](crate::machinery::TxnSession::advance_horizon).
    pub fn advance_horizon(&self) {
        self.mgr.machinery.advance_horizon(self.ctr());
    }

    /// See [`TxnSession::count`](crate::machinery::TxnSession::count).
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        count_into(self.ctr(), what, n);
    }

    /// See [`TxnSession::stats`](crate::machinery::TxnSession::stats).
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        s.add(self.ctr());
        self.mgr.machinery.add_stats(Some(self.slot), &mut s);
        s
    }

    #[inline]
    pub(super) fn ctr(&self) -> &'m Counters {
        self.ctr
    }
}

impl<M: Machinery> Drop for TxnSession<'_, M> {
    fn drop(&mut self) {
        // Invariant 12: every slot is released exactly once; an open
        // transaction borrows the session, so it has already ended.
        if self.open.live {
            super::txn::recover_leaked(self, |_| {});
        }
        self.mgr
            .machinery
            .close_session(self.slot, &mut self.retired);
    }
}
