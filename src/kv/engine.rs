//! [`Engine`] and [`Session`]: the bundled key-value store on the public
//! machinery layer.

use super::txn::{self, Txn};
use crate::config::{CommitOptions, EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::durability::CommitMode;
use crate::error::{Error, Result};
use crate::machinery::with_machinery::{LockFree, Machinery, TxnManager, TxnSession};
use crate::machinery::{Count, SessionPin};
use crate::stats::Stats;
use crate::store::{Registry, Store, WriteSet};
use crate::sync::Ordering;
use crate::ts::Timestamp;
use std::sync::Arc;

/// The generic form of [`Engine`](crate::Engine), on snapshot protocol
/// `M` (only the workload driver and the tests choose one).
pub struct Engine<M: Machinery = LockFree> {
    pub(crate) mgr: TxnManager<M>,
    pub(crate) store: Store,
    pub(crate) config: EngineConfig,
    /// The commit log and checkpoints of an engine from `Engine::open`
    /// (`None`: in memory).
    pub(crate) durable: Option<crate::durability::Opened>,
    /// Prepared commits durable above stable, for `rollback_to_stable`.
    pub(crate) prepared_durable: super::PreparedDurable,
    /// The serializable commit gate (`kv/serializable.rs`).
    pub(crate) serial: super::serializable::Gate,
    /// The live named tables (`store/table.rs`).
    pub(crate) tables: Registry,
    /// This engine's process-wide unique id, carried by its tables'
    /// handles (so another engine's are refused).
    pub(crate) instance: u64,
}

impl Engine<LockFree> {
    /// See [`Engine::new`](crate::Engine::new).
    pub fn new(config: EngineConfig) -> Result<Engine<LockFree>> {
        Engine::with_machinery(config)
    }
}

/// A lock-free engine with [`EngineConfig::default`], which is valid.
impl Default for Engine<LockFree> {
    fn default() -> Self {
        Engine::new(EngineConfig::default()).expect("the default EngineConfig is valid")
    }
}

impl<M: Machinery> Engine<M> {
    /// An engine on machinery `M`.
    ///
    /// # Errors
    /// As [`Engine::new`].
    pub fn with_machinery(config: EngineConfig) -> Result<Engine<M>> {
        Ok(Engine {
            mgr: TxnManager::with_config(&config)?,
            store: Store::new(config.stable_sweep),
            config,
            durable: None,
            prepared_durable: Default::default(),
            serial: Default::default(),
            tables: Registry::default(),
            instance: crate::sync::unique_id(),
        })
    }

    /// See [`Engine::session`](crate::Engine::session).
    pub fn session(&self) -> Result<Session<'_, M>> {
        Session::open(self, None)
    }

    /// See [`Engine::owned_session`](crate::Engine::owned_session).
    pub fn owned_session(self: &Arc<Self>) -> Result<OwnedSession<M>> {
        super::raw::open_owned(self)
    }

    /// See [`Engine::set_timestamps`](crate::Engine::set_timestamps).
    pub fn set_timestamps(&self, update: TimestampUpdate) -> Result<()> {
        self.mgr.set_timestamps(update)?;
        if let Some(d) = &self.durable {
            d.note_stable(self.mgr.stable_timestamp());
        }
        Ok(())
    }

    /// See [`Engine::query_timestamp`](crate::Engine::query_timestamp).
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        if kind == TimestampKind::Recovery {
            return self.durable.as_ref()?.recovery_ts().to_option();
        }
        self.mgr.query_timestamp(kind)
    }

    /// See [`Engine::checkpoint`](crate::Engine::checkpoint).
    pub fn checkpoint(&self) -> Result<crate::durability::CheckpointReport> {
        self.durable.as_ref().ok_or(Error::NotDurable)?.checkpoint()
    }

    /// See [`Engine::backup`](crate::Engine::backup).
    pub fn backup(&self, dir: &std::path::Path) -> Result<crate::durability::BackupReport> {
        self.durable.as_ref().ok_or(Error::NotDurable)?.backup(dir)
    }

    /// See [`Engine::recovery_report`](crate::Engine::recovery_report).
    pub fn recovery_report(&self) -> Option<&crate::durability::RecoveryReport> {
        self.durable.as_ref().map(|d| d.report())
    }

    /// See [`Engine::checkpointer_status`](crate::Engine::checkpointer_status).
    pub fn checkpointer_status(&self) -> Option<crate::durability::CheckpointerStatus> {
        self.durable.as_ref().map(|d| d.checkpointer_status())
    }

    /// See [`Engine::log_stats`](crate::Engine::log_stats).
    pub fn log_stats(&self) -> Option<crate::durability::LogStats> {
        self.durable.as_ref().map(|d| d.log_stats())
    }

    /// See [`Engine::stats`](crate::Engine::stats).
    pub fn stats(&self) -> Stats {
        let mut s = self.mgr.stats();
        s.versions_freed = self.store.freed.load(Ordering::Relaxed);
        s
    }

    /// See [`Engine::collect`](crate::Engine::collect).
    pub fn collect(&self) {
        self.mgr.advance_horizon();
        let h = self.mgr.horizon();
        let stable = self.mgr.stable_timestamp();
        let n = self.store.collect(&self.tables.live(), h, stable);
        self.mgr.count(Count::VersionsPruned, n.cut);
        self.mgr.count(Count::CommitVersionsExamined, n.examined);
    }

    /// See [`Engine::pins`](crate::Engine::pins).
    pub fn pins(&self) -> Vec<SessionPin> {
        self.mgr.pins()
    }

    /// See [`Engine::chain_len`](crate::Engine::chain_len).
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain_len(key)
    }

    /// See [`Engine::asymmetric_fences`](crate::Engine::asymmetric_fences).
    pub fn asymmetric_fences(&self) -> bool {
        self.mgr.asymmetric_fences()
    }

    /// See [`Engine::config`](crate::Engine::config).
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// See [`Engine::manager`](crate::Engine::manager).
    pub fn manager(&self) -> &TxnManager<M> {
        &self.mgr
    }
}

/// The generic form of [`Session`](crate::Session), on snapshot protocol
/// `M` (only the workload driver and the tests choose one).
pub struct Session<'e, M: Machinery = LockFree> {
    // Field order matters (invariant 14): `msess` and `data` borrow the
    // engine that `owner` keeps alive, so they drop first.
    pub(crate) msess: TxnSession<'e, M>,
    pub(crate) data: SessionData<'e, M>,
    /// The engine's `Arc` for an owned session; `None` for a borrowed one.
    owner: Option<Arc<Engine<M>>>,
    /// Not `Sync`, named here so the compiler's error says `Session`.
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

/// The generic form of [`OwnedSession`](crate::OwnedSession).
pub type OwnedSession<M = LockFree> = Session<'static, M>;

/// The store's half of a session, borrowed by its open [`Txn`].
pub(crate) struct SessionData<'e, M: Machinery> {
    pub(crate) engine: &'e Engine<M>,
    /// The open transaction's writes and the pruned tails not yet handed
    /// to the collector.
    pub(crate) writes: WriteSet<'e>,
    /// Commits since the last horizon refresh.
    pub(crate) commits: u32,
    /// The open transaction's live savepoints, oldest first: (id, writes
    /// before it). Cleared at begin.
    pub(crate) savepoints: Vec<(u64, usize)>,
    /// Savepoint ids handed out on this session (never reused, so a stale
    /// savepoint from an earlier transaction is refused).
    pub(crate) savepoint_ids: u64,
    /// This session's process-wide unique token, carried by its savepoints
    /// (so another session's, or an earlier session's, is refused).
    pub(crate) token: u64,
    /// How the open transaction's commit is logged, when not as the
    /// engine's durability says ([`Txn::set_durability`],
    /// [`Txn::commit_async`]).
    pub(crate) durability: Option<CommitMode>,
    /// The open transaction's serializable tracking (`kv/serializable.rs`).
    pub(crate) serial: super::serializable::Tracker<'e>,
}

impl<'e, M: Machinery> Session<'e, M> {
    pub(super) fn open(engine: &'e Engine<M>, owner: Option<Arc<Engine<M>>>) -> Result<Self> {
        Ok(Session {
            msess: engine.mgr.session()?,
            data: SessionData {
                engine,
                // A durable engine's write set keeps each write's key, for
                // its log record.
                writes: WriteSet::new(&engine.store),
                commits: 0,
                savepoints: Vec::new(),
                savepoint_ids: 0,
                token: crate::sync::unique_id(),
                durability: None,
                serial: super::serializable::Tracker::new(&engine.serial),
            },
            owner,
            _not_sync: std::marker::PhantomData,
        })
    }

    /// See [`Session::begin`](crate::Session::begin).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Txn<'_, 'e, M>> {
        if self.msess.has_leaked() {
            txn::recover_leaked(&mut self.msess, &mut self.data);
        }
        Txn::begin(&mut self.msess, &mut self.data, options)
    }

    /// See [`Session::transaction`](crate::Session::transaction).
    pub fn transaction<R>(
        &mut self,
        options: &TxnOptions,
        mut f: impl FnMut(&mut Txn<'_, 'e, M>) -> Result<R>,
    ) -> Result<R> {
        retry_conflicts(|| {
            let mut txn = self.begin(options)?;
            f(&mut txn).and_then(|r| txn.commit(CommitOptions::default()).map(|()| r))
        })
    }

    /// See [`Session::TRANSACTION_ATTEMPTS`](crate::Session::TRANSACTION_ATTEMPTS).
    pub const TRANSACTION_ATTEMPTS: u32 = crate::Session::TRANSACTION_ATTEMPTS;

    /// See [`Session::slot`](crate::Session::slot).
    pub fn slot(&self) -> usize {
        self.msess.slot()
    }

    /// See [`Session::engine`](crate::Session::engine).
    pub fn engine(&self) -> &Engine<M> {
        self.data.engine
    }

    /// See [`Session::is_owned`](crate::Session::is_owned).
    pub fn is_owned(&self) -> bool {
        self.owner.is_some()
    }

    /// See [`Session::stats`](crate::Session::stats).
    pub fn stats(&self) -> Stats {
        self.msess.stats()
    }
}

/// `Session::transaction`'s loop (of both forms of `Session`): runs
/// `attempt` (begin, the caller's closure, commit) until it returns
/// anything but [`Error::WriteConflict`], the [`Error::MustRollBack`] that
/// follows one, or a serializable conflict, at most [`Session::TRANSACTION_ATTEMPTS`] times, backing
/// off between attempts.
pub(super) fn retry_conflicts<R>(mut attempt: impl FnMut() -> Result<R>) -> Result<R> {
    let mut n = 1;
    loop {
        match attempt() {
            Err(
                Error::WriteConflict { .. }
                | Error::MustRollBack
                | Error::SerializationConflict { .. }
                | Error::RangeConflict { .. }
                | Error::PreparedReadConflict { .. },
            ) if n < crate::Session::TRANSACTION_ATTEMPTS => {
                conflict_backoff(n);
                n += 1;
            }
            r => return r,
        }
    }
}

/// The wait after the `attempt`-th conflicting attempt of
/// `Session::transaction`. The transaction that holds the contended key
/// may be descheduled (more runnable threads than cores), and retrying at
/// once only spends the attempts before it runs again: yield for the first
/// few, then sleep, doubling up to a cap.
fn conflict_backoff(attempt: u32) {
    const YIELDS: u32 = 3;
    const FIRST_SLEEP_US: u64 = 10;
    const MAX_SLEEP_US: u64 = 2_000;
    if attempt <= YIELDS {
        std::thread::yield_now();
    } else {
        let us = (FIRST_SLEEP_US << (attempt - YIELDS - 1).min(16)).min(MAX_SLEEP_US);
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

impl<M: Machinery> Drop for Session<'_, M> {
    fn drop(&mut self) {
        // Invariant 12: every slot is released exactly once (by the
        // machinery session, dropped after this); an open transaction
        // borrows the session, so it has already ended, unless leaked.
        if self.msess.has_leaked() {
            txn::recover_leaked(&mut self.msess, &mut self.data);
        }
        self.data.writes.flush_tails();
    }
}
