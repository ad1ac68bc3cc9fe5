//! What a node's parts (write path, batcher, state machine, log store,
//! readers) share: [`Shared`], with the engine, the fence, the tracker of
//! commit timestamps in flight, the commit queue and the counters.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, RwLock};

use super::config::ReplicaConfig;
use super::entry::{NodeId, Proposer};
use super::queue::Queue;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::{Engine, Timestamp, TimestampKind};

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
/// [`Replica::stats`](super::Replica::stats), publishing nothing.
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
    pub(crate) skipped_writes: AtomicU64,
    pub(crate) tables_created: AtomicU64,
    pub(crate) tables_dropped: AtomicU64,
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
    pub(crate) engine_gen: AtomicU64,
    /// A write's outcome is unknown: refuse reads and writes.
    fenced: AtomicBool,
    /// The `Replica` was dropped: the ticker ends.
    pub(crate) stopped: AtomicBool,
    /// The newest timestamp in any entry this node's log has held.
    log_max_ts: AtomicU64,
    tracker: Mutex<Tracker>,
    /// This node's own proposals whose transactions are still open, by
    /// sequence number, with their commit timestamps: the state machine
    /// skips their entries (the transaction commits the versions itself).
    pub(crate) pending: Mutex<HashMap<u64, u64>>,
    /// Commits waiting for the batcher.
    pub(crate) queue: Mutex<Queue>,
    /// This run of the node (tells its own batches from those of an
    /// earlier run with the same id).
    pub(crate) run: u64,
    /// The number of the last own batch of this run appended to this
    /// node's log (the log store checks that none is missing).
    pub(crate) last_own_batch: Mutex<u64>,
    pub(crate) queue_notify: tokio::sync::Notify,
    pub(crate) wm_lock: Mutex<()>,
    pub(crate) wm_cv: Condvar,
    pub(crate) ctr: Counters,
    pub(crate) history: Mutex<Vec<(Timestamp, Instant)>>,
    /// The id the next replicated table create may take: above every id
    /// the applied log (or the installed snapshot) created, dropped ones
    /// included, so no id is reused. Set by the state machine.
    pub(crate) next_table: Mutex<u32>,
    /// Held by the leader's table creates and drops, one at a time, from
    /// proposal to outcome; holds the newest table id this node proposed.
    pub(crate) ddl: Mutex<u32>,
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
    proposer: &Proposer,
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
    /// The state of node `id`, starting on `engine`, in a new run.
    pub(crate) fn new(id: NodeId, config: ReplicaConfig, engine: Arc<Engine>) -> Shared {
        Shared {
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
            next_table: Mutex::new(1),
            ddl: Mutex::new(0),
        }
    }

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

    /// The newest timestamp in this node's log or engine: a new commit
    /// timestamp goes above it.
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
    pub(crate) fn low_water_with(&self, engine: &Engine, own: &[u64]) -> u64 {
        let floor = self.floor(engine);
        let t = self.tracker.lock();
        let newest = t.last.max(floor);
        match t.in_flight.iter().find(|ts| own.binary_search(ts).is_err()) {
            Some(&m) => (m - 1).min(newest),
            None => newest,
        }
    }

    /// Allocates a commit timestamp above every timestamp this node has
    /// seen in its log or `engine` (failover: above every replicated one),
    /// and registers it as in flight before anything else can compute a
    /// watermark past it; returns it with the proposal's sequence number.
    pub(crate) fn allocate(&self, engine: &Engine) -> (u64, u64) {
        let floor = self.floor(engine);
        let mut t = self.tracker.lock();
        let ts = t.last.max(floor) + 1;
        t.last = ts;
        t.in_flight.insert(ts);
        t.seq += 1;
        (ts, t.seq)
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
