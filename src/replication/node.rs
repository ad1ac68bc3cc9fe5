//! [`Replica`]: one node. The leader's write path, the watermark ticker, and
//! [`Reader`], the follower read path at the replicated watermark.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::{AtomicBool, AtomicU64, Ordering};
use openraft::{Raft, RaftNetworkFactory, ServerState};
use parking_lot::{Condvar, Mutex, RwLock};

use super::disk::{self, Disk, LogRecovery};
use super::log_store::LogStore;
use super::state_machine::StateMachine;
use super::{
    raft_err, Command, CommitRecord, NodeId, Origin, ReplicaConfig, ReplicaError, TypeConfig, Write,
};
use crate::{CommitOptions, Engine, Result, Session, Timestamp, TimestampKind, Txn, TxnOptions};

/// A value that tells this run of a node from earlier ones: the time and
/// the process, hashed with std's randomly keyed hasher (fresh keys per
/// call).
fn new_run() -> u64 {
    use std::hash::BuildHasher;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((t, std::process::id()))
}

/// Commit timestamps the leader has handed out and whose log entries are not
/// yet appended.
#[derive(Default)]
struct Tracker {
    /// The newest timestamp allocated.
    last: u64,
    /// Allocated, entry not yet appended (or the append's outcome not yet
    /// known).
    in_flight: BTreeSet<u64>,
    /// Proposal sequence numbers.
    seq: u64,
}

/// Counters of one node. Relaxed throughout: reports, read by
/// [`Replica::stats`], publishing nothing.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) applied_commits: AtomicU64,
    pub(crate) applied_writes: AtomicU64,
    pub(crate) skipped_own: AtomicU64,
    pub(crate) watermarks: AtomicU64,
    pub(crate) apply_retries: AtomicU64,
    pub(crate) snapshots_built: AtomicU64,
    pub(crate) snapshots_installed: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) batched_commits: AtomicU64,
    pub(crate) largest_batch_bytes: AtomicU64,
}

/// What the node's parts (write path, state machine, log store, readers)
/// share.
pub(crate) struct Shared {
    pub(crate) id: NodeId,
    pub(crate) config: ReplicaConfig,
    /// The engine; replaced (never mutated in place) when a snapshot is
    /// installed.
    engine: RwLock<Arc<Engine>>,
    /// Bumped on every engine replacement (Readers compare it).
    engine_gen: AtomicU64,
    /// A write's outcome is unknown: refuse reads and writes.
    fenced: AtomicBool,
    /// The `Replica` was dropped: the ticker ends.
    stopped: AtomicBool,
    /// The newest timestamp in any entry this node's log has held.
    log_max_ts: AtomicU64,
    tracker: Mutex<Tracker>,
    /// This node's own proposals whose transactions are still open, by
    /// sequence number, with their commit timestamps: the state machine
    /// skips their entries (the transaction commits the versions itself).
    pub(crate) pending: Mutex<HashMap<u64, u64>>,
    /// Commits waiting for the batcher.
    queue: Mutex<Queue>,
    /// This run of the node (tells its own batches from those of an
    /// earlier run with the same id).
    pub(crate) run: u64,
    /// The number of the last own batch of this run appended to this
    /// node's log (the log store checks that none is missing).
    pub(crate) last_own_batch: Mutex<u64>,
    queue_notify: tokio::sync::Notify,
    wm_lock: Mutex<()>,
    wm_cv: Condvar,
    pub(crate) ctr: Counters,
    history: Mutex<Vec<(Timestamp, Instant)>>,
}

/// Invariant R5 for one entry a log store is about to append: an own batch
/// of this run (`proposer` is this node and run) is admitted only while the
/// node is not fenced and every earlier batch of the run is in the log
/// (`last` is the newest admitted; a batch seen before may come back from
/// another leader). A batch whose predecessor never reached the log may
/// hold commits that read that predecessor's writes, so it must never
/// commit: refusing it (and fencing) stops this node's raft before the
/// entry is in its log, where replication reads it. Other entries pass.
pub(crate) fn admit_batch(
    shared: &Shared,
    last: &Mutex<u64>,
    proposer: &super::Proposer,
) -> std::result::Result<(), String> {
    if proposer.node != shared.id || proposer.run != shared.run {
        return Ok(());
    }
    let mut last = last.lock();
    let fenced = shared.is_fenced();
    if fenced || proposer.batch > *last + 1 {
        return Err(format!(
            "own batch {} after batch {} (fenced: {fenced})",
            proposer.batch, *last
        ));
    }
    *last = (*last).max(proposer.batch);
    Ok(())
}

impl Shared {
    pub(crate) fn engine(&self) -> Arc<Engine> {
        self.engine.read().clone()
    }

    pub(crate) fn replace_engine(&self, e: Arc<Engine>) {
        *self.engine.write() = e;
        // Relaxed: the engine itself is handed over by the RwLock; a reader
        // that misses the bump reads its old engine, whose contents stay
        // consistent (only stale), and sees the bump at its next begin.
        self.engine_gen.fetch_add(1, Ordering::Relaxed);
        self.notify_watermark();
    }

    pub(crate) fn saw_ts(&self, ts: Timestamp) {
        // Relaxed: a bound for the timestamps a new leader hands out, read by
        // this node's own threads after the log store's mutex ordered them.
        self.log_max_ts.fetch_max(ts.get(), Ordering::Relaxed);
    }

    pub(crate) fn notify_watermark(&self) {
        let _g = self.wm_lock.lock();
        self.wm_cv.notify_all();
    }

    pub(crate) fn record_watermark(&self, w: Timestamp) {
        self.ctr.watermarks.fetch_add(1, Ordering::Relaxed);
        if self.config.record_watermarks {
            self.history.lock().push((w, Instant::now()));
        }
        self.notify_watermark();
    }

    fn floor(&self, engine: &Engine) -> u64 {
        let stable = engine
            .query_timestamp(TimestampKind::Stable)
            .map_or(0, Timestamp::get);
        self.log_max_ts.load(Ordering::Relaxed).max(stable)
    }

    /// The leader's watermark for an entry that carries the commits at
    /// timestamps `own` (sorted): every other commit at or below it has its
    /// entry in this node's log already (DESIGN.md, "Replication", the
    /// watermark rule).
    fn low_water_with(&self, engine: &Engine, own: &[u64]) -> u64 {
        let floor = self.floor(engine);
        let t = self.tracker.lock();
        let newest = t.last.max(floor);
        match t.in_flight.iter().find(|ts| own.binary_search(ts).is_err()) {
            Some(&m) => (m - 1).min(newest),
            None => newest,
        }
    }

    /// A commit timestamp is no longer in flight: its entry is in this
    /// node's log, or its write failed (and fenced the node).
    pub(crate) fn release(&self, ts: u64) {
        self.tracker.lock().in_flight.remove(&ts);
    }

    /// Whether own proposal `seq` is still open (committed here, entry not
    /// yet known to be committed).
    pub(crate) fn is_pending(&self, seq: u64) -> bool {
        self.pending.lock().contains_key(&seq)
    }

    /// Whether the fence is set.
    pub(crate) fn is_fenced(&self) -> bool {
        // Acquire: pairs with the Release store in `fence`.
        self.fenced.load(Ordering::Acquire)
    }

    /// Sets the fence (DESIGN.md, "Replication", R4).
    pub(crate) fn fence(&self) {
        // Release: pairs with the Acquire loads of `fenced`. Stronger than
        // needed where stable is loaded first (the fence is stored before
        // the Release store of a stable past the abandoned write); the
        // ticker and the write path check it without loading stable.
        self.fenced.store(true, Ordering::Release);
    }
}

/// Options for [`Replica::write_with`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Hold the commit timestamp (allocated, claimed, entry not yet
    /// appended) this long before appending: a fault-injection knob that
    /// makes commits finish out of timestamp order.
    pub delay_before_append: Duration,
}

/// A read-write transaction on the leader: a [`Txn`] whose writes are also
/// recorded for the log entry.
pub struct WriteTxn<'a, 's, 'e> {
    txn: &'a mut Txn<'s, 'e>,
    writes: &'a mut BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl WriteTxn<'_, '_, '_> {
    /// The visible value of `key` (see [`Txn::get`]).
    ///
    /// # Errors
    /// As [`Txn::get`].
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.txn.get(key)
    }

    /// Calls `f` with the visible value of `key` (see [`Txn::get_with`]).
    ///
    /// # Errors
    /// As [`Txn::get_with`].
    pub fn get_with<R>(&mut self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        self.txn.get_with(key, f)
    }

    /// Visits the visible pairs in `range` (see [`Txn::scan`]).
    ///
    /// # Errors
    /// As [`Txn::scan`].
    pub fn scan(
        &mut self,
        range: impl crate::KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.txn.scan(range, f)
    }

    /// Writes `value` under `key`.
    ///
    /// # Errors
    /// As [`Txn::put`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn.put(key, value)?;
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    /// Deletes `key`.
    ///
    /// # Errors
    /// As [`Txn::delete`].
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.txn.delete(key)?;
        self.writes.insert(key.to_vec(), None);
        Ok(())
    }
}

/// Counters and state of one node, from [`Replica::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaStats {
    /// Commit entries installed into this node's engine by the state machine.
    pub applied_commits: u64,
    /// Writes those entries carried.
    pub applied_writes: u64,
    /// Own commit entries skipped (their transactions committed locally).
    pub skipped_own_commits: u64,
    /// Watermark advances applied.
    pub watermarks_applied: u64,
    /// Apply retries after a write conflict with a local transaction.
    pub apply_conflict_retries: u64,
    /// Snapshots built.
    pub snapshots_built: u64,
    /// Snapshots installed.
    pub snapshots_installed: u64,
    /// Log entries of commits and watermarks this node proposed as leader.
    pub batches_proposed: u64,
    /// Commits those entries carried.
    pub commits_proposed: u64,
    /// The most bytes of commits ([`CommitRecord::encoded_len`]) one of
    /// those entries carried; at most `ReplicaConfig::max_batch_bytes`.
    pub largest_batch_bytes: u64,
    /// `write` calls on a durable node's raft log segments.
    pub log_writes: u64,
    /// `fdatasync` calls on them (group commit: one covers every entry and
    /// vote queued meanwhile).
    pub log_syncs: u64,
    /// Nanoseconds spent in those calls.
    pub log_sync_ns: u64,
    /// The current watermark (stable timestamp).
    pub watermark: Option<Timestamp>,
    /// Whether the node is fenced.
    pub fenced: bool,
}

/// One node: an engine kept equal to the replicated log, and its raft.
pub struct Replica {
    pub(super) shared: Arc<Shared>,
    raft: Raft<TypeConfig>,
    rt: tokio::runtime::Handle,
    log: LogStore,
    /// A durable node's files and what opening them found.
    disk: Option<(Arc<Disk>, LogRecovery)>,
}

impl Replica {
    /// Starts node `id` with a new, empty engine, on runtime `rt` (openraft's
    /// tasks and the watermark ticker run there). `network` reaches the other
    /// nodes. Call from outside the runtime.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a batching bound is 0;
    /// [`ReplicaError::Raft`] if openraft rejects the configuration; the
    /// engine's error if `config.engine` is out of bounds
    /// ([`EngineConfig::validate`](crate::EngineConfig::validate)).
    pub fn new<N>(
        id: NodeId,
        config: ReplicaConfig,
        network: N,
        rt: tokio::runtime::Handle,
    ) -> std::result::Result<Replica, ReplicaError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        Replica::validate(&config)?;
        Replica::start(id, config, network, rt, None)
    }

    /// Starts node `id` on its directory `dir` (created if missing): its
    /// raft log and vote are kept there ([`ReplicaConfig::log`] says when an
    /// entry counts as stored), and so is every snapshot it builds or
    /// installs. A node that ran there before comes back as it was: its
    /// engine is rebuilt from its snapshot and the committed log after it,
    /// its vote and log are its own, and it catches up from the leader only
    /// what it missed. [`Replica::recovery`] says what was found.
    ///
    /// # Errors
    /// As [`Replica::new`], and: [`Error::DirectoryLocked`](crate::Error)
    /// if another node has `dir` open; [`Error::Corrupt`](crate::Error) if a
    /// log segment or the snapshot is damaged anywhere but in a torn final
    /// record (which is cut off and reported); [`Error::Io`](crate::Error)
    /// if a file cannot be read or written;
    /// [`Error::InvalidDurabilityOption`](crate::Error) if
    /// [`ReplicaConfig::log`] is out of bounds. All inside
    /// [`ReplicaError::Engine`].
    pub fn open<N>(
        id: NodeId,
        config: ReplicaConfig,
        dir: impl AsRef<std::path::Path>,
        network: N,
        rt: tokio::runtime::Handle,
    ) -> std::result::Result<Replica, ReplicaError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        Replica::validate(&config)?;
        let opened = disk::open(dir.as_ref(), config.log)?;
        Replica::start(id, config, network, rt, Some(opened))
    }

    /// Checks `config` before anything is started or any file touched.
    fn validate(config: &ReplicaConfig) -> std::result::Result<(), ReplicaError> {
        if config.max_batch_commits == 0 || config.max_batches_in_flight == 0 {
            return Err(ReplicaError::BadConfig {
                what: format!(
                    "max_batch_commits {} and max_batches_in_flight {} must be at least 1",
                    config.max_batch_commits, config.max_batches_in_flight
                ),
            });
        }
        if !(1024..=super::MAX_BATCH_BYTES).contains(&config.max_batch_bytes) {
            return Err(ReplicaError::BadConfig {
                what: format!(
                    "max_batch_bytes {} is out of range: want 1024 to {}",
                    config.max_batch_bytes,
                    super::MAX_BATCH_BYTES
                ),
            });
        }
        config.raft.clone().validate().map_err(raft_err)?;
        config.engine.validate()?;
        Ok(())
    }

    /// Starts a node whose `config` has been validated; `opened`: a durable
    /// node's files and what recovery found in them.
    fn start<N>(
        id: NodeId,
        config: ReplicaConfig,
        network: N,
        rt: tokio::runtime::Handle,
        opened: Option<(Disk, disk::Recovered, LogRecovery)>,
    ) -> std::result::Result<Replica, ReplicaError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        let raft_config = Arc::new(config.raft.clone().validate().map_err(raft_err)?);
        let engine = Arc::new(Engine::new(config.engine.clone())?);
        let shared = Arc::new(Shared {
            id,
            engine: RwLock::new(engine),
            config,
            engine_gen: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            log_max_ts: AtomicU64::new(0),
            tracker: Mutex::default(),
            pending: Mutex::default(),
            queue: Mutex::default(),
            run: new_run(),
            last_own_batch: Mutex::new(0),
            queue_notify: tokio::sync::Notify::new(),
            wm_lock: Mutex::new(()),
            wm_cv: Condvar::new(),
            ctr: Counters::default(),
            history: Mutex::default(),
        });
        let (log, sm, disk) = match opened {
            None => (
                LogStore::new(shared.clone()),
                StateMachine::new(shared.clone(), None),
                None,
            ),
            Some((files, recovered, mut report)) => {
                let files = Arc::new(files);
                let log = LogStore::recovered(shared.clone(), recovered, files.writer.clone());
                let mut sm = StateMachine::new(shared.clone(), Some(files.clone()));
                report.snapshot_index = sm.restore()?;
                (log, sm, Some((files, report)))
            }
        };
        // openraft re-applies the committed log after the restored snapshot
        // before it serves anything.
        let raft = rt
            .block_on(Raft::new(id, raft_config, network, log.clone(), sm))
            .map_err(raft_err)?;
        rt.spawn(batcher(shared.clone(), raft.clone()));
        Ok(Replica {
            shared,
            raft,
            rt,
            log,
            disk,
        })
    }

    /// What [`Replica::open`] found in the node's directory (`None` for a
    /// node in memory).
    pub fn recovery(&self) -> Option<&LogRecovery> {
        self.disk.as_ref().map(|(_, r)| r)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.shared.id
    }

    /// The openraft handle (membership changes, metrics, snapshots).
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// The node's current engine. Read from it through [`Replica::reader`];
    /// writing to it directly bypasses the log.
    pub fn engine(&self) -> Arc<Engine> {
        self.shared.engine()
    }

    /// The replicated watermark: this node's stable timestamp.
    pub fn watermark(&self) -> Option<Timestamp> {
        self.shared.engine().query_timestamp(TimestampKind::Stable)
    }

    /// How many entries this node's log holds.
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Whether a write's unknown outcome fenced this node.
    pub fn is_fenced(&self) -> bool {
        // Acquire: pairs with the Release store in `fence`.
        self.shared.fenced.load(Ordering::Acquire)
    }

    /// Whether this node is the leader and has applied its own term's first
    /// entry (so its engine holds every committed write): writes go here.
    pub fn is_leader_ready(&self) -> bool {
        leader_ready(&self.raft, self.shared.id).is_ok()
    }

    /// The leader this node knows of.
    pub fn current_leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Counters and state.
    pub fn stats(&self) -> ReplicaStats {
        let c = &self.shared.ctr;
        ReplicaStats {
            applied_commits: c.applied_commits.load(Ordering::Relaxed),
            applied_writes: c.applied_writes.load(Ordering::Relaxed),
            skipped_own_commits: c.skipped_own.load(Ordering::Relaxed),
            watermarks_applied: c.watermarks.load(Ordering::Relaxed),
            apply_conflict_retries: c.apply_retries.load(Ordering::Relaxed),
            snapshots_built: c.snapshots_built.load(Ordering::Relaxed),
            snapshots_installed: c.snapshots_installed.load(Ordering::Relaxed),
            batches_proposed: c.batches.load(Ordering::Relaxed),
            commits_proposed: c.batched_commits.load(Ordering::Relaxed),
            largest_batch_bytes: c.largest_batch_bytes.load(Ordering::Relaxed),
            log_writes: self
                .disk
                .as_ref()
                .map_or(0, |(d, _)| d.writer.writes.load(Ordering::Relaxed)),
            log_syncs: self
                .disk
                .as_ref()
                .map_or(0, |(d, _)| d.writer.syncs.load(Ordering::Relaxed)),
            log_sync_ns: self
                .disk
                .as_ref()
                .map_or(0, |(d, _)| d.writer.sync_ns.load(Ordering::Relaxed)),
            watermark: self.watermark(),
            fenced: self.is_fenced(),
        }
    }

    /// Every watermark this node applied, with when (empty unless
    /// `ReplicaConfig::record_watermarks`).
    pub fn watermark_history(&self) -> Vec<(Timestamp, Instant)> {
        self.shared.history.lock().clone()
    }

    /// A read path at this node's watermark.
    pub fn reader(&self) -> Reader {
        Reader {
            shared: self.shared.clone(),
            gen: self.shared.engine_gen.load(Ordering::Relaxed),
            engine: self.shared.engine(),
        }
    }

    /// Runs `f` in a read-write transaction on the leader and commits it
    /// through the log: returns `f`'s result and the commit timestamp
    /// (`Timestamp::NONE` if `f` wrote nothing). When it returns `Ok`, the
    /// commit is in the log of a majority and committed here.
    ///
    /// # Errors
    /// [`ReplicaError::NotLeader`] on a follower (nothing ran);
    /// [`ReplicaError::Engine`] if `f` or the engine refused (the
    /// transaction rolled back; a write conflict can be retried);
    /// [`ReplicaError::Fenced`] when the log entry failed or timed out (the
    /// outcome is unknown; this node fences itself and leaves the cluster).
    pub fn write<R>(
        &self,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<(R, Timestamp), ReplicaError> {
        self.write_with(&WriteOptions::default(), f)
    }

    /// [`Replica::write`] with options.
    ///
    /// # Errors
    /// As [`Replica::write`].
    pub fn write_with<R>(
        &self,
        opts: &WriteOptions,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<(R, Timestamp), ReplicaError> {
        self.submit_with(opts, f)?.wait()
    }

    /// Runs `f` in a read-write transaction on the leader, commits it here
    /// at once and queues its log entry, without waiting for replication:
    /// the write is acknowledged when [`PendingWrite::wait`] returns `Ok`,
    /// which is when its entry is in the log of a majority. A caller keeps
    /// several writes in flight this way (pipelining); the leader puts the
    /// commits queued meanwhile into one log entry (group commit).
    ///
    /// Until then the commit is speculative: later read-write transactions
    /// on this node see it (and their own entries follow it in the log),
    /// but no read at a watermark sees it, on this node or any other, before
    /// its entry is committed. If its entry fails, this node fences itself.
    ///
    /// # Errors
    /// As [`Replica::write`], except the replication outcome, which
    /// [`PendingWrite::wait`] reports.
    pub fn submit<R>(
        &self,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<PendingWrite<R>, ReplicaError> {
        self.submit_with(&WriteOptions::default(), f)
    }

    /// [`Replica::submit`] with options.
    ///
    /// # Errors
    /// As [`Replica::submit`].
    pub fn submit_with<R>(
        &self,
        opts: &WriteOptions,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<PendingWrite<R>, ReplicaError> {
        let id = self.shared.id;
        if self.is_fenced() {
            return Err(ReplicaError::Fenced { node: id });
        }
        leader_ready(&self.raft, id)
            .map_err(|leader| ReplicaError::NotLeader { node: id, leader })?;
        let engine = self.shared.engine();
        let mut session = engine.session()?;
        let mut txn = session.begin(&TxnOptions::default())?;
        let mut writes = BTreeMap::new();
        let value = f(&mut WriteTxn {
            txn: &mut txn,
            writes: &mut writes,
        })?;
        let size = CommitRecord::encoded_len_of(writes.iter().map(|(k, v)| (&k[..], v.as_deref())));
        if size > self.shared.config.max_batch_bytes {
            // Dropping the open transaction rolls it back: nothing of it is
            // committed, here or in any log.
            return Err(ReplicaError::CommitTooLarge {
                size,
                bound: self.shared.config.max_batch_bytes,
            });
        }
        if writes.is_empty() {
            txn.commit(CommitOptions::default())?;
            return Ok(PendingWrite {
                value,
                ts: Timestamp::NONE,
                slot: None,
                node: id,
                bound: Duration::ZERO,
            });
        }
        // Allocate above every timestamp this node has seen in its log or
        // engine (failover: above every replicated one), and register it as
        // in flight before anything else can compute a watermark past it.
        let floor = self.shared.floor(&engine);
        let (ts, seq) = {
            let mut t = self.shared.tracker.lock();
            let ts = t.last.max(floor) + 1;
            t.last = ts;
            t.in_flight.insert(ts);
            t.seq += 1;
            (ts, t.seq)
        };
        let commit_ts = Timestamp::new(ts);
        // Validated against this node's stable, which moves only when a
        // watermark is applied: this node's own watermarks stay below every
        // in-flight timestamp, and another leader's that reaches `ts`
        // fences this node (DESIGN.md, "Replication", R4).
        if let Err(e) = txn.set_commit_timestamp(commit_ts) {
            self.shared.release(ts);
            return Err(e.into());
        }
        self.shared.pending.lock().insert(seq, ts);
        let rec = CommitRecord {
            commit_ts,
            durable_ts: commit_ts,
            origin: Origin { node: id, seq },
            writes: writes
                .into_iter()
                .map(|(key, value)| Write { key, value })
                .collect(),
        };
        if !opts.delay_before_append.is_zero() {
            std::thread::sleep(opts.delay_before_append);
        }
        // The speculative local commit, then the queue, both under the
        // queue's lock: a later transaction on the same keys commits after
        // this one, so it queues after it, and the log carries the two in
        // timestamp order; and every queued commit is already in this engine,
        // so a watermark that covers it (applied here when its entry commits)
        // never passes a commit still to come.
        let slot = Arc::new(Slot::default());
        let committed = {
            let mut q = self.shared.queue.lock();
            if q.closed {
                // The batcher has stopped (fenced or dropped): the
                // transaction rolls back as it drops; nothing is in any log.
                drop(txn);
                Err(ReplicaError::Fenced { node: id })
            } else {
                match txn.commit(CommitOptions::default()) {
                    Ok(()) => {
                        q.items.push(Queued {
                            rec,
                            bytes: size,
                            seq,
                            slot: slot.clone(),
                        });
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        };
        if let Err(e) = committed {
            // Cannot happen while this node's stable stays below `ts`; if
            // it does, fence: the write is in no log.
            self.fence_and_leave();
            self.shared.pending.lock().remove(&seq);
            self.shared.release(ts);
            return Err(e);
        }
        self.shared.queue_notify.notify_one();
        Ok(PendingWrite {
            value,
            ts: commit_ts,
            slot: Some(slot),
            node: id,
            bound: self.shared.config.write_timeout * 3 + self.shared.config.tick,
        })
    }

    /// Fences this node and stops its raft, so that the others elect a
    /// leader without it.
    fn fence_and_leave(&self) {
        self.shared.fence();
        let raft = self.raft.clone();
        self.rt.spawn(async move {
            let _ = raft.shutdown().await;
        });
    }
}

impl Drop for Replica {
    /// Ends the batcher (queued writes fail); the raft handle itself stops
    /// when [`Raft::shutdown`] is called or its runtime ends.
    fn drop(&mut self) {
        // Relaxed: only ends the batcher's loop; nothing is published with it.
        self.shared.stopped.store(true, Ordering::Relaxed);
        self.shared.queue_notify.notify_one();
    }
}

fn leader_ready(raft: &Raft<TypeConfig>, id: NodeId) -> std::result::Result<(), Option<NodeId>> {
    let rx = raft.metrics();
    let m = rx.borrow();
    let own_term_applied = m
        .last_applied
        .is_some_and(|l| l.leader_id.term == m.current_term);
    if m.state == ServerState::Leader && m.current_leader == Some(id) && own_term_applied {
        Ok(())
    } else {
        Err(m.current_leader.filter(|&l| l != id))
    }
}

/// A commit waiting for its log entry, and where its outcome goes.
pub(crate) struct Queued {
    rec: CommitRecord,
    /// `rec.encoded_len()`, computed once at submit.
    bytes: usize,
    seq: u64,
    slot: Arc<Slot>,
}

/// Commits queued for the next log entry.
#[derive(Default)]
pub(crate) struct Queue {
    items: Vec<Queued>,
    /// The batcher has stopped: nothing more is taken.
    closed: bool,
}

/// The outcome of one queued commit, and when it became known.
#[derive(Default)]
pub(crate) struct Slot {
    outcome: Mutex<Option<(std::result::Result<(), ReplicaError>, Instant)>>,
    cv: Condvar,
}

impl Slot {
    fn set(&self, r: std::result::Result<(), ReplicaError>) {
        *self.outcome.lock() = Some((r, Instant::now()));
        self.cv.notify_all();
    }
}

/// A write committed on the leader whose replication is under way, from
/// [`Replica::submit`].
#[must_use = "a write is acknowledged only when `wait` returns Ok"]
pub struct PendingWrite<R> {
    value: R,
    ts: Timestamp,
    slot: Option<Arc<Slot>>,
    node: NodeId,
    bound: Duration,
}

impl<R> PendingWrite<R> {
    /// The commit timestamp (`Timestamp::NONE` if the transaction wrote
    /// nothing).
    pub fn commit_ts(&self) -> Timestamp {
        self.ts
    }

    /// Whether the outcome is known ([`PendingWrite::wait`] will not block).
    pub fn is_done(&self) -> bool {
        self.slot
            .as_ref()
            .is_none_or(|s| s.outcome.lock().is_some())
    }

    /// When the outcome became known, if it is.
    pub fn done_at(&self) -> Option<Instant> {
        self.slot
            .as_ref()
            .and_then(|s| s.outcome.lock().as_ref().map(|o| o.1))
    }

    /// Waits for the outcome: `Ok` when the write's log entry is committed
    /// (in the log of a majority).
    ///
    /// # Errors
    /// [`ReplicaError::Fenced`] when the entry failed or timed out (the
    /// outcome is unknown; the node fenced itself and left the cluster);
    /// [`ReplicaError::NotLeader`] when openraft refused the entry because
    /// the node is no longer the leader (the node fenced itself too: its
    /// engine holds the commit); [`ReplicaError::Timeout`] if no outcome
    /// came within three write timeouts.
    pub fn wait(self) -> std::result::Result<(R, Timestamp), ReplicaError> {
        self.wait_timed().map(|(r, ts, _)| (r, ts))
    }

    /// [`PendingWrite::wait`], also returning when the outcome became known.
    ///
    /// # Errors
    /// As [`PendingWrite::wait`].
    pub fn wait_timed(self) -> std::result::Result<(R, Timestamp, Instant), ReplicaError> {
        let Some(slot) = self.slot else {
            return Ok((self.value, self.ts, Instant::now()));
        };
        let deadline = Instant::now() + self.bound;
        let mut g = slot.outcome.lock();
        loop {
            if let Some((r, at)) = g.take() {
                return r.map(|()| (self.value, self.ts, at));
            }
            if slot.cv.wait_until(&mut g, deadline).timed_out() && g.is_none() {
                return Err(ReplicaError::Timeout {
                    what: "a write's log entry to commit",
                    waited: self.bound,
                });
            }
        }
    }

    /// The node the write ran on.
    pub fn node(&self) -> NodeId {
        self.node
    }
}

/// Fences this node and stops its raft, from inside its runtime.
fn leave(shared: &Shared, raft: &Raft<TypeConfig>) {
    shared.fence();
    let raft = raft.clone();
    tokio::spawn(async move {
        let _ = raft.shutdown().await;
    });
}

/// Hands `outcome` to every write of one entry. A failure fences the node
/// first: its engine holds those commits, and their entry may or may not
/// commit.
fn resolve(
    shared: &Shared,
    raft: &Raft<TypeConfig>,
    items: Vec<(u64, u64, Arc<Slot>)>,
    outcome: std::result::Result<(), ReplicaError>,
) {
    if outcome.is_err() && !items.is_empty() {
        leave(shared, raft);
    }
    for (seq, ts, slot) in items {
        shared.pending.lock().remove(&seq);
        shared.release(ts);
        slot.set(outcome.clone());
    }
}

/// The leader's batcher (group commit and the watermark): whenever commits
/// are queued and fewer than `max_batches_in_flight` entries are out, or
/// every `tick`, appends one `Batch` entry with every queued commit and the
/// watermark, if it moved.
async fn batcher(shared: Arc<Shared>, raft: Raft<TypeConfig>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(
        shared.config.max_batches_in_flight,
    ));
    let id = shared.id;
    // The newest watermark proposed in this leadership.
    let mut sent = 0;
    let mut batch_no = 0;
    loop {
        let _ = tokio::time::timeout(shared.config.tick, shared.queue_notify.notified()).await;
        // Acquire: pairs with the Release store in `fence`; `stopped` is a
        // plain flag (Relaxed: nothing is published with it).
        if shared.fenced.load(Ordering::Acquire) || shared.stopped.load(Ordering::Relaxed) {
            break;
        }
        if leader_ready(&raft, id).is_err() {
            sent = 0;
            // Queued just before leadership went (or the raft stopped): in
            // no log, but committed in this engine, so the node fences.
            let items = std::mem::take(&mut shared.queue.lock().items);
            fail_queued(&shared, &raft, items);
            continue;
        }
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (taken, bytes): (Vec<Queued>, usize) = {
            let mut q = shared.queue.lock();
            // At most `max_batch_commits` commits and `max_batch_bytes` of
            // them; at least one, which `submit` bounded by the bytes.
            let (mut n, mut bytes) = (0, 0);
            for item in q.items.iter().take(shared.config.max_batch_commits) {
                if n > 0 && bytes + item.bytes > shared.config.max_batch_bytes {
                    break;
                }
                n += 1;
                bytes += item.bytes;
            }
            let taken: Vec<Queued> = q.items.drain(..n).collect();
            if !q.items.is_empty() {
                shared.queue_notify.notify_one();
            }
            (taken, bytes)
        };
        let engine = shared.engine();
        let mut own: Vec<u64> = taken.iter().map(|q| q.rec.commit_ts.get()).collect();
        own.sort_unstable();
        let w = shared.low_water_with(&engine, &own);
        let stable = engine
            .query_timestamp(TimestampKind::Stable)
            .map_or(0, Timestamp::get);
        drop(engine);
        let watermark = (w > stable && w > sent).then(|| Timestamp::new(w));
        if taken.is_empty() && watermark.is_none() {
            continue;
        }
        let mut commits = Vec::with_capacity(taken.len());
        let mut items = Vec::with_capacity(taken.len());
        for q in taken {
            items.push((q.seq, q.rec.commit_ts.get(), q.slot));
            commits.push(q.rec);
        }
        let n = commits.len() as u64;
        batch_no += 1;
        let cmd = Command::Batch {
            proposer: super::Proposer {
                node: id,
                run: shared.run,
                batch: batch_no,
            },
            commits: commits.into(),
            watermark,
        };
        // `client_write_ff` hands the entry to RaftCore's channel before it
        // returns, so entries reach the log in the order they are made here.
        match raft.client_write_ff(cmd).await {
            Ok(rx) => {
                shared.ctr.batches.fetch_add(1, Ordering::Relaxed);
                shared.ctr.batched_commits.fetch_add(n, Ordering::Relaxed);
                shared
                    .ctr
                    .largest_batch_bytes
                    .fetch_max(bytes as u64, Ordering::Relaxed);
                if let Some(w) = watermark {
                    sent = w.get();
                }
                let (shared, raft) = (shared.clone(), raft.clone());
                tokio::spawn(async move {
                    let timeout = shared.config.write_timeout;
                    let outcome = match tokio::time::timeout(timeout, rx).await {
                        Ok(Ok(Ok(_))) => Ok(()),
                        Ok(Ok(Err(openraft::error::ClientWriteError::ForwardToLeader(f)))) => {
                            Err(ReplicaError::NotLeader {
                                node: id,
                                leader: f.leader_id,
                            })
                        }
                        _ => Err(ReplicaError::Fenced { node: id }),
                    };
                    resolve(&shared, &raft, items, outcome);
                    drop(permit);
                });
            }
            Err(_) => {
                resolve(
                    &shared,
                    &raft,
                    items,
                    Err(ReplicaError::Fenced { node: id }),
                );
                break;
            }
        }
    }
    // Stopped: fail what is queued, and refuse more.
    let items = {
        let mut q = shared.queue.lock();
        q.closed = true;
        std::mem::take(&mut q.items)
    };
    fail_queued(&shared, &raft, items);
}

/// Fails writes that were queued but are in no log entry: committed in this
/// engine, so the node fences (`resolve`; nothing happens for none).
fn fail_queued(shared: &Shared, raft: &Raft<TypeConfig>, queued: Vec<Queued>) {
    let items = queued
        .into_iter()
        .map(|q| (q.seq, q.rec.commit_ts.get(), q.slot))
        .collect();
    resolve(
        shared,
        raft,
        items,
        Err(ReplicaError::Fenced { node: shared.id }),
    );
}

/// The read path of one node at its replicated watermark. Cheap to make;
/// one per reading thread.
pub struct Reader {
    shared: Arc<Shared>,
    engine: Arc<Engine>,
    gen: u64,
}

impl Reader {
    /// The engine to open sessions on for [`Reader::begin`].
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The node's watermark now (`Timestamp::NONE`: none yet).
    pub fn watermark(&self) -> Timestamp {
        self.engine
            .query_timestamp(TimestampKind::Stable)
            .unwrap_or(Timestamp::NONE)
    }

    /// Begins a read-only transaction at the node's watermark (the
    /// read-only fast path: no snapshot descriptor, no validation). If
    /// `at_least` is set (not `Timestamp::NONE`), first waits up to `wait`
    /// for the watermark to reach it (read-your-writes after a leader commit
    /// at `at_least`). Before the node has applied any watermark it waits as
    /// if `at_least` were 1.
    ///
    /// # Errors
    /// [`ReplicaError::WatermarkBehind`] naming `at_least` and the watermark
    /// when the wait ran out; [`ReplicaError::WrongEngine`] if `session` is
    /// not on [`Reader::engine`]; [`ReplicaError::EngineReplaced`] after a
    /// snapshot install (take a new reader); [`ReplicaError::Fenced`];
    /// [`ReplicaError::Engine`] from begin.
    pub fn begin<'s, 'e>(
        &self,
        session: &'s mut Session<'e>,
        at_least: Timestamp,
        wait: Duration,
    ) -> std::result::Result<Txn<'s, 'e>, ReplicaError> {
        if !std::ptr::eq(session.engine(), &*self.engine) {
            return Err(ReplicaError::WrongEngine);
        }
        if self.shared.engine_gen.load(Ordering::Relaxed) != self.gen {
            return Err(ReplicaError::EngineReplaced);
        }
        // Without a watermark the fast path would read the newest commits,
        // holes included: require one.
        let need = if at_least.is_none() {
            Timestamp::new(1)
        } else {
            at_least
        };
        if self.watermark() < need {
            self.wait_for(need, wait)?;
        }
        let txn = session.begin(&TxnOptions {
            read_at_stable: true,
            ..TxnOptions::default()
        })?;
        // After begin loaded stable: a fence stored before that stable was
        // published is seen here (the fence precedes the rollback that lets
        // stable move). Acquire: pairs with the Release store in `fence`.
        if self.shared.fenced.load(Ordering::Acquire) {
            drop(txn);
            return Err(ReplicaError::Fenced {
                node: self.shared.id,
            });
        }
        Ok(txn)
    }

    fn wait_for(&self, need: Timestamp, wait: Duration) -> std::result::Result<(), ReplicaError> {
        let start = Instant::now();
        let deadline = start + wait;
        let mut g = self.shared.wm_lock.lock();
        loop {
            let w = self.watermark();
            if w >= need {
                return Ok(());
            }
            // Acquire: pairs with the Release store in `fence`.
            if self.shared.fenced.load(Ordering::Acquire) {
                return Err(ReplicaError::Fenced {
                    node: self.shared.id,
                });
            }
            if self.shared.engine_gen.load(Ordering::Relaxed) != self.gen {
                return Err(ReplicaError::EngineReplaced);
            }
            if Instant::now() >= deadline
                || self.shared.wm_cv.wait_until(&mut g, deadline).timed_out()
            {
                let w = self.watermark();
                if w >= need {
                    return Ok(());
                }
                return Err(ReplicaError::WatermarkBehind {
                    requested: need,
                    watermark: w,
                    waited: start.elapsed(),
                });
            }
        }
    }
}
