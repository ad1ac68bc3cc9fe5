//! Named tables: [`Table`] handles, their [`TableOptions`], the engine's
//! create/open/list/drop, and [`TableTxn`], a transaction's view of one
//! table. The store side (state, registry, index slot) is in
//! `store/table.rs` and `store/raw/table.rs`.
//!
//! # Rules
//!
//! * A table has a name (non-empty UTF-8, at most [`MAX_TABLE_NAME_LEN`]
//!   bytes, no NUL byte) and an id; ids are never reused in an engine, so
//!   a handle to a dropped table never reaches a newer table of the same
//!   name. The default table (id 0) has no name and never drops.
//! * Create and drop are not transactional: they take effect at once, one
//!   at a time (a small registry lock that no read or commit takes).
//! * A transaction reads and writes every table at its one snapshot and
//!   read timestamp; its commit, prepare and rollback cover every table it
//!   wrote, at once.
//! * Dropping a table: its handles read and write nothing after the drop
//!   ([`Error::TableDropped`]). Its keys and versions are freed once every
//!   read that loaded its index has finished and every transaction that
//!   wrote to it (or opened a cursor on it) has ended; a handle keeps
//!   nothing alive.
//! * A commit racing a drop of a table it wrote either fails with
//!   [`Error::TableDropped`] (rolled back: the drop came first) or succeeds,
//!   and its writes to that table go with the table.

use super::cursor::Cursor;
use super::range::KeyRange;
use super::txn::Txn;
use crate::config::EngineConfig;
use crate::error::{Error, Result, TableNameProblem};
use crate::machinery::with_machinery::{LockFree, Machinery};
use crate::store::table::Bounds;
use crate::store::{TableState, Tb};
use std::fmt;
use std::sync::Arc;

/// The longest table name, in bytes.
pub const MAX_TABLE_NAME_LEN: usize = 255;

/// A table's id in its engine: 0 is the default table; named tables get
/// 1, 2, … in creation order, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The default table's id.
    pub const DEFAULT: TableId = TableId(0);

    /// The id as a number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A named table's settings, given to
/// [`Engine::create_table`](crate::Engine::create_table). `None` takes the
/// engine's [`EngineConfig`] value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// Longest key accepted in this table, in bytes,
    /// `0..=`[`EngineConfig::MAX_KEY_LEN`]; a longer one is
    /// [`Error::KeyTooLarge`].
    pub max_key_len: Option<usize>,
    /// Longest value accepted in this table, in bytes,
    /// `0..=`[`EngineConfig::MAX_VALUE_LEN`]; a longer one is
    /// [`Error::ValueTooLarge`].
    pub max_value_len: Option<usize>,
}

impl TableOptions {
    /// The bounds these options give in an engine configured with
    /// `config`.
    ///
    /// # Errors
    /// [`Error::TableOptionOutOfRange`] for the first field out of its
    /// bounds.
    pub(crate) fn bounds(&self, config: &EngineConfig) -> Result<Bounds> {
        let check = |field, value: Option<usize>, default, max| match value {
            None => Ok(default),
            Some(v) if v <= max => Ok(v),
            Some(v) => Err(Error::TableOptionOutOfRange {
                field,
                value: v,
                max,
            }),
        };
        Ok(Bounds {
            max_key_len: check(
                "max_key_len",
                self.max_key_len,
                config.max_key_len,
                EngineConfig::MAX_KEY_LEN,
            )?,
            max_value_len: check(
                "max_value_len",
                self.max_value_len,
                config.max_value_len,
                EngineConfig::MAX_VALUE_LEN,
            )?,
        })
    }
}

/// Checks a table name: non-empty, at most [`MAX_TABLE_NAME_LEN`] bytes,
/// no NUL byte.
///
/// # Errors
/// [`Error::InvalidTableName`].
pub(crate) fn check_name(name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        TableNameProblem::Empty
    } else if name.len() > MAX_TABLE_NAME_LEN {
        TableNameProblem::TooLong {
            len: name.len(),
            max: MAX_TABLE_NAME_LEN,
        }
    } else if let Some(at) = name.bytes().position(|b| b == 0) {
        TableNameProblem::Nul { at }
    } else {
        return Ok(());
    };
    Err(Error::InvalidTableName {
        name: name.to_string(),
        problem,
    })
}

/// A handle to a named table: cheap to clone (an `Arc`), `Send + Sync`.
/// Get one from [`Engine::create_table`](crate::Engine::create_table) or
/// [`Engine::open_table`](crate::Engine::open_table), and use it in a
/// transaction with [`Txn::table`](crate::Txn::table).
///
/// A handle names one table of one engine, for its whole life: after
/// [`Engine::drop_table`](crate::Engine::drop_table) it reaches nothing
/// (not a newer table of the same name), and it keeps none of the dropped
/// table's data alive.
#[derive(Clone)]
pub struct Table(pub(crate) Arc<TableState>);

impl Table {
    /// The table's id.
    pub fn id(&self) -> TableId {
        TableId(self.0.id)
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The longest key the table accepts, in bytes.
    pub fn max_key_len(&self) -> usize {
        self.0.max_key_len
    }

    /// The longest value the table accepts, in bytes.
    pub fn max_value_len(&self) -> usize {
        self.0.max_value_len
    }

    /// Was the table dropped?
    pub fn is_dropped(&self) -> bool {
        self.0.is_dropped()
    }
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("id", &self.0.id)
            .field("name", &self.0.name)
            .field("dropped", &self.is_dropped())
            .finish()
    }
}

/// Two handles are equal when they name the same table of the same engine.
impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Table {}

impl<M: Machinery> super::Engine<M> {
    /// See [`Engine::create_table`](crate::Engine::create_table).
    pub fn create_table(&self, name: &str, options: TableOptions) -> Result<Table> {
        check_name(name)?;
        let bounds = options.bounds(&self.config)?;
        if self.durable.is_some() {
            return Err(Error::Unsupported {
                operation: "create_table on an engine opened on a directory",
                reason: "its commit log and checkpoints hold the default table only; \
                         use an in-memory engine (Engine::new) for named tables",
            });
        }
        self.create_table_as(name, None, bounds)
    }

    /// Creates table `name` with id `id` (recovery's replay of a logged
    /// create; later ids follow it), on any engine.
    ///
    /// # Errors
    /// As [`Engine::create_table`](crate::Engine::create_table), less
    /// [`Error::Unsupported`].
    #[allow(dead_code)]
    pub(crate) fn create_table_with_id(
        &self,
        id: TableId,
        name: &str,
        options: TableOptions,
    ) -> Result<Table> {
        check_name(name)?;
        let bounds = options.bounds(&self.config)?;
        self.create_table_as(name, Some(id.0), bounds)
    }

    fn create_table_as(&self, name: &str, id: Option<u32>, bounds: Bounds) -> Result<Table> {
        let state = self
            .tables
            .create(name, id, bounds, self.instance, &self.store.freed)?;
        Ok(Table(state))
    }

    /// See [`Engine::open_table`](crate::Engine::open_table).
    pub fn open_table(&self, name: &str) -> Result<Table> {
        check_name(name)?;
        self.tables.open(name).map(Table)
    }

    /// See [`Engine::table_names`](crate::Engine::table_names).
    pub fn table_names(&self) -> Vec<String> {
        self.tables.names()
    }

    /// See [`Engine::drop_table`](crate::Engine::drop_table).
    pub fn drop_table(&self, name: &str) -> Result<()> {
        check_name(name)?;
        self.tables.drop_table(name, &self.store)
    }
}

/// The generic form of [`TableTxn`](crate::TableTxn), on snapshot
/// protocol `M`.
pub struct TableTxn<'t, 's, 'e, M: Machinery = LockFree> {
    txn: &'t mut Txn<'s, 'e, M>,
    table: &'t Arc<TableState>,
}

impl<'s, 'e, M: Machinery> Txn<'s, 'e, M> {
    /// See [`Txn::table`](crate::Txn::table).
    pub fn table<'t>(&'t mut self, table: &'t Table) -> Result<TableTxn<'t, 's, 'e, M>> {
        let t = &table.0;
        if t.engine != self.session.engine.instance {
            return Err(Error::ForeignTable {
                name: t.name.to_string(),
            });
        }
        if t.is_dropped() {
            return Err(t.dropped());
        }
        Ok(TableTxn {
            txn: self,
            table: t,
        })
    }
}

impl<'t, 's, 'e, M: Machinery> TableTxn<'t, 's, 'e, M> {
    #[inline]
    fn tb(&self) -> Tb<'t> {
        Tb::Named(self.table)
    }

    /// See [`TableTxn::get_with`](crate::TableTxn::get_with).
    #[inline]
    pub fn get_with<R>(
        &mut self,
        key: impl AsRef<[u8]>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.txn.get_with_in(self.tb(), key.as_ref(), f)
    }

    /// See [`TableTxn::get`](crate::TableTxn::get).
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// See [`TableTxn::get_many_with`](crate::TableTxn::get_many_with).
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.txn.get_many_with_in(self.tb(), keys, f)
    }

    /// See [`TableTxn::get_many`](crate::TableTxn::get_many).
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        self.get_many_with(keys, |_, v| out.push(v.map(<[u8]>::to_vec)))?;
        Ok(out)
    }

    /// See [`TableTxn::get_untracked`](crate::TableTxn::get_untracked).
    pub fn get_untracked(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.txn.get_untracked_in(self.tb(), key.as_ref())
    }

    /// See [`TableTxn::get_for_update`](crate::TableTxn::get_for_update).
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.txn.get_for_update_in(self.tb(), key.as_ref())
    }

    /// See [`TableTxn::scan`](crate::TableTxn::scan).
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.txn.scan_in(self.tb(), range, f)
    }

    /// See [`TableTxn::range`](crate::TableTxn::range).
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan(range, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// See [`TableTxn::iter`](crate::TableTxn::iter).
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e, M> {
        let tb = self.tb();
        Cursor::new(self.txn, tb, range.bounds())
    }

    /// See [`TableTxn::cursor`](crate::TableTxn::cursor).
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e, M> {
        self.iter(..)
    }

    /// See [`TableTxn::put`](crate::TableTxn::put).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.txn.put_in(self.tb(), key.as_ref(), value.as_ref())
    }

    /// See [`TableTxn::delete`](crate::TableTxn::delete).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.txn.write(self.tb(), key.as_ref(), None)
    }

    /// See [`TableTxn::table`](crate::TableTxn::table).
    pub fn table(&self) -> TableId {
        TableId(self.table.id)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_table_created_with_an_id_moves_the_next_id_past_it() {
        let e = crate::with_machinery::Engine::<LockFree>::new(EngineConfig::default()).unwrap();
        let t = e
            .create_table_with_id(TableId(7), "seven", TableOptions::default())
            .unwrap();
        assert_eq!(t.id(), TableId(7));
        let next = e.create_table("next", TableOptions::default()).unwrap();
        assert_eq!(next.id(), TableId(8));
        assert_eq!(
            e.create_table_with_id(TableId(9), "seven", TableOptions::default())
                .err(),
            Some(Error::TableExists {
                name: "seven".into()
            })
        );
        assert_eq!(
            e.create_table_with_id(TableId(9), "", TableOptions::default())
                .err(),
            Some(Error::InvalidTableName {
                name: String::new(),
                problem: TableNameProblem::Empty
            })
        );
    }
}
