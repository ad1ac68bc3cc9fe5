//! [`Txn`]: reads, writes and scans of the bundled store inside a
//! machinery [`Transaction`], which does everything that is not data
//! (timestamps, prepare, commit, rollback).

use super::cursor::Cursor;
use super::engine::SessionData;
use super::range::KeyRange;
use crate::config::{CommitOptions, TxnOptions};
use crate::error::{Error, Result};
use crate::machinery::{Count, LockFree, Protocol, Transaction, TxnSession, VersionState};
use crate::store::Found;
use crate::ts::{Timestamp, TxnId};
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
pub struct Txn<'s, 'e, P: Protocol = LockFree> {
    /// The machinery's transaction (snapshot, timestamps, completion).
    pub(super) inner: Transaction<'s, 'e, P>,
    /// The session's store-side state: the engine, the write set, the
    /// savepoints.
    pub(super) session: &'s mut SessionData<'e, P>,
}

/// A point in a transaction's writes to roll back to
/// ([`Txn::savepoint`], [`Txn::rollback_to`]). Plain data: it borrows
/// nothing, and a savepoint from another transaction (on this session or
/// any other), or one discarded by rolling back to an earlier savepoint, is
/// refused with [`Error::UnknownSavepoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Savepoint {
    session: u64,
    id: u64,
}

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
pub struct CommitError<'s, 'e, P: Protocol = LockFree> {
    error: Error,
    txn: Option<Box<Txn<'s, 'e, P>>>,
}

impl<'s, 'e, P: Protocol> CommitError<'s, 'e, P> {
    /// Why the commit was refused.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The error, dropping the transaction (which rolls it back).
    pub fn into_error(self) -> Error {
        self.error
    }

    /// The transaction, still open, when the commit was refused for a
    /// timestamp (fix it and commit again); `None` when the commit rolled
    /// it back ([`Error::MustRollBack`] after a write conflict).
    pub fn into_txn(self) -> Option<Txn<'s, 'e, P>> {
        self.txn.map(|t| *t)
    }
}

impl<P: Protocol> fmt::Debug for CommitError<'_, '_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommitError")
            .field("error", &self.error)
            .field("txn_open", &self.txn.is_some())
            .finish()
    }
}

impl<P: Protocol> fmt::Display for CommitError<'_, '_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<P: Protocol> std::error::Error for CommitError<'_, '_, P> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<P: Protocol> From<CommitError<'_, '_, P>> for Error {
    fn from(e: CommitError<'_, '_, P>) -> Error {
        e.error
    }
}

impl<P: Protocol> PartialEq<Error> for CommitError<'_, '_, P> {
    fn eq(&self, other: &Error) -> bool {
        self.error == *other
    }
}

impl<'s, 'e, P: Protocol> Txn<'s, 'e, P> {
    #[inline]
    pub(crate) fn begin(
        msess: &'s mut TxnSession<'e, P>,
        d: &'s mut SessionData<'e, P>,
        opts: &TxnOptions,
    ) -> Result<Self> {
        d.savepoints.clear();
        d.dlog.reset();
        Ok(Txn {
            inner: msess.begin(opts)?,
            session: d,
        })
    }

    /// This transaction's id: [`TxnId::NONE`] until its first write.
    pub fn id(&self) -> TxnId {
        self.inner.id()
    }

    /// The read timestamp in force ([`Timestamp::NONE`] if none). For a
    /// `read_at_stable` transaction, the stable timestamp it reads at.
    pub fn read_timestamp(&self) -> Timestamp {
        self.inner.read_timestamp()
    }

    /// The options it began with.
    pub fn options(&self) -> &TxnOptions {
        self.inner.options()
    }

    /// Takes the snapshot now, if the transaction has none yet; see
    /// [`Transaction::take_snapshot`]. Without it the snapshot is taken at
    /// the first read, write, scan or read timestamp, so commits that
    /// return between `begin` and then are seen.
    ///
    /// # Errors
    /// As [`Transaction::check_usable`].
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.inner.take_snapshot()
    }

    /// Sets the read timestamp after begin (once); see
    /// [`Transaction::set_read_timestamp`].
    ///
    /// # Errors
    /// As [`Transaction::set_read_timestamp`]; the transaction stays usable.
    pub fn set_read_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        self.inner.set_read_timestamp(ts)
    }

    /// Calls `f` with the visible value of `key` (or `None`), borrowed from
    /// the store with no copy. The epoch guard is held only while `f` runs.
    ///
    /// # Errors
    /// The transaction is not usable ([`Transaction::check_usable`]),
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
        let key = key.as_ref();
        let max = self.session.engine.config.max_key_len;
        if key.len() > max {
            // The transaction's state first, as for a write.
            self.inner.check_usable()?;
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        let view = self.inner.read_view()?;
        let (r, examined) = self.session.engine.store.read(key, &view, |found, n| {
            let r = match found {
                Found::Value(v) => Some(f(Some(v))),
                Found::Deleted | Found::Absent => Some(f(None)),
                Found::PrepareConflict => None,
            };
            (r, n)
        });
        self.inner.count(Count::Reads, 1);
        self.inner.count(Count::VersionsRead, examined);
        match r {
            Some(r) => Ok(r),
            None => {
                self.inner.count(Count::PrepareConflicts, 1);
                Err(Error::PrepareConflict { key: key.to_vec() })
            }
        }
    }

    /// The visible value of `key`, copied out.
    ///
    /// # Errors
    /// As [`Txn::get_with`].
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
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
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let max = self.session.engine.config.max_key_len;
        if let Some(k) = keys.iter().find(|k| k.as_ref().len() > max) {
            self.inner.check_usable()?;
            return Err(Error::KeyTooLarge {
                len: k.as_ref().len(),
                max,
            });
        }
        let view = self.inner.read_view()?;
        let (mut reads, mut examined) = (0, 0);
        let mut conflict = None;
        self.session
            .engine
            .store
            .read_many(keys, &view, |i, found, n| {
                reads += 1;
                examined += n;
                match found {
                    Found::Value(v) => f(i, Some(v)),
                    Found::Deleted | Found::Absent => f(i, None),
                    Found::PrepareConflict => {
                        conflict = Some(i);
                        return false;
                    }
                }
                true
            });
        self.inner.count(Count::Reads, reads);
        self.inner.count(Count::VersionsRead, examined);
        match conflict {
            Some(i) => {
                self.inner.count(Count::PrepareConflicts, 1);
                Err(Error::PrepareConflict {
                    key: keys[i].as_ref().to_vec(),
                })
            }
            None => Ok(()),
        }
    }

    /// The visible values of `keys`, copied out, in order
    /// ([`Txn::get_many_with`] without the closure).
    ///
    /// # Errors
    /// As [`Txn::get_many_with`].
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        self.get_many_with(keys, |_, v| out.push(v.map(<[u8]>::to_vec)))?;
        Ok(out)
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
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let view = self.inner.read_view()?;
        let bounds = range.bounds();
        let store = &self.session.engine.store;
        let guard = store.collector.pin();
        let mut conflict: Option<Vec<u8>> = None;
        let (mut reads, mut examined) = (0, 0);
        store.index.range(bounds, true, &guard, |k, e| {
            reads += 1;
            match e.read_counted(&view, &guard, &mut examined) {
                Found::Value(v) => f(k, v),
                Found::Deleted | Found::Absent => true,
                Found::PrepareConflict => {
                    conflict = Some(k.to_vec());
                    false
                }
            }
        });
        drop(guard);
        self.inner.count(Count::Reads, reads);
        self.inner.count(Count::VersionsRead, examined);
        match conflict {
            Some(key) => {
                self.inner.count(Count::PrepareConflicts, 1);
                Err(Error::PrepareConflict { key })
            }
            None => Ok(()),
        }
    }

    /// The visible key-value pairs with keys in `range`, in key order,
    /// copied into a `Vec` (see [`Txn::iter`] for a cursor that copies
    /// nothing up front).
    ///
    /// # Errors
    /// As [`Txn::scan`].
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan(range, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// A cursor over the visible key-value pairs with keys in `range`: an
    /// [`Iterator`] in key order and a [`DoubleEndedIterator`] (`.rev()`
    /// for a reverse scan), with [`Cursor::seek`] and [`Cursor::seek_back`].
    /// See [`Cursor`] for what
    /// an open cursor holds.
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e, P> {
        Cursor::new(self, range.bounds())
    }

    /// A cursor over every visible key ([`Txn::iter`] of `..`).
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e, P> {
        self.iter(..)
    }

    /// Writes `value` under `key`.
    ///
    /// # Errors
    /// [`Error::ValueTooLarge`], or as [`Txn::delete`].
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let max = self.session.engine.config.max_value_len;
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.write(key, Some(value))
    }

    /// Deletes `key` (writes a tombstone).
    ///
    /// # Errors
    /// The transaction may not write ([`Transaction::check_writable`]),
    /// [`Error::KeyTooLarge`], or [`Error::WriteConflict`] (first updater
    /// wins), after which it must roll back.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(key.as_ref(), None)
    }

    /// Marks the current point in this transaction's writes;
    /// [`Txn::rollback_to`] undoes every write made after it.
    ///
    /// # Errors
    /// As [`Transaction::check_usable`] (after a write conflict, after
    /// prepare).
    pub fn savepoint(&mut self) -> Result<Savepoint> {
        self.inner.check_usable()?;
        self.session.savepoint_ids += 1;
        let id = self.session.savepoint_ids;
        self.session
            .savepoints
            .push((id, self.session.writes.len()));
        Ok(Savepoint {
            session: self.session.token,
            id,
        })
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
    /// As [`Transaction::check_usable`] (a write conflict is not undone by
    /// a savepoint: the transaction must roll back);
    /// [`Error::UnknownSavepoint`] for a savepoint of another transaction
    /// or one discarded by an earlier `rollback_to`.
    pub fn rollback_to(&mut self, sp: &Savepoint) -> Result<()> {
        self.inner.check_usable()?;
        let live = (sp.session == self.session.token)
            .then(|| {
                self.session
                    .savepoints
                    .iter()
                    .rposition(|&(id, _)| id == sp.id)
            })
            .flatten();
        let Some(at) = live else {
            return Err(Error::UnknownSavepoint);
        };
        let writes = self.session.savepoints[at].1;
        self.session.savepoints.truncate(at + 1);
        let unlinked = self.session.writes.rollback_to(writes);
        self.session.dlog.truncate(writes);
        self.inner.count(Count::VersionsPruned, unlinked);
        Ok(())
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable()?;
        let max = self.session.engine.config.max_key_len;
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        let (status, view) = self.inner.new_version()?;
        match self.session.writes.write(key, status, value, &view) {
            Ok(retries) => {
                self.inner.count(Count::ChainCasRetries, retries);
                if self.session.engine.durable.is_some() {
                    self.session.dlog.push_key(key);
                }
                Ok(())
            }
            Err(_) => {
                self.inner.mark_write_conflict();
                Err(Error::WriteConflict { key: key.to_vec() })
            }
        }
    }

    /// Sets the commit timestamp before commit (once); see
    /// [`Transaction::set_commit_timestamp`].
    ///
    /// # Errors
    /// As [`Transaction::set_commit_timestamp`]; the transaction stays
    /// usable.
    pub fn set_commit_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.inner.set_commit_timestamp(ts)
    }

    /// Announces a prepared transaction's durable timestamp; see
    /// [`Transaction::set_durable_timestamp`].
    ///
    /// # Errors
    /// As [`Transaction::set_durable_timestamp`].
    pub fn set_durable_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        let ts = ts.into();
        self.inner.set_durable_timestamp(ts)?;
        self.session.dlog.durable_ts = Some(ts);
        Ok(())
    }

    /// Prepares the transaction (two-phase commit) at `ts`; see
    /// [`Transaction::prepare`]. Returns the prepare timestamp in force.
    ///
    /// # Errors
    /// As [`Transaction::prepare`]; the transaction stays usable.
    pub fn prepare(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        let writes = &mut self.session.writes;
        let p = self.inner.prepare(ts, |done| {
            writes.complete(done);
        })?;
        self.session.dlog.prepared = true;
        Ok(p)
    }

    /// Sets how this transaction's commit is made durable, in place of the
    /// engine's [`DurabilityOptions::durability`](crate::DurabilityOptions)
    /// (no effect on an in-memory engine).
    pub fn set_durability(&mut self, durability: crate::Durability) {
        self.session.dlog.mode = Some(crate::durable::CommitMode::Durability(durability));
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
    pub fn commit_async(mut self, opts: CommitOptions) -> Result<crate::CommitHandle> {
        self.session.dlog.mode = Some(crate::durable::CommitMode::Async);
        // On an error `self` drops here, which rolls it back, as `commit`
        // does.
        let lsn = if self.session.engine.durable.is_some() {
            self.commit_logged(opts)?
        } else {
            self.commit_in_place(opts)?;
            None
        };
        Ok(match &self.session.engine.durable {
            Some(d) => d.handle(lsn),
            None => crate::CommitHandle::ready(),
        })
    }

    /// Commits; see [`Transaction::commit`] for the timestamp rules. Then
    /// prunes the chains it wrote to the reclaim horizon. The session is
    /// free for the next transaction as soon as this returns.
    ///
    /// The error is an owned [`Error`] that borrows nothing, so `?` works in
    /// any function whose error type takes one (`Box<dyn std::error::Error>`,
    /// `anyhow::Error`, [`crate::Result`]). To keep a transaction refused
    /// for a timestamp, fix it and commit again, use [`Txn::try_commit`].
    ///
    /// # Errors
    /// A timestamp that breaks a rule of [`Transaction::commit`]: the
    /// transaction is rolled back (as if dropped) and the error says which
    /// rule. [`Error::MustRollBack`] after a write conflict (rolled back
    /// too). On a durable engine, [`Error::Io`] when the log failed: the
    /// commit is not applied, now or after recovery
    /// ([`Durability`](crate::Durability), "A commit's outcome").
    #[inline]
    pub fn commit(self, opts: CommitOptions) -> Result<()> {
        self.try_commit(opts).map_err(CommitError::into_error)
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
    pub fn try_commit(mut self, opts: CommitOptions) -> Result<(), CommitError<'s, 'e, P>> {
        match self.commit_in_place(opts) {
            Ok(()) => Ok(()),
            Err(error) => {
                let txn = self.inner.is_open().then(|| Box::new(self));
                Err(CommitError { error, txn })
            }
        }
    }

    #[inline]
    fn commit_in_place(&mut self, opts: CommitOptions) -> Result<()> {
        if self.session.engine.durable.is_some() {
            return self.commit_logged(opts).map(|_| ());
        }
        let id = self.inner.id();
        let d = &mut *self.session;
        let (writes, dlog, engine) = (&mut d.writes, &d.dlog, d.engine);
        let mut done_with = None;
        // A doomed transaction's completion is an abort (rolled back), a
        // committed one's links and flips.
        let r = self.inner.commit(opts, |done| {
            if dlog.prepared {
                note_prepared(engine, dlog, id, done.outcome(), opts);
            }
            done_with = Some(writes.complete(done));
        });
        self.after_completion(done_with, r.is_ok());
        r
    }

    /// A durable engine's commit: the log record is appended (and written,
    /// and for `Sync` synced) inside the completion, after the timestamps
    /// are validated and claimed and before any status flips, so a commit
    /// is visible only once its record is where its durability asks
    /// (invariant D1). If the log fails, nothing is flipped: the versions,
    /// still unfinished, are unlinked, and the commit returns the error.
    /// Returns the record's lsn (`None`: nothing was logged).
    #[cold]
    #[inline(never)]
    fn commit_logged(&mut self, opts: CommitOptions) -> Result<Option<u64>> {
        let id = self.inner.id();
        let d = &mut *self.session;
        let engine = d.engine;
        let log = engine.durable.as_deref().expect("a durable engine");
        if !d.writes.is_empty() {
            if let Some(e) = log.refusal() {
                return Err(e);
            }
        }
        let (writes, dlog) = (&mut d.writes, &d.dlog);
        let mut done_with = None;
        let mut logged: Result<Option<u64>, (Error, u64)> = Ok(None);
        let r = self.inner.commit(opts, |done| {
            if let VersionState::Committed(cts) = done.outcome() {
                if !writes.is_empty() {
                    let values = writes.values();
                    match log.log_commit(dlog, values, cts.get(), opts.durable_ts) {
                        Ok(lsn) => logged = Ok(Some(lsn)),
                        Err(e) => {
                            logged = Err((e, writes.abandon()));
                            return;
                        }
                    }
                }
            }
            if dlog.prepared {
                note_prepared(engine, dlog, id, done.outcome(), opts);
            }
            done_with = Some(writes.complete(done));
        });
        let lsn = match logged {
            Ok(lsn) => lsn,
            Err((e, unlinked)) => {
                self.session.writes.clear();
                self.inner.count(Count::VersionsPruned, unlinked);
                return Err(e);
            }
        };
        self.after_completion(done_with, r.is_ok());
        r.map(|()| lsn)
    }

    /// After the machinery ran the commit's completion (`done`, if it
    /// did): a refused or doomed commit's versions were unlinked, so the
    /// write set is cleared; a committed one prunes the chains it wrote.
    fn after_completion(&mut self, done: Option<crate::store::Completed>, committed: bool) {
        let Some(c) = done else { return };
        if !committed {
            self.session.writes.clear();
            self.inner.count(Count::VersionsPruned, c.unlinked);
        } else if !self.session.writes.is_empty() {
            self.inner.count(Count::CommitVersionsExamined, c.examined);
            self.prune_written();
        }
    }

    /// Prunes the chains this transaction wrote, and refreshes the horizon
    /// every `horizon_refresh_commits` commits.
    fn prune_written(&mut self) {
        let d = &mut *self.session;
        let engine = d.engine;
        d.commits += 1;
        // Not a safety bound: `>` refreshes the horizon one commit later,
        // an equivalent mutant.
        if d.commits >= engine.config.horizon_refresh_commits {
            d.commits = 0;
            self.inner.session().advance_horizon();
        }
        let h = engine.mgr.horizon();
        let stable = engine.mgr.stable_timestamp().get();
        let n = d.writes.prune_committed(h, stable);
        self.inner.count(Count::VersionsPruned, n.cut);
        self.inner.count(Count::CommitVersionsExamined, n.examined);
    }

    /// Rolls back: the transaction's writes are never seen by anyone. The
    /// same as dropping it; the session is free for the next transaction.
    pub fn rollback(mut self) {
        self.rollback_in_place();
    }

    fn rollback_in_place(&mut self) {
        let writes = &mut self.session.writes;
        let mut unlinked = 0;
        // Only an open transaction (the one thing a `Txn` can be outside
        // `commit`) is rolled back; a finished one has nothing to undo.
        if self
            .inner
            .rollback(|done| unlinked = writes.complete(done).unlinked)
            .is_ok()
        {
            self.inner.count(Count::VersionsPruned, unlinked);
        }
        self.session.writes.clear();
    }
}

impl<P: Protocol> Drop for Txn<'_, '_, P> {
    #[inline]
    fn drop(&mut self) {
        if self.inner.is_open() {
            self.drop_open();
        }
    }
}

impl<P: Protocol> Txn<'_, '_, P> {
    #[cold]
    #[inline(never)]
    fn drop_open(&mut self) {
        // Dropping an open transaction (including during a panic) rolls it
        // back and clears its pins (invariant 12).
        self.rollback_in_place();
        // Only a transaction whose commit flips unwound (poisoned: it never
        // completes, and its versions stay where they are) still has writes
        // here; the next transaction on this session must not see them.
        self.session.writes.clear();
    }
}

/// A prepared transaction's commit (`outcome`, before its flips): notes
/// its durable timestamp for `rollback_to_stable` when it is above the
/// commit timestamp (`kv/rollback.rs`).
#[cold]
#[inline(never)]
fn note_prepared<P: Protocol>(
    engine: &super::Engine<P>,
    dlog: &crate::durable::SessionLog,
    id: TxnId,
    outcome: VersionState,
    opts: CommitOptions,
) {
    if let VersionState::Committed(cts) = outcome {
        let durable = opts
            .durable_ts
            .or(dlog.durable_ts)
            .map_or(cts.get(), Timestamp::get);
        let stable = engine.mgr.stable_timestamp().get();
        engine.prepared_durable.note(id, cts.get(), durable, stable);
    }
}

/// The previous transaction on this session never ended: it was leaked
/// with `mem::forget`, so neither commit, rollback nor drop ran. Roll it
/// back now, as its drop would have, so its versions never become visible,
/// its id leaves the running set and its pins go.
#[cold]
pub(crate) fn recover_leaked<P: Protocol>(
    msess: &mut TxnSession<'_, P>,
    d: &mut SessionData<'_, P>,
) {
    let mut unlinked = 0;
    let writes = &mut d.writes;
    msess.recover_leaked(|done| unlinked = writes.complete(done).unlinked);
    d.writes.clear();
    msess.count(Count::VersionsPruned, unlinked);
}
