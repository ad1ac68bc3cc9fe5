//! The state machine ([`openraft::storage::RaftStateMachine`], v2 API):
//! applies the log to the node's engine, builds and installs snapshots.
//!
//! * `Commit` entries become one transaction each that writes the entry's
//!   keys and commits at the leader's commit timestamp (skipped on the node
//!   that proposed it: its own transaction commits those versions).
//! * `Watermark(W)` sets the engine's stable timestamp to `W` (and oldest to
//!   `W - oldest_lag`); raising stable waits for local commits at or below
//!   `W` still in flight.
//! * `Batch` entries (what the leader proposes) are their commits one after
//!   another, then their watermark, if any.
//! * `CreateTable` and `DropTable` create and drop a named table, on every
//!   node and the leader alike, in log order; a created table takes the
//!   id in the entry (the leader's), so ids agree on every node. A write
//!   to an id no live table has (dropped before the entry) is skipped, as
//!   on the leader, whose table dropped it.
//! * A snapshot is the table catalog (every live named table's id, name
//!   and bounds, and the next id), every table's contents at its watermark
//!   `W` (read at timestamp `W`) plus every applied commit entry above `W`
//!   (the *tail*, at most a few ticks of commits). Installing one builds a
//!   new engine: the tables with their ids, the contents committed at `W`,
//!   stable set to `W`, then the tail at its own timestamps; the node then
//!   switches to it.
//! * A durable node writes every snapshot it builds or installs to its
//!   directory before reporting it, and at start rebuilds its engine from
//!   that file; openraft then re-applies the committed log after it.
//!
//! The snapshot's bytes are `snapshot.rs`'s format.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, OptionalSend, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};

use super::disk::Disk;
use super::entry::{Applied, Command, CommitRecord, NodeId, TableDef, TypeConfig};
use super::error::ReplicaError;
use super::shared::Shared;
use super::snapshot::{decode, encode, Contents, SnapshotBytes};
use crate::sync::{mutant as m, mutant_on, Ordering};
use crate::{
    CommitOptions, Engine, Error, Table, TableId, Timestamp, TimestampKind, TimestampUpdate,
    TxnOptions,
};

/// The live named tables the log created on the current engine, by id.
type Tables = BTreeMap<u32, Table>;

/// A node's state machine: its engine, the last applied log id and
/// membership, and the tail of applied commits above the watermark.
pub struct StateMachine {
    shared: Arc<Shared>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    /// Applied commit entries above the watermark, in apply order.
    tail: Vec<CommitRecord>,
    /// The live named tables on the current engine, by id.
    tables: Tables,
    /// The newest timestamp applied (commit or watermark).
    max_ts: Timestamp,
    current: Option<Snapshot<TypeConfig>>,
    built: u64,
    /// A durable node's files, where its snapshots are kept.
    disk: Option<Arc<Disk>>,
}

/// Builds nothing: the snapshot is taken when the builder is made, while
/// the state machine is not applying (a consistent cut).
pub struct SnapshotBuilder {
    built: std::result::Result<Snapshot<TypeConfig>, String>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        self.built
            .clone()
            .map_err(|e| StorageIOError::write_snapshot(None, AnyError::error(e)).into())
    }
}

fn stable_of(engine: &Engine) -> u64 {
    engine
        .query_timestamp(TimestampKind::Stable)
        .map_or(0, Timestamp::get)
}

/// Installs `rec` into `engine` as one transaction committed at its
/// timestamp; `tables`: the engine's live named tables, by id (a write to
/// another id is skipped). A write conflict can only come from a local
/// leader transaction that is about to roll back (its node lost leadership
/// and is fenced); retry for up to `bound`.
fn install(
    shared: &Shared,
    engine: &Engine,
    tables: &Tables,
    rec: &CommitRecord,
    bound: Duration,
) -> Result<(), Error> {
    let mut session = engine.session()?;
    let start = std::time::Instant::now();
    loop {
        let mut txn = session.begin(&TxnOptions::default())?;
        let mut skipped = 0u64;
        let writes = rec.writes.iter().try_for_each(|w| {
            if w.table == TableId::DEFAULT.get() {
                return match &w.value {
                    Some(v) => txn.put(&w.key, v),
                    None => txn.delete(&w.key),
                };
            }
            let Some(table) = tables.get(&w.table) else {
                skipped += 1;
                return Ok(());
            };
            let mut t = txn.table(table)?;
            match &w.value {
                Some(v) => t.put(&w.key, v),
                None => t.delete(&w.key),
            }
        });
        // `commit` takes the transaction; after a failed write it drops
        // here instead, which rolls it back before any retry.
        let res = writes.and_then(|()| {
            txn.commit(CommitOptions {
                commit_ts: Some(rec.commit_ts),
                durable_ts: None,
            })
        });
        match res {
            Ok(()) => {
                shared.ctr.applied_commits.fetch_add(1, Ordering::Relaxed);
                shared
                    .ctr
                    .applied_writes
                    .fetch_add(rec.writes.len() as u64 - skipped, Ordering::Relaxed);
                shared
                    .ctr
                    .skipped_writes
                    .fetch_add(skipped, Ordering::Relaxed);
                return Ok(());
            }
            Err(Error::WriteConflict { .. }) if start.elapsed() < bound => {
                shared.ctr.apply_retries.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sets stable (and oldest, durable) to `w` on `engine`, if `w` is newer.
fn advance(shared: &Shared, engine: &Engine, w: Timestamp) -> Result<bool, Error> {
    if w.get() <= stable_of(engine) {
        return Ok(false);
    }
    let oldest = engine
        .query_timestamp(TimestampKind::Oldest)
        .map_or(0, Timestamp::get);
    let target = w.get().saturating_sub(shared.config.oldest_lag);
    engine.set_timestamps(TimestampUpdate {
        oldest: (target > oldest && target > 0).then(|| Timestamp::new(target)),
        stable: Some(w),
        durable: Some(w),
    })?;
    Ok(true)
}

impl StateMachine {
    /// A state machine over `shared`'s engine; `disk` keeps its snapshots.
    pub(crate) fn new(shared: Arc<Shared>, disk: Option<Arc<Disk>>) -> StateMachine {
        StateMachine {
            shared,
            last_applied: None,
            membership: StoredMembership::default(),
            tail: Vec::new(),
            tables: Tables::new(),
            max_ts: Timestamp::NONE,
            current: None,
            built: 0,
            disk,
        }
    }

    /// Rebuilds the engine from the snapshot in the node's directory, if
    /// there is one; returns the index of the last entry it covers.
    ///
    /// # Errors
    /// The file is damaged ([`Error::Corrupt`]) or does not decode
    /// ([`ReplicaError::BadSnapshot`]); the engine refused its contents.
    pub(crate) fn restore(&mut self) -> Result<Option<u64>, ReplicaError> {
        let Some(disk) = self.disk.clone() else {
            return Ok(None);
        };
        let Some((meta, data)) = disk.load_snapshot()? else {
            return Ok(None);
        };
        let index = meta.last_log_id.map(|l| l.index);
        self.install_snapshot_data(&meta, data, Source::Disk)?;
        Ok(index)
    }

    fn apply_one(&mut self, entry: &Entry<TypeConfig>) -> Result<Applied, ReplicaError> {
        self.last_applied = Some(entry.log_id);
        let engine = self.shared.engine();
        match &entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Membership(m) => {
                self.membership = StoredMembership::new(Some(entry.log_id), m.clone());
            }
            EntryPayload::Normal(Command::Commit(rec)) => self.apply_commit(&engine, rec)?,
            EntryPayload::Normal(Command::Watermark { ts }) => {
                self.apply_watermark(&engine, entry, *ts)?;
            }
            EntryPayload::Normal(Command::Batch {
                commits, watermark, ..
            }) => {
                for rec in commits.iter() {
                    self.apply_commit(&engine, rec)?;
                }
                if let Some(ts) = watermark {
                    self.apply_watermark(&engine, entry, *ts)?;
                }
            }
            EntryPayload::Normal(Command::CreateTable(def)) => self.apply_create(&engine, def),
            EntryPayload::Normal(Command::DropTable { id }) => self.apply_drop(&engine, *id)?,
        }
        Ok(Applied {
            stable: engine.query_timestamp(TimestampKind::Stable),
        })
    }

    /// Installs one commit (skipped on the node whose open transaction
    /// made it: that transaction commits the versions itself).
    fn apply_commit(&mut self, engine: &Engine, rec: &CommitRecord) -> Result<(), ReplicaError> {
        self.max_ts = self.max_ts.max(rec.commit_ts);
        let own = rec.origin.node == self.shared.id && self.shared.is_pending(rec.origin.seq);
        if own {
            self.shared.ctr.skipped_own.fetch_add(1, Ordering::Relaxed);
        } else {
            install(
                &self.shared,
                engine,
                &self.tables,
                rec,
                self.shared.config.write_timeout * 2,
            )?;
            if mutant_on(m::STABLE_FOLLOWS_NEWEST_COMMIT)
                && advance(&self.shared, engine, rec.commit_ts)?
            {
                self.shared.record_watermark(rec.commit_ts);
            }
        }
        if rec.commit_ts.get() > stable_of(engine) {
            self.tail.push(rec.clone());
        }
        Ok(())
    }

    /// Creates the table `def` with its id. A no-op where a live table has
    /// the id or the name: every node's tables are the same at this point
    /// of the log, so it is a no-op on every node (the leader reports it
    /// to its caller). The next id moves past it either way.
    fn apply_create(&mut self, engine: &Engine, def: &TableDef) {
        {
            let mut next = self.shared.next_table.lock();
            *next = (*next).max(def.id.saturating_add(1));
        }
        if def.id == TableId::DEFAULT.get() || self.tables.contains_key(&def.id) {
            return;
        }
        if let Ok(t) = engine.create_table_with_id(TableId(def.id), &def.name, def.options()) {
            self.shared
                .ctr
                .tables_created
                .fetch_add(1, Ordering::Relaxed);
            self.tables.insert(def.id, t);
        }
    }

    /// Drops the table of id `id`, if it is live.
    fn apply_drop(&mut self, engine: &Engine, id: u32) -> Result<(), ReplicaError> {
        let Some(t) = self.tables.remove(&id) else {
            return Ok(());
        };
        match engine.drop_table(t.name()) {
            // Not found: dropped on this engine directly, outside the log.
            Ok(()) | Err(Error::TableNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.shared
            .ctr
            .tables_dropped
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Sets stable to watermark `ts` carried by `entry`.
    fn apply_watermark(
        &mut self,
        engine: &Engine,
        entry: &Entry<TypeConfig>,
        ts: Timestamp,
    ) -> Result<(), ReplicaError> {
        self.max_ts = self.max_ts.max(ts);
        // Another leader's watermark reached a transaction this node
        // committed speculatively and whose entry is not known committed
        // (it lost leadership mid-write): that write's outcome is unknown
        // here, so fence before stable passes it (DESIGN.md, "Replication",
        // R4). This node's own watermarks pass an open transaction of its
        // own only once that transaction's entry is in the log at or before
        // them, so applying them means that entry is committed.
        if entry.log_id.leader_id.node_id != self.shared.id
            && self.shared.pending.lock().values().any(|&p| p <= ts.get())
        {
            self.shared.fence();
        }
        if advance(&self.shared, engine, ts)? {
            self.tail.retain(|r| r.commit_ts > ts);
            self.shared.record_watermark(ts);
        }
        Ok(())
    }

    fn build(&mut self) -> Result<Snapshot<TypeConfig>, ReplicaError> {
        let engine = self.shared.engine();
        let w = engine.query_timestamp(TimestampKind::Stable);
        let mut base = Vec::new();
        if let Some(w) = w {
            let mut session = engine.session()?;
            // One read at `w` for every table.
            let mut txn = session.begin(&TxnOptions {
                read_timestamp: Some(w),
                read_only: true,
                ..TxnOptions::default()
            })?;
            let mut pairs = Vec::new();
            txn.scan(.., |k, v| {
                pairs.push((k.to_vec(), v.to_vec()));
                true
            })?;
            base.push((TableId::DEFAULT.get(), pairs));
            for (&id, table) in &self.tables {
                let mut pairs = Vec::new();
                txn.table(table)?.scan(.., |k, v| {
                    pairs.push((k.to_vec(), v.to_vec()));
                    true
                })?;
                base.push((id, pairs));
            }
            txn.commit(CommitOptions::default())?;
        }
        let data = encode(&Contents {
            watermark: w.unwrap_or(Timestamp::NONE),
            max_ts: self.max_ts,
            next_table: *self.shared.next_table.lock(),
            tables: self.tables.values().map(TableDef::of).collect(),
            base,
            tail: self.tail.clone(),
        });
        self.built += 1;
        self.shared
            .ctr
            .snapshots_built
            .fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match self.last_applied {
            Some(l) => format!(
                "{}-{}-{}-{}",
                l.leader_id.term, l.index, self.shared.id, self.built
            ),
            None => format!("none-{}-{}", self.shared.id, self.built),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        // Stored before openraft learns of it: it purges the log up to it.
        if let Some(disk) = &self.disk {
            disk.save_snapshot(&meta, &data)?;
        }
        let snap = Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        };
        self.current = Some(snap.clone());
        Ok(snap)
    }

    fn install_snapshot_data(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: Vec<u8>,
        source: Source,
    ) -> Result<(), ReplicaError> {
        let snap = decode(&data)?;
        let engine = Arc::new(Engine::new(self.shared.config.engine.clone())?);
        let mut tables = Tables::new();
        for def in &snap.tables {
            let t = engine.create_table_with_id(TableId(def.id), &def.name, def.options())?;
            tables.insert(def.id, t);
        }
        if !snap.watermark.is_none() {
            let mut session = engine.session()?;
            for (id, pairs) in &snap.base {
                let table = match *id {
                    0 => None,
                    id => Some(tables.get(&id).ok_or_else(|| ReplicaError::BadSnapshot {
                        what: format!("contents of table {id}, which its catalog lacks"),
                    })?),
                };
                for chunk in pairs.chunks(1024) {
                    let mut txn = session.begin(&TxnOptions::default())?;
                    for (k, v) in chunk {
                        match table {
                            None => txn.put(k, v)?,
                            Some(t) => txn.table(t)?.put(k, v)?,
                        }
                    }
                    txn.commit(CommitOptions {
                        commit_ts: Some(snap.watermark),
                        durable_ts: None,
                    })?;
                }
            }
            drop(session);
            advance(&self.shared, &engine, snap.watermark)?;
        }
        let bound = self.shared.config.write_timeout;
        for rec in &snap.tail {
            install(&self.shared, &engine, &tables, rec, bound)?;
        }
        if let (Source::Leader, Some(disk)) = (source, &self.disk) {
            // Stored before the engine switches and openraft learns of it.
            disk.save_snapshot(meta, &data)?;
        }
        self.shared.saw_ts(snap.max_ts);
        {
            let mut next = self.shared.next_table.lock();
            *next = (*next).max(snap.next_table);
        }
        self.tables = tables;
        self.shared.replace_engine(engine);
        if source == Source::Leader {
            self.shared
                .ctr
                .snapshots_installed
                .fetch_add(1, Ordering::Relaxed);
        }
        if !snap.watermark.is_none() {
            self.shared.record_watermark(snap.watermark);
        }
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.tail = snap.tail;
        self.max_ts = snap.max_ts;
        self.current = Some(Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data)),
        });
        Ok(())
    }
}

/// Where an installed snapshot came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Sent by the leader (counted in `snapshots_installed`).
    Leader,
    /// This node's own, read from its directory at start.
    Disk,
}

fn sm_err(log_id: Option<LogId<NodeId>>, e: ReplicaError) -> StorageError<NodeId> {
    let err = AnyError::error(e);
    match log_id {
        Some(l) => StorageIOError::apply(l, err).into(),
        None => StorageIOError::write_state_machine(err).into(),
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut out = Vec::new();
        for e in entries {
            let r = self
                .apply_one(&e)
                .map_err(|err| sm_err(Some(e.log_id), err))?;
            out.push(r);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            built: self.build().map_err(|e| e.to_string()),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<SnapshotBytes>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<SnapshotBytes>,
    ) -> Result<(), StorageError<NodeId>> {
        self.install_snapshot_data(meta, snapshot.into_inner(), Source::Leader)
            .map_err(|e| sm_err(None, e))
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(self.current.clone())
    }
}
