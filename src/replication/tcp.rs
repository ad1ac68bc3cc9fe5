//! The TCP transport: nodes in separate processes.
//!
//! Every message is one frame of tokio-util's [`LengthDelimitedCodec`] (a
//! 4-byte big-endian length, then the body) holding one bincode-encoded
//! [`Request`] or [`Response`]. A connection carries one request at a time,
//! each answered before the next is sent; a node keeps one connection per
//! peer and per openraft client, and reconnects after any error. Frames
//! above [`TcpConfig::max_frame_bytes`] are refused on both ends with the
//! size and the bound ([`TransportError::FrameTooLarge`]); an AppendEntries
//! that would exceed it is answered to openraft as "payload too large", so
//! it resends fewer entries.
//!
//! [`TcpNode`] is one node served over TCP: a [`Replica`] whose peers are
//! reached through [`TcpNetworkFactory`] (a peer's address is its
//! [`BasicNode::addr`] in the membership), plus a listener that answers
//! raft RPCs and the client requests of [`TcpClient`] (writes on the
//! leader, reads at a follower's watermark, status).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::node::Replica;
use super::{NodeId, ReplicaConfig, ReplicaError, TypeConfig};
use crate::{Error, Timestamp};

/// Settings of the TCP transport.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// The largest frame sent or accepted, in bytes (at most 1 GiB).
    pub max_frame_bytes: usize,
    /// How long connecting to a peer may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its answer.
    pub rpc_timeout: Duration,
}

/// The smallest [`TcpConfig::max_frame_bytes`]: room for the smallest
/// batch bound ([`ReplicaConfig::max_batch_bytes`](super::ReplicaConfig))
/// and an entry's framing ([`BATCH_FRAME_SLACK`](super::BATCH_FRAME_SLACK)).
pub const MIN_FRAME_BYTES: usize = 1024 + super::BATCH_FRAME_SLACK;

/// The largest [`TcpConfig::max_frame_bytes`].
pub const MAX_FRAME_BOUND: usize = 1 << 30;

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            max_frame_bytes: 64 << 20,
            connect_timeout: Duration::from_secs(1),
            rpc_timeout: Duration::from_secs(5),
        }
    }
}

impl TcpConfig {
    fn validate(&self) -> Result<(), ReplicaError> {
        if self.max_frame_bytes < MIN_FRAME_BYTES || self.max_frame_bytes > MAX_FRAME_BOUND {
            return Err(bad_config(format!(
                "max_frame_bytes {} is out of range: want {MIN_FRAME_BYTES} to {MAX_FRAME_BOUND}",
                self.max_frame_bytes
            )));
        }
        if self.connect_timeout.is_zero() || self.rpc_timeout.is_zero() {
            return Err(bad_config(
                "connect_timeout and rpc_timeout must be above zero".to_string(),
            ));
        }
        Ok(())
    }
}

fn bad_config(what: String) -> ReplicaError {
    ReplicaError::BadConfig { what }
}

/// What went wrong on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// A message's frame is larger than the bound.
    FrameTooLarge {
        /// The frame's size in bytes.
        size: usize,
        /// The bound ([`TcpConfig::max_frame_bytes`]).
        bound: usize,
    },
    /// The peer could not be reached or the connection broke.
    Unreachable {
        /// The peer's address.
        addr: String,
        /// What happened.
        what: String,
    },
    /// No answer within the bound.
    Timeout {
        /// The peer's address.
        addr: String,
        /// The bound.
        waited: Duration,
    },
    /// A frame did not decode as a message.
    BadMessage {
        /// What was wrong.
        what: String,
    },
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::FrameTooLarge { size, bound } => {
                write!(
                    f,
                    "a frame of {size} bytes exceeds the bound of {bound} bytes"
                )
            }
            TransportError::Unreachable { addr, what } => {
                write!(f, "peer {addr} is unreachable: {what}")
            }
            TransportError::Timeout { addr, waited } => {
                write!(f, "peer {addr} did not answer within {waited:?}")
            }
            TransportError::BadMessage { what } => write!(f, "bad message: {what}"),
        }
    }
}

impl std::error::Error for TransportError {}

impl From<TransportError> for ReplicaError {
    fn from(e: TransportError) -> Self {
        ReplicaError::Raft {
            message: e.to_string(),
        }
    }
}

// ---- messages ---------------------------------------------------------------

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

// ---- frames ---------------------------------------------------------------

type Conn = Framed<Stream, LengthDelimitedCodec>;

/// A TCP stream written with `send` (which Rust passes `MSG_NOSIGNAL`), not
/// `writev`: writing to a connection the peer closed is then an `EPIPE`
/// error, never a SIGPIPE for a process that set the signal's default
/// action.
pub(crate) struct Stream(TcpStream);

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

fn framed(s: TcpStream, max: usize) -> Conn {
    let _ = s.set_nodelay(true);
    Framed::new(Stream(s), codec(max))
}

fn codec(max: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(max)
        .new_codec()
}

fn encode<T: Serialize>(msg: &T, bound: usize) -> Result<Vec<u8>, TransportError> {
    let b = bincode::serialize(msg).map_err(|e| TransportError::BadMessage {
        what: e.to_string(),
    })?;
    if b.len() > bound {
        return Err(TransportError::FrameTooLarge {
            size: b.len(),
            bound,
        });
    }
    Ok(b)
}

fn decode<T: for<'de> Deserialize<'de>>(b: &[u8], bound: usize) -> Result<T, TransportError> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(bound as u64)
        .deserialize(b)
        .map_err(|e| TransportError::BadMessage {
            what: e.to_string(),
        })
}

fn io_err(addr: &str, e: impl fmt::Display) -> TransportError {
    let what = e.to_string();
    if what.contains("frame size too big") {
        return TransportError::BadMessage { what };
    }
    TransportError::Unreachable {
        addr: addr.to_string(),
        what,
    }
}

/// One request/answer connection to `addr`, reconnecting after errors.
struct Link {
    addr: String,
    cfg: TcpConfig,
    conn: Option<Conn>,
}

impl Link {
    async fn call(&mut self, req: &Request) -> Result<Response, TransportError> {
        let body = encode(req, self.cfg.max_frame_bytes)?;
        let res = tokio::time::timeout(self.cfg.rpc_timeout, self.exchange(body)).await;
        match res {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(TransportError::Timeout {
                    addr: self.addr.clone(),
                    waited: self.cfg.rpc_timeout,
                })
            }
        }
    }

    async fn exchange(&mut self, body: Vec<u8>) -> Result<Response, TransportError> {
        if self.conn.is_none() {
            let s = tokio::time::timeout(self.cfg.connect_timeout, TcpStream::connect(&self.addr))
                .await
                .map_err(|_| io_err(&self.addr, "connect timed out"))?
                .map_err(|e| io_err(&self.addr, e))?;
            self.conn = Some(framed(s, self.cfg.max_frame_bytes));
        }
        let conn = self.conn.as_mut().expect("connected above");
        conn.send(&body[..])
            .await
            .map_err(|e| io_err(&self.addr, e))?;
        match conn.next().await {
            Some(Ok(frame)) => decode(&frame, self.cfg.max_frame_bytes),
            Some(Err(e)) => Err(io_err(&self.addr, e)),
            None => Err(io_err(&self.addr, "connection closed")),
        }
    }
}

// ---- the raft network -------------------------------------------------------

/// Makes [`TcpNetwork`] clients: one connection per target, at the target's
/// [`BasicNode::addr`].
#[derive(Clone, Debug, Default)]
pub struct TcpNetworkFactory {
    cfg: TcpConfig,
}

impl TcpNetworkFactory {
    /// A factory with `cfg`'s bounds.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a bound is out of its range.
    pub fn new(cfg: TcpConfig) -> Result<TcpNetworkFactory, ReplicaError> {
        cfg.validate()?;
        Ok(TcpNetworkFactory { cfg })
    }
}

/// One node's connection to another over TCP.
pub struct TcpNetwork {
    target: NodeId,
    link: Link,
}

impl RaftNetworkFactory<TypeConfig> for TcpNetworkFactory {
    type Network = TcpNetwork;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> TcpNetwork {
        TcpNetwork {
            target,
            link: Link {
                addr: node.addr.clone(),
                cfg: self.cfg.clone(),
                conn: None,
            },
        }
    }
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

fn rpc_err<E: std::error::Error>(e: TransportError) -> RpcErr<E> {
    match e {
        TransportError::BadMessage { .. } => RPCError::Network(NetworkError::new(&e)),
        _ => RPCError::Unreachable(Unreachable::new(&e)),
    }
}

fn unexpected<E: std::error::Error>(what: &str) -> RpcErr<E> {
    rpc_err(TransportError::BadMessage {
        what: format!("unexpected answer to {what}"),
    })
}

impl RaftNetwork<TypeConfig> for TcpNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        let n = rpc.entries.len() as u64;
        match self.link.call(&Request::Append(rpc)).await {
            Ok(Response::Append(Ok(r))) => Ok(r),
            Ok(Response::Append(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(_) => Err(unexpected("append_entries")),
            // Fewer entries may fit: openraft resends with at most the hint.
            Err(TransportError::FrameTooLarge { .. }) if n > 1 => Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(n / 2),
            )),
            Err(e) => Err(rpc_err(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        match self.link.call(&Request::Snapshot(rpc)).await {
            Ok(Response::Snapshot(Ok(r))) => Ok(r),
            Ok(Response::Snapshot(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(_) => Err(unexpected("install_snapshot")),
            Err(e) => Err(rpc_err(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        match self.link.call(&Request::Vote(rpc)).await {
            Ok(Response::Vote(Ok(r))) => Ok(r),
            Ok(Response::Vote(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(_) => Err(unexpected("vote")),
            Err(e) => Err(rpc_err(e)),
        }
    }
}

// ---- a node served over TCP ------------------------------------------------

/// What a [`TcpNode`] needs: its id and address, its peers' ids and
/// addresses, and its data directory.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id (not 0).
    pub id: NodeId,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Every other voter: id and address.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// The node's directory (created if missing): its raft log, vote and
    /// snapshot ([`Replica::open`]).
    pub data_dir: PathBuf,
    /// Whether this node initializes the cluster (exactly one node of a new
    /// cluster does; on a restart, with its directory no longer empty, it
    /// does nothing).
    pub init: bool,
    /// The replica's settings.
    pub replica: ReplicaConfig,
    /// The transport's bounds.
    pub tcp: TcpConfig,
}

impl NodeConfig {
    /// Reads a config of `key = value` lines: `id`, `addr`, `data_dir`,
    /// `init` (`true`/`false`, default false), and one `peer = ID@ADDR` line
    /// per other voter; `#` starts a comment. Everything else keeps its
    /// default.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] naming the line and what was wrong: an
    /// unknown key, a missing `id`/`addr`/`data_dir`, an id of 0 or a peer
    /// with this node's id or listed twice, an address that does not parse.
    pub fn parse(text: &str) -> Result<NodeConfig, ReplicaError> {
        let (mut id, mut addr, mut dir, mut init) = (None, None, None, false);
        let mut peers = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |what: String| bad_config(format!("line {}: {what}", n + 1));
            let (k, v) = line
                .split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| at(format!("`{line}` is not `key = value`")))?;
            let parse_addr = |v: &str| {
                v.parse::<SocketAddr>()
                    .map_err(|e| at(format!("address `{v}`: {e}")))
            };
            let parse_id = |v: &str| match v.parse::<NodeId>() {
                Ok(0) | Err(_) => Err(at(format!("node id `{v}`: want 1 to {}", NodeId::MAX))),
                Ok(i) => Ok(i),
            };
            match k {
                "id" => id = Some(parse_id(v)?),
                "addr" => addr = Some(parse_addr(v)?),
                "data_dir" => dir = Some(PathBuf::from(v)),
                "init" => {
                    init = v
                        .parse::<bool>()
                        .map_err(|_| at(format!("init `{v}`: want true or false")))?
                }
                "peer" => {
                    let (pid, paddr) = v
                        .split_once('@')
                        .ok_or_else(|| at(format!("peer `{v}`: want ID@ADDR")))?;
                    let pid = parse_id(pid.trim())?;
                    if peers.insert(pid, parse_addr(paddr.trim())?).is_some() {
                        return Err(at(format!("peer {pid} listed twice")));
                    }
                }
                _ => {
                    return Err(at(format!(
                        "unknown key `{k}` (want id, addr, data_dir, init, peer)"
                    )))
                }
            }
        }
        let need = |what: &str| bad_config(format!("missing `{what} = ...`"));
        let id = id.ok_or_else(|| need("id"))?;
        if peers.contains_key(&id) {
            return Err(bad_config(format!("peer {id} is this node's own id")));
        }
        Ok(NodeConfig {
            id,
            addr: addr.ok_or_else(|| need("addr"))?,
            peers,
            data_dir: dir.ok_or_else(|| need("data_dir"))?,
            init,
            replica: ReplicaConfig::default(),
            tcp: TcpConfig::default(),
        })
    }
}

/// One node served over TCP, with its own runtime. Dropping it stops it.
pub struct TcpNode {
    replica: Arc<Replica>,
    addr: SocketAddr,
    rt: Option<tokio::runtime::Runtime>,
}

impl TcpNode {
    /// Starts the node: its replica on `cfg.data_dir` ([`Replica::open`]:
    /// a restart recovers from it), its listener on `cfg.addr`, and (if
    /// `cfg.init` and the directory held nothing) the cluster's
    /// initialization with every peer as a voter.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a setting is out of range or the
    /// address cannot be bound (with the OS error); [`ReplicaError::Raft`]
    /// if openraft refuses to start; [`Replica::open`]'s errors for the
    /// directory.
    pub fn start(mut cfg: NodeConfig) -> Result<TcpNode, ReplicaError> {
        cfg.tcp.validate()?;
        // Every entry must fit one frame (`ReplicaConfig::max_batch_bytes`).
        cfg.replica.max_batch_bytes = cfg
            .replica
            .max_batch_bytes
            .min(cfg.tcp.max_frame_bytes - super::BATCH_FRAME_SLACK);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("n{}-raft", cfg.id))
            .enable_all()
            .build()
            .map_err(|e| bad_config(format!("a runtime: {e}")))?;
        let listener = rt
            .block_on(TcpListener::bind(cfg.addr))
            .map_err(|e| bad_config(format!("addr {}: cannot listen: {e}", cfg.addr)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| bad_config(format!("addr {}: {e}", cfg.addr)))?;
        let net = TcpNetworkFactory::new(cfg.tcp.clone())?;
        let replica = Arc::new(Replica::open(
            cfg.id,
            cfg.replica.clone(),
            &cfg.data_dir,
            net,
            rt.handle().clone(),
        )?);
        rt.spawn(serve(listener, replica.clone(), cfg.tcp.max_frame_bytes));
        if cfg.init && replica.recovery().is_some_and(|r| r.fresh) {
            let mut members: BTreeMap<NodeId, BasicNode> = cfg
                .peers
                .iter()
                .map(|(&id, a)| (id, BasicNode::new(a.to_string())))
                .collect();
            members.insert(cfg.id, BasicNode::new(addr.to_string()));
            rt.block_on(replica.raft().initialize(members))
                .map_err(super::raft_err)?;
        }
        Ok(TcpNode {
            replica,
            addr,
            rt: Some(rt),
        })
    }

    /// The replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for TcpNode {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            let raft = self.replica.raft().clone();
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), raft.shutdown()).await
            });
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

async fn serve(listener: TcpListener, replica: Arc<Replica>, max: usize) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors or similar: try again shortly.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tokio::spawn(connection(framed(stream, max), replica.clone(), max));
    }
}

/// Answers one connection's requests in turn until it closes or breaks (an
/// oversized frame closes it after a `Refused` answer naming the bound).
async fn connection(mut conn: Conn, replica: Arc<Replica>, max: usize) {
    while let Some(frame) = conn.next().await {
        let resp = match frame {
            // The codec's only data error: a frame above the bound.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                let msg = format!("frame refused (bound {max} bytes): {e}");
                if let Ok(b) = encode(&Response::Refused(msg), max) {
                    let _ = conn.send(&b[..]).await;
                }
                return;
            }
            Err(_) => return,
            Ok(frame) => match decode::<Request>(&frame, max) {
                Err(e) => Response::Refused(e.to_string()),
                Ok(req) => answer(&replica, req).await,
            },
        };
        let body = match encode(&resp, max) {
            Ok(b) => b,
            Err(e) => match encode(&Response::Refused(e.to_string()), max) {
                Ok(b) => b,
                Err(_) => return,
            },
        };
        if conn.send(&body[..]).await.is_err() {
            return;
        }
    }
}

async fn answer(replica: &Arc<Replica>, req: Request) -> Response {
    let raft = replica.raft();
    match req {
        Request::Append(r) => Response::Append(raft.append_entries(r).await),
        Request::Vote(r) => Response::Vote(raft.vote(r).await),
        Request::Snapshot(r) => Response::Snapshot(raft.install_snapshot(r).await),
        Request::Client(c) => {
            let replica = replica.clone();
            // Writes wait for replication and reads may wait for the
            // watermark: off the runtime's workers.
            match tokio::task::spawn_blocking(move || client(&replica, c)).await {
                Ok(r) => Response::Client(r),
                Err(e) => {
                    Response::Client(ClientResponse::Failed(ClientError::Other(e.to_string())))
                }
            }
        }
    }
}

fn client_error(e: ReplicaError) -> ClientError {
    match e {
        ReplicaError::NotLeader { leader, .. } => ClientError::NotLeader { leader },
        ReplicaError::Engine(Error::WriteConflict { .. }) => ClientError::Conflict,
        ReplicaError::Fenced { .. } => ClientError::Fenced,
        e => ClientError::Other(e.to_string()),
    }
}

fn client(replica: &Replica, req: ClientRequest) -> ClientResponse {
    match req {
        ClientRequest::Status => ClientResponse::Status {
            id: replica.id(),
            leader: replica.current_leader(),
            leader_ready: replica.is_leader_ready(),
            watermark: replica.watermark().map_or(0, Timestamp::get),
            fenced: replica.is_fenced(),
            recovered_entries: replica.recovery().map_or(0, |r| r.entries),
            restored_snapshot: replica
                .recovery()
                .is_some_and(|r| r.snapshot_index.is_some()),
            snapshots_installed: replica.stats().snapshots_installed,
        },
        ClientRequest::Write { ops } => {
            let r = replica.write(|t| {
                for op in &ops {
                    match op {
                        Op::Put { key, value } => t.put(key, value)?,
                        Op::Delete { key } => t.delete(key)?,
                        Op::Add { key, delta } => {
                            let now = t.get_with(key, |v| {
                                v.and_then(|v| v.try_into().ok()).map(i64::from_le_bytes)
                            })?;
                            let next = now.unwrap_or(0).wrapping_add(*delta);
                            t.put(key, &next.to_le_bytes())?;
                        }
                    }
                }
                Ok(())
            });
            match r {
                Ok(((), ts)) => ClientResponse::Written { ts: ts.get() },
                Err(e) => ClientResponse::Failed(client_error(e)),
            }
        }
        ClientRequest::Read {
            keys,
            at_least,
            wait_ms,
        } => {
            let reader = replica.reader();
            let read = || -> Result<ClientResponse, ReplicaError> {
                let mut session = reader.engine().session()?;
                let mut txn = reader.begin(
                    &mut session,
                    Timestamp::new(at_least),
                    Duration::from_millis(wait_ms),
                )?;
                let mut values = Vec::with_capacity(keys.len());
                for k in &keys {
                    values.push(txn.get(k)?);
                }
                Ok(ClientResponse::Read {
                    ts: txn.read_timestamp().get(),
                    values,
                })
            };
            read().unwrap_or_else(|e| ClientResponse::Failed(client_error(e)))
        }
    }
}

// ---- the client -------------------------------------------------------------

/// A client of one node over TCP (blocking; it runs its own small runtime).
pub struct TcpClient {
    link: Link,
    rt: tokio::runtime::Runtime,
}

impl TcpClient {
    /// A client of the node at `addr` (connects at the first request).
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a bound of `cfg` is out of range or
    /// no runtime can be made.
    pub fn new(addr: SocketAddr, cfg: TcpConfig) -> Result<TcpClient, ReplicaError> {
        cfg.validate()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| bad_config(format!("a runtime: {e}")))?;
        Ok(TcpClient {
            link: Link {
                addr: addr.to_string(),
                cfg,
                conn: None,
            },
            rt,
        })
    }

    /// Sends `req` and waits (within the rpc timeout) for the answer.
    ///
    /// # Errors
    /// [`TransportError`] when the node is unreachable, does not answer in
    /// time, or the message is above the frame bound.
    pub fn call(&mut self, req: ClientRequest) -> Result<ClientResponse, TransportError> {
        let link = &mut self.link;
        match self.rt.block_on(link.call(&Request::Client(req)))? {
            Response::Client(r) => Ok(r),
            Response::Refused(what) => Err(TransportError::BadMessage { what }),
            _ => Err(TransportError::BadMessage {
                what: "a raft answer to a client request".to_string(),
            }),
        }
    }
}
