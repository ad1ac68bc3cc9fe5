//! The in-process network: a [`Router`] of every node's [`Raft`] handle, and
//! an [`openraft::RaftNetwork`] that calls the target's handle directly.
//!
//! This is the transport for the tests and the benchmark. A real deployment
//! implements [`openraft::RaftNetworkFactory`] over its own transport (RPCs
//! carrying the same requests) and passes it to [`Replica::new`](super::Replica::new).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use parking_lot::Mutex;

use super::entry::{NodeId, TypeConfig};

/// Every node's raft handle, by id, and which nodes are cut off.
#[derive(Default)]
pub struct Router {
    nodes: Mutex<HashMap<NodeId, Raft<TypeConfig>>>,
    cut: Mutex<HashSet<NodeId>>,
}

#[derive(Debug)]
struct Down(NodeId);

impl std::fmt::Display for Down {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {} is unreachable", self.0)
    }
}

impl std::error::Error for Down {}

impl Router {
    /// Makes `raft` reachable as `id`.
    pub fn add(&self, id: NodeId, raft: Raft<TypeConfig>) {
        self.nodes.lock().insert(id, raft);
    }

    /// Makes `id` unreachable for good (a stopped node).
    pub fn remove(&self, id: NodeId) {
        self.nodes.lock().remove(&id);
    }

    /// Cuts `id` off (`true`) or reconnects it (`false`): while cut, no
    /// message reaches it or leaves it.
    pub fn set_cut(&self, id: NodeId, cut: bool) {
        let mut c = self.cut.lock();
        if cut {
            c.insert(id);
        } else {
            c.remove(&id);
        }
    }

    fn route(&self, from: NodeId, to: NodeId) -> Result<Raft<TypeConfig>, Unreachable> {
        let cut = self.cut.lock();
        if cut.contains(&from) || cut.contains(&to) {
            return Err(Unreachable::new(&Down(to)));
        }
        drop(cut);
        self.nodes
            .lock()
            .get(&to)
            .cloned()
            .ok_or_else(|| Unreachable::new(&Down(to)))
    }
}

/// Makes [`LocalNetwork`] clients for one node.
#[derive(Clone)]
pub struct LocalNetworkFactory {
    router: Arc<Router>,
    from: NodeId,
}

impl LocalNetworkFactory {
    /// The factory for node `from`.
    pub fn new(router: Arc<Router>, from: NodeId) -> LocalNetworkFactory {
        LocalNetworkFactory { router, from }
    }
}

/// One node's connection to another, through the [`Router`].
pub struct LocalNetwork {
    router: Arc<Router>,
    from: NodeId,
    to: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for LocalNetworkFactory {
    type Network = LocalNetwork;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> LocalNetwork {
        LocalNetwork {
            router: self.router.clone(),
            from: self.from,
            to: target,
        }
    }
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl RaftNetwork<TypeConfig> for LocalNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        let raft = self.router.route(self.from, self.to)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        let raft = self.router.route(self.from, self.to)?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        let raft = self.router.route(self.from, self.to)?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}
