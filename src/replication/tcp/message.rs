//! What the frames carry: every [`Request`] a node receives (openraft's
//! RPCs and a client's [`ClientRequest`]) and every [`Response`] it sends.
//!
//! A client request addresses the default table unless it names a table:
//! [`ClientRequest::Write`] and [`ClientRequest::Read`] are the default
//! table's; [`ClientRequest::WriteTables`], [`ClientRequest::ReadTables`]
//! and [`ClientRequest::Scan`] take a table name per group (`None`: the
//! default table), so one transaction writes, or one read reads, several
//! tables at once.

use std::fmt;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use crate::replication::entry::{NodeId, TypeConfig};
use crate::TableNameProblem;

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
    /// A read-write transaction on the leader in the default table,
    /// acknowledged once replicated to a majority.
    Write {
        /// Its operations, in order.
        ops: Vec<Op>,
    },
    /// A read-only transaction at the node's watermark in the default
    /// table, after it reaches `at_least` (waiting at most `wait_ms`).
    Read {
        /// The keys to read.
        keys: Vec<Vec<u8>>,
        /// The smallest watermark to read at (0: any).
        at_least: u64,
        /// How long to wait for it, in milliseconds.
        wait_ms: u64,
    },
    /// A read-write transaction on the leader over any tables: each group's
    /// operations, in order, in its table; one commit (one log entry) for
    /// all, acknowledged once replicated to a majority.
    WriteTables {
        /// The groups, in order (a table may appear in several).
        writes: Vec<TableOps>,
    },
    /// A read-only transaction at the node's watermark over any tables,
    /// after it reaches `at_least` (waiting at most `wait_ms`).
    ReadTables {
        /// The keys to read, table by table.
        reads: Vec<TableKeys>,
        /// The smallest watermark to read at (0: any).
        at_least: u64,
        /// How long to wait for it, in milliseconds.
        wait_ms: u64,
    },
    /// The visible pairs of one table with keys from `start` (inclusive)
    /// to `end` (exclusive; `None`: to the last key), in key order, at the
    /// node's watermark once it reaches `at_least` (waiting at most
    /// `wait_ms`): at most `limit` pairs, and no more than fit one frame.
    /// Each call reads at its own watermark; [`ClientResponse::Scanned`]
    /// says where the next page starts.
    Scan {
        /// The table (`None`: the default table).
        table: Option<String>,
        /// The first key.
        start: Vec<u8>,
        /// The key the scan stops before (`None`: no bound).
        end: Option<Vec<u8>>,
        /// The most pairs to return.
        limit: u32,
        /// The smallest watermark to read at (0: any).
        at_least: u64,
        /// How long to wait for it, in milliseconds.
        wait_ms: u64,
    },
    /// Creates the named table `name` on every node
    /// ([`Replica::create_table`](crate::replication::Replica::create_table),
    /// on the leader).
    CreateTable {
        /// The name.
        name: String,
        /// Its longest key in bytes (`None`: the engine's bound).
        max_key_len: Option<u64>,
        /// Its longest value in bytes (`None`: the engine's bound).
        max_value_len: Option<u64>,
    },
    /// Drops the named table `name` on every node
    /// ([`Replica::drop_table`](crate::replication::Replica::drop_table),
    /// on the leader).
    DropTable {
        /// The name.
        name: String,
    },
    /// The node's live named tables.
    ListTables,
}

/// One table's operations in a [`ClientRequest::WriteTables`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableOps {
    /// The table (`None`: the default table).
    pub table: Option<String>,
    /// Its operations, in order.
    pub ops: Vec<Op>,
}

/// One table's keys in a [`ClientRequest::ReadTables`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableKeys {
    /// The table (`None`: the default table).
    pub table: Option<String>,
    /// The keys to read.
    pub keys: Vec<Vec<u8>>,
}

/// A named table on a node: [`ClientResponse::TableCreated`] and
/// [`ClientResponse::Tables`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    /// Its name.
    pub name: String,
    /// Its id, the same on every node.
    pub id: u32,
    /// Its longest key, in bytes.
    pub max_key_len: u64,
    /// Its longest value, in bytes.
    pub max_value_len: u64,
}

/// Why a client request failed.
///
/// An engine error about tables or bounds
/// ([`Error::TableNotFound`](crate::Error::TableNotFound) and the rest)
/// arrives as the variant of the same name here, with the same fields
/// (sizes as `u64`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// A table name the engine refuses.
    InvalidTableName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        #[serde(with = "name_problem")]
        problem: TableNameProblem,
    },
    /// A create of a name a live table has.
    TableExists {
        /// The name.
        name: String,
    },
    /// No live table has this name (never created, or dropped).
    TableNotFound {
        /// The name.
        name: String,
    },
    /// The table was dropped while the request used it (a write to it is
    /// rolled back whole).
    TableDropped {
        /// The name.
        name: String,
    },
    /// A [`ClientRequest::CreateTable`] bound out of its range.
    TableOptionOutOfRange {
        /// The field, by its name in [`TableOptions`](crate::TableOptions).
        field: String,
        /// The rejected value.
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// Every table id was used.
    TableIdsExhausted,
    /// A key longer than its table's bound.
    KeyTooLarge {
        /// The key's length.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// A value longer than its table's bound.
    ValueTooLarge {
        /// The value's length.
        len: u64,
        /// The bound.
        max: u64,
    },
}

/// [`TableNameProblem`] on the wire (it has no serde derive: the engine
/// builds without serde).
mod name_problem {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::TableNameProblem;

    #[derive(Serialize, Deserialize)]
    enum Wire {
        Empty,
        TooLong { len: u64, max: u64 },
        Nul { at: u64 },
    }

    pub(super) fn serialize<S: Serializer>(p: &TableNameProblem, s: S) -> Result<S::Ok, S::Error> {
        match *p {
            TableNameProblem::Empty => Wire::Empty,
            TableNameProblem::TooLong { len, max } => Wire::TooLong {
                len: len as u64,
                max: max as u64,
            },
            TableNameProblem::Nul { at } => Wire::Nul { at: at as u64 },
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<TableNameProblem, D::Error> {
        let size = |v: u64| usize::try_from(v).map_err(serde::de::Error::custom);
        Ok(match Wire::deserialize(d)? {
            Wire::Empty => TableNameProblem::Empty,
            Wire::TooLong { len, max } => TableNameProblem::TooLong {
                len: size(len)?,
                max: size(max)?,
            },
            Wire::Nul { at } => TableNameProblem::Nul { at: size(at)? },
        })
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotLeader { leader } => write!(f, "not the leader (leader: {leader:?})"),
            ClientError::Conflict => write!(f, "write conflict"),
            ClientError::Fenced => write!(f, "the node is fenced"),
            ClientError::Other(s) => f.write_str(s),
            ClientError::InvalidTableName { name, problem } => {
                write!(f, "table name {name:?} {problem}")
            }
            ClientError::TableExists { name } => write!(f, "table {name:?} already exists"),
            ClientError::TableNotFound { name } => write!(f, "no table named {name:?}"),
            ClientError::TableDropped { name } => write!(f, "table {name:?} was dropped"),
            ClientError::TableOptionOutOfRange { field, value, max } => {
                write!(
                    f,
                    "TableOptions::{field} {value} is out of range (0..={max})"
                )
            }
            ClientError::TableIdsExhausted => write!(f, "every table id was used"),
            ClientError::KeyTooLarge { len, max } => {
                write!(
                    f,
                    "a key of {len} bytes is above the table's bound of {max}"
                )
            }
            ClientError::ValueTooLarge { len, max } => {
                write!(
                    f,
                    "a value of {len} bytes is above the table's bound of {max}"
                )
            }
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
    /// For [`ClientRequest::ReadTables`]: the values read at timestamp
    /// `ts`, one list per [`TableKeys`] in the order asked.
    ReadTables {
        /// The read timestamp (the watermark read at).
        ts: u64,
        /// The values, table by table.
        values: Vec<Vec<Option<Vec<u8>>>>,
    },
    /// For [`ClientRequest::Scan`]: the pairs read at timestamp `ts`.
    Scanned {
        /// The read timestamp (the watermark read at).
        ts: u64,
        /// The pairs, in key order.
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
        /// Where the next page starts (the first key not returned), if
        /// the page stopped at its limit or the frame bound; `None`: the
        /// range is done.
        next: Option<Vec<u8>>,
    },
    /// For [`ClientRequest::CreateTable`]: the table, created on a majority
    /// and on the node that answers.
    TableCreated(TableInfo),
    /// For [`ClientRequest::DropTable`]: the drop is on a majority and on
    /// the node that answers.
    Dropped,
    /// For [`ClientRequest::ListTables`]: the node's live named tables, in
    /// name order.
    Tables(Vec<TableInfo>),
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
