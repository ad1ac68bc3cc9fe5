//! [`Txn`]: reads, writes and scans of the bundled store inside a
//! machinery [`Transaction`], which does everything that is not data
//! (timestamps, prepare, commit, rollback). Its commit path is in
//! `commit.rs`.

use super::cursor::Cursor;
use super::engine::SessionData;
use super::range::KeyRange;
use crate::config::TxnOptions;
use crate::error::{Error, Result};
use crate::machinery::epoch::Guard;
use crate::machinery::with_machinery::{LockFree, Machinery, Transaction, TxnSession};
use crate::machinery::{Count, ReadView};
use crate::store::{Found, KeyEntry, Tb};
use crate::ts::{Timestamp, TxnId};

/// The generic form of [`Txn`](crate::Txn), on snapshot protocol `M`
/// (only the workload driver and the tests choose one).
pub struct Txn<'s, 'e, M: Machinery = LockFree> {
    /// The machinery's transaction (snapshot, timestamps, completion).
    pub(super) inner: Transaction<'s, 'e, M>,
    /// The session's store-side state: the engine, the write set, the
    /// savepoints.
    pub(super) session: &'s mut SessionData<'e, M>,
}

/// A point in a transaction's writes to roll back to
/// ([`Txn::savepoint`](crate::Txn::savepoint),
/// [`Txn::rollback_to`](crate::Txn::rollback_to)). Plain data: it borrows
/// nothing, and a savepoint from another transaction (on this session or
/// any other), or one discarded by rolling back to an earlier savepoint, is
/// refused with [`Error::UnknownSavepoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Savepoint {
    session: u64,
    id: u64,
}

impl<'s, 'e, M: Machinery> Txn<'s, 'e, M> {
    #[inline]
    pub(crate) fn begin(
        msess: &'s mut TxnSession<'e, M>,
        d: &'s mut SessionData<'e, M>,
        opts: &TxnOptions,
    ) -> Result<Self> {
        d.savepoints.clear();
        d.durability = None;
        d.serial.begin(opts)?;
        Ok(Txn {
            inner: msess.begin(opts)?,
            session: d,
        })
    }

    /// See [`Txn::id`](crate::Txn::id).
    pub fn id(&self) -> TxnId {
        self.inner.id()
    }

    /// See [`Txn::read_timestamp`](crate::Txn::read_timestamp).
    pub fn read_timestamp(&self) -> Timestamp {
        self.inner.read_timestamp()
    }

    /// See [`Txn::options`](crate::Txn::options).
    pub fn options(&self) -> &TxnOptions {
        self.inner.options()
    }

    /// See [`Txn::take_snapshot`](crate::Txn::take_snapshot).
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.inner.take_snapshot()
    }

    /// See [`Txn::set_read_timestamp`](crate::Txn::set_read_timestamp).
    pub fn set_read_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        self.inner.set_read_timestamp(ts)
    }

    /// See [`Txn::get_with`](crate::Txn::get_with).
    #[inline]
    pub fn get_with<R>(
        &mut self,
        key: impl AsRef<[u8]>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.get_with_in(Tb::Default, key.as_ref(), f)
    }

    /// A point read of `key` in table `tb` (every table's `get_with`).
    #[inline]
    pub(super) fn get_with_in<R>(
        &mut self,
        tb: Tb<'_>,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R> {
        let max = tb.max_key_len(self.session.engine.config.max_key_len);
        if key.len() > max {
            // The transaction's state first, as for a write.
            self.inner.check_usable()?;
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        let judge = |found: Found<'_>| match found {
            Found::Value(v) => Some(f(Some(v))),
            Found::Deleted | Found::Absent => Some(f(None)),
            Found::PrepareConflict => None,
        };
        let (r, examined) = if self.session.serial.track {
            // A tracked read keeps the key's entry, so its validation
            // checks the key without looking it up again.
            let view = self.inner.read_view()?;
            let d = &mut *self.session;
            // The default table's index lives as long as the engine: no
            // hold needed.
            let index = match tb {
                Tb::Default => &d.engine.store.index,
                Tb::Named(_) => d.writes.hold(tb, false)?,
            };
            d.engine
                .store
                .read_in(index, key, &view, |found, n, entry| {
                    d.serial.note_key(tb, key, entry);
                    (judge(found), n)
                })
        } else {
            let view = self.inner.read_view()?;
            let store = &self.session.engine.store;
            store.read(tb, key, &view, |found, n| (judge(found), n))?
        };
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

    /// See [`Txn::get`](crate::Txn::get).
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// See [`Txn::get_many_with`](crate::Txn::get_many_with).
    pub fn get_many_with<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.get_many_with_in(Tb::Default, keys, f)
    }

    /// A batched point read of `keys` in table `tb` (every table's
    /// `get_many_with`).
    pub(super) fn get_many_with_in<K: AsRef<[u8]>>(
        &mut self,
        tb: Tb<'_>,
        keys: &[K],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let max = tb.max_key_len(self.session.engine.config.max_key_len);
        if let Some(k) = keys.iter().find(|k| k.as_ref().len() > max) {
            self.inner.check_usable()?;
            return Err(Error::KeyTooLarge {
                len: k.as_ref().len(),
                max,
            });
        }
        let mut conflict = None;
        let mut each = |i: usize, found: Found<'_>| {
            match found {
                Found::Value(v) => f(i, Some(v)),
                Found::Deleted | Found::Absent => f(i, None),
                Found::PrepareConflict => {
                    conflict = Some(i);
                    return false;
                }
            }
            true
        };
        let examined = if self.session.serial.track {
            // As in `get_with_in`: each key's entry is kept.
            let at = self.session.serial.note_keys(tb, keys);
            let view = self.inner.read_view()?;
            let d = &mut *self.session;
            let index = match tb {
                Tb::Default => &d.engine.store.index,
                Tb::Named(_) => d.writes.hold(tb, false)?,
            };
            d.engine
                .store
                .read_many_in(index, keys, &view, |i, found, entry| {
                    d.serial.keep(at + i, entry);
                    each(i, found)
                })
        } else {
            let view = self.inner.read_view()?;
            let store = &self.session.engine.store;
            store.read_many(tb, keys, &view, each)?
        };
        // Every key up to the first conflict was read (`each` stops there).
        let reads = conflict.map_or(keys.len(), |i| i + 1) as u64;
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

    /// See [`Txn::get_many`](crate::Txn::get_many).
    pub fn get_many<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        self.get_many_with(keys, |_, v| out.push(v.map(<[u8]>::to_vec)))?;
        Ok(out)
    }

    /// See [`Txn::scan`](crate::Txn::scan).
    pub fn scan(
        &mut self,
        range: impl KeyRange,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.scan_in(Tb::Default, range, f)
    }

    /// A scan of `range` in table `tb` (every table's `scan`).
    pub(super) fn scan_in(
        &mut self,
        tb: Tb<'_>,
        range: impl KeyRange,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let view = self.inner.read_view()?;
        let bounds = range.bounds();
        let d = &mut *self.session;
        let engine = d.engine;
        let store = &engine.store;
        let track = d.serial.track;
        // A tracked scan reads the index the write set holds for its table
        // (as a tracked point read does) and keeps the entries it visits
        // for its validation (`Tracker::visit`).
        let held = match (track, tb) {
            (false, _) => None,
            (true, Tb::Default) => Some(&store.index),
            (true, Tb::Named(_)) => Some(d.writes.hold(tb, false)?),
        };
        let guard = store.collector.pin();
        let mut v = Visiting {
            view: &view,
            guard: &guard,
            f: &mut f,
            track,
            reads: 0,
            examined: 0,
            stopped: None,
            conflict: None,
        };
        let keeping = match held {
            Some(index) => {
                let serial = &mut d.serial;
                let mut keeping = serial.scan_starts(index);
                index.range(bounds, true, &guard, |k, e| {
                    serial.visit(&mut keeping, k, e);
                    v.visit(k, e)
                });
                Some(keeping)
            }
            None => {
                let index = tb.index(store, &guard)?;
                index.range(bounds, true, &guard, |k, e| v.visit(k, e));
                None
            }
        };
        let Visiting {
            reads,
            examined,
            stopped,
            conflict,
            ..
        } = v;
        drop(guard);
        if let Some(keeping) = keeping {
            let at = conflict.as_deref().or(stopped.as_deref());
            d.serial.note_scan(tb, bounds, at, keeping);
        }
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

    /// See [`Txn::range`](crate::Txn::range).
    pub fn range(&mut self, range: impl KeyRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan(range, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// See [`Txn::iter`](crate::Txn::iter).
    pub fn iter(&mut self, range: impl KeyRange) -> Cursor<'_, 's, 'e, M> {
        Cursor::new(self, Tb::Default, range.bounds())
    }

    /// See [`Txn::cursor`](crate::Txn::cursor).
    pub fn cursor(&mut self) -> Cursor<'_, 's, 'e, M> {
        self.iter(..)
    }

    /// See [`Txn::put`](crate::Txn::put).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_in(Tb::Default, key.as_ref(), value.as_ref())
    }

    /// A put of `key` in table `tb` (every table's `put`).
    pub(super) fn put_in(&mut self, tb: Tb<'_>, key: &[u8], value: &[u8]) -> Result<()> {
        let max = tb.max_value_len(self.session.engine.config.max_value_len);
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.write(tb, key, Some(value))
    }

    /// See [`Txn::delete`](crate::Txn::delete).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(Tb::Default, key.as_ref(), None)
    }

    /// See [`Txn::savepoint`](crate::Txn::savepoint).
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

    /// See [`Txn::rollback_to`](crate::Txn::rollback_to).
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
        self.inner.count(Count::VersionsPruned, unlinked);
        Ok(())
    }

    /// A write of `key` in table `tb` (`None`: a delete).
    pub(super) fn write(&mut self, tb: Tb<'_>, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable()?;
        let max = tb.max_key_len(self.session.engine.config.max_key_len);
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        let (status, view) = self.inner.new_version()?;
        match self.session.writes.write(tb, key, status, value, &view)? {
            Ok(retries) => {
                self.inner.count(Count::ChainCasRetries, retries);
                Ok(())
            }
            Err(_) => {
                self.inner.mark_write_conflict();
                Err(Error::WriteConflict { key: key.to_vec() })
            }
        }
    }

    /// See [`Txn::rollback`](crate::Txn::rollback).
    #[inline]
    pub fn rollback(mut self) {
        self.rollback_in_place();
    }

    /// Inline: a read-only transaction's rollback is a few checks and
    /// stores (the machinery's writer rollback stays out of line).
    #[inline]
    pub(super) fn rollback_in_place(&mut self) {
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
        super::serializable::rolled_back(self.session);
    }
}

impl<M: Machinery> Drop for Txn<'_, '_, M> {
    #[inline]
    fn drop(&mut self) {
        if self.inner.is_open() {
            self.drop_open();
        }
    }
}

impl<M: Machinery> Txn<'_, '_, M> {
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

/// The previous transaction on this session never ended: it was leaked
/// with `mem::forget`, so neither commit, rollback nor drop ran. Roll it
/// back now, as its drop would have, so its versions never become visible,
/// its id leaves the running set and its pins go.
#[cold]
pub(crate) fn recover_leaked<M: Machinery>(
    msess: &mut TxnSession<'_, M>,
    d: &mut SessionData<'_, M>,
) {
    let mut unlinked = 0;
    let writes = &mut d.writes;
    msess.recover_leaked(|done| unlinked = writes.complete(done).unlinked);
    d.writes.clear();
    msess.count(Count::VersionsPruned, unlinked);
}

/// A scan's visit of each entry its walk meets: reads it at `view`, hands
/// a visible value to `f`, and counts.
struct Visiting<'a, F> {
    view: &'a ReadView<'a>,
    guard: &'a Guard,
    f: &'a mut F,
    /// The scan is tracked: note where `f` stopped it.
    track: bool,
    reads: u64,
    examined: u64,
    stopped: Option<Vec<u8>>,
    conflict: Option<Vec<u8>>,
}

impl<F: FnMut(&[u8], &[u8]) -> bool> Visiting<'_, F> {
    /// Visits `key`'s `entry`; false: stop the walk. Inlined into each
    /// walk's closure, tracked or not, as one closure of its own would be.
    #[inline(always)]
    fn visit(&mut self, key: &[u8], entry: &KeyEntry) -> bool {
        self.reads += 1;
        match entry.read_counted(self.view, self.guard, &mut self.examined) {
            Found::Value(v) => {
                let go = (self.f)(key, v);
                if !go && self.track {
                    self.stopped = Some(key.to_vec());
                }
                go
            }
            Found::Deleted | Found::Absent => true,
            Found::PrepareConflict => {
                self.conflict = Some(key.to_vec());
                false
            }
        }
    }
}
