//! [`Engine`], [`Session`] and [`OwnedSession`] as users name them.

use super::super::engine::retry_conflicts;
use super::super::raw;
use super::Txn;
use crate::config::{CommitOptions, EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::durability::{
    BackupReport, CheckpointReport, CheckpointerStatus, DurabilityOptions, LogStats, RecoveryReport,
};
use crate::error::Result;
use crate::machinery::{SessionPin, TxnManager};
use crate::stats::Stats;
use crate::ts::Timestamp;
use crate::with_machinery::{self as generic, LockFree};
use crate::RollbackReport;
use std::path::Path;
use std::sync::Arc;

/// The transaction engine: snapshot machinery, session table, timestamps and
/// the MVCC key-value store. `Send + Sync`; share it by reference or `Arc`.
///
/// Sessions come in two forms of one type: [`Engine::session`] borrows the
/// engine (`Session<'e>`, for `thread::scope` and short-lived work), and
/// [`Engine::owned_session`] holds an `Arc` to it ([`OwnedSession`], which is
/// `'static`: store it in a struct or a pool, move it into `thread::spawn`
/// or an async task).
#[repr(transparent)]
pub struct Engine(pub(super) generic::Engine<LockFree>);

impl Engine {
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
    #[inline]
    pub fn new(config: EngineConfig) -> Result<Engine> {
        generic::Engine::new(config).map(Engine)
    }

    /// Opens (creating it if missing) a durable engine on directory `dir`:
    /// recovers the newest checkpoint and replays the log after it, then
    /// logs every committing write transaction there. Stable and oldest
    /// start at the checkpoint's stable timestamp
    /// ([`TimestampKind::Recovery`](crate::TimestampKind::Recovery)).
    /// What recovery found (a torn final record it dropped, a truncation)
    /// is in [`Engine::recovery_report`].
    ///
    /// A transaction that was prepared but not committed at the crash is
    /// gone: prepare is not logged; the coordinator re-drives two-phase
    /// commit.
    ///
    /// # Errors
    /// [`Error::InvalidDurabilityOption`](crate::Error::InvalidDurabilityOption);
    /// [`Error::DirectoryLocked`](crate::Error::DirectoryLocked) when another open
    /// engine (in this or another process) holds `dir`;
    /// [`Error::Corrupt`](crate::Error::Corrupt) for a damaged checkpoint, a
    /// missing segment (the newest too: the segment before it names it), a
    /// missing checkpoint, a segment cut short that a later one shows held
    /// more, or a checksum mismatch before the end of the log that no crash
    /// leaves (see [`RecoveryReport::torn_tail`]; unless `truncate_corrupt`);
    /// [`Error::UnsupportedFormat`](crate::Error::UnsupportedFormat) for a log
    /// of an older format (nothing is changed); [`Error::Io`](crate::Error::Io);
    /// an error replaying a record (a key or value over this `config`'s
    /// limits).
    #[inline]
    pub fn open(
        dir: impl AsRef<Path>,
        config: EngineConfig,
        options: DurabilityOptions,
    ) -> Result<Engine> {
        generic::Engine::open(dir, config, options).map(Engine)
    }

    /// Opens a session: claims a slot in the session table, released when
    /// the session drops. Use one session per thread.
    ///
    /// # Errors
    /// [`Error::SessionTableFull`](crate::Error::SessionTableFull) when
    /// every slot is taken.
    #[inline]
    pub fn session(&self) -> Result<Session<'_>> {
        self.0.session().map(Session)
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
    #[inline]
    pub fn owned_session(self: &Arc<Self>) -> Result<OwnedSession> {
        raw::generic_arc(self).owned_session().map(Session)
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
    /// [`Error::NotDurable`](crate::Error::NotDurable) for an in-memory engine;
    /// [`Error::Io`](crate::Error::Io);
    /// [`Error::Corrupt`](crate::Error::Corrupt) if a segment it folds in is damaged. The previous
    /// checkpoint stays in force and no temporary file is left. Commits go
    /// on after a failure to write the checkpoint file (the log is intact);
    /// a failure in the log's own cut (its sync, or starting the new
    /// segment) stops the log as a failed commit write does. Once the new
    /// checkpoint is in force (renamed and its directory synced) the call
    /// succeeds; if the directory sync after the removal of what it covers
    /// fails, the log stops instead: later commits get that
    /// [`Error::Io`](crate::Error::Io) until reopened.
    #[inline]
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        self.0.checkpoint()
    }

    /// Writes an online backup of this durable engine into `dir` (created
    /// if missing; it must be empty): a copy of its newest checkpoint and
    /// the log after it, which [`Engine::open`] opens like the original.
    /// The copy holds every commit that returned before the call began,
    /// and every commit at or below the stable timestamp then; a commit
    /// running during the backup is in it whole or not at all.
    ///
    /// Readers and writers run on meanwhile: writers wait only for the one
    /// sync of the records pending when it began ([`BackupReport::pause`]);
    /// a checkpoint (on call or in the background) waits until the copy is
    /// done. The backup goes through this engine's file layer
    /// ([`DurabilityOptions::fs`]).
    ///
    /// Until it completes, `dir` holds a `BACKUP-INCOMPLETE` file, created
    /// first and removed last, and [`Engine::open`] refuses the directory
    /// with [`Error::IncompleteBackup`](crate::Error::IncompleteBackup): a
    /// backup that fails or whose process dies is never mistaken for a
    /// complete one.
    ///
    /// ```
    /// # use snapshot_engine::{CommitOptions, DurabilityOptions, Engine, EngineConfig, TxnOptions};
    /// # let base = std::env::temp_dir().join(format!("snapshot-doc-backup-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&base);
    /// let engine = Engine::open(base.join("db"), EngineConfig::default(), DurabilityOptions::default())?;
    /// let mut session = engine.session()?;
    /// let mut txn = session.begin(&TxnOptions::default())?;
    /// txn.put("k", "v")?;
    /// txn.commit(CommitOptions::default())?;
    /// let report = engine.backup(base.join("backup"))?;
    /// assert_eq!(report.last_lsn, 1);
    /// let copy = Engine::open(base.join("backup"), EngineConfig::default(), DurabilityOptions::default())?;
    /// assert_eq!(copy.session()?.begin(&TxnOptions::default())?.get("k")?, Some(b"v".to_vec()));
    /// # drop(session);
    /// # drop((copy, engine));
    /// # std::fs::remove_dir_all(&base).unwrap();
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NotDurable`](crate::Error::NotDurable) for an in-memory
    /// engine; [`Error::BackupTargetNotEmpty`](crate::Error::BackupTargetNotEmpty)
    /// (nothing written); [`Error::Io`](crate::Error::Io) for a failed file
    /// operation on either directory; the log's error if it has failed, or
    /// if the sync fails (which stops the log, as a failed commit sync
    /// does); [`Error::Corrupt`](crate::Error::Corrupt) for a log segment
    /// missing from the engine's directory. The engine stays usable after
    /// any of them (unless the log stopped); `dir` then holds
    /// `BACKUP-INCOMPLETE`: remove it before backing up there again.
    #[inline]
    pub fn backup(&self, dir: impl AsRef<Path>) -> Result<BackupReport> {
        self.0.backup(dir.as_ref())
    }

    /// What recovery found and did when this engine was opened (`None`: in
    /// memory).
    #[inline]
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.0.recovery_report()
    }

    /// What the background checkpointer
    /// ([`DurabilityOptions::checkpoint_interval`](crate::DurabilityOptions::checkpoint_interval))
    /// did since open: counts, the latest report and the latest failure's
    /// error, which nothing else reports (`None`: in memory).
    #[inline]
    pub fn checkpointer_status(&self) -> Option<CheckpointerStatus> {
        self.0.checkpointer_status()
    }

    /// The commit log's counters (`None`: in memory).
    #[inline]
    pub fn log_stats(&self) -> Option<LogStats> {
        self.0.log_stats()
    }

    /// Sums every session's counters.
    #[inline]
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }

    /// Recomputes the reclaim horizon and prunes every key's version chain
    /// to it. Writers prune the keys they write as they commit; call this to
    /// give memory back after a long reader ends when the keys it pinned are
    /// no longer written. It also finishes a hash table's growth that key
    /// creation left part-way (a growth moves the keys as later keys are
    /// created; until it ends, a read of a key not yet moved probes two
    /// tables), holding key creation back a few thousand slot moves at a
    /// time.
    #[inline]
    pub fn collect(&self) {
        self.0.collect()
    }

    /// The pins every open session holds: which sessions hold history back,
    /// and by how much.
    #[inline]
    pub fn pins(&self) -> Vec<SessionPin> {
        self.0.pins()
    }

    /// The versions in `key`'s chain (pruned ones excluded), for tests and
    /// diagnostics; 0 if the key was never written.
    #[inline]
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.0.chain_len(key)
    }

    /// Whether handshake 1 (pin versus horizon) runs on the asymmetric
    /// fence pair, a compiler fence for readers and a membarrier per horizon
    /// advance: asked for with [`EngineConfig::asymmetric_fences`] (off by
    /// default) or `SNAPSHOT_ENGINE_FENCES=asymmetric`, and granted where
    /// the process could register for it.
    #[inline]
    pub fn asymmetric_fences(&self) -> bool {
        self.0.asymmetric_fences()
    }

    /// The configuration the engine was built with.
    #[inline]
    pub fn config(&self) -> &EngineConfig {
        self.0.config()
    }

    /// The transaction manager underneath (the public machinery layer).
    #[inline]
    pub fn manager(&self) -> &TxnManager {
        TxnManager::from_generic(self.0.manager())
    }

    /// Rolls the engine back to the stable timestamp, as WiredTiger's
    /// `rollback_to_stable`: removes every committed version whose durable
    /// timestamp is above stable (committed above stable, or a prepared
    /// transaction committed at or below stable but durable above it).
    /// Untimestamped commits stay, and so does all history at or below
    /// stable, readable at every read timestamp it was readable at before.
    /// A replicated host uses it to come back to a point every replica
    /// agrees on.
    ///
    /// `&mut self`: no session can be open (an [`OwnedSession`] holds an
    /// `Arc`, so it cannot be either), so nothing reads or writes while the
    /// chains are rebuilt. A durable engine first writes a checkpoint at
    /// stable that drops the rolled-back log records, so no later recovery
    /// brings them back; only then does it change the store.
    ///
    /// [`OwnedSession`]: crate::OwnedSession
    ///
    /// One limit: pruning judges a version by its commit timestamp, so once
    /// oldest reaches the commit timestamp of a prepared commit durable
    /// above stable, the versions below it may already be pruned, and this
    /// rollback then leaves the key with what remains (nothing, if nothing
    /// does). WiredTiger judges global visibility by the durable timestamp
    /// instead. Keep oldest below such a commit's timestamp until stable
    /// reaches its durable timestamp to keep that history.
    ///
    /// # Errors
    /// [`Error::StableNotSet`](crate::Error::StableNotSet) without a stable timestamp;
    /// [`Error::RollbackWithOpenTransactions`](crate::Error::RollbackWithOpenTransactions)
    /// when a transaction never ended (leaked with its session, or still prepared);
    /// for a durable engine,
    /// [`Error::RollbackBelowCheckpoint`](crate::Error::RollbackBelowCheckpoint)
    /// when its last checkpoint already holds more than stable, and
    /// [`Error::Io`](crate::Error::Io) or
    /// [`Error::Corrupt`](crate::Error::Corrupt) from the checkpoint (the log's own failure, if it
    /// failed before). Nothing changes on an error.
    #[inline]
    pub fn rollback_to_stable(&mut self) -> Result<RollbackReport> {
        self.0.rollback_to_stable()
    }
}

/// A lock-free engine with [`EngineConfig::default`], which is valid.
impl Default for Engine {
    #[inline]
    fn default() -> Self {
        Engine(generic::Engine::<LockFree>::default())
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
pub struct Session<'e>(generic::Session<'e, LockFree>);

/// A session that owns its handle to the engine: `Send`, `'static`, no
/// borrow to carry (see [`Engine::owned_session`]).
pub type OwnedSession = Session<'static>;

impl<'e> Session<'e> {
    /// Begins a transaction. It borrows the session until it ends by value
    /// ([`Txn::commit`], [`Txn::rollback`]) or drops (a rollback).
    ///
    /// # Errors
    /// An invalid read timestamp in `options` (out of range, older than
    /// oldest without `roundup_read`), or a read timestamp combined with
    /// `read_at_stable` ([`Error::IncompatibleOptions`](crate::Error::IncompatibleOptions)).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Txn<'_, 'e>> {
        self.0.begin(options).map(Txn)
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
        mut f: impl FnMut(&mut Txn<'_, 'e>) -> Result<R>,
    ) -> Result<R> {
        retry_conflicts(|| {
            let mut txn = self.begin(options)?;
            f(&mut txn).and_then(|r| txn.commit(CommitOptions::default()).map(|()| r))
        })
    }

    /// How many times [`Session::transaction`] runs its closure before it
    /// gives up on write conflicts.
    pub const TRANSACTION_ATTEMPTS: u32 = 16;

    /// This session's slot in the session table.
    #[inline]
    pub fn slot(&self) -> usize {
        self.0.slot()
    }

    /// The engine this session belongs to.
    #[inline]
    pub fn engine(&self) -> &Engine {
        raw::plain_engine(self.0.engine())
    }

    /// Is this an [`OwnedSession`] (it holds an `Arc` to its engine)?
    #[inline]
    pub fn is_owned(&self) -> bool {
        self.0.is_owned()
    }

    /// This session's own counters (every transaction it ran, since its
    /// slot was first used; blocks are never reset). `read_path_rmw` and
    /// `versions_freed` are engine-wide and left at their defaults here.
    #[inline]
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }
}
