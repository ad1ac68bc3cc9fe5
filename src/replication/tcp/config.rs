//! The TCP transport's bounds ([`TcpConfig`]) and what a
//! [`TcpNode`](super::TcpNode)
//! needs ([`NodeConfig`]), with the parser of its config file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::replication::config::{ReplicaConfig, BATCH_FRAME_SLACK};
use crate::replication::entry::NodeId;
use crate::replication::error::ReplicaError;

/// Settings of the TCP transport.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// The cluster's name (default `"default"`): every frame carries it,
    /// and a node or client refuses a frame of another cluster
    /// ([`TransportError::ForeignCluster`](super::TransportError::ForeignCluster)),
    /// so an address that now names a node of another cluster (a stale
    /// config, a port reused) is never written to or voted with. A node
    /// records it in its data directory and refuses to start there under
    /// another name. Every node and client of one cluster must use the same
    /// name; give each cluster that can meet another on the network its
    /// own. 1 to [`MAX_CLUSTER_NAME`] bytes of ASCII letters, digits, `-`,
    /// `_` and `.`.
    pub cluster: String,
    /// The largest frame sent or accepted, in bytes (at most 1 GiB).
    pub max_frame_bytes: usize,
    /// How long connecting to a peer may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its answer.
    pub rpc_timeout: Duration,
}

/// The smallest [`TcpConfig::max_frame_bytes`]: room for the smallest
/// batch bound ([`ReplicaConfig::max_batch_bytes`]) and an entry's framing
/// ([`BATCH_FRAME_SLACK`]).
pub const MIN_FRAME_BYTES: usize = 1024 + BATCH_FRAME_SLACK;

/// The largest [`TcpConfig::max_frame_bytes`].
pub const MAX_FRAME_BOUND: usize = 1 << 30;

/// The longest [`TcpConfig::cluster`], in bytes.
pub const MAX_CLUSTER_NAME: usize = 64;

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            cluster: "default".to_string(),
            max_frame_bytes: 64 << 20,
            connect_timeout: Duration::from_secs(1),
            rpc_timeout: Duration::from_secs(5),
        }
    }
}

impl TcpConfig {
    /// Checks the bounds.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] naming the setting and its range.
    pub(super) fn validate(&self) -> Result<(), ReplicaError> {
        check_cluster_name(&self.cluster).map_err(bad_config)?;
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

/// Checks a cluster's name against [`TcpConfig::cluster`]'s rules: what
/// is wrong with it.
fn check_cluster_name(name: &str) -> Result<(), String> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if name.is_empty() || name.len() > MAX_CLUSTER_NAME || !name.bytes().all(ok) {
        return Err(format!(
            "cluster name `{}` ({} bytes) is not 1 to {MAX_CLUSTER_NAME} bytes of ASCII \
             letters, digits, `-`, `_` and `.`",
            name.escape_debug(),
            name.len()
        ));
    }
    Ok(())
}

/// A [`ReplicaError::BadConfig`] saying `what`.
pub(super) fn bad_config(what: String) -> ReplicaError {
    ReplicaError::BadConfig { what }
}

/// What a [`TcpNode`](super::TcpNode) needs: its id and address, its peers' ids and
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
    /// snapshot ([`Replica::open`](crate::replication::Replica::open)).
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
    /// `init` (`true`/`false`, default false), `cluster` (the cluster's
    /// name, [`TcpConfig::cluster`]; default `default`), and one
    /// `peer = ID@ADDR` line per other voter; `#` starts a comment.
    /// Everything else keeps its default.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] naming the line and what was wrong: an
    /// unknown key, a missing `id`/`addr`/`data_dir`, an id of 0 or a peer
    /// with this node's id or listed twice, an address that does not parse,
    /// a cluster name outside its rules.
    pub fn parse(text: &str) -> Result<NodeConfig, ReplicaError> {
        let (mut id, mut addr, mut dir, mut init) = (None, None, None, false);
        let mut tcp = TcpConfig::default();
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
                "cluster" => {
                    check_cluster_name(v).map_err(at)?;
                    tcp.cluster = v.to_string();
                }
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
                        "unknown key `{k}` (want id, addr, data_dir, init, cluster, peer)"
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
            tcp,
        })
    }
}
