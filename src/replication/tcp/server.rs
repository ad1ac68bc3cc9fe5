//! [`TcpNode`]: one node served over TCP, and how it answers each
//! connection's requests (openraft's RPCs, and a client's writes, reads and
//! status).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openraft::BasicNode;
use tokio::net::TcpListener;

use super::config::{bad_config, NodeConfig};
use super::message::{ClientError, ClientRequest, ClientResponse, Op, Request, Response};
use super::network::TcpNetworkFactory;
use super::transport::{decode, encode, framed, Conn};
use crate::replication::config::BATCH_FRAME_SLACK;
use crate::replication::entry::NodeId;
use crate::replication::error::{raft_err, ReplicaError};
use crate::replication::replica::Replica;
use crate::{Error, Timestamp};

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
            .min(cfg.tcp.max_frame_bytes - BATCH_FRAME_SLACK);
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
                .map_err(raft_err)?;
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
            Ok(frame) => match decode::<Request>(&frame) {
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

/// Carries out a client's request on `replica` (blocking: a write waits
/// for replication, a read may wait for the watermark).
fn client(replica: &Replica, req: ClientRequest) -> ClientResponse {
    let r = match req {
        ClientRequest::Status => Ok(status(replica)),
        ClientRequest::Write { ops } => write(replica, &ops),
        ClientRequest::Read {
            keys,
            at_least,
            wait_ms,
        } => read(replica, &keys, at_least, wait_ms),
    };
    r.unwrap_or_else(|e| ClientResponse::Failed(client_error(e)))
}

fn status(replica: &Replica) -> ClientResponse {
    ClientResponse::Status {
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
    }
}

/// Runs `ops` in one replicated write on the leader.
fn write(replica: &Replica, ops: &[Op]) -> Result<ClientResponse, ReplicaError> {
    let ((), ts) = replica.write(|t| {
        for op in ops {
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
    })?;
    Ok(ClientResponse::Written { ts: ts.get() })
}

/// Reads `keys` at the node's watermark once it reaches `at_least`
/// (waiting at most `wait_ms`).
fn read(
    replica: &Replica,
    keys: &[Vec<u8>],
    at_least: u64,
    wait_ms: u64,
) -> Result<ClientResponse, ReplicaError> {
    let reader = replica.reader();
    let mut session = reader.engine().session()?;
    let mut txn = reader.begin(
        &mut session,
        Timestamp::new(at_least),
        Duration::from_millis(wait_ms),
    )?;
    let mut values = Vec::with_capacity(keys.len());
    for k in keys {
        values.push(txn.get(k)?);
    }
    Ok(ClientResponse::Read {
        ts: txn.read_timestamp().get(),
        values,
    })
}
