//! Named tables as users name them: the engine's create/open/list/drop,
//! [`Txn::table`] and [`TableTxn`].

use super::{Cursor, Engine, Txn};
use crate::error::Result;
use crate::kv::{KeyRange, Table, TableId, TableOptions};
use crate::with_machinery::{self as generic, LockFree};

impl Engine {
    /// Creates a named table and returns a handle to it. Not
    /// transactional: the table exists at once, for every transaction
    /// (one that began earlier included); it is empty.
    ///
    /// ```
    /// # use snapshot_engine::{Engine, EngineConfig, Error, TableOptions};
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let users = engine.create_table("users", TableOptions::default())?;
    /// assert_eq!(users.name(), "users");
    /// assert!(matches!(
    ///     engine.create_table("users", TableOptions::default()),
    ///     Err(Error::TableExists { .. })
    /// ));
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidTableName`](crate::Error::InvalidTableName) (empty,
    /// longer than [`MAX_TABLE_NAME_LEN`](crate::MAX_TABLE_NAME_LEN) bytes,
    /// or holding a NUL byte);
    /// [`Error::TableOptionOutOfRange`](crate::Error::TableOptionOutOfRange);
    /// [`Error::TableExists`](crate::Error::TableExists) when a live table
    /// has the name; [`Error::TableIdsExhausted`](crate::Error::TableIdsExhausted);
    /// on an engine from [`Engine::open`], [`Error::Io`](crate::Error::Io)
    /// if the create could not be logged. Nothing changes on an error. On
    /// a durable engine the create is logged (and for
    /// [`Durability::Sync`](crate::durability::Durability::Sync) synced)
    /// before the table is returned: after a crash it exists if any write
    /// to it survived.
    #[inline]
    pub fn create_table(&self, name: &str, options: TableOptions) -> Result<Table> {
        self.0.create_table(name, options)
    }

    /// A handle to the live table `name`.
    ///
    /// # Errors
    /// [`Error::InvalidTableName`](crate::Error::InvalidTableName);
    /// [`Error::TableNotFound`](crate::Error::TableNotFound) when no live
    /// table has the name (never created, or dropped).
    #[inline]
    pub fn open_table(&self, name: &str) -> Result<Table> {
        self.0.open_table(name)
    }

    /// The live named tables' names, in byte order (the default table has
    /// no name and is not listed).
    #[inline]
    pub fn table_names(&self) -> Vec<String> {
        self.0.table_names()
    }

    /// Drops the table `name`. Not transactional: at once, every handle to
    /// it reads and writes nothing
    /// ([`Error::TableDropped`](crate::Error::TableDropped)), a transaction
    /// that wrote to it and has not prepared cannot commit (it is rolled
    /// back), and the name is free for a new table (with a new id, which
    /// no old handle reaches). Its keys and versions are freed once every
    /// read that was in it has finished and every transaction that wrote
    /// to it has ended; no reader of another table waits.
    ///
    /// A commit that races the drop either fails with `TableDropped` or
    /// succeeds, and then its writes to this table go with it. On an
    /// engine from [`Engine::open`] the drop is logged before the table
    /// goes (under [`Durability::Sync`](crate::durability::Durability::Sync)
    /// synced before this returns); a crash before that brings the table
    /// back as the log left it.
    ///
    /// # Errors
    /// [`Error::InvalidTableName`](crate::Error::InvalidTableName);
    /// [`Error::TableNotFound`](crate::Error::TableNotFound);
    /// [`Error::Io`](crate::Error::Io) if the drop could not be logged
    /// (the table stays).
    #[inline]
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.0.drop_table(name)
    }

    /// Creates table `name` with id `id` (a replica applying its leader's
    /// create; later ids follow it), on any engine.
    ///
    /// # Errors
    /// As [`Engine::create_table`].
    #[cfg(feature = "replication")]
    #[inline]
    pub(crate) fn create_table_with_id(
        &self,
        id: TableId,
        name: &str,
        options: TableOptions,
    ) -> Result<Table> {
        self.0.create_table_with_id(id, name, options)
    }
}

/// A transaction's view of one named table ([`Txn::table`]): reads and
/// writes of that table in the transaction, at its snapshot and read
/// timestamp. Savepoints, prepare, commit and rollback stay on the
/// [`Txn`] and cover every table it wrote, at once.
///
/// ```
/// # use snapshot_engine::{CommitOptions, Engine, EngineConfig, TableOptions, TxnOptions};
/// let engine = Engine::new(EngineConfig::default())?;
/// let users = engine.create_table("users", TableOptions::default())?;
/// let orders = engine.create_table("orders", TableOptions::default())?;
/// let mut session = engine.session()?;
/// let mut txn = session.begin(&TxnOptions::default())?;
/// txn.table(&users)?.put("u1", "ada")?;
/// txn.table(&orders)?.put("o1", "u1")?;
/// txn.commit(CommitOptions::default())?; // both writes, or neither
///
/// let mut txn = session.begin(&TxnOptions::default())?;
/// assert_eq!(txn.table(&users)?.get("u1")?.as_deref(), Some(&b"ada"[..]));
/// assert_eq!(txn.get("u1")?, None); // the default table is another keyspace
/// # Ok::<(), snapshot_engine::Error>(())
/// ```
///
/// Every method below errs with
/// [`Error::TableDropped`](crate::Error::TableDropped) once the table was
/// dropped, besides what the [`Txn`] method of the same name returns; the
/// key and value bounds are the table's
/// ([`Table::max_key_len`], [`Table::max_value_len`]).
#[repr(transparent)]
pub struct TableTxn<'t, 's, 'e>(generic::TableTxn<'t, 's, 'e, LockFree>);

impl<'s, 'e> Txn<'s, 'e> {
    /// This transaction's view of `table`, for its reads and writes.
    ///
    /// # Errors
    /// [`Error::ForeignTable`](crate::Error::ForeignTable) for a handle from
    /// another engine; [`Error::TableDropped`](crate::Error::TableDropped).
    /// The transaction stays usable.
    #[inline]
    pub fn table<'t>(&'t mut self, table: &'t Table) -> Result<TableTxn<'t, 's, 'e>> {
        self.0.table(table).map(TableTxn)
    }
}

impl<'s, 'e> TableTxn<'_, 's, 'e> {
    /// The table's id.
    #[inline]
    pub fn table(&self) -> TableId {
        self.0.table()
    }

    /// As [`Txn::get_with`], in this table.
    ///
    /// # Errors
    /// As [`Txn::get_with`] (with this table's key bound), and
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    #[inline]
    pub fn get_with<R>(
        &mut self,
        key: impl AsRef<[u8]>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.0.get_with(key, f)
    }

    /// As [`Txn::get`], in this table.
    ///
    /// # Errors
    /// As [`TableTxn::get_with`].
    #[inline]
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }

    /// As [`Txn::get_many_with`], in this table.
    ///
    /// # Errors
    /// As [`Txn::get_many_with`] (with this table's key bound), and
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    #[inline]
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.0.get_many_with(keys, f)
    }

    /// As [`Txn::get_many`], in this table.
    ///
    /// # Errors
    /// As [`TableTxn::get_many_with`].
    #[inline]
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.0.get_many(keys)
    }

    /// As [`Txn::get_untracked`], in this table.
    ///
    /// # Errors
    /// As [`TableTxn::get_with`].
    #[inline]
    pub fn get_untracked(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.0.get_untracked(key)
    }

    /// As [`Txn::get_for_update`], in this table: the read is tracked as
    /// (this table, `key`), so only a write of `key` in this table
    /// conflicts with it.
    ///
    /// # Errors
    /// As [`Txn::get_for_update`], and
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    #[inline]
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.0.get_for_update(key)
    }

    /// As [`Txn::scan`], in this table.
    ///
    /// # Errors
    /// As [`Txn::scan`], and
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    #[inline]
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.0.scan(range, f)
    }

    /// As [`Txn::range`], in this table.
    ///
    /// # Errors
    /// As [`TableTxn::scan`].
    #[inline]
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.range(range)
    }

    /// As [`Txn::iter`], in this table. The transaction holds the table's
    /// index from here until it ends (so the cursor's keys stay valid);
    /// after a drop the cursor yields
    /// [`Error::TableDropped`](crate::Error::TableDropped) at its next
    /// read-ahead.
    #[inline]
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e> {
        Cursor(self.0.iter(range))
    }

    /// As [`Txn::cursor`], in this table (see [`TableTxn::iter`]).
    #[inline]
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e> {
        Cursor(self.0.cursor())
    }

    /// As [`Txn::put`], in this table.
    ///
    /// # Errors
    /// As [`Txn::put`] (with this table's key and value bounds), and
    /// [`Error::TableDropped`](crate::Error::TableDropped) (nothing
    /// written; the transaction stays usable).
    #[inline]
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.0.put(key, value)
    }

    /// As [`Txn::delete`], in this table.
    ///
    /// # Errors
    /// As [`TableTxn::put`].
    #[inline]
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.0.delete(key)
    }
}
