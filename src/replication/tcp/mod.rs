//! The TCP transport: nodes in separate processes.
//!
//! Every message is one frame of tokio-util's [`LengthDelimitedCodec`] (a
//! 4-byte big-endian length, then the body). The body is the tag byte `R`,
//! the wire version ([`WIRE_VERSION`], 4), then one [`Request`] or
//! [`Response`] in the replication encoding (`codec.rs`, postcard). A
//! frame of another version (version 1: an untagged bincode 1.3 message;
//! version 2: postcard entries without tables; version 3: client requests
//! of the default table only, and the engine's table errors as text) is
//! refused with [`TransportError::UnsupportedVersion`] (a node answers it
//! with [`Response::Refused`] and that error's text, which a version-1
//! peer cannot decode either). A connection carries one request at a time,
//! each answered before the next is sent; a node keeps one connection per
//! peer and per openraft client, and reconnects after any error. Frames
//! above [`TcpConfig::max_frame_bytes`] are refused on both ends with the
//! size and the bound ([`TransportError::FrameTooLarge`]); an AppendEntries
//! that would exceed it is answered to openraft as "payload too large", so
//! it resends fewer entries.
//!
//! [`TcpNode`] is one node served over TCP: a [`Replica`](super::Replica) whose peers are
//! reached through [`TcpNetworkFactory`] (a peer's address is its
//! [`BasicNode::addr`] in the membership), plus a listener that answers
//! raft RPCs and the client requests of [`TcpClient`] (writes on the
//! leader, reads and scans at a follower's watermark, status, and named
//! tables: create and drop on the leader, list, and reads and writes
//! addressed to a table, several in one transaction).
//!
//! Files: `config.rs` (the transport's bounds and a node's config file),
//! `message.rs` (what the frames carry), `transport.rs` (frames and one
//! request/answer connection), `network.rs` (openraft's network over it),
//! `server.rs` ([`TcpNode`]: the listener and the answers) and `client.rs`
//! ([`TcpClient`]).

mod client;
mod config;
mod message;
mod network;
mod server;
mod transport;

pub use client::TcpClient;
pub use config::{NodeConfig, TcpConfig, MAX_CLUSTER_NAME, MAX_FRAME_BOUND, MIN_FRAME_BYTES};
pub use message::{
    ClientError, ClientRequest, ClientResponse, Op, Request, Response, TableInfo, TableKeys,
    TableOps,
};
pub use network::{TcpNetwork, TcpNetworkFactory};
pub use server::TcpNode;
pub use transport::{TransportError, WIRE_VERSION};
