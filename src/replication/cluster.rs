//! [`LocalCluster`]: several [`Replica`]s in one process, each on its own
//! tokio runtime (threads named `n<id>-raft`), joined by the in-process
//! [`Router`], in memory or each on its own directory. For the tests and
//! the benchmark.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::BasicNode;
use parking_lot::Mutex;

use super::config::ReplicaConfig;
use super::entry::NodeId;
use super::error::{raft_err, ReplicaError};
use super::network::{LocalNetworkFactory, Router};
use super::replica::Replica;
use crate::Timestamp;

struct LocalNode {
    replica: Replica,
    rt: tokio::runtime::Runtime,
}

/// Nodes in one process. Dropping it stops every node.
pub struct LocalCluster {
    router: Arc<Router>,
    config: ReplicaConfig,
    nodes: BTreeMap<NodeId, LocalNode>,
    crashed: Mutex<BTreeSet<NodeId>>,
    /// Where durable nodes keep their files (node `id` in `n<id>`).
    dir: Option<PathBuf>,
}

impl LocalCluster {
    /// Starts nodes `1..=n` as voters of one cluster and waits (up to 10 s)
    /// for a leader that is ready for writes.
    ///
    /// # Errors
    /// [`ReplicaError::Raft`] if a node cannot start or the cluster cannot
    /// be initialized; [`ReplicaError::Timeout`] if no leader is ready in
    /// time.
    pub fn start(n: usize, config: ReplicaConfig) -> Result<LocalCluster, ReplicaError> {
        LocalCluster::begin(n, config, None)
    }

    /// Starts (or restarts) nodes `1..=n` as durable nodes
    /// ([`Replica::open`]), node `id` on `dir/n<id>`, and waits (up to 10 s)
    /// for a ready leader. A new cluster is initialized; one that ran there
    /// before comes back with every node's log, vote and snapshot.
    ///
    /// # Errors
    /// As [`LocalCluster::start`], and [`Replica::open`]'s.
    pub fn open(
        dir: impl Into<PathBuf>,
        n: usize,
        config: ReplicaConfig,
    ) -> Result<LocalCluster, ReplicaError> {
        LocalCluster::begin(n, config, Some(dir.into()))
    }

    fn begin(
        n: usize,
        config: ReplicaConfig,
        dir: Option<PathBuf>,
    ) -> Result<LocalCluster, ReplicaError> {
        let mut c = LocalCluster {
            router: Arc::default(),
            config,
            nodes: BTreeMap::new(),
            crashed: Mutex::default(),
            dir,
        };
        let ids: Vec<NodeId> = (1..=n as NodeId).collect();
        for &id in &ids {
            c.spawn_node(id)?;
        }
        let first = &c.nodes[&ids[0]];
        if first.replica.recovery().is_none_or(|r| r.fresh) {
            let members: BTreeMap<NodeId, BasicNode> = ids
                .iter()
                .map(|&id| (id, BasicNode::new(format!("local:{id}"))))
                .collect();
            first
                .rt
                .block_on(first.replica.raft().initialize(members))
                .map_err(raft_err)?;
        }
        c.wait_for_leader(Duration::from_secs(10))?;
        Ok(c)
    }

    /// Starts node `id`, reachable through the router: in memory, empty and
    /// a member of nothing yet; in a durable cluster
    /// ([`LocalCluster::open`]), from its directory, as it was when it
    /// stopped (a restart after [`LocalCluster::stop`]).
    ///
    /// # Errors
    /// [`ReplicaError::Raft`] if it cannot start; [`Replica::open`]'s.
    pub fn spawn_node(&mut self, id: NodeId) -> Result<&Replica, ReplicaError> {
        // Two workers: the state machine may block briefly (raising stable
        // waits for local commits in flight) while the other runs raft and
        // its timers.
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder
            .worker_threads(2)
            .thread_name(format!("n{id}-raft"))
            .enable_time();
        // A unit test's mutant switch reaches the node's apply path.
        #[cfg(test)]
        builder.on_thread_start(crate::sync::mutant::inherit());
        let rt = builder.build().map_err(raft_err)?;
        let net = LocalNetworkFactory::new(self.router.clone(), id);
        let (config, handle) = (self.config.clone(), rt.handle().clone());
        let replica = match &self.dir {
            Some(dir) => Replica::open(id, config, dir.join(format!("n{id}")), net, handle)?,
            None => Replica::new(id, config, net, handle)?,
        };
        self.router.add(id, replica.raft().clone());
        self.nodes.insert(id, LocalNode { replica, rt });
        Ok(&self.nodes[&id].replica)
    }

    /// The ids of the running nodes.
    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// Node `id`, if running.
    pub fn node(&self, id: NodeId) -> Option<&Replica> {
        self.nodes.get(&id).map(|n| &n.replica)
    }

    /// The router (to cut nodes off and reconnect them).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// A running node that is leader and ready for writes, if any.
    pub fn leader(&self) -> Option<NodeId> {
        let crashed = self.crashed.lock();
        self.nodes
            .values()
            .filter(|n| !crashed.contains(&n.replica.id()))
            .find(|n| n.replica.is_leader_ready())
            .map(|n| n.replica.id())
    }

    /// Crashes node `id` while others may be using it: it becomes
    /// unreachable and its raft stops (its writes in flight fail and fence
    /// it); the [`Replica`] stays inspectable until [`LocalCluster::stop`].
    pub fn crash(&self, id: NodeId) {
        self.crashed.lock().insert(id);
        self.router.remove(id);
        if let Some(n) = self.nodes.get(&id) {
            let raft = n.replica.raft().clone();
            let _ = n.rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), raft.shutdown()).await
            });
        }
    }

    /// Waits up to `timeout` for a ready leader.
    ///
    /// # Errors
    /// [`ReplicaError::Timeout`].
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, ReplicaError> {
        let start = Instant::now();
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            if start.elapsed() > timeout {
                return Err(ReplicaError::Timeout {
                    what: "a ready leader",
                    waited: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits up to `timeout` until node `id`'s watermark reaches `ts`.
    ///
    /// # Errors
    /// [`ReplicaError::Timeout`]; [`ReplicaError::Raft`] if `id` is not
    /// running.
    pub fn wait_watermark(
        &self,
        id: NodeId,
        ts: Timestamp,
        timeout: Duration,
    ) -> Result<(), ReplicaError> {
        let node = self.node(id).ok_or_else(|| not_running(id))?;
        let start = Instant::now();
        while node.watermark().unwrap_or(Timestamp::NONE) < ts {
            if start.elapsed() > timeout {
                return Err(ReplicaError::Timeout {
                    what: "a node's watermark",
                    waited: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Stops node `id` (raft shut down, unreachable, engine dropped), as a
    /// crash would. Returns whether it was running.
    pub fn stop(&mut self, id: NodeId) -> bool {
        self.router.remove(id);
        match self.nodes.remove(&id) {
            Some(n) => {
                shutdown(n);
                true
            }
            None => false,
        }
    }

    /// Starts node `id` empty and adds it as a learner through the leader,
    /// waiting (up to `timeout`) until it has caught up: openraft sends it
    /// a snapshot when the leader no longer has the log it lacks.
    ///
    /// # Errors
    /// [`ReplicaError::Timeout`] without a leader; [`ReplicaError::Raft`] if
    /// the membership change fails.
    pub fn add_learner(&mut self, id: NodeId, timeout: Duration) -> Result<(), ReplicaError> {
        let leader = self.wait_for_leader(timeout)?;
        self.spawn_node(id)?;
        let l = &self.nodes[&leader];
        let fut = l
            .replica
            .raft()
            .add_learner(id, BasicNode::new(format!("local:{id}")), true);
        l.rt.block_on(async { tokio::time::timeout(timeout, fut).await })
            .map_err(|_| ReplicaError::Timeout {
                what: "a learner to catch up",
                waited: timeout,
            })?
            .map_err(raft_err)?;
        Ok(())
    }

    /// Makes `ids` the voters (learners that are not listed stay learners).
    ///
    /// # Errors
    /// As [`LocalCluster::add_learner`].
    pub fn change_voters(&self, ids: &[NodeId], timeout: Duration) -> Result<(), ReplicaError> {
        let leader = self.wait_for_leader(timeout)?;
        let l = &self.nodes[&leader];
        let set: BTreeSet<NodeId> = ids.iter().copied().collect();
        let fut = l.replica.raft().change_membership(set, true);
        l.rt.block_on(async { tokio::time::timeout(timeout, fut).await })
            .map_err(|_| ReplicaError::Timeout {
                what: "a membership change",
                waited: timeout,
            })?
            .map_err(raft_err)?;
        Ok(())
    }

    /// Has node `id` build a snapshot of its state machine and purge its
    /// log up to it; waits up to `timeout`. Returns the snapshot's last log
    /// index.
    ///
    /// # Errors
    /// [`ReplicaError::Timeout`]; [`ReplicaError::Raft`].
    pub fn snapshot(&self, id: NodeId, timeout: Duration) -> Result<u64, ReplicaError> {
        let n = self.nodes.get(&id).ok_or_else(|| not_running(id))?;
        let raft = n.replica.raft();
        let applied = raft.metrics().borrow().last_applied.map_or(0, |l| l.index);
        n.rt.block_on(raft.trigger().snapshot()).map_err(raft_err)?;
        let start = Instant::now();
        let index = loop {
            let snap = raft.metrics().borrow().snapshot.map_or(0, |l| l.index);
            if snap >= applied && snap > 0 {
                break snap;
            }
            if start.elapsed() > timeout {
                return Err(ReplicaError::Timeout {
                    what: "a snapshot",
                    waited: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        n.rt.block_on(raft.trigger().purge_log(index))
            .map_err(raft_err)?;
        Ok(index)
    }
}

fn not_running(id: NodeId) -> ReplicaError {
    ReplicaError::Raft {
        message: format!("node {id} is not running"),
    }
}

fn shutdown(n: LocalNode) {
    let raft = n.replica.raft().clone();
    let _ = n
        .rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), raft.shutdown()).await });
    drop(n.replica);
    n.rt.shutdown_timeout(Duration::from_secs(5));
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for id in self.ids() {
            self.router.remove(id);
        }
        while let Some((_, n)) = self.nodes.pop_first() {
            shutdown(n);
        }
    }
}
