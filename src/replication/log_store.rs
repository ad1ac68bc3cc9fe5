//! A node's raft log ([`openraft::storage::RaftLogStorage`], v2 API): the
//! entries, vote and committed point in memory, where reads find them, and
//! for a durable node ([`Replica::open`](super::Replica::open)) the same
//! records in its directory (`disk/`), stored before openraft is told.
//! An in-memory node ([`Replica::new`](super::Replica::new)) loses its log
//! when it stops.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, OptionalSend, StorageError, StorageIOError, Vote,
};
use parking_lot::Mutex;

use super::disk::{frame_entry, Recovered, Writer};
use super::entry::{Command, CommitRecord, NodeId, TypeConfig};
use super::shared::{admit_batch, Shared};

#[derive(Default)]
struct Inner {
    log: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

/// A node's log. Cloning it gives a reader of the same log.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
    shared: Arc<Shared>,
    /// A durable node's log writer.
    disk: Option<Arc<Writer>>,
}

fn io_err(e: crate::Error) -> StorageIOError<NodeId> {
    StorageIOError::write_logs(AnyError::error(e))
}

impl LogStore {
    /// An empty log in memory.
    pub(crate) fn new(shared: Arc<Shared>) -> LogStore {
        LogStore {
            inner: Arc::default(),
            shared,
            disk: None,
        }
    }

    /// A durable node's log: what recovery found, stored on by `writer`.
    /// Every recovered entry's timestamps bound what this node hands out as
    /// leader, as if it had just been appended.
    pub(crate) fn recovered(shared: Arc<Shared>, rec: Recovered, writer: Arc<Writer>) -> LogStore {
        let store = LogStore {
            inner: Arc::new(Mutex::new(Inner {
                log: rec.entries,
                vote: rec.vote,
                committed: rec.committed,
                last_purged: rec.purged,
            })),
            shared,
            disk: Some(writer),
        };
        store
            .inner
            .lock()
            .log
            .values()
            .for_each(|e| store.saw_entry(e));
        store
    }

    /// How many entries the log holds (purged ones excluded).
    pub fn len(&self) -> usize {
        self.inner.lock().log.len()
    }

    /// Whether the log holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl LogStore {
    /// Bookkeeping for a commit entering this log: its timestamp bounds what
    /// a new leader allocates, and an own commit is no longer in flight (a
    /// watermark computed from now on may cover it: its entry is in the log
    /// before any entry that carries that watermark).
    fn saw_commit(&self, c: &CommitRecord) {
        self.shared.saw_ts(c.commit_ts);
        if c.origin.node == self.shared.id {
            self.shared.release(c.commit_ts.get());
        }
    }

    /// Every timestamp this log has seen: a node that becomes leader
    /// allocates above all of them (DESIGN.md, "Replication", failover),
    /// including entries of older leaders that may still commit.
    fn saw_entry(&self, e: &Entry<TypeConfig>) {
        match &e.payload {
            EntryPayload::Normal(Command::Commit(c)) => self.saw_commit(c),
            EntryPayload::Normal(Command::Watermark { ts }) => self.shared.saw_ts(*ts),
            EntryPayload::Normal(Command::Batch {
                commits, watermark, ..
            }) => {
                commits.iter().for_each(|c| self.saw_commit(c));
                if let Some(w) = watermark {
                    self.shared.saw_ts(*w);
                }
            }
            _ => {}
        }
    }
}

/// The commits an entry carries.
fn commits_of(e: &Entry<TypeConfig>) -> impl Iterator<Item = &CommitRecord> {
    let s: &[CommitRecord] = match &e.payload {
        EntryPayload::Normal(Command::Commit(c)) => std::slice::from_ref(c),
        EntryPayload::Normal(Command::Batch { commits, .. }) => commits,
        _ => &[],
    };
    s.iter()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        Ok(inner.log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        let last = inner
            .log
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(inner.last_purged);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.inner.lock().vote = Some(*vote);
        if let Some(w) = &self.disk {
            w.save_vote(vote)
                .await
                .map_err(|e| StorageIOError::write_vote(AnyError::error(e)))?;
        }
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.inner.lock().committed = committed;
        if let Some(w) = &self.disk {
            w.save_committed(&committed);
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        // A durable node's records of these entries, made before the lock
        // that readers of the log take.
        let mut frames = Vec::new();
        if self.disk.is_some() {
            entries.iter().for_each(|e| frame_entry(&mut frames, e));
        }
        let newest = entries.last().map(|e| e.log_id.index);
        let mut inner = self.inner.lock();
        for e in entries {
            // R5: no own batch without its predecessors.
            if let EntryPayload::Normal(Command::Batch { proposer, .. }) = &e.payload {
                let last = &self.shared.last_own_batch;
                if let Err(why) = admit_batch(&self.shared, last, proposer) {
                    self.shared.fence();
                    return Err(StorageIOError::write_logs(AnyError::error(why)).into());
                }
            }
            self.saw_entry(&e);
            inner.log.insert(e.log_id.index, e);
        }
        drop(inner);
        match &self.disk {
            // Reported flushed by the writer once the records are stored.
            Some(w) => w.append(frames, newest, callback),
            // In memory: "flushed" as soon as it is inserted.
            None => callback.log_io_completed(Ok(())),
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let gone = self.inner.lock().log.split_off(&log_id.index);
        // An own commit still open here is in this engine but now in no
        // log this node will commit: fence before anything else runs on it.
        let id = self.shared.id;
        let own_open = gone.values().any(|e| {
            commits_of(e).any(|c| c.origin.node == id && self.shared.is_pending(c.origin.seq))
        });
        if own_open {
            self.shared.fence();
        }
        if let Some(w) = &self.disk {
            w.truncate(log_id.index).await.map_err(io_err)?;
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        {
            let mut inner = self.inner.lock();
            let keep = inner.log.split_off(&(log_id.index + 1));
            inner.log = keep;
            inner.last_purged = Some(log_id);
        }
        if let Some(w) = &self.disk {
            w.purge(log_id).await.map_err(io_err)?;
        }
        Ok(())
    }
}
