//! Follower replicas on [openraft]: read-only transactions at a replicated
//! watermark (cargo feature `replication`).
//!
//! A [`Replica`] is one node: an [`Engine`](crate::Engine), an openraft
//! [`Raft`](openraft::Raft) handle, a log store (in memory from
//! [`Replica::new`]; on disk from [`Replica::open`], which a restart
//! recovers from) and a state machine that applies the log to the engine. The leader runs read-write
//! transactions ([`Replica::write`], or pipelined: [`Replica::submit`]);
//! every commit becomes a [`CommitRecord`] (commit timestamp, durable
//! timestamp, the writes) that is replicated before the write is
//! acknowledged. The leader's batcher puts every commit queued meanwhile into
//! one [`Command::Batch`] entry (group commit, at most
//! [`ReplicaConfig::max_batches_in_flight`] entries out at a time), with the
//! watermark after them; a node that applies a watermark `W` sets its stable
//! timestamp to `W`, so read-only transactions at stable ([`Reader::begin`])
//! see exactly the commits at or below `W`, and never one with a hole below
//! it.
//!
//! ```
//! use snapshot_engine::replication::{LocalCluster, ReplicaConfig};
//! use std::time::Duration;
//!
//! let cluster = LocalCluster::start(3, ReplicaConfig::default())?;
//! let leader = cluster.wait_for_leader(Duration::from_secs(5))?;
//! let (_, ts) = cluster.node(leader).unwrap().write(|txn| txn.put(b"k", b"v"))?;
//! let follower = cluster.ids().into_iter().find(|&id| id != leader).unwrap();
//! let reader = cluster.node(follower).unwrap().reader();
//! let mut session = reader.engine().session()?;
//! // Read-your-writes: wait (at most 1 s) until the follower's watermark covers `ts`.
//! let mut txn = reader.begin(&mut session, ts, Duration::from_secs(1))?;
//! assert_eq!(txn.get(b"k")?, Some(b"v".to_vec()));
//! # Ok::<(), snapshot_engine::replication::ReplicaError>(())
//! ```
//!
//! # The watermark rule (no holes)
//!
//! Commit timestamps are allocated by the leader at commit time and
//! registered as *in flight* until the commit's log entry is in the leader's
//! own log (its log store appended it). For an entry that carries the
//! commits `B`, the leader's watermark is `W = min(in-flight \ B) - 1`, or
//! the newest allocated (or logged) timestamp when none is in flight, and the
//! entry carries `W` after `B`. So every commit at or below `W` is in the log
//! at or before `W`, and every commit after `W` in the log has a timestamp
//! above `W`. A node applies
//! the log in order and sets stable to the last applied `W`: everything at or
//! below its stable has been applied, so its reads have no holes. DESIGN.md,
//! "Replication", gives the full argument, failover included.
//!
//! # What a user supplies
//!
//! A transport: [`TcpNetworkFactory`] (nodes in separate processes, one
//! [`TcpNode`] each, started from a [`NodeConfig`]), [`LocalNetwork`] (in
//! process, for tests), or its own [`openraft::RaftNetworkFactory`]; and,
//! for crash durability, a directory per node ([`Replica::open`],
//! [`NodeConfig::data_dir`]).

mod cluster;
mod disk;
mod log_store;
mod network;
mod node;
mod state_machine;
mod tcp;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io::Cursor;
use std::time::Duration;

// The KV layer's public API; besides it the module uses only the sync shim
// and, in `disk.rs`, the durability layer's frame format and I/O errors.
use crate::{Error, Timestamp};

pub use cluster::LocalCluster;
pub use disk::{LogOptions, LogRecovery};
pub use log_store::LogStore;
pub use network::{LocalNetwork, LocalNetworkFactory, Router};
pub use node::{PendingWrite, Reader, Replica, ReplicaStats, WriteOptions, WriteTxn};
pub use state_machine::StateMachine;
pub use tcp::{
    ClientError, ClientRequest, ClientResponse, NodeConfig, Op, Request, Response, TcpClient,
    TcpConfig, TcpNetwork, TcpNetworkFactory, TcpNode, TransportError, MAX_FRAME_BOUND,
    MIN_FRAME_BYTES,
};

/// A node's id in the cluster.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft's type configuration for replicated engines.
    pub TypeConfig:
        D = Command,
        R = Applied,
        NodeId = NodeId,
        Node = openraft::BasicNode,
);

/// One write of a replicated commit.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Write {
    /// The key.
    pub key: Vec<u8>,
    /// The new value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// The largest [`ReplicaConfig::max_batch_bytes`].
pub const MAX_BATCH_BYTES: usize = 1 << 30;

/// What a log entry adds to its commits' bytes in a transport frame (the
/// entry's log id, the batch's proposer and watermark, the AppendEntries
/// request around it), with room to spare.
pub const BATCH_FRAME_SLACK: usize = 1024;

/// Which leader transaction a commit entry came from: the proposing node and
/// its own sequence number. The proposing node skips applying its own
/// entries (its transaction commits them locally).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The node that proposed the entry.
    pub node: NodeId,
    /// That node's sequence number for the proposal.
    pub seq: u64,
}

/// Where a [`Command::Batch`] came from. A node appends its own batches
/// (those of its current run) only one after another, with no batch
/// missing: a later batch may hold commits that read an earlier one's
/// writes on the leader.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Proposer {
    /// The proposing node.
    pub node: NodeId,
    /// That node's run (a value drawn when its [`Replica`] was made).
    pub run: u64,
    /// The batch's number in that run, from 1.
    pub batch: u64,
}

/// A committed leader transaction, as carried in the log.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitRecord {
    /// The commit timestamp the leader committed at.
    #[serde(with = "ts_serde")]
    pub commit_ts: Timestamp,
    /// The durable timestamp. Leader transactions commit unprepared, so it
    /// equals `commit_ts`; it is carried so that a node can advance its
    /// global durable timestamp when the entry is applied.
    #[serde(with = "ts_serde")]
    pub durable_ts: Timestamp,
    /// Where it came from.
    pub origin: Origin,
    /// The writes, in key order (one per key).
    pub writes: Vec<Write>,
}

impl CommitRecord {
    /// The record's size in a log entry (bincode's fixed-width encoding:
    /// two timestamps, the origin, then each write's key and optional value
    /// with 8-byte lengths).
    pub fn encoded_len(&self) -> usize {
        Self::encoded_len_of(self.writes.iter().map(|w| (&w.key[..], w.value.as_deref())))
    }

    /// [`CommitRecord::encoded_len`] of a record holding `writes`.
    pub(crate) fn encoded_len_of<'a>(
        writes: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> usize {
        // commit_ts, durable_ts, origin (node, seq), the writes' length.
        const FIXED: usize = 8 + 8 + 16 + 8;
        FIXED
            + writes
                .map(|(k, v)| 8 + k.len() + 1 + v.map_or(0, |v| 8 + v.len()))
                .sum::<usize>()
    }
}

/// The application data of a log entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Command {
    /// A committed leader transaction.
    Commit(CommitRecord),
    /// The leader's replicated watermark: every commit at or below it was
    /// appended before this entry. A node that applies it sets its stable
    /// timestamp to it.
    Watermark {
        /// The watermark.
        #[serde(with = "ts_serde")]
        ts: Timestamp,
    },
    /// Many committed leader transactions in one entry (group commit), then
    /// optionally a watermark: every commit at or below it is in this entry
    /// or in an entry before it. A node applies the commits in order, then
    /// the watermark.
    Batch {
        /// Which node proposed it, in which run of that node, and its place
        /// among that run's batches (1, 2, ...).
        proposer: Proposer,
        /// The commits, in the order their transactions committed on the
        /// leader (so two commits of one key are in timestamp order).
        /// Shared: openraft clones an entry for every follower it sends it
        /// to, and a clone is a reference count.
        commits: std::sync::Arc<[CommitRecord]>,
        /// The watermark carried after them, if it moved.
        #[serde(with = "opt_ts_serde")]
        watermark: Option<Timestamp>,
    },
}

/// What applying one log entry reports back to the proposer.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// The node's stable timestamp after the entry was applied.
    #[serde(with = "opt_ts_serde")]
    pub stable: Option<Timestamp>,
}

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
    /// itself ([`ReplicaError::Fenced`]) and leaves the cluster.
    pub write_timeout: Duration,
    /// Keep a history of (watermark, time applied) pairs on every node, for
    /// staleness measurements ([`Replica::watermark_history`]).
    pub record_watermarks: bool,
    /// The most commits the leader puts in one log entry.
    pub max_batch_commits: usize,
    /// The most bytes of encoded commits ([`CommitRecord::encoded_len`]) the
    /// leader puts in one log entry, 1,024 to [`MAX_BATCH_BYTES`]. A
    /// transaction whose own record is larger is refused when submitted
    /// ([`ReplicaError::CommitTooLarge`]), before it commits anywhere. A
    /// [`TcpNode`] lowers it to its frame bound less [`BATCH_FRAME_SLACK`]
    /// where it is above that, so that every entry can be sent.
    pub max_batch_bytes: usize,
    /// The most log entries of commits the leader has proposed and not yet
    /// seen committed; while that many are out, new commits queue up and
    /// go out together in the next entry (group commit).
    pub max_batches_in_flight: usize,
    /// openraft's own settings (heartbeat, elections, snapshots).
    pub raft: openraft::Config,
    /// How a durable node ([`Replica::open`]) keeps its raft log; unused in
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

/// What went wrong in a replicated operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaError {
    /// The engine refused an operation (a write conflict, a bad key, ...).
    Engine(Error),
    /// A reader asked for at least `requested`, and the node's watermark was
    /// still `watermark` after waiting `waited` (its bound).
    WatermarkBehind {
        /// The timestamp the reader needed.
        requested: Timestamp,
        /// The node's watermark when it gave up (`Timestamp::NONE`: none yet).
        watermark: Timestamp,
        /// How long it waited.
        waited: Duration,
    },
    /// Writes go to the leader; this node is not it (or has not yet applied
    /// its own term's first entry).
    NotLeader {
        /// This node.
        node: NodeId,
        /// The leader it knows of, if any.
        leader: Option<NodeId>,
    },
    /// A write's outcome is unknown (its log entry failed or timed out), so
    /// this node's engine may differ from the log: it refuses reads and
    /// writes and has left the cluster. Replace it with a new node, which
    /// catches up from a snapshot.
    Fenced {
        /// This node.
        node: NodeId,
    },
    /// The node installed a snapshot into a new engine after this reader was
    /// made; take a new [`Reader`].
    EngineReplaced,
    /// The session passed to [`Reader::begin`] belongs to another engine.
    WrongEngine,
    /// openraft reported an error.
    Raft {
        /// Its message.
        message: String,
    },
    /// A snapshot could not be decoded.
    BadSnapshot {
        /// What was wrong.
        what: String,
    },
    /// A setting is out of its range.
    BadConfig {
        /// Which setting and what was wrong with it, with its bound.
        what: String,
    },
    /// A transaction's log record would be `size` bytes, above the bound
    /// on one log entry ([`ReplicaConfig::max_batch_bytes`]); it was rolled
    /// back, nothing of it committed. Split it into smaller transactions.
    CommitTooLarge {
        /// The record's encoded size.
        size: usize,
        /// The bound.
        bound: usize,
    },
    /// Waited longer than the bound for a cluster event.
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// The bound.
        waited: Duration,
    },
}

impl fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplicaError::Engine(e) => write!(f, "engine: {e}"),
            ReplicaError::WatermarkBehind {
                requested,
                watermark,
                waited,
            } => write!(
                f,
                "read needs timestamp {} but the replicated watermark is {} (waited {:?})",
                requested.get(),
                watermark.get(),
                waited
            ),
            ReplicaError::NotLeader { node, leader } => match leader {
                Some(l) => write!(f, "node {node} is not the leader; node {l} is"),
                None => write!(f, "node {node} is not the leader; no leader known"),
            },
            ReplicaError::Fenced { node } => write!(
                f,
                "node {node} is fenced: a write's outcome is unknown; replace the node"
            ),
            ReplicaError::EngineReplaced => {
                write!(f, "the node installed a snapshot; take a new reader")
            }
            ReplicaError::WrongEngine => {
                write!(f, "the session belongs to another engine than the reader's")
            }
            ReplicaError::Raft { message } => write!(f, "openraft: {message}"),
            ReplicaError::BadSnapshot { what } => write!(f, "bad snapshot: {what}"),
            ReplicaError::BadConfig { what } => write!(f, "bad configuration: {what}"),
            ReplicaError::CommitTooLarge { size, bound } => write!(
                f,
                "the transaction's log record is {size} bytes, above the bound of {bound} bytes per log entry (max_batch_bytes); it was rolled back"
            ),
            ReplicaError::Timeout { what, waited } => {
                write!(f, "timed out after {waited:?} waiting for {what}")
            }
        }
    }
}

impl std::error::Error for ReplicaError {}

impl From<Error> for ReplicaError {
    fn from(e: Error) -> Self {
        ReplicaError::Engine(e)
    }
}

/// A refused commit: its error (the transaction, if handed back, rolls back
/// as the `CommitError` drops).
impl<P: crate::Protocol> From<crate::CommitError<'_, '_, P>> for ReplicaError {
    fn from(e: crate::CommitError<'_, '_, P>) -> Self {
        ReplicaError::Engine(e.into_error())
    }
}

fn raft_err(e: impl fmt::Display) -> ReplicaError {
    ReplicaError::Raft {
        message: e.to_string(),
    }
}

/// Timestamps on the wire: the raw value, checked against
/// [`Timestamp::MAX`] when read.
mod ts_serde {
    use crate::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(ts.get())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let v = u64::deserialize(d)?;
        if v > Timestamp::MAX.get() {
            return Err(serde::de::Error::custom(format!(
                "timestamp {v} above the maximum {}",
                Timestamp::MAX.get()
            )));
        }
        Ok(Timestamp::new(v))
    }
}

/// Optional timestamps on the wire.
mod opt_ts_serde {
    use crate::Timestamp;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        ts: &Option<Timestamp>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        ts.map(Timestamp::get).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Timestamp>, D::Error> {
        match Option::<u64>::deserialize(d)? {
            Some(v) if v > Timestamp::MAX.get() => Err(serde::de::Error::custom(format!(
                "timestamp {v} above the maximum {}",
                Timestamp::MAX.get()
            ))),
            v => Ok(v.map(Timestamp::new)),
        }
    }
}

/// The snapshot format's data, shared by the builder and the installer.
pub(crate) type SnapshotBytes = Cursor<Vec<u8>>;
