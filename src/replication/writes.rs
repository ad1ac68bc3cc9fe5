//! The leader's write path: [`Replica::write`] and [`Replica::submit`] run
//! a [`WriteTxn`], commit it here at a timestamp the node tracks as in
//! flight, and queue its [`CommitRecord`] for the batcher; [`PendingWrite`]
//! waits for its entry's outcome. [`Replica::create_table`] and
//! [`Replica::drop_table`] propose a table's create or drop as an entry of
//! its own, which every node (this one too) applies in log order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::batcher::leader_ready;
use super::entry::{Command, CommitRecord, NodeId, Origin, TableDef, Write};
use super::error::ReplicaError;
use super::queue::{Queued, Slot};
use super::replica::Replica;
use crate::{
    CommitOptions, Cursor, Engine, Error, KeyRange, Result, Table, TableId, TableOptions, TableTxn,
    Timestamp, Txn, TxnOptions,
};

/// A leader transaction's writes for its log record, by (table id, key).
type Writes = BTreeMap<(u32, Vec<u8>), Option<Vec<u8>>>;

/// Options for [`Replica::write_with`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Hold the commit timestamp (allocated, claimed, entry not yet
    /// appended) this long before appending: a fault-injection knob that
    /// makes commits finish out of timestamp order.
    pub delay_before_append: Duration,
}

/// A read-write transaction on the leader: a [`Txn`] whose writes are also
/// recorded for the log entry. It writes the default table, and named
/// tables through [`WriteTxn::table`]; its commit is one log record, so
/// its writes to every table replicate as one entry. Its reads (point
/// reads, [`WriteTxn::get_many`], scans and cursors) are the [`Txn`]'s:
/// at its snapshot, its own writes included.
pub struct WriteTxn<'a, 's, 'e> {
    txn: &'a mut Txn<'s, 'e>,
    writes: &'a mut Writes,
    engine: &'a Engine,
}

impl<'s, 'e> WriteTxn<'_, 's, 'e> {
    /// A handle to the live table `name` on the engine this transaction
    /// runs on, for [`WriteTxn::table`]. Unlike a handle from
    /// [`Replica::open_table`] taken before the write, it cannot belong to
    /// an engine the node has since replaced.
    ///
    /// # Errors
    /// [`Error::TableNotFound`] (never created, or dropped);
    /// [`Error::InvalidTableName`].
    pub fn open_table(&self, name: &str) -> Result<Table> {
        self.engine.open_table(name)
    }

    /// This transaction's view of the named table `table` (a handle from
    /// [`Replica::create_table`] or [`Replica::open_table`] on this node),
    /// for its reads and writes; see [`Txn::table`].
    ///
    /// # Errors
    /// As [`Txn::table`]: [`Error::ForeignTable`] for a handle of another
    /// engine (another node's, or this node's before it installed a
    /// snapshot: open it again), [`Error::TableDropped`].
    pub fn table<'t>(&'t mut self, table: &'t Table) -> Result<WriteTable<'t, 's, 'e>> {
        Ok(WriteTable {
            txn: self.txn.table(table)?,
            writes: self.writes,
        })
    }

    /// The visible value of `key` (see [`Txn::get`]).
    ///
    /// # Errors
    /// As [`Txn::get`].
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.txn.get(key)
    }

    /// Calls `f` with the visible value of `key` (see [`Txn::get_with`]).
    ///
    /// # Errors
    /// As [`Txn::get_with`].
    pub fn get_with<R>(&mut self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        self.txn.get_with(key, f)
    }

    /// The visible values of `keys`, in their order (see
    /// [`Txn::get_many`]).
    ///
    /// # Errors
    /// As [`Txn::get_many`].
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.txn.get_many(keys)
    }

    /// Calls `f` with each key's index in `keys` and its visible value
    /// (see [`Txn::get_many_with`]).
    ///
    /// # Errors
    /// As [`Txn::get_many_with`].
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.txn.get_many_with(keys, f)
    }

    /// Visits the visible pairs in `range` (see [`Txn::scan`]).
    ///
    /// # Errors
    /// As [`Txn::scan`].
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.txn.scan(range, f)
    }

    /// The visible pairs in `range`, in key order (see [`Txn::range`]).
    ///
    /// # Errors
    /// As [`Txn::range`].
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.txn.range(range)
    }

    /// A cursor over the visible pairs in `range` (see [`Txn::iter`]). It
    /// only reads: the transaction writes nothing while it lives.
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e> {
        self.txn.iter(range)
    }

    /// A cursor over every visible pair (see [`Txn::cursor`]).
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e> {
        self.txn.cursor()
    }

    /// Writes `value` under `key`.
    ///
    /// # Errors
    /// As [`Txn::put`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn.put(key, value)?;
        let table = TableId::DEFAULT.get();
        self.writes
            .insert((table, key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    /// Deletes `key`.
    ///
    /// # Errors
    /// As [`Txn::delete`].
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.txn.delete(key)?;
        self.writes
            .insert((TableId::DEFAULT.get(), key.to_vec()), None);
        Ok(())
    }
}

/// A leader transaction's view of one named table ([`WriteTxn::table`]):
/// a [`TableTxn`] whose writes are also recorded for the log entry, and
/// whose reads are the [`TableTxn`]'s.
pub struct WriteTable<'t, 's, 'e> {
    txn: TableTxn<'t, 's, 'e>,
    writes: &'t mut Writes,
}

impl<'s, 'e> WriteTable<'_, 's, 'e> {
    /// The table's id.
    pub fn table(&self) -> TableId {
        self.txn.table()
    }

    /// The visible value of `key` in this table (see [`TableTxn::get`]).
    ///
    /// # Errors
    /// As [`TableTxn::get`].
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.txn.get(key)
    }

    /// Calls `f` with the visible value of `key` in this table (see
    /// [`TableTxn::get_with`]).
    ///
    /// # Errors
    /// As [`TableTxn::get_with`].
    pub fn get_with<R>(&mut self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        self.txn.get_with(key, f)
    }

    /// The visible values of `keys` in this table, in their order (see
    /// [`TableTxn::get_many`]).
    ///
    /// # Errors
    /// As [`TableTxn::get_many`].
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.txn.get_many(keys)
    }

    /// Calls `f` with each key's index in `keys` and its visible value in
    /// this table (see [`TableTxn::get_many_with`]).
    ///
    /// # Errors
    /// As [`TableTxn::get_many_with`].
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.txn.get_many_with(keys, f)
    }

    /// Visits the visible pairs of this table in `range` (see
    /// [`TableTxn::scan`]).
    ///
    /// # Errors
    /// As [`TableTxn::scan`].
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.txn.scan(range, f)
    }

    /// The visible pairs of this table in `range`, in key order (see
    /// [`TableTxn::range`]).
    ///
    /// # Errors
    /// As [`TableTxn::range`].
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.txn.range(range)
    }

    /// A cursor over the visible pairs of this table in `range` (see
    /// [`TableTxn::iter`]; after a drop it yields
    /// [`Error::TableDropped`]). It only reads: the transaction writes
    /// nothing while it lives.
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e> {
        self.txn.iter(range)
    }

    /// A cursor over every visible pair of this table (see
    /// [`TableTxn::cursor`]).
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e> {
        self.txn.cursor()
    }

    /// Writes `value` under `key` in this table.
    ///
    /// # Errors
    /// As [`TableTxn::put`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn.put(key, value)?;
        self.writes
            .insert((self.table().get(), key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    /// Deletes `key` in this table.
    ///
    /// # Errors
    /// As [`TableTxn::delete`].
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.txn.delete(key)?;
        self.writes.insert((self.table().get(), key.to_vec()), None);
        Ok(())
    }
}

/// A write committed on the leader whose replication is under way, from
/// [`Replica::submit`].
#[must_use = "a write is acknowledged only when `wait` returns Ok"]
pub struct PendingWrite<R> {
    value: R,
    ts: Timestamp,
    slot: Option<Arc<Slot>>,
    node: NodeId,
    bound: Duration,
}

impl<R> PendingWrite<R> {
    /// The commit timestamp (`Timestamp::NONE` if the transaction wrote
    /// nothing).
    pub fn commit_ts(&self) -> Timestamp {
        self.ts
    }

    /// Whether the outcome is known ([`PendingWrite::wait`] will not block).
    pub fn is_done(&self) -> bool {
        self.slot
            .as_ref()
            .is_none_or(|s| s.outcome.lock().is_some())
    }

    /// When the outcome became known, if it is.
    pub fn done_at(&self) -> Option<Instant> {
        self.slot
            .as_ref()
            .and_then(|s| s.outcome.lock().as_ref().map(|o| o.1))
    }

    /// Waits for the outcome: `Ok` when the write's log entry is committed
    /// (in the log of a majority).
    ///
    /// # Errors
    /// [`ReplicaError::Fenced`] when the entry failed or timed out (the
    /// outcome is unknown; the node fenced itself and left the cluster);
    /// [`ReplicaError::NotLeader`] when openraft refused the entry because
    /// the node is no longer the leader (the node fenced itself too: its
    /// engine holds the commit); [`ReplicaError::Timeout`] if no outcome
    /// came within three write timeouts.
    pub fn wait(self) -> std::result::Result<(R, Timestamp), ReplicaError> {
        self.wait_timed().map(|(r, ts, _)| (r, ts))
    }

    /// [`PendingWrite::wait`], also returning when the outcome became known.
    ///
    /// # Errors
    /// As [`PendingWrite::wait`].
    pub fn wait_timed(self) -> std::result::Result<(R, Timestamp, Instant), ReplicaError> {
        let Some(slot) = self.slot else {
            return Ok((self.value, self.ts, Instant::now()));
        };
        let deadline = Instant::now() + self.bound;
        let mut g = slot.outcome.lock();
        loop {
            if let Some((r, at)) = g.take() {
                return r.map(|()| (self.value, self.ts, at));
            }
            if slot.cv.wait_until(&mut g, deadline).timed_out() && g.is_none() {
                return Err(ReplicaError::Timeout {
                    what: "a write's log entry to commit",
                    waited: self.bound,
                });
            }
        }
    }

    /// The node the write ran on.
    pub fn node(&self) -> NodeId {
        self.node
    }
}

impl Replica {
    /// Runs `f` in a read-write transaction on the leader and commits it
    /// through the log: returns `f`'s result and the commit timestamp
    /// (`Timestamp::NONE` if `f` wrote nothing). When it returns `Ok`, the
    /// commit is in the log of a majority and committed here.
    ///
    /// # Errors
    /// [`ReplicaError::NotLeader`] on a follower (nothing ran);
    /// [`ReplicaError::Engine`] if `f` or the engine refused (the
    /// transaction rolled back; a write conflict can be retried);
    /// [`ReplicaError::Fenced`] when the log entry failed or timed out (the
    /// outcome is unknown; this node fences itself and leaves the cluster).
    pub fn write<R>(
        &self,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<(R, Timestamp), ReplicaError> {
        self.write_with(&WriteOptions::default(), f)
    }

    /// [`Replica::write`] with options.
    ///
    /// # Errors
    /// As [`Replica::write`].
    pub fn write_with<R>(
        &self,
        opts: &WriteOptions,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<(R, Timestamp), ReplicaError> {
        self.submit_with(opts, f)?.wait()
    }

    /// Runs `f` in a read-write transaction on the leader, commits it here
    /// at once and queues its log entry, without waiting for replication:
    /// the write is acknowledged when [`PendingWrite::wait`] returns `Ok`,
    /// which is when its entry is in the log of a majority. A caller keeps
    /// several writes in flight this way (pipelining); the leader puts the
    /// commits queued meanwhile into one log entry (group commit).
    ///
    /// Until then the commit is speculative: later read-write transactions
    /// on this node see it (and their own entries follow it in the log),
    /// but no read at a watermark sees it, on this node or any other, before
    /// its entry is committed. If its entry fails, this node fences itself.
    ///
    /// # Errors
    /// As [`Replica::write`], except the replication outcome, which
    /// [`PendingWrite::wait`] reports.
    pub fn submit<R>(
        &self,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<PendingWrite<R>, ReplicaError> {
        self.submit_with(&WriteOptions::default(), f)
    }

    /// [`Replica::submit`] with options.
    ///
    /// # Errors
    /// As [`Replica::submit`].
    pub fn submit_with<R>(
        &self,
        opts: &WriteOptions,
        f: impl FnOnce(&mut WriteTxn<'_, '_, '_>) -> Result<R>,
    ) -> std::result::Result<PendingWrite<R>, ReplicaError> {
        let id = self.shared.id;
        if self.is_fenced() {
            return Err(ReplicaError::Fenced { node: id });
        }
        leader_ready(&self.raft, id)
            .map_err(|leader| ReplicaError::NotLeader { node: id, leader })?;
        let engine = self.shared.engine();
        let mut session = engine.session()?;
        let mut txn = session.begin(&TxnOptions::default())?;
        let mut writes = BTreeMap::new();
        let value = f(&mut WriteTxn {
            txn: &mut txn,
            writes: &mut writes,
            engine: &engine,
        })?;
        let size = CommitRecord::encoded_len_bound(
            writes.iter().map(|((t, k), v)| (*t, &k[..], v.as_deref())),
        );
        if size > self.shared.config.max_batch_bytes {
            // Dropping the open transaction rolls it back: nothing of it is
            // committed, here or in any log.
            return Err(ReplicaError::CommitTooLarge {
                size,
                bound: self.shared.config.max_batch_bytes,
            });
        }
        if writes.is_empty() {
            txn.commit(CommitOptions::default())?;
            return Ok(PendingWrite {
                value,
                ts: Timestamp::NONE,
                slot: None,
                node: id,
                bound: Duration::ZERO,
            });
        }
        // In flight from here until its entry is in this node's log.
        let (ts, seq) = self.shared.allocate(&engine);
        let commit_ts = Timestamp::new(ts);
        // Validated against this node's stable, which moves only when a
        // watermark is applied: this node's own watermarks stay below every
        // in-flight timestamp, and another leader's that reaches `ts`
        // fences this node (DESIGN.md, "Replication", R4).
        if let Err(e) = txn.set_commit_timestamp(commit_ts) {
            self.shared.release(ts);
            return Err(e.into());
        }
        self.shared.pending.lock().insert(seq, ts);
        let rec = CommitRecord {
            commit_ts,
            durable_ts: commit_ts,
            origin: Origin { node: id, seq },
            writes: writes
                .into_iter()
                .map(|((table, key), value)| Write { table, key, value })
                .collect(),
        };
        if !opts.delay_before_append.is_zero() {
            std::thread::sleep(opts.delay_before_append);
        }
        let size = rec.encoded_len();
        let slot = self.commit_and_queue(txn, rec, size)?;
        Ok(PendingWrite {
            value,
            ts: commit_ts,
            slot: Some(slot),
            node: id,
            bound: self.shared.config.write_timeout * 3 + self.shared.config.tick,
        })
    }

    /// Commits `txn` here (speculatively) and queues its record `rec`
    /// (`size` bytes) for the batcher; returns the slot its outcome goes
    /// to. If either fails, nothing of it is in any log: the timestamp is
    /// released, and a failed commit fences the node.
    fn commit_and_queue(
        &self,
        txn: Txn<'_, '_>,
        rec: CommitRecord,
        size: usize,
    ) -> std::result::Result<Arc<Slot>, ReplicaError> {
        let id = self.shared.id;
        let (ts, seq) = (rec.commit_ts.get(), rec.origin.seq);
        // The speculative local commit, then the queue, both under the
        // queue's lock: a later transaction on the same keys commits after
        // this one, so it queues after it, and the log carries the two in
        // timestamp order; and every queued commit is already in this engine,
        // so a watermark that covers it (applied here when its entry commits)
        // never passes a commit still to come.
        let slot = Arc::new(Slot::default());
        let committed = {
            let mut q = self.shared.queue.lock();
            if q.closed {
                // The batcher has stopped (fenced or dropped): the
                // transaction rolls back as it drops; nothing is in any log.
                drop(txn);
                Err(ReplicaError::Fenced { node: id })
            } else {
                match txn.commit(CommitOptions::default()) {
                    Ok(()) => {
                        q.items.push(Queued {
                            rec,
                            bytes: size,
                            seq,
                            slot: slot.clone(),
                        });
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        };
        if let Err(e) = committed {
            // A table the transaction wrote was dropped first: the commit
            // rolled back whole, so this engine holds nothing of it and no
            // log will. Any other failure cannot happen while this node's
            // stable stays below `ts`; if one does, fence: the write is in
            // no log.
            if !matches!(e, ReplicaError::Engine(Error::TableDropped { .. })) {
                self.fence_and_leave();
            }
            self.shared.pending.lock().remove(&seq);
            self.shared.release(ts);
            return Err(e);
        }
        self.shared.queue_notify.notify_one();
        Ok(slot)
    }

    /// Creates the named table `name` on every node: proposes its create
    /// (with the next table id, which every node gives it) as a log entry,
    /// and returns a handle to it on this node's engine once that entry is
    /// committed on a majority and applied here. Leader transactions write
    /// it through [`WriteTxn::table`]; their entries follow the create in
    /// the log. Not transactional, like
    /// [`Engine::create_table`](crate::Engine::create_table). Call from
    /// outside the runtime.
    ///
    /// # Errors
    /// [`ReplicaError::NotLeader`] on a follower; [`ReplicaError::Fenced`];
    /// [`ReplicaError::Engine`] with the engine's error for a bad name or
    /// options, [`Error::TableExists`] when a live table has the name,
    /// [`Error::TableIdsExhausted`]; [`ReplicaError::Timeout`] when the
    /// entry did not commit within the write timeout and
    /// [`ReplicaError::Raft`] when openraft failed it (either way the
    /// outcome is unknown: the table may yet be created, which
    /// [`Replica::open_table`] tells).
    pub fn create_table(
        &self,
        name: &str,
        options: TableOptions,
    ) -> std::result::Result<Table, ReplicaError> {
        self.check_leader()?;
        let bounds = options.bounds(&self.shared.config.engine)?;
        let mut ddl = self.shared.ddl.lock();
        match self.shared.engine().open_table(name) {
            Ok(_) => {
                return Err(Error::TableExists {
                    name: name.to_string(),
                }
                .into())
            }
            Err(Error::TableNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // Above every id the log created and every id this node proposed
        // (one whose outcome was unknown may still commit).
        let id = (*self.shared.next_table.lock()).max(ddl.saturating_add(1));
        if id == u32::MAX {
            return Err(Error::TableIdsExhausted.into());
        }
        *ddl = id;
        self.propose_ddl(Command::CreateTable(TableDef {
            id,
            name: name.to_string(),
            max_key_len: bounds.max_key_len as u64,
            max_value_len: bounds.max_value_len as u64,
        }))?;
        match self.shared.engine().open_table(name) {
            Ok(t) if t.id().get() == id => Ok(t),
            // The entry was a no-op: another create of the name came first.
            _ => Err(Error::TableExists {
                name: name.to_string(),
            }
            .into()),
        }
    }

    /// Drops the named table `name` on every node: proposes its drop as a
    /// log entry and returns once that entry is committed on a majority
    /// and applied here (this node's handles to it then read and write
    /// nothing). A leader transaction that wrote it and commits after the
    /// drop fails with [`Error::TableDropped`]; one that committed before
    /// has its writes dropped with the table, on every node. Call from
    /// outside the runtime.
    ///
    /// # Errors
    /// [`ReplicaError::NotLeader`]; [`ReplicaError::Fenced`];
    /// [`ReplicaError::Engine`] with [`Error::TableNotFound`] or
    /// [`Error::InvalidTableName`]; [`ReplicaError::Timeout`] and
    /// [`ReplicaError::Raft`] as for [`Replica::create_table`] (the table
    /// may yet be dropped).
    pub fn drop_table(&self, name: &str) -> std::result::Result<(), ReplicaError> {
        self.check_leader()?;
        let _ddl = self.shared.ddl.lock();
        let t = self.shared.engine().open_table(name)?;
        self.propose_ddl(Command::DropTable { id: t.id().get() })
    }

    /// A handle to the live table `name` on this node's current engine,
    /// for [`WriteTxn::table`] on the leader. A handle names a table of
    /// one engine: after this node installs a snapshot (a new engine),
    /// open it again. Followers read tables through [`Reader::table`](super::Reader::table).
    ///
    /// # Errors
    /// [`Error::TableNotFound`], [`Error::InvalidTableName`], inside
    /// [`ReplicaError::Engine`].
    pub fn open_table(&self, name: &str) -> std::result::Result<Table, ReplicaError> {
        Ok(self.shared.engine().open_table(name)?)
    }

    /// The live named tables on this node, in byte order: those whose
    /// create entries it applied and whose drops it has not.
    pub fn table_names(&self) -> Vec<String> {
        self.shared.engine().table_names()
    }

    /// `Ok` if this node is unfenced and the ready leader.
    fn check_leader(&self) -> std::result::Result<(), ReplicaError> {
        let node = self.shared.id;
        if self.is_fenced() {
            return Err(ReplicaError::Fenced { node });
        }
        leader_ready(&self.raft, node).map_err(|leader| ReplicaError::NotLeader { node, leader })
    }

    /// Proposes a table's create or drop and waits (up to the write
    /// timeout) until it is committed and applied here. Nothing changes
    /// on this node before that, so a failure fences nothing.
    fn propose_ddl(&self, cmd: Command) -> std::result::Result<(), ReplicaError> {
        let node = self.shared.id;
        let wait = self.shared.config.write_timeout;
        let raft = self.raft.clone();
        let res = self
            .rt
            .block_on(async move { tokio::time::timeout(wait, raft.client_write(cmd)).await });
        match res {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(openraft::error::RaftError::APIError(
                openraft::error::ClientWriteError::ForwardToLeader(f),
            ))) => Err(ReplicaError::NotLeader {
                node,
                leader: f.leader_id,
            }),
            Ok(Err(e)) => Err(super::error::raft_err(e)),
            Err(_) => Err(ReplicaError::Timeout {
                what: "a table's create or drop entry to commit",
                waited: wait,
            }),
        }
    }

    /// Fences this node and stops its raft, so that the others elect a
    /// leader without it.
    fn fence_and_leave(&self) {
        self.shared.fence();
        let raft = self.raft.clone();
        self.rt.spawn(async move {
            let _ = raft.shutdown().await;
        });
    }
}
