//! The durable table catalog: the live tables' definitions and the next
//! table id, as the log's `create` and `drop` records leave them.
//!
//! Table 0 is the default table: it has no name, always exists and is
//! never created or dropped. Every other table is created once with an id
//! no table had before (ids are never reused), so a table id below
//! [`Catalog::next_id`] that is not live was dropped.
//!
//! # Replay rules
//!
//! The catalog takes the log's records in lsn order ([`Catalog::admit`]):
//! * a `create` adds its table; of an id already live under the same name
//!   it is a no-op; of id 0, of a live id under another name, or of a name
//!   another live table holds, it is corruption;
//! * a `drop` removes its table; of an id already dropped it is a no-op; of
//!   an id never created (at or above the next id, or 0) it is corruption;
//! * a write to a dropped table is skipped (its commit raced the drop and
//!   was logged after it); a write to a table never created is corruption.
//!
//! Creates need not come in id order: an id below the next id that is not
//! live may be created (two creates that took ids in one order and logged
//! them in the other).

use super::record::{Commit, Record};
use std::collections::{BTreeMap, HashMap};

/// The longest table name, in bytes of UTF-8.
pub(crate) const MAX_TABLE_NAME: usize = 255;

/// A named table's definition, as its `create` record and a checkpoint's
/// catalog hold it. Valid by construction ([`TableDef::new`]): a non-zero
/// id and a name of 1 to [`MAX_TABLE_NAME`] bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableDef {
    id: u32,
    name: String,
    max_key_len: u32,
    max_value_len: u32,
}

impl TableDef {
    /// A table definition.
    ///
    /// # Errors
    /// What is wrong, when `id` is 0 (the default table, never created) or
    /// `name` is empty or longer than [`MAX_TABLE_NAME`] bytes.
    pub(crate) fn new(
        id: u32,
        name: String,
        max_key_len: u32,
        max_value_len: u32,
    ) -> Result<TableDef, &'static str> {
        if id == 0 {
            return Err("table id 0 (the default table) in a table record");
        }
        if name.is_empty() || name.len() > MAX_TABLE_NAME {
            return Err("table name empty or over 255 bytes");
        }
        Ok(TableDef {
            id,
            name,
            max_key_len,
            max_value_len,
        })
    }

    /// The table's id (never 0).
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// The table's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The longest key the table takes, in bytes.
    pub(crate) fn max_key_len(&self) -> u32 {
        self.max_key_len
    }

    /// The longest value the table takes, in bytes.
    pub(crate) fn max_value_len(&self) -> u32 {
        self.max_value_len
    }
}

/// The live named tables and the next table id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Catalog {
    tables: BTreeMap<u32, TableDef>,
    names: HashMap<String, u32>,
    /// One above the highest id ever created (1 with none): no table at or
    /// above it was ever created.
    next_id: u64,
}

impl Default for Catalog {
    fn default() -> Catalog {
        Catalog {
            tables: BTreeMap::new(),
            names: HashMap::new(),
            next_id: 1,
        }
    }
}

impl Catalog {
    /// A catalog of `tables` with `next_id`, as a checkpoint holds it.
    ///
    /// # Errors
    /// What is wrong: two tables with one id or one name, an id at or above
    /// `next_id`, or `next_id` 0 or above `2^32`.
    pub(crate) fn from_parts(tables: Vec<TableDef>, next_id: u64) -> Result<Catalog, &'static str> {
        if next_id == 0 || next_id > 1 << 32 {
            return Err("next table id out of range");
        }
        let mut c = Catalog {
            next_id,
            ..Catalog::default()
        };
        for def in tables {
            if u64::from(def.id) >= next_id {
                return Err("catalog table id at or above the next table id");
            }
            if c.tables.contains_key(&def.id) || c.names.contains_key(&def.name) {
                return Err("catalog holds a table id or name twice");
            }
            c.names.insert(def.name.clone(), def.id);
            c.tables.insert(def.id, def);
        }
        Ok(c)
    }

    /// The live named tables, by id.
    pub(crate) fn tables(&self) -> impl ExactSizeIterator<Item = &TableDef> {
        self.tables.values()
    }

    /// One above the highest table id ever created (1 with none): ids from
    /// here on are free.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Whether table `id` exists: the default table, or a live named one.
    #[inline]
    pub(crate) fn is_live(&self, id: u32) -> bool {
        id == 0 || self.tables.contains_key(&id)
    }

    /// Whether table `id` was ever created (the default table counts).
    fn was_created(&self, id: u32) -> bool {
        u64::from(id) < self.next_id
    }

    /// Takes the next record in log order (see "Replay rules"): applies a
    /// `create` or `drop`, and removes from a commit its writes to dropped
    /// tables.
    ///
    /// # Errors
    /// What is wrong with a record the rules call corruption; the catalog
    /// and the record are then unchanged.
    pub(crate) fn admit(&mut self, rec: &mut Record) -> Result<(), &'static str> {
        match rec {
            Record::Commit(c) => self.admit_writes(c),
            Record::CreateTable { def, .. } => self.create(def),
            Record::DropTable { id, .. } => self.drop_table(*id).map(|_| ()),
        }
    }

    fn admit_writes(&self, c: &mut Commit) -> Result<(), &'static str> {
        if c.writes.iter().any(|w| !self.was_created(w.table)) {
            return Err("write to a table never created");
        }
        if c.writes.iter().any(|w| !self.is_live(w.table)) {
            c.writes.retain(|w| self.is_live(w.table));
        }
        Ok(())
    }

    fn create(&mut self, def: &TableDef) -> Result<(), &'static str> {
        if let Some(live) = self.tables.get(&def.id) {
            return if live.name == def.name {
                Ok(())
            } else {
                Err("create of a live table id under another name")
            };
        }
        if self.names.contains_key(&def.name) {
            return Err("create of a name a live table holds");
        }
        self.next_id = self.next_id.max(u64::from(def.id) + 1);
        self.names.insert(def.name.clone(), def.id);
        self.tables.insert(def.id, def.clone());
        Ok(())
    }

    /// Drops table `id`; returns whether it was live.
    ///
    /// # Errors
    /// `id` is 0 or was never created.
    pub(crate) fn drop_table(&mut self, id: u32) -> Result<bool, &'static str> {
        if id == 0 || !self.was_created(id) {
            return Err("drop of a table never created");
        }
        match self.tables.remove(&id) {
            Some(def) => {
                self.names.remove(&def.name);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::durability::record::Write;

    fn def(id: u32, name: &str) -> TableDef {
        TableDef::new(id, name.into(), 64, 1024).unwrap()
    }

    fn create(lsn: u64, id: u32, name: &str) -> Record {
        Record::CreateTable {
            lsn,
            def: def(id, name),
        }
    }

    fn write_to(lsn: u64, tables: &[u32]) -> Record {
        Record::Commit(Commit {
            lsn,
            commit_ts: 0,
            durable_ts: 0,
            prepared: false,
            writes: tables
                .iter()
                .map(|&table| Write {
                    table,
                    key: b"k".to_vec(),
                    value: Some(b"v".to_vec()),
                })
                .collect(),
        })
    }

    fn tables_of(r: &Record) -> Vec<u32> {
        match r {
            Record::Commit(c) => c.writes.iter().map(|w| w.table).collect(),
            _ => panic!("not a commit"),
        }
    }

    #[test]
    fn definitions_are_checked_when_made() {
        assert!(TableDef::new(0, "t".into(), 1, 1).is_err());
        assert!(TableDef::new(1, String::new(), 1, 1).is_err());
        assert!(TableDef::new(1, "x".repeat(MAX_TABLE_NAME + 1), 1, 1).is_err());
        let d = TableDef::new(1, "x".repeat(MAX_TABLE_NAME), 7, 9).unwrap();
        assert_eq!((d.id(), d.max_key_len(), d.max_value_len()), (1, 7, 9));
    }

    #[test]
    fn the_replay_rules_hold_in_log_order() {
        let mut c = Catalog::default();
        c.admit(&mut create(1, 1, "users")).unwrap();
        // Again, same name: a no-op. Another name or a taken name: corrupt.
        c.admit(&mut create(2, 1, "users")).unwrap();
        assert!(c.admit(&mut create(2, 1, "orders")).is_err());
        assert!(c.admit(&mut create(2, 2, "users")).is_err());
        assert_eq!(c.next_id(), 2);
        let mut w = write_to(3, &[0, 1]);
        c.admit(&mut w).unwrap();
        assert_eq!(tables_of(&w), [0, 1]);
        // Never created: corrupt, the record unchanged.
        let mut w = write_to(4, &[1, 2]);
        assert!(c.admit(&mut w).is_err());
        assert_eq!(tables_of(&w), [1, 2]);
        assert!(c.admit(&mut Record::DropTable { lsn: 5, id: 2 }).is_err());
        assert!(c.admit(&mut Record::DropTable { lsn: 5, id: 0 }).is_err());
        c.admit(&mut Record::DropTable { lsn: 5, id: 1 }).unwrap();
        // Dropped again: a no-op; a write that raced the drop: skipped.
        c.admit(&mut Record::DropTable { lsn: 6, id: 1 }).unwrap();
        let mut w = write_to(7, &[1, 0, 1]);
        c.admit(&mut w).unwrap();
        assert_eq!(tables_of(&w), [0]);
        // The name is free again, under a new id.
        c.admit(&mut create(8, 3, "users")).unwrap();
        assert_eq!(c.next_id(), 4);
        // An id below the next one, never live: created late.
        c.admit(&mut create(9, 2, "orders")).unwrap();
        let names: Vec<&str> = c.tables().map(TableDef::name).collect();
        assert_eq!(names, ["orders", "users"]);
        assert_eq!(c.next_id(), 4);
    }

    #[test]
    fn a_checkpoints_catalog_is_checked_when_loaded() {
        assert!(Catalog::from_parts(vec![def(1, "a"), def(2, "b")], 3).is_ok());
        assert!(Catalog::from_parts(vec![def(1, "a"), def(2, "a")], 3).is_err());
        assert!(Catalog::from_parts(vec![def(1, "a"), def(1, "b")], 3).is_err());
        assert!(Catalog::from_parts(vec![def(3, "a")], 3).is_err());
        assert!(Catalog::from_parts(vec![], 0).is_err());
        assert!(Catalog::from_parts(vec![], (1 << 32) + 1).is_err());
    }
}
