//! [`Engine::open`]: a durable engine on a directory. The durability layer
//! recovers the directory ([`Recovery`]) and hands back what it read; it is
//! applied here, through ordinary transactions, before the log becomes the
//! engine's.

use super::engine::Engine;
use super::table::{Table, TableId, TableOptions};
use super::txn::Txn;
use crate::config::{CommitOptions, EngineConfig, TimestampUpdate, TxnOptions};
use crate::durability::{Commit, DurabilityOptions, Record, Recovery, TableDef};
use crate::error::{Error, Result};
use crate::machinery::with_machinery::LockFree;
use crate::store::Tb;
use crate::ts::Timestamp;
use std::collections::HashMap;
use std::path::Path;

/// The tables being replayed, by id.
struct Tables<'e> {
    engine: &'e Engine,
    dir: &'e Path,
    by_id: HashMap<u32, Table>,
}

impl Tables<'_> {
    /// Creates the table `def` logged or checkpointed, with its id.
    fn create(&mut self, def: &TableDef) -> Result<()> {
        let options = TableOptions {
            max_key_len: Some(def.max_key_len() as usize),
            max_value_len: Some(def.max_value_len() as usize),
        };
        let t = self
            .engine
            .create_table_with_id(TableId(def.id()), def.name(), options)?;
        self.by_id.insert(def.id(), t);
        Ok(())
    }

    /// Drops table `id` (a logged drop).
    fn drop_id(&mut self, id: u32) -> Result<()> {
        match self.by_id.remove(&id) {
            Some(t) => self.engine.drop_table(t.name()),
            // `Catalog::admit` let only drops of live tables through.
            None => Err(self.unknown()),
        }
    }

    /// Writes `value` (`None`: a delete) at `key` of table `table` in `t`.
    fn write(
        &self,
        t: &mut Txn<'_, '_>,
        table: u32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        let tb = match table {
            0 => Tb::Default,
            id => Tb::Named(&self.by_id.get(&id).ok_or_else(|| self.unknown())?.0),
        };
        match value {
            Some(v) => t.put_in(tb, key, v),
            None => t.write(tb, key, None),
        }
    }

    fn unknown(&self) -> Error {
        Error::Corrupt {
            file: self.dir.to_path_buf(),
            offset: 0,
            reason: "a record names a table the recovered catalog does not hold",
        }
    }
}

/// Rebuilds the store from a checkpoint's catalog and base and the records
/// after it, through ordinary transactions and table creates and drops on
/// an engine that is not logging yet.
fn replay(engine: &Engine, dir: &Path, rec: &Recovery) -> Result<u64> {
    let (st, tail) = (&rec.checkpoint, &rec.records);
    let mut tables = Tables {
        engine,
        dir,
        by_id: HashMap::new(),
    };
    for def in st.catalog.tables() {
        tables.create(def)?;
    }
    let mut s = engine.session()?;
    let at = |ts: Timestamp| CommitOptions {
        commit_ts: ts.to_option(),
        durable_ts: None,
    };
    let mut base: Vec<_> = st
        .base
        .iter()
        .flat_map(|(&table, keys)| {
            keys.iter()
                .filter_map(move |(k, e)| Some((e.commit_ts, table, k, e.value.as_deref()?)))
        })
        .collect();
    base.sort_unstable_by_key(|&(ts, ..)| ts);
    for group in base.chunk_by(|a, b| a.0 == b.0) {
        for chunk in group.chunks(1024) {
            let mut t = s.begin(&TxnOptions::default())?;
            for &(_, table, k, v) in chunk {
                tables.write(&mut t, table, k, Some(v))?;
            }
            t.commit(at(chunk[0].0))?;
        }
    }
    // The carried commits, then the log's records, in lsn order. A run of
    // consecutive unprepared commits at one commit timestamp is replayed
    // as one transaction (up to 1,024): nothing can read between them, and
    // lsn order, which each key's chain order follows (D3), is kept. A
    // prepared commit stays alone: its id is noted for rollback to stable.
    // A create or drop ends a run and is applied in its place (D14).
    let items: Vec<Item<'_>> = st
        .carried
        .iter()
        .map(Item::Commit)
        .chain(tail.iter().map(|r| match r {
            Record::Commit(c) => Item::Commit(c),
            Record::CreateTable { def, .. } => Item::Create(def),
            Record::DropTable { id, .. } => Item::Drop(*id),
        }))
        .collect();
    let mut i = 0;
    while i < items.len() {
        let first = match items[i] {
            Item::Commit(c) => c,
            Item::Create(def) => {
                tables.create(def)?;
                i += 1;
                continue;
            }
            Item::Drop(id) => {
                tables.drop_id(id)?;
                i += 1;
                continue;
            }
        };
        let mut end = i + 1;
        if !first.prepared {
            while end < items.len()
                && end - i < 1024
                && matches!(items[end], Item::Commit(c) if !c.prepared && c.commit_ts == first.commit_ts)
            {
                end += 1;
            }
        }
        let mut t = s.begin(&TxnOptions::default())?;
        for item in &items[i..end] {
            let Item::Commit(r) = item else { continue };
            for w in &r.writes {
                if st
                    .base_entry(w.table, &w.key)
                    .is_some_and(|e| e.lsn > r.lsn)
                {
                    continue;
                }
                tables.write(&mut t, w.table, &w.key, w.value.as_deref())?;
            }
        }
        // Replayed as an ordinary commit: note a prepared one's durable
        // timestamp for `rollback_to_stable`, as its commit did.
        let (commit, durable) = (
            Timestamp::new(first.commit_ts),
            Timestamp::new(first.durable_ts),
        );
        let prepared = first.prepared.then_some((commit, durable));
        let id = t.id();
        t.commit(at(commit))?;
        if let Some((c, d)) = prepared {
            engine.prepared_durable.note(id, c, d, Timestamp::NONE);
        }
        i = end;
    }
    engine.tables.raise_next_id(rec.next_table_id());
    Ok(items.len() as u64)
}

/// One thing recovery read, in lsn order.
#[derive(Clone, Copy)]
enum Item<'a> {
    Commit(&'a Commit),
    Create(&'a TableDef),
    Drop(u32),
}

impl Engine<LockFree> {
    /// See [`Engine::open`](crate::Engine::open).
    ///
    /// # Errors
    /// As [`Engine::open`](crate::Engine::open).
    pub fn open(
        dir: impl AsRef<Path>,
        config: EngineConfig,
        options: DurabilityOptions,
    ) -> Result<Engine> {
        // The config first: a bad one touches no file.
        config.validate()?;
        options.validate()?;
        let rec = Recovery::open(dir.as_ref(), &options)?;
        let mut engine = Engine::with_machinery(config)?;
        let replayed = replay(&engine, dir.as_ref(), &rec)?;
        engine
            .serial
            .recovered(engine.mgr.query_timestamp(crate::TimestampKind::AllDurable));
        let stable = rec.stable();
        if !stable.is_none() {
            engine.set_timestamps(TimestampUpdate {
                oldest: Some(stable),
                stable: Some(stable),
                ..TimestampUpdate::default()
            })?;
        }
        engine.durable = Some(rec.start(replayed)?);
        Ok(engine)
    }
}
