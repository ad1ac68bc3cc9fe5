//! [`Replica`]: one node. Starting it (in memory or on its directory),
//! what it reports, and the read path it hands out; its write path is
//! `writes.rs`.

use std::sync::Arc;
use std::time::Instant;

use openraft::{Raft, RaftNetworkFactory};

use super::batcher::{batcher, leader_ready};
use super::config::ReplicaConfig;
use super::disk::{self, Disk, LogRecovery};
use super::entry::{NodeId, TypeConfig};
use super::error::{raft_err, ReplicaError};
use super::log_store::LogStore;
use super::reader::Reader;
use super::shared::Shared;
use super::state_machine::StateMachine;
use crate::sync::Ordering;
use crate::{Engine, Timestamp, TimestampKind};

/// Counters and state of one node, from [`Replica::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaStats {
    /// Commit entries installed into this node's engine by the state machine.
    pub applied_commits: u64,
    /// Writes those entries installed.
    pub applied_writes: u64,
    /// Writes those entries carried to a table this node no longer had
    /// (dropped before the entry), skipped.
    pub skipped_writes: u64,
    /// Named tables created by applying the log (a snapshot's tables are
    /// not counted).
    pub tables_created: u64,
    /// Named tables dropped by applying the log.
    pub tables_dropped: u64,
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
    /// The most bytes of commits
    /// ([`CommitRecord::encoded_len`](super::CommitRecord::encoded_len)) one of
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
    pub(super) raft: Raft<TypeConfig>,
    pub(super) rt: tokio::runtime::Handle,
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
    ) -> Result<Replica, ReplicaError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        config.validate()?;
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
    /// [`Error::UnsupportedFormat`](crate::Error) if `dir` was written in
    /// format version 1 (bincode 1.3; left unchanged);
    /// [`Error::InvalidDurabilityOption`](crate::Error) if
    /// [`ReplicaConfig::log`] is out of bounds. All inside
    /// [`ReplicaError::Engine`].
    pub fn open<N>(
        id: NodeId,
        config: ReplicaConfig,
        dir: impl AsRef<std::path::Path>,
        network: N,
        rt: tokio::runtime::Handle,
    ) -> Result<Replica, ReplicaError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        config.validate()?;
        let opened = disk::open(dir.as_ref(), config.log)?;
        Replica::start(id, config, network, rt, Some(opened))
    }

    /// Starts a node whose `config` has been validated; `opened`: a durable
    /// node's files and what recovery found in them.
    fn start<N>(
        id: NodeId,
        config: ReplicaConfig,
        network: N,
        rt: tokio::runtime::Handle,
        opened: Option<(Disk, disk::Recovered, LogRecovery)>,
    ) -> Result<Replica, ReplicaError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        let raft_config = Arc::new(config.raft.clone().validate().map_err(raft_err)?);
        let engine = Arc::new(Engine::new(config.engine.clone())?);
        let shared = Arc::new(Shared::new(id, config, engine));
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
        self.shared.is_fenced()
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
            skipped_writes: c.skipped_writes.load(Ordering::Relaxed),
            tables_created: c.tables_created.load(Ordering::Relaxed),
            tables_dropped: c.tables_dropped.load(Ordering::Relaxed),
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
        Reader::new(self.shared.clone())
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
