//! What the frames carry: every [`Request`] a node receives (openraft's
//! RPCs and a client's [`ClientRequest`]) and every [`Response`] it sends.

use std::fmt;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use crate::replication::entry::{NodeId, TypeConfig};

/// One operation of a client write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Writes `value` under `key`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Deletes `key`.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Adds `delta` to the signed 8-byte little-endian integer under `key`
    /// (a missing key counts as 0).
    Add {
        /// The key.
        key: Vec<u8>,
        /// The amount.
        delta: i64,
    },
}

/// A client's request to a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// The node's role and watermark.
    Status,
    /// A read-write transaction on the leader, acknowledged once
    /// replicated to a majority.
    Write {
        /// Its operations, in order.
        ops: Vec<Op>,
    },
    /// A read-only transaction at the node's watermark, after it reaches
    /// `at_least` (waiting at most `wait_ms`).
    Read {
        /// The keys to read.
        keys: Vec<Vec<u8>>,
        /// The smallest watermark to read at (0: any).
        at_least: u64,
        /// How long to wait for it, in milliseconds.
        wait_ms: u64,
    },
}

/// Why a client request failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientError {
    /// Writes go to the leader; this node is not it.
    NotLeader {
        /// The leader it knows of.
        leader: Option<NodeId>,
    },
    /// A write conflict: retry.
    Conflict,
    /// The write's outcome is unknown; the node fenced itself.
    Fenced,
    /// Anything else, as text.
    Other(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotLeader { leader } => write!(f, "not the leader (leader: {leader:?})"),
            ClientError::Conflict => write!(f, "write conflict"),
            ClientError::Fenced => write!(f, "the node is fenced"),
            ClientError::Other(s) => f.write_str(s),
        }
    }
}

/// A node's answer to a [`ClientRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientResponse {
    /// For [`ClientRequest::Status`].
    Status {
        /// The node.
        id: NodeId,
        /// The leader it knows of.
        leader: Option<NodeId>,
        /// Whether it is the leader, ready for writes.
        leader_ready: bool,
        /// Its watermark (0: none).
        watermark: u64,
        /// Whether it is fenced.
        fenced: bool,
        /// Log entries it recovered from its directory when it started.
        recovered_entries: u64,
        /// Whether it rebuilt its engine from its own snapshot at start.
        restored_snapshot: bool,
        /// Snapshots it installed from a leader since it started.
        snapshots_installed: u64,
    },
    /// A write was acknowledged at commit timestamp `ts`.
    Written {
        /// Its commit timestamp (0: it wrote nothing).
        ts: u64,
    },
    /// The values read (in the order asked) at timestamp `ts`.
    Read {
        /// The read timestamp (the watermark read at).
        ts: u64,
        /// The values.
        values: Vec<Option<Vec<u8>>>,
    },
    /// The request failed.
    Failed(ClientError),
}

/// Every frame a node receives.
#[derive(Serialize, Deserialize)]
pub enum Request {
    /// openraft's AppendEntries.
    Append(AppendEntriesRequest<TypeConfig>),
    /// openraft's Vote.
    Vote(VoteRequest<NodeId>),
    /// openraft's InstallSnapshot (one chunk).
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// A client's request.
    Client(ClientRequest),
}

/// Every frame a node sends back.
#[derive(Serialize, Deserialize)]
pub enum Response {
    /// To [`Request::Append`].
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Request::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Request::Snapshot`].
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    /// To [`Request::Client`].
    Client(ClientResponse),
    /// The request could not be decoded.
    Refused(String),
}
