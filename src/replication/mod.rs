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
//! # Named tables
//!
//! The leader creates and drops tables through the log
//! ([`Replica::create_table`], [`Replica::drop_table`]): each is an entry
//! that every node, the leader too, applies in log order, creating a table
//! with the id the leader chose (so ids agree on every node and are never
//! reused). A leader transaction writes tables through
//! [`WriteTxn::table`]; its commit is one record, whatever tables it
//! wrote. Followers read them at the watermark through
//! [`Reader::table`]. A write to a table dropped before its entry is
//! skipped on every node, as the leader's drop discarded it.
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

// Code map. The log's contents (`entry.rs`), settings (`config.rs`), errors
// (`error.rs`); a node (`replica.rs`) and what its parts share
// (`shared.rs`); the leader's write path (`writes.rs`), queue (`queue.rs`)
// and batcher (`batcher.rs`); the read path (`reader.rs`); openraft's
// storage: the log (`log_store.rs`, on disk in `disk/`) and the state
// machine (`state_machine.rs`, its snapshots in `snapshot.rs`); transports
// (`network.rs` in process, `tcp/`) and `LocalCluster` (`cluster.rs`).
// Imports run one way (no file imports one that imports it back):
// `shared.rs` imports only the entry, config and queue types, and only the
// write path, the cluster and `tcp/` import `replica.rs`.

mod batcher;
mod cluster;
mod codec;
mod config;
mod disk;
mod entry;
mod error;
mod log_store;
mod network;
mod queue;
mod reader;
mod replica;
mod shared;
mod snapshot;
mod state_machine;
mod tcp;
#[cfg(test)]
mod tests;
mod writes;

// From the rest of the crate the module uses the KV layer's public API, the
// sync shim and, in `disk/`, the durability layer's frame format and I/O
// errors.

pub use cluster::LocalCluster;
pub use config::{ReplicaConfig, BATCH_FRAME_SLACK, MAX_BATCH_BYTES};
pub use disk::{LogOptions, LogRecovery};
pub use entry::{
    Applied, Command, CommitRecord, NodeId, Origin, Proposer, TableDef, TypeConfig, Write,
};
pub use error::ReplicaError;
pub use log_store::LogStore;
pub use network::{LocalNetwork, LocalNetworkFactory, Router};
pub use reader::Reader;
pub use replica::{Replica, ReplicaStats};
pub use state_machine::StateMachine;
pub use tcp::{
    ClientError, ClientRequest, ClientResponse, NodeConfig, Op, Request, Response, TableInfo,
    TableKeys, TableOps, TcpClient, TcpConfig, TcpNetwork, TcpNetworkFactory, TcpNode,
    TransportError, MAX_CLUSTER_NAME, MAX_FRAME_BOUND, MIN_FRAME_BYTES, WIRE_VERSION,
};
pub use writes::{PendingWrite, WriteOptions, WriteTable, WriteTxn};
