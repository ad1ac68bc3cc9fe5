//! A replica's settings ([`ReplicaConfig`]) and the bounds on them.

use std::time::Duration;

use super::disk::LogOptions;
use super::error::{raft_err, ReplicaError};

/// The largest [`ReplicaConfig::max_batch_bytes`].
pub const MAX_BATCH_BYTES: usize = 1 << 30;

/// What a log entry adds to its commits' bytes in a transport frame (the
/// entry's log id, the batch's proposer and watermark, the AppendEntries
/// request around it), with room to spare.
pub const BATCH_FRAME_SLACK: usize = 1024;

/// Settings of a replica.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    /// How often the leader appends a watermark entry (the watermark delay).
    pub tick: Duration,
    /// Each node sets its oldest timestamp to `watermark - oldest_lag`, so
    /// history older than that may be pruned.
    pub oldest_lag: u64,
    /// How long a write waits for its log entry to be committed. A write
    /// that times out (or fails) leaves its outcome unknown: the node fences
    /// itself ([`ReplicaError::Fenced`](super::ReplicaError::Fenced)) and leaves the cluster.
    pub write_timeout: Duration,
    /// Keep a history of (watermark, time applied) pairs on every node, for
    /// staleness measurements ([`Replica::watermark_history`](super::Replica::watermark_history)).
    pub record_watermarks: bool,
    /// The most commits the leader puts in one log entry.
    pub max_batch_commits: usize,
    /// The most bytes of encoded commits ([`CommitRecord::encoded_len`](super::CommitRecord::encoded_len)) the
    /// leader puts in one log entry, 1,024 to [`MAX_BATCH_BYTES`]. A
    /// transaction whose own record could be larger (with its timestamps
    /// and origin at their widest) is refused when submitted
    /// ([`ReplicaError::CommitTooLarge`](super::ReplicaError::CommitTooLarge)), before it commits anywhere. A
    /// [`TcpNode`](super::TcpNode) lowers it to its frame bound less [`BATCH_FRAME_SLACK`]
    /// where it is above that, so that every entry can be sent.
    pub max_batch_bytes: usize,
    /// The most log entries of commits the leader has proposed and not yet
    /// seen committed; while that many are out, new commits queue up and
    /// go out together in the next entry (group commit).
    pub max_batches_in_flight: usize,
    /// openraft's own settings (heartbeat, elections, snapshots).
    pub raft: openraft::Config,
    /// How a durable node ([`Replica::open`](super::Replica::open)) keeps its raft log; unused in
    /// memory.
    pub log: LogOptions,
    /// The engine settings of every node.
    pub engine: crate::EngineConfig,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig {
            tick: Duration::from_millis(1),
            oldest_lag: 1_000,
            max_batch_commits: 4_096,
            max_batch_bytes: 16 << 20,
            max_batches_in_flight: 2,
            write_timeout: Duration::from_secs(5),
            record_watermarks: false,
            raft: openraft::Config {
                cluster_name: "snapshot-engine".to_string(),
                // Elections generous for nodes that share a loaded machine (a
                // spurious one fences a leader with writes in flight);
                // heartbeats frequent, as a follower that missed the push of
                // a commit index learns it from the next one.
                heartbeat_interval: 20,
                election_timeout_min: 600,
                election_timeout_max: 1200,
                // Snapshots are taken on demand (`LocalCluster::snapshot`) or
                // every 100,000 entries; 1,000 entries are kept after one.
                snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(100_000),
                max_in_snapshot_log_to_keep: 1_000,
                ..Default::default()
            },
            engine: crate::EngineConfig::default(),
            log: LogOptions::default(),
        }
    }
}

impl ReplicaConfig {
    /// Checks every setting before anything is started or any file touched.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a batching bound is out of range;
    /// [`ReplicaError::Raft`] if openraft rejects [`ReplicaConfig::raft`];
    /// the engine's error if [`ReplicaConfig::engine`] is out of bounds.
    pub(crate) fn validate(&self) -> Result<(), ReplicaError> {
        if self.max_batch_commits == 0 || self.max_batches_in_flight == 0 {
            return Err(ReplicaError::BadConfig {
                what: format!(
                    "max_batch_commits {} and max_batches_in_flight {} must be at least 1",
                    self.max_batch_commits, self.max_batches_in_flight
                ),
            });
        }
        if !(1024..=MAX_BATCH_BYTES).contains(&self.max_batch_bytes) {
            return Err(ReplicaError::BadConfig {
                what: format!(
                    "max_batch_bytes {} is out of range: want 1024 to {}",
                    self.max_batch_bytes, MAX_BATCH_BYTES
                ),
            });
        }
        self.raft.clone().validate().map_err(raft_err)?;
        self.engine.validate()?;
        Ok(())
    }
}
