//! [`Engine`] and [`Session`]: the bundled key-value store on the public
//! machinery layer.

use super::txn::{self, Txn};
use crate::config::{CommitOptions, EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::error::{Error, Result};
use crate::machinery::{Count, LockFree, Protocol, SessionPin, TxnManager, TxnSession};
use crate::stats::Stats;
use crate::store::{Store, WriteSet};
use crate::sync::Ordering;
use crate::ts::Timestamp;
use std::sync::Arc;

/// The transaction engine: snapshot machinery, session table, timestamps and
/// the MVCC key-value store. `Send + Sync`; share it by reference or `Arc`.
///
/// Sessions come in two forms of one type: [`Engine::session`] borrows the
/// engine (`Session<'e>`, for `thread::scope` and short-lived work), and
/// [`Engine::owned_session`] holds an `Arc` to it ([`OwnedSession`], which is
/// `'static`: store it in a struct or a pool, move it into `thread::spawn`
/// or an async task).
///
/// `P` is the snapshot machinery: [`LockFree`] unless you are benchmarking
/// against the lock baseline.
pub struct Engine<P: Protocol = LockFree> {
    pub(crate) mgr: TxnManager<P>,
    pub(crate) store: Store,
    pub(crate) config: EngineConfig,
    /// The commit log and checkpoints of an engine from `Engine::open`
    /// (`None`: in memory).
    pub(crate) durable: Option<crate::durable::Opened>,
    /// Prepared commits durable above stable, for `rollback_to_stable`.
    pub(crate) prepared_durable: super::PreparedDurable,
}

impl Engine<LockFree> {
    /// A lock-free engine.
    ///
    /// ```
    /// # use snapshot_engine::{Engine, EngineConfig};
    /// let engine = Engine::new(EngineConfig { max_sessions: 16, ..EngineConfig::default() })?;
    /// assert!(Engine::new(EngineConfig { max_sessions: 1 << 40, ..EngineConfig::default() }).is_err());
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`](crate::Error::ConfigOutOfRange) for a
    /// field of `config` out of its bounds ([`EngineConfig::validate`]).
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

impl<P: Protocol> Engine<P> {
    /// An engine on machinery `P`.
    ///
    /// # Errors
    /// As [`Engine::new`].
    pub fn with_machinery(config: EngineConfig) -> Result<Engine<P>> {
        Ok(Engine {
            mgr: TxnManager::with_config(&config)?,
            store: Store::new(),
            config,
            durable: None,
            prepared_durable: Default::default(),
        })
    }

    /// Opens a session: claims a slot in the session table, released when
    /// the session drops. Use one session per thread.
    ///
    /// # Errors
    /// [`Error::SessionTableFull`](crate::Error::SessionTableFull) when
    /// every slot is taken.
    pub fn session(&self) -> Result<Session<'_, P>> {
        Session::open(self, None)
    }

    /// Opens a session that holds its own `Arc` to the engine: an
    /// [`OwnedSession`], `Send` and `'static`, so it can live in a struct
    /// beside the `Arc<Engine>`, in a pool, or move into `thread::spawn`.
    /// It costs the same per transaction as a borrowed [`Session`]; the
    /// engine lives until its last session and `Arc` drop.
    ///
    /// ```
    /// use snapshot_engine::{CommitOptions, Engine, EngineConfig, OwnedSession, TxnOptions};
    /// use std::sync::Arc;
    ///
    /// struct Connection { engine: Arc<Engine>, session: OwnedSession }
    ///
    /// let engine = Arc::new(Engine::new(EngineConfig::default())?);
    /// let mut conn = Connection { session: engine.owned_session()?, engine: engine.clone() };
    /// let worker = std::thread::spawn(move || -> snapshot_engine::Result<()> {
    ///     let mut txn = conn.session.begin(&TxnOptions::default())?;
    ///     txn.put("k", "v")?;
    ///     txn.commit(CommitOptions::default())?;
    ///     Ok(())
    /// });
    /// worker.join().unwrap()?;
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::SessionTableFull`](crate::Error::SessionTableFull) when
    /// every slot is taken.
    pub fn owned_session(self: &Arc<Self>) -> Result<OwnedSession<P>> {
        super::raw::open_owned(self)
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
        self.mgr.set_timestamps(update)?;
        if let Some(d) = &self.durable {
            d.note_stable(self.mgr.stable_timestamp());
        }
        Ok(())
    }

    /// Reports a global timestamp (`None` if it is not set / no reader).
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        if kind == TimestampKind::Recovery {
            return self.durable.as_ref()?.recovery_ts().to_option();
        }
        self.mgr.query_timestamp(kind)
    }

    /// Takes a checkpoint: for every key, the newest committed version
    /// whose durable timestamp is at or below stable (every untimestamped
    /// one; none of a prepared transaction durable above stable), in a new
    /// file, synced and renamed into place before the log segments it
    /// covers are removed. Commits above stable are carried whole. Readers
    /// and writers run on meanwhile (writers wait only for the one sync
    /// that cuts the log). Without a stable timestamp it holds everything
    /// committed before it began.
    ///
    /// # Errors
    /// [`Error::NotDurable`] for an in-memory engine; [`Error::Io`];
    /// [`Error::Corrupt`] if a segment it folds in is damaged. The previous
    /// checkpoint stays in force and no temporary file is left. Commits go
    /// on after a failure to write the checkpoint file (the log is intact);
    /// a failure in the log's own cut (its sync, or starting the new
    /// segment) stops the log as a failed commit write does. Once the new
    /// checkpoint is in force (renamed and its directory synced) the call
    /// succeeds; if the directory sync after the removal of what it covers
    /// fails, the log stops instead: later commits get that [`Error::Io`]
    /// until reopened.
    pub fn checkpoint(&self) -> Result<crate::durable::CheckpointReport> {
        self.durable.as_ref().ok_or(Error::NotDurable)?.checkpoint()
    }

    /// What recovery found and did when this engine was opened (`None`: in
    /// memory).
    pub fn recovery_report(&self) -> Option<&crate::durable::RecoveryReport> {
        self.durable.as_ref().map(|d| d.report())
    }

    /// The commit log's counters (`None`: in memory).
    pub fn log_stats(&self) -> Option<crate::durable::LogStats> {
        self.durable.as_ref().map(|d| d.log_stats())
    }

    /// Sums every session's counters.
    pub fn stats(&self) -> Stats {
        let mut s = self.mgr.stats();
        s.versions_freed = self.store.freed.load(Ordering::Relaxed);
        s
    }

    /// Recomputes the reclaim horizon and prunes every key's version chain
    /// to it. Writers prune the keys they write as they commit; call this to
    /// give memory back after a long reader ends when the keys it pinned are
    /// no longer written.
    pub fn collect(&self) {
        self.mgr.advance_horizon();
        let h = self.mgr.horizon();
        let stable = self.mgr.stable_timestamp();
        let n = self.store.collect(h, stable.get());
        self.mgr.count(Count::VersionsPruned, n.cut);
        self.mgr.count(Count::CommitVersionsExamined, n.examined);
    }

    /// The pins every open session holds: which sessions hold history back,
    /// and by how much.
    pub fn pins(&self) -> Vec<SessionPin> {
        self.mgr.pins()
    }

    /// The versions in `key`'s chain (pruned ones excluded), for tests and
    /// diagnostics; 0 if the key was never written.
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain_len(key)
    }

    /// Whether handshake 1 (pin versus horizon) runs on the asymmetric
    /// fence pair, a compiler fence for readers and a membarrier per horizon
    /// advance: asked for with [`EngineConfig::asymmetric_fences`] (off by
    /// default) or `SNAPSHOT_ENGINE_FENCES=asymmetric`, and granted where
    /// the process could register for it.
    pub fn asymmetric_fences(&self) -> bool {
        self.mgr.asymmetric_fences()
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The transaction manager underneath (the public machinery layer).
    pub fn manager(&self) -> &TxnManager<P> {
        &self.mgr
    }
}

/// A session: one slot in the session table. Begin transactions on it, one
/// at a time; each ends by value ([`Txn::commit`], [`Txn::rollback`], or
/// drop), after which the session is free for the next.
///
/// `'e` is the engine borrow of [`Engine::session`]; an [`OwnedSession`]
/// (from [`Engine::owned_session`]) is `Session<'static>` and keeps the
/// engine alive itself.
///
/// `Send` (move it to the thread that uses it) but not `Sync`: a session
/// is one thread's at a time.
///
/// ```
/// fn is_send<T: Send>() {}
/// is_send::<snapshot_engine::OwnedSession>();
/// ```
/// ```compile_fail
/// fn is_sync<T: Sync>() {}
/// is_sync::<snapshot_engine::OwnedSession>();
/// ```
pub struct Session<'e, P: Protocol = LockFree> {
    // Field order matters (invariant 14): `msess` and `data` borrow the
    // engine that `owner` keeps alive, so they drop first.
    pub(crate) msess: TxnSession<'e, P>,
    pub(crate) data: SessionData<'e, P>,
    /// The engine's `Arc` for an owned session; `None` for a borrowed one.
    owner: Option<Arc<Engine<P>>>,
    /// Not `Sync`, named here so the compiler's error says `Session`.
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

/// A session that owns its handle to the engine: `Send`, `'static`, no
/// borrow to carry (see [`Engine::owned_session`]).
pub type OwnedSession<P = LockFree> = Session<'static, P>;

/// The store's half of a session, borrowed by its open [`Txn`].
pub(crate) struct SessionData<'e, P: Protocol> {
    pub(crate) engine: &'e Engine<P>,
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
    /// The open transaction's keys, for its log record (durable engines).
    pub(crate) dlog: crate::durable::SessionLog,
}

impl<'e, P: Protocol> Session<'e, P> {
    pub(super) fn open(engine: &'e Engine<P>, owner: Option<Arc<Engine<P>>>) -> Result<Self> {
        Ok(Session {
            msess: engine.mgr.session()?,
            data: SessionData {
                engine,
                writes: WriteSet::new(&engine.store),
                commits: 0,
                savepoints: Vec::new(),
                savepoint_ids: 0,
                token: crate::sync::unique_id(),
                dlog: Default::default(),
            },
            owner,
            _not_sync: std::marker::PhantomData,
        })
    }

    /// Begins a transaction. It borrows the session until it ends by value
    /// ([`Txn::commit`], [`Txn::rollback`]) or drops (a rollback).
    ///
    /// # Errors
    /// An invalid read timestamp in `options` (out of range, older than
    /// oldest without `roundup_read`), or a read timestamp combined with
    /// `read_at_stable` ([`Error::IncompatibleOptions`](crate::Error::IncompatibleOptions)).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Txn<'_, 'e, P>> {
        if self.msess.has_leaked() {
            txn::recover_leaked(&mut self.msess, &mut self.data);
        }
        Txn::begin(&mut self.msess, &mut self.data, options)
    }

    /// Runs `f` in a transaction begun with `options` and commits it with
    /// [`CommitOptions::default`] (set a commit timestamp inside `f` with
    /// [`Txn::set_commit_timestamp`]). When `f` or the commit fails with
    /// [`Error::WriteConflict`](crate::Error::WriteConflict) (or the
    /// [`Error::MustRollBack`](crate::Error::MustRollBack) that follows
    /// one), the transaction rolls back and `f` runs again in a new one, up
    /// to [`Session::TRANSACTION_ATTEMPTS`] times in all. Between attempts
    /// it backs off so that the writer it conflicted with can finish: it
    /// yields the thread after the first conflicts, then sleeps, doubling
    /// from 10 us up to 2 ms. Any other error rolls back and returns at
    /// once.
    ///
    /// ```
    /// # use snapshot_engine::{Engine, EngineConfig, TxnOptions};
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let mut session = engine.session()?;
    /// let n = session.transaction(&TxnOptions::default(), |txn| {
    ///     let n = txn.get("n")?.map_or(0, |v| v[0]) + 1;
    ///     txn.put("n", [n])?;
    ///     Ok(n)
    /// })?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// The error from `begin`, from `f`, or from the commit; the last
    /// [`Error::WriteConflict`](crate::Error::WriteConflict) after
    /// [`Session::TRANSACTION_ATTEMPTS`] conflicting attempts.
    pub fn transaction<R>(
        &mut self,
        options: &TxnOptions,
        mut f: impl FnMut(&mut Txn<'_, 'e, P>) -> Result<R>,
    ) -> Result<R> {
        let mut attempt = 1;
        loop {
            let mut txn = self.begin(options)?;
            let r = f(&mut txn).and_then(|r| txn.commit(CommitOptions::default()).map(|()| r));
            match r {
                Err(Error::WriteConflict { .. } | Error::MustRollBack)
                    if attempt < Self::TRANSACTION_ATTEMPTS =>
                {
                    conflict_backoff(attempt);
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    /// How many times [`Session::transaction`] runs its closure before it
    /// gives up on write conflicts.
    pub const TRANSACTION_ATTEMPTS: u32 = 16;

    /// This session's slot in the session table.
    pub fn slot(&self) -> usize {
        self.msess.slot()
    }

    /// The engine this session belongs to.
    pub fn engine(&self) -> &Engine<P> {
        self.data.engine
    }

    /// Is this an [`OwnedSession`] (it holds an `Arc` to its engine)?
    pub fn is_owned(&self) -> bool {
        self.owner.is_some()
    }

    /// This session's own counters (every transaction it ran, since its
    /// slot was first used; blocks are never reset). `read_path_rmw` and
    /// `versions_freed` are engine-wide and left at their defaults here.
    pub fn stats(&self) -> Stats {
        self.msess.stats()
    }
}

/// The wait after the `attempt`-th conflicting attempt of
/// [`Session::transaction`]. The transaction that holds the contended key
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

impl<P: Protocol> Drop for Session<'_, P> {
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
