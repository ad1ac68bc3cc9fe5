//! openraft's network over TCP: [`TcpNetworkFactory`] makes one
//! [`TcpNetwork`] per peer, at the peer's [`BasicNode::addr`].

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

use super::config::TcpConfig;
use super::message::{Request, Response};
use super::transport::{Link, TransportError};
use crate::replication::entry::{NodeId, TypeConfig};
use crate::replication::error::ReplicaError;

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
            link: Link::new(node.addr.clone(), self.cfg.clone()),
        }
    }
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

fn rpc_err<E: std::error::Error>(e: TransportError) -> RpcErr<E> {
    match e {
        TransportError::BadMessage { .. }
        | TransportError::UnsupportedVersion { .. }
        | TransportError::ForeignCluster { .. } => RPCError::Network(NetworkError::new(&e)),
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
