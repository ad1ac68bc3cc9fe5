//! [`Txn`] and [`CommitError`] as users name them.

use super::Cursor;
use crate::config::{CommitOptions, TxnOptions};
use crate::error::{Error, Result};
use crate::kv::{KeyRange, Savepoint};
use crate::ts::{Timestamp, TxnId};
use crate::with_machinery::{self as generic, LockFree};
use std::fmt;

/// A transaction. Reads see one snapshot (or, with `read_at_stable`, the
/// stable watermark); writes are visible to others only after commit.
///
/// It ends by value: [`Txn::commit`] or [`Txn::rollback`] consume it, and
/// the session is free for the next [`Session::begin`](crate::Session::begin)
/// at once. Dropping an open transaction rolls it back. `commit`'s error is
/// an owned [`Error`], so `?` takes it into `Box<dyn Error>` or `anyhow`;
/// [`Txn::try_commit`] instead hands a transaction refused for a timestamp
/// back inside its [`CommitError`], to fix and commit again.
///
/// Keys and values are anything that is `AsRef<[u8]>` (`&str`, `&[u8]`,
/// byte-string literals, `Vec<u8>`, arrays):
///
/// ```
/// # use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
/// let engine = Engine::new(EngineConfig::default())?;
/// let mut session = engine.session()?;
/// let mut txn = session.begin(&TxnOptions::default())?;
/// txn.put("k", "v")?;
/// txn.put(b"k2", [1, 2, 3])?;
/// assert_eq!(txn.get("k")?.as_deref(), Some(&b"v"[..]));
/// txn.commit(CommitOptions::default())?;
/// let txn = session.begin(&TxnOptions::default())?; // no drop needed
/// txn.rollback();
/// # Ok::<(), snapshot_engine::Error>(())
/// ```
#[repr(transparent)]
pub struct Txn<'s, 'e>(pub(super) generic::Txn<'s, 'e, LockFree>);

/// A refused [`Txn::try_commit`]: the error, and the transaction back when
/// it is still open (a timestamp error), to fix and commit again or roll
/// back. It borrows the session (through the transaction), so it cannot
/// leave the function that opened the session; [`CommitError::into_error`],
/// or `?` in a function returning [`crate::Result`], turns it into an owned
/// [`Error`] (the transaction, if any, rolls back as it drops).
///
/// ```
/// # use snapshot_engine::{CommitOptions, Engine, EngineConfig, TimestampUpdate, TxnOptions};
/// let engine = Engine::new(EngineConfig::default())?;
/// engine.set_timestamps(TimestampUpdate::stable(20))?;
/// let mut session = engine.session()?;
/// let mut txn = session.begin(&TxnOptions::default())?;
/// txn.put("k", "v")?;
/// let txn = match txn.try_commit(CommitOptions::at(10)) {
///     Err(e) => e.into_txn().expect("a timestamp error keeps the transaction"),
///     Ok(()) => unreachable!("10 is not after stable 20"),
/// };
/// txn.commit(CommitOptions::at(30))?;
/// # Ok::<(), snapshot_engine::Error>(())
/// ```
pub struct CommitError<'s, 'e>(generic::CommitError<'s, 'e, LockFree>);

impl<'s, 'e> CommitError<'s, 'e> {
    /// Why the commit was refused.
    #[inline]
    pub fn error(&self) -> &Error {
        self.0.error()
    }

    /// The error, dropping the transaction (which rolls it back).
    #[inline]
    pub fn into_error(self) -> Error {
        self.0.into_error()
    }

    /// The transaction, still open, when the commit was refused for a
    /// timestamp (fix it and commit again); `None` when the commit rolled
    /// it back ([`Error::MustRollBack`] after a write conflict).
    #[inline]
    pub fn into_txn(self) -> Option<Txn<'s, 'e>> {
        self.0.into_txn().map(Txn)
    }
}

impl fmt::Debug for CommitError<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for CommitError<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for CommitError<'_, '_> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.error())
    }
}

impl From<CommitError<'_, '_>> for Error {
    #[inline]
    fn from(e: CommitError<'_, '_>) -> Error {
        e.into_error()
    }
}

impl PartialEq<Error> for CommitError<'_, '_> {
    fn eq(&self, other: &Error) -> bool {
        self.0 == *other
    }
}

impl<'s, 'e> Txn<'s, 'e> {
    /// This transaction's id: [`TxnId::NONE`] until its first write.
    #[inline]
    pub fn id(&self) -> TxnId {
        self.0.id()
    }

    /// The read timestamp in force ([`Timestamp::NONE`] if none). For a
    /// `read_at_stable` transaction, the stable timestamp it reads at.
    #[inline]
    pub fn read_timestamp(&self) -> Timestamp {
        self.0.read_timestamp()
    }

    /// The options it began with.
    #[inline]
    pub fn options(&self) -> &TxnOptions {
        self.0.options()
    }

    /// Takes the snapshot now, if the transaction has none yet; see
    /// [`Transaction::take_snapshot`](crate::machinery::Transaction::take_snapshot).
    /// Without it the snapshot is taken at the first read, write, scan or read
    /// timestamp, so commits that return between `begin` and then are seen.
    ///
    /// # Errors
    /// As [`Transaction::check_usable`](crate::machinery::Transaction::check_usable).
    #[inline]
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.0.take_snapshot()
    }

    /// Sets the read timestamp after begin (once); see
    /// [`Transaction::set_read_timestamp`](crate::machinery::Transaction::set_read_timestamp).
    ///
    /// # Errors
    /// As
    /// [`Transaction::set_read_timestamp`](crate::machinery::Transaction::set_read_timestamp);
    /// the transaction stays usable.
    #[inline]
    pub fn set_read_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        self.0.set_read_timestamp(ts)
    }

    /// Calls `f` with the visible value of `key` (or `None`), borrowed from
    /// the store with no copy. The epoch guard is held only while `f` runs.
    ///
    /// # Errors
    /// The transaction is not usable
    /// ([`Transaction::check_usable`](crate::machinery::Transaction::check_usable)),
    /// [`Error::KeyTooLarge`] for a key longer than
    /// [`EngineConfig::max_key_len`](crate::EngineConfig::max_key_len) (as
    /// `put` and `delete`: no such key can exist), or
    /// [`Error::PrepareConflict`] on a prepared update at or below the read
    /// timestamp.
    #[inline]
    pub fn get_with<R>(
        &mut self,
        key: impl AsRef<[u8]>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.0.get_with(key, f)
    }

    /// The visible value of `key`, copied out.
    ///
    /// # Errors
    /// As [`Txn::get_with`].
    #[inline]
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }

    /// Reads a batch of keys, as RocksDB's MultiGet does: the lookups'
    /// cache misses overlap (every key's index slot, then its node, then
    /// its newest version is requested before the first value is read),
    /// so a batch costs about one miss chain instead of one per key. Calls
    /// `f(i, value)` for each `keys[i]` in order, with the visible value
    /// (or `None`) borrowed from the store; the epoch guard is held while
    /// the batch is read, so keep `f` short.
    ///
    /// ```
    /// # use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let mut session = engine.session()?;
    /// let mut txn = session.begin(&TxnOptions::default())?;
    /// txn.put("a", "1")?;
    /// txn.put("c", "3")?;
    /// let mut got = Vec::new();
    /// txn.get_many_with(&["a", "b", "c"], |_, v| got.push(v.map(<[u8]>::to_vec)))?;
    /// assert_eq!(got, [Some(b"1".to_vec()), None, Some(b"3".to_vec())]);
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Txn::get_with`] (a key over `max_key_len` is
    /// [`Error::KeyTooLarge`] before any key is read); a prepare conflict
    /// stops the batch at that key (`f` has run for the keys before it).
    #[inline]
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.0.get_many_with(keys, f)
    }

    /// The visible values of `keys`, copied out, in order
    /// ([`Txn::get_many_with`] without the closure).
    ///
    /// # Errors
    /// As [`Txn::get_many_with`].
    #[inline]
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.0.get_many(keys)
    }

    /// Visits the visible key-value pairs with keys in `range`, in key
    /// order (tombstones hidden), until `f` returns `false`. The range's
    /// bounds may be of any length (only stored keys are limited by
    /// `max_key_len`). Keys and values
    /// are borrowed; the epoch guard is held for the whole scan, so keep `f`
    /// short (or use [`Txn::iter`], which re-pins per batch).
    ///
    /// # Errors
    /// As [`Txn::get_with`]; a prepare conflict stops the scan.
    #[inline]
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.0.scan(range, f)
    }

    /// The visible key-value pairs with keys in `range`, in key order,
    /// copied into a `Vec` (see [`Txn::iter`] for a cursor that copies
    /// nothing up front).
    ///
    /// # Errors
    /// As [`Txn::scan`].
    #[inline]
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.range(range)
    }

    /// A cursor over the visible key-value pairs with keys in `range`: an
    /// [`Iterator`] in key order and a [`DoubleEndedIterator`] (`.rev()`
    /// for a reverse scan), with [`Cursor::seek`] and [`Cursor::seek_back`].
    /// See [`Cursor`] for what
    /// an open cursor holds.
    #[inline]
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e> {
        Cursor(self.0.iter(range))
    }

    /// A cursor over every visible key ([`Txn::iter`] of `..`).
    #[inline]
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e> {
        Cursor(self.0.cursor())
    }

    /// Writes `value` under `key`.
    ///
    /// # Errors
    /// [`Error::ValueTooLarge`], or as [`Txn::delete`].
    #[inline]
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.0.put(key, value)
    }

    /// Deletes `key` (writes a tombstone).
    ///
    /// # Errors
    /// The transaction may not write
    /// ([`Transaction::check_writable`](crate::machinery::Transaction::check_writable)),
    /// [`Error::KeyTooLarge`], or [`Error::WriteConflict`] (first updater
    /// wins), after which it must roll back.
    #[inline]
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.0.delete(key)
    }

    /// Marks the current point in this transaction's writes;
    /// [`Txn::rollback_to`] undoes every write made after it.
    ///
    /// # Errors
    /// As
    /// [`Transaction::check_usable`](crate::machinery::Transaction::check_usable)
    /// (after a write conflict, after prepare).
    #[inline]
    pub fn savepoint(&mut self) -> Result<Savepoint> {
        self.0.savepoint()
    }

    /// Undoes every write made since `sp`: each key written after it reads
    /// again as it did at the savepoint (a key this transaction wrote
    /// before the savepoint and again after it returns to the value it had
    /// then). `sp` stays valid (roll back to it again later); savepoints
    /// taken after it are discarded.
    ///
    /// The undone versions are unlinked and freed as a rollback's are. Until
    /// then a concurrent writer that already loaded one may still report a
    /// write conflict with this transaction on that key.
    ///
    /// # Errors
    /// As
    /// [`Transaction::check_usable`](crate::machinery::Transaction::check_usable)
    /// (a write conflict is not undone by a savepoint: the transaction must roll
    /// back);
    /// [`Error::UnknownSavepoint`] for a savepoint of another transaction
    /// or one discarded by an earlier `rollback_to`.
    #[inline]
    pub fn rollback_to(&mut self, sp: &Savepoint) -> Result<()> {
        self.0.rollback_to(sp)
    }

    /// Sets the commit timestamp before commit (once); see
    /// [`Transaction::set_commit_timestamp`](crate::machinery::Transaction::set_commit_timestamp).
    ///
    /// # Errors
    /// As
    /// [`Transaction::set_commit_timestamp`](crate::machinery::Transaction::set_commit_timestamp);
    /// the transaction stays usable.
    #[inline]
    pub fn set_commit_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.0.set_commit_timestamp(ts)
    }

    /// Announces a prepared transaction's durable timestamp; see
    /// [`Transaction::set_durable_timestamp`](crate::machinery::Transaction::set_durable_timestamp).
    ///
    /// # Errors
    /// As
    /// [`Transaction::set_durable_timestamp`](crate::machinery::Transaction::set_durable_timestamp).
    #[inline]
    pub fn set_durable_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.0.set_durable_timestamp(ts)
    }

    /// Prepares the transaction (two-phase commit) at `ts`; see
    /// [`Transaction::prepare`](crate::machinery::Transaction::prepare). Returns
    /// the prepare timestamp in force.
    ///
    /// A serializable transaction (or one with a tracked read,
    /// [`Txn::get_for_update`]) first validates its reads as its commit
    /// would ([`Isolation::Serializable`](crate::Isolation::Serializable)).
    ///
    /// # Errors
    /// As
    /// [`Transaction::prepare`](crate::machinery::Transaction::prepare); the
    /// transaction stays usable. A failed validation
    /// ([`Error::SerializationConflict`], [`Error::RangeConflict`],
    /// [`Error::PreparedReadConflict`]) prepares nothing and leaves the
    /// transaction open but doomed, as a write conflict does (and as
    /// WiredTiger leaves a transaction whose prepare failed): roll it back
    /// (or drop it); anything else returns [`Error::MustRollBack`], and a
    /// commit rolls it back with that error.
    #[inline]
    pub fn prepare(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        self.0.prepare(ts)
    }

    /// Sets how this transaction's commit is made durable, in place of the
    /// engine's [`DurabilityOptions::durability`](crate::DurabilityOptions)
    /// (no effect on an in-memory engine).
    #[inline]
    pub fn set_durability(&mut self, durability: crate::Durability) {
        self.0.set_durability(durability)
    }

    /// Commits as [`Txn::commit`] does, but returns as soon as the log
    /// record is written to the OS (the commit is visible at once), with a
    /// [`CommitHandle`](crate::CommitHandle) that resolves when the record
    /// is synced: block on [`CommitHandle::wait`](crate::CommitHandle::wait)
    /// or `.await` it. On an in-memory engine, or for a commit with no
    /// writes, the handle is ready at once.
    ///
    /// # Errors
    /// As [`Txn::commit`].
    #[inline]
    pub fn commit_async(self, opts: CommitOptions) -> Result<crate::CommitHandle> {
        self.0.commit_async(opts)
    }

    /// Commits; see [`Transaction::commit`](crate::machinery::Transaction::commit)
    /// for the timestamp rules. Then prunes the chains it wrote to the reclaim
    /// horizon. The session is free for the next transaction as soon as this
    /// returns.
    ///
    /// The error is an owned [`Error`] that borrows nothing, so `?` works in
    /// any function whose error type takes one (`Box<dyn std::error::Error>`,
    /// `anyhow::Error`, [`crate::Result`]). To keep a transaction refused
    /// for a timestamp, fix it and commit again, use [`Txn::try_commit`].
    ///
    /// # Errors
    /// A timestamp that breaks a rule of
    /// [`Transaction::commit`](crate::machinery::Transaction::commit): the
    /// transaction is rolled back (as if dropped) and the error says which rule.
    /// [`Error::MustRollBack`] after a write conflict (rolled back too). On
    /// a durable engine, [`Error::Io`] when the log failed: the commit is not
    /// applied, now or after recovery ([`Durability`](crate::Durability), "A
    /// commit's outcome").
    #[inline]
    pub fn commit(self, opts: CommitOptions) -> Result<()> {
        self.0.commit(opts)
    }

    /// Commits as [`Txn::commit`] does, but hands a transaction refused for
    /// a timestamp back, open and usable, in the [`CommitError`]
    /// ([`CommitError::into_txn`]) to fix and commit again, or roll back.
    ///
    /// # Errors
    /// As [`Txn::commit`]; the transaction comes back in the error for a
    /// timestamp error, and not after a write conflict
    /// ([`Error::MustRollBack`]: it was rolled back).
    #[inline]
    pub fn try_commit(self, opts: CommitOptions) -> Result<(), CommitError<'s, 'e>> {
        self.0.try_commit(opts).map_err(CommitError)
    }

    /// Rolls back: the transaction's writes are never seen by anyone. The
    /// same as dropping it; the session is free for the next transaction.
    #[inline]
    pub fn rollback(self) {
        self.0.rollback()
    }
}
