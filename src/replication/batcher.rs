//! The leader's batcher (group commit and the watermark): it takes the
//! commits the write path queued, puts them into one `Batch` log entry with
//! the watermark after them, and hands each write its entry's outcome.

use std::sync::Arc;

use openraft::{Raft, ServerState};
use tokio::sync::OwnedSemaphorePermit;

use super::entry::{Command, NodeId, Proposer, TypeConfig};
use super::error::ReplicaError;
use super::queue::{Queued, Slot};
use super::shared::Shared;
use crate::sync::Ordering;
use crate::{Timestamp, TimestampKind};

/// A write of one entry: its sequence number, commit timestamp and slot.
type Item = (u64, u64, Arc<Slot>);

/// `Ok` if node `id` is the leader and has applied its own term's first
/// entry (so its engine holds every committed write); else the leader it
/// knows of, if another.
pub(crate) fn leader_ready(raft: &Raft<TypeConfig>, id: NodeId) -> Result<(), Option<NodeId>> {
    let rx = raft.metrics();
    let m = rx.borrow();
    let own_term_applied = m
        .last_applied
        .is_some_and(|l| l.leader_id.term == m.current_term);
    if m.state == ServerState::Leader && m.current_leader == Some(id) && own_term_applied {
        Ok(())
    } else {
        Err(m.current_leader.filter(|&l| l != id))
    }
}

/// Fences this node and stops its raft, from inside its runtime.
fn leave(shared: &Shared, raft: &Raft<TypeConfig>) {
    shared.fence();
    let raft = raft.clone();
    tokio::spawn(async move {
        let _ = raft.shutdown().await;
    });
}

/// Hands `outcome` to every write of one entry. A failure fences the node
/// first: its engine holds those commits, and their entry may or may not
/// commit.
fn resolve(
    shared: &Shared,
    raft: &Raft<TypeConfig>,
    items: Vec<Item>,
    outcome: Result<(), ReplicaError>,
) {
    if outcome.is_err() && !items.is_empty() {
        leave(shared, raft);
    }
    for (seq, ts, slot) in items {
        shared.pending.lock().remove(&seq);
        shared.release(ts);
        slot.set(outcome.clone());
    }
}

/// The leader's batcher: whenever commits are queued and fewer than
/// `max_batches_in_flight` entries are out, or every `tick`, appends one
/// `Batch` entry with every queued commit and the watermark, if it moved.
/// Runs until the node is fenced or dropped, or its raft stops.
pub(crate) async fn batcher(shared: Arc<Shared>, raft: Raft<TypeConfig>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(
        shared.config.max_batches_in_flight,
    ));
    let id = shared.id;
    // The newest watermark proposed in this leadership.
    let mut sent = 0;
    let mut batch_no = 0;
    loop {
        let _ = tokio::time::timeout(shared.config.tick, shared.queue_notify.notified()).await;
        // `is_fenced` loads with Acquire; `stopped` is a plain flag
        // (Relaxed: nothing is published with it).
        if shared.is_fenced() || shared.stopped.load(Ordering::Relaxed) {
            break;
        }
        if leader_ready(&raft, id).is_err() {
            sent = 0;
            // Queued just before leadership went (or the raft stopped): in
            // no log, but committed in this engine, so the node fences.
            let items = std::mem::take(&mut shared.queue.lock().items);
            fail_queued(&shared, &raft, items);
            continue;
        }
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (taken, bytes) = take_batch(&shared);
        let watermark = watermark_for(&shared, &taken, sent);
        if taken.is_empty() && watermark.is_none() {
            continue;
        }
        let mut commits = Vec::with_capacity(taken.len());
        let mut items = Vec::with_capacity(taken.len());
        for q in taken {
            items.push((q.seq, q.rec.commit_ts.get(), q.slot));
            commits.push(q.rec);
        }
        batch_no += 1;
        let cmd = Command::Batch {
            proposer: Proposer {
                node: id,
                run: shared.run,
                batch: batch_no,
            },
            commits: commits.into(),
            watermark,
        };
        if !propose(&shared, &raft, cmd, items, bytes, permit).await {
            break;
        }
        if let Some(w) = watermark {
            sent = w.get();
        }
    }
    // Stopped: fail what is queued, and refuse more.
    let items = {
        let mut q = shared.queue.lock();
        q.closed = true;
        std::mem::take(&mut q.items)
    };
    fail_queued(&shared, &raft, items);
}

/// Takes the queued commits for one entry, with their encoded bytes: at
/// most `max_batch_commits` commits and `max_batch_bytes` of them; at least
/// one, which `submit` bounded by the bytes.
fn take_batch(shared: &Shared) -> (Vec<Queued>, usize) {
    let mut q = shared.queue.lock();
    let (mut n, mut bytes) = (0, 0);
    for item in q.items.iter().take(shared.config.max_batch_commits) {
        if n > 0 && bytes + item.bytes > shared.config.max_batch_bytes {
            break;
        }
        n += 1;
        bytes += item.bytes;
    }
    let taken: Vec<Queued> = q.items.drain(..n).collect();
    if !q.items.is_empty() {
        shared.queue_notify.notify_one();
    }
    (taken, bytes)
}

/// The watermark an entry carrying `taken` carries after them: the
/// leader's low water mark (`Shared::low_water_with`), if it is above both
/// this node's stable and `sent`, the newest one proposed in this
/// leadership.
fn watermark_for(shared: &Shared, taken: &[Queued], sent: u64) -> Option<Timestamp> {
    let engine = shared.engine();
    let mut own: Vec<u64> = taken.iter().map(|q| q.rec.commit_ts.get()).collect();
    own.sort_unstable();
    let w = shared.low_water_with(&engine, &own);
    let stable = engine
        .query_timestamp(TimestampKind::Stable)
        .map_or(0, Timestamp::get);
    drop(engine);
    (w > stable && w > sent).then(|| Timestamp::new(w))
}

/// Hands entry `cmd` (carrying the writes `items`, `bytes` of commits) to
/// raft; a task of its own then hands the entry's outcome to its writes and
/// frees its `permit`. Returns `false` when raft refused it (it has
/// stopped): the writes fail and the batcher ends.
async fn propose(
    shared: &Arc<Shared>,
    raft: &Raft<TypeConfig>,
    cmd: Command,
    items: Vec<Item>,
    bytes: usize,
    permit: OwnedSemaphorePermit,
) -> bool {
    let id = shared.id;
    let n = items.len() as u64;
    // `client_write_ff` hands the entry to RaftCore's channel before it
    // returns, so entries reach the log in the order they are made here.
    match raft.client_write_ff(cmd).await {
        Ok(rx) => {
            shared.ctr.batches.fetch_add(1, Ordering::Relaxed);
            shared.ctr.batched_commits.fetch_add(n, Ordering::Relaxed);
            shared
                .ctr
                .largest_batch_bytes
                .fetch_max(bytes as u64, Ordering::Relaxed);
            let (shared, raft) = (shared.clone(), raft.clone());
            tokio::spawn(async move {
                let timeout = shared.config.write_timeout;
                let outcome = match tokio::time::timeout(timeout, rx).await {
                    Ok(Ok(Ok(_))) => Ok(()),
                    Ok(Ok(Err(openraft::error::ClientWriteError::ForwardToLeader(f)))) => {
                        Err(ReplicaError::NotLeader {
                            node: id,
                            leader: f.leader_id,
                        })
                    }
                    _ => Err(ReplicaError::Fenced { node: id }),
                };
                resolve(&shared, &raft, items, outcome);
                drop(permit);
            });
            true
        }
        Err(_) => {
            resolve(shared, raft, items, Err(ReplicaError::Fenced { node: id }));
            false
        }
    }
}

/// Fails writes that were queued but are in no log entry: committed in this
/// engine, so the node fences (`resolve`; nothing happens for none).
fn fail_queued(shared: &Shared, raft: &Raft<TypeConfig>, queued: Vec<Queued>) {
    let items = queued
        .into_iter()
        .map(|q| (q.seq, q.rec.commit_ts.get(), q.slot))
        .collect();
    resolve(
        shared,
        raft,
        items,
        Err(ReplicaError::Fenced { node: shared.id }),
    );
}
