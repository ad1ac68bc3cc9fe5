//! [`ReplicaError`]: what goes wrong in a replicated operation.

use std::fmt;
use std::time::Duration;

use super::entry::NodeId;
use crate::{Error, Timestamp};

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
    /// made; take a new [`Reader`](super::Reader).
    EngineReplaced,
    /// The session passed to [`Reader::begin`](super::Reader::begin) belongs to another engine.
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
    /// A transaction's log record could be `size` bytes (its size with its
    /// timestamps and origin at their widest), above the bound on one log
    /// entry ([`ReplicaConfig::max_batch_bytes`](super::ReplicaConfig::max_batch_bytes)); it was rolled
    /// back, nothing of it committed. Split it into smaller transactions.
    CommitTooLarge {
        /// The record's encoded size at most.
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
impl From<crate::CommitError<'_, '_>> for ReplicaError {
    fn from(e: crate::CommitError<'_, '_>) -> Self {
        ReplicaError::Engine(e.into_error())
    }
}

pub(crate) fn raft_err(e: impl fmt::Display) -> ReplicaError {
    ReplicaError::Raft {
        message: e.to_string(),
    }
}
