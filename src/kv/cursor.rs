//! [`Cursor`]: an iterator over a transaction's visible key-value pairs
//! that holds no epoch guard between batches.

use super::txn::Txn;
use crate::error::{Error, Result};
use crate::machinery::with_machinery::{LockFree, Machinery};
use crate::machinery::Count;
use crate::store::raw::chain::Found;
use crate::store::{Index, Tb};
use std::ops::Bound;

/// Visible pairs a cursor copies per batch (under one epoch guard).
const BATCH: usize = 64;
/// Index entries a batch looks at, at most, visible or not, so one guard
/// never covers a long run of deleted or invisible keys.
const EXAMINE: usize = 1024;

/// A key a cursor position names: one of the keys the cursor owns (the
/// caller's bounds and the last sought keys, in [`Owned`]), or a key of the
/// store's index, which lives until the store drops.
#[derive(Clone, Copy)]
enum Key<'t> {
    /// The caller's lower bound.
    Lo,
    /// The caller's upper bound.
    Hi,
    /// The key of the last [`Cursor::seek`].
    Front,
    /// The key of the last [`Cursor::seek_back`].
    Back,
    /// A key of the index.
    Index(&'t [u8]),
}

/// A bound of what one end may still yield, or of where its next refill
/// starts.
#[derive(Clone, Copy)]
enum At<'t> {
    Unbounded,
    Included(Key<'t>),
    Excluded(Key<'t>),
}

/// The keys a cursor owns, copied once: the positions name them by
/// [`Key`], so the cursor borrows nothing of its own.
#[derive(Default)]
struct Owned {
    lo: Box<[u8]>,
    hi: Box<[u8]>,
    front: Box<[u8]>,
    back: Box<[u8]>,
}

impl Owned {
    fn key<'a>(&'a self, k: Key<'a>) -> &'a [u8] {
        match k {
            Key::Lo => &self.lo,
            Key::Hi => &self.hi,
            Key::Front => &self.front,
            Key::Back => &self.back,
            Key::Index(k) => k,
        }
    }

    fn bound<'a>(&'a self, at: At<'a>) -> Bound<&'a [u8]> {
        match at {
            At::Unbounded => Bound::Unbounded,
            At::Included(k) => Bound::Included(self.key(k)),
            At::Excluded(k) => Bound::Excluded(self.key(k)),
        }
    }

    /// Does `k` lie above the lower bound `at`?
    fn below(&self, at: At<'_>, k: &[u8]) -> bool {
        match self.bound(at) {
            Bound::Unbounded => true,
            Bound::Included(b) => b <= k,
            Bound::Excluded(b) => b < k,
        }
    }

    /// Does `k` lie below the upper bound `at`?
    fn above(&self, at: At<'_>, k: &[u8]) -> bool {
        match self.bound(at) {
            Bound::Unbounded => true,
            Bound::Included(b) => k <= b,
            Bound::Excluded(b) => k < b,
        }
    }

    /// Is the range between `lo` and `hi` empty (the index's range walk
    /// requires `lo <= hi`)?
    fn is_empty(&self, lo: At<'_>, hi: At<'_>) -> bool {
        let (l, l_in) = match self.bound(lo) {
            Bound::Unbounded => return false,
            Bound::Included(k) => (k, true),
            Bound::Excluded(k) => (k, false),
        };
        let (h, h_in) = match self.bound(hi) {
            Bound::Unbounded => return false,
            Bound::Included(k) => (k, true),
            Bound::Excluded(k) => (k, false),
        };
        l > h || (l == h && !(l_in && h_in))
    }
}

/// One direction's buffered pairs: keys point into the index, values are
/// copied into `arena`.
///
/// A refill reads between its end's position and the other end's, so the
/// items and `done` hold only while the other end moves inwards (a step
/// yields towards this end, never away from it). A seek of either end may
/// move an end outwards: it drops both batches ([`Cursor::moved`]).
#[derive(Default)]
struct Batch<'t> {
    items: Vec<(&'t [u8], usize, usize)>,
    arena: Vec<u8>,
    next: usize,
    /// The walk reached the end of the range: no refill.
    done: bool,
}

impl Batch<'_> {
    fn reset(&mut self) {
        self.items.clear();
        self.arena.clear();
        self.next = 0;
        self.done = false;
    }
}

/// A cursor over the visible key-value pairs of a key range in one
/// transaction ([`Txn::iter`], [`Txn::cursor`]): an [`Iterator`] in key
/// order, a [`DoubleEndedIterator`] (`.rev()`, or `next_back`, for a
/// reverse scan; the two ends meet and stop), with [`Cursor::seek`] and
/// [`Cursor::seek_back`] to move the front and the back. Nothing is
/// collected up front.
///
/// # The two ends
///
/// What a cursor has left to yield is the visible pairs between its front
/// and its back. The front starts at the range's start and the back at its
/// end; each operation moves one end and leaves the other where it is:
///
/// * [`next`](Iterator::next) and [`Cursor::next_ref`] yield the first pair
///   after the front (at or after the key of a [`seek`](Cursor::seek)) that
///   lies before the back, and move the front past it;
/// * [`next_back`](DoubleEndedIterator::next_back) and
///   [`Cursor::next_back_ref`] yield the last pair before the back (at or
///   before the key of a [`seek_back`](Cursor::seek_back)) that lies after
///   the front, and move the back past it;
/// * [`seek`](Cursor::seek) moves the front to a key and
///   [`seek_back`](Cursor::seek_back) the back, forwards or backwards,
///   within the range.
///
/// A step that finds nothing between the ends returns `None`: the ends
/// have met, and every step from either end returns `None` until a seek.
/// Each end reads ahead, a batch at a time, up to where the other end is; a
/// seek of either end drops both ends' batches, so each end's next step
/// reads afresh from its own position.
///
/// Items are `(key, value)`: the key borrowed with no copy (keys live in
/// the store's index until the engine drops), the value copied out, since a
/// value may be freed once no epoch guard covers it. [`Cursor::next_ref`]
/// lends the value instead, from a buffer the cursor reuses.
///
/// What an open cursor holds: a `&mut` borrow of the transaction (so the
/// transaction makes no writes while the cursor lives), its position, its
/// own copies of the range's bounds and the sought keys, and
/// up to one batch of copied values per direction. It holds **no epoch
/// guard** between calls: each refill pins the store's guard, copies up to
/// 64 visible pairs (looking at no more than 1024 index entries), and drops
/// it (a guard never outlives one operation: DESIGN.md invariant 11), so a cursor left
/// open for minutes stalls no one's reclamation. Its reads are those of the
/// transaction: one snapshot (with [`Isolation::ReadCommitted`](crate::Isolation),
/// a fresh one per batch), its own writes included.
///
/// After an error (a prepare conflict met by a read-ahead, or a
/// transaction that can no longer read) the cursor yields it once and then
/// yields nothing until a seek.
///
/// Cost: a forward step is a copy of the value plus, once per batch, a
/// search of the index for where the batch starts; the callback
/// [`Txn::scan`] is faster over a whole table (by about a fifth) because it
/// keeps one guard and copies nothing. A backward step costs about a
/// quarter more than a forward one: the keys created since the index's
/// ordered view was last merged (at most a sixteenth of them) are found by
/// a search each (`benches/scan.rs`).
///
/// ```
/// # use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
/// let engine = Engine::new(EngineConfig::default())?;
/// let mut session = engine.session()?;
/// let mut txn = session.begin(&TxnOptions::default())?;
/// for k in ["a", "b", "c", "d"] {
///     txn.put(k, k.to_uppercase())?;
/// }
/// let keys: Vec<Vec<u8>> = txn.iter("b"..).map(|r| r.map(|(k, _)| k.to_vec())).collect::<Result<_, _>>()?;
/// assert_eq!(keys, [b"b", b"c", b"d"]);
/// let (last, value) = txn.cursor().next_back().unwrap()?;
/// assert_eq!((last, &value[..]), (&b"d"[..], &b"D"[..]));
/// let mut cursor = txn.cursor();
/// cursor.seek("c");
/// assert_eq!(cursor.next_ref().unwrap()?, (&b"c"[..], &b"C"[..]));
/// # Ok::<(), snapshot_engine::Error>(())
/// ```
pub struct Cursor<'t, 's, 'e, M: Machinery = LockFree> {
    txn: &'t mut Txn<'s, 'e, M>,
    /// The table it reads.
    tb: Tb<'t>,
    /// The table's index: the store's own for the default table, or a
    /// named table's, which the transaction's write set holds until the
    /// transaction ends (so its keys may be lent for `'t`, and its entries
    /// kept for the transaction's validation); `None`: the table was
    /// dropped.
    index: Option<&'e Index>,
    /// The caller's bounds and the sought keys, which positions name.
    keys: Owned,
    /// The caller's lower bound.
    lo: At<'t>,
    /// The caller's upper bound.
    hi: At<'t>,
    /// Lower bound of what the front may still yield / where its next
    /// refill starts.
    front_floor: At<'t>,
    front_scan: At<'t>,
    /// Upper bound of what the back may still yield / where its next refill
    /// starts.
    back_ceil: At<'t>,
    back_scan: At<'t>,
    front: Batch<'t>,
    back: Batch<'t>,
    /// An error to yield next, then the end.
    failed: Option<Error>,
    finished: bool,
}

impl<'t, 's, 'e, M: Machinery> Cursor<'t, 's, 'e, M> {
    pub(super) fn new(
        txn: &'t mut Txn<'s, 'e, M>,
        tb: Tb<'t>,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
    ) -> Self {
        let copy = |b: Bound<&[u8]>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Box::<[u8]>::from(k),
            Bound::Unbounded => Box::default(),
        };
        let at = |b: Bound<&[u8]>, k: Key<'t>| match b {
            Bound::Included(_) => At::Included(k),
            Bound::Excluded(_) => At::Excluded(k),
            Bound::Unbounded => At::Unbounded,
        };
        let (lo, hi) = (at(bounds.0, Key::Lo), at(bounds.1, Key::Hi));
        let (index, failed) = match txn.session.writes.hold(tb, false) {
            Ok(i) => (Some(i), None),
            Err(e) => (None, Some(e)),
        };
        Cursor {
            txn,
            tb,
            index,
            keys: Owned {
                lo: copy(bounds.0),
                hi: copy(bounds.1),
                ..Owned::default()
            },
            lo,
            hi,
            front_floor: lo,
            front_scan: lo,
            back_ceil: hi,
            back_scan: hi,
            front: Batch::default(),
            back: Batch::default(),
            failed,
            finished: false,
        }
    }

    /// Moves the front to `key` (to the range's start if `key` lies before
    /// it): the next [`next`](Iterator::next) yields the first visible key
    /// at or after `key`, forwards or backwards from where the front was
    /// (keys it yielded before are yielded again). The back stays where it
    /// was: it yields down to the front's new place, and a `key` past it
    /// leaves nothing to yield. Both ends yield again if they had met.
    ///
    /// ```
    /// # use snapshot_engine::{Engine, EngineConfig, TxnOptions};
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let mut session = engine.session()?;
    /// let mut txn = session.begin(&TxnOptions::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     txn.put(k, "v")?;
    /// }
    /// let mut cursor = txn.cursor();
    /// cursor.seek("d");
    /// assert_eq!(cursor.next_back().unwrap()?.0, b"d");
    /// // The back stays just below `d`; the front moves back to `a`.
    /// cursor.seek("a");
    /// assert_eq!(cursor.next_back().unwrap()?.0, b"c");
    /// assert_eq!(cursor.next().unwrap()?.0, b"a");
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.front_floor = if self.keys.below(self.lo, key) {
            self.keys.front = Box::from(key);
            At::Included(Key::Front)
        } else {
            // The caller's lower bound still applies.
            self.lo
        };
        self.moved();
    }

    /// Moves the back to `key` (to the range's end if `key` lies past it):
    /// the next [`next_back`](DoubleEndedIterator::next_back) yields the
    /// last visible key at or before `key`, a reverse scan from `key` on the
    /// same cursor, backwards or forwards from where the back was. The front
    /// stays where it was: it yields up to the back's new place, and a `key`
    /// before it leaves nothing to yield. Both ends yield again if they had
    /// met.
    ///
    /// ```
    /// # use snapshot_engine::{Engine, EngineConfig, TxnOptions};
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let mut session = engine.session()?;
    /// let mut txn = session.begin(&TxnOptions::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     txn.put(k, "v")?;
    /// }
    /// let mut cursor = txn.cursor();
    /// cursor.seek_back("c");
    /// let keys: Vec<&[u8]> = cursor.rev().map(|r| r.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"c", b"b", b"a"]);
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.back_ceil = if self.keys.above(self.hi, key) {
            self.keys.back = Box::from(key);
            At::Included(Key::Back)
        } else {
            // The caller's upper bound still applies.
            self.hi
        };
        self.moved();
    }

    /// After a seek: drops both batches (each was read up to where the
    /// other end was, which may have moved outwards), so each end's next
    /// step reads afresh from its own position, and the ends have not met.
    fn moved(&mut self) {
        self.front.reset();
        self.back.reset();
        self.front_scan = self.front_floor;
        self.back_scan = self.back_ceil;
        self.finished = false;
    }

    /// The next pair from the front with the value lent from the cursor's
    /// buffer (no allocation once the buffer has grown): zero-copy for the
    /// key, one copy for the value. `None` at the end of the range (or where
    /// the back end already is).
    ///
    /// # Errors
    /// [`Error::PrepareConflict`] on a prepared update at or below the read
    /// timestamp, or the transaction is not usable
    /// ([`Transaction::check_usable`](crate::machinery::Transaction::check_usable));
    /// the cursor then ends.
    pub fn next_ref(&mut self) -> Option<Result<(&'t [u8], &[u8])>> {
        match self.step(true)? {
            Ok((k, a, b)) => Some(Ok((k, &self.front.arena[a..b]))),
            Err(e) => Some(Err(e)),
        }
    }

    /// As [`Cursor::next_ref`], from the back.
    ///
    /// # Errors
    /// As [`Cursor::next_ref`].
    pub fn next_back_ref(&mut self) -> Option<Result<(&'t [u8], &[u8])>> {
        match self.step(false)? {
            Ok((k, a, b)) => Some(Ok((k, &self.back.arena[a..b]))),
            Err(e) => Some(Err(e)),
        }
    }

    fn step(&mut self, forward: bool) -> Option<Result<(&'t [u8], usize, usize)>> {
        loop {
            if let Some(e) = self.failed.take() {
                self.finished = true;
                return Some(Err(e));
            }
            if self.finished {
                return None;
            }
            let batch = if forward {
                &mut self.front
            } else {
                &mut self.back
            };
            if let Some(&(k, a, b)) = batch.items.get(batch.next) {
                batch.next += 1;
                // The two ends meet: stop at what the other end yielded.
                let inside = if forward {
                    self.keys.above(self.back_ceil, k)
                } else {
                    self.keys.below(self.front_floor, k)
                };
                if !inside {
                    self.finished = true;
                    return None;
                }
                if forward {
                    self.front_floor = At::Excluded(Key::Index(k));
                } else {
                    self.back_ceil = At::Excluded(Key::Index(k));
                }
                return Some(Ok((k, a, b)));
            }
            if batch.done {
                self.finished = true;
                return None;
            }
            self.refill(forward);
        }
    }

    /// Pins the store's guard once and copies up to [`BATCH`] visible pairs
    /// in one direction.
    fn refill(&mut self, forward: bool) {
        let (lo, hi) = if forward {
            (self.front_scan, self.back_ceil)
        } else {
            (self.front_floor, self.back_scan)
        };
        let batch = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        batch.items.clear();
        batch.arena.clear();
        batch.next = 0;
        let view = match self.txn.inner.read_view() {
            Ok(v) => v,
            Err(e) => {
                self.failed = Some(e);
                return;
            }
        };
        if self.keys.is_empty(lo, hi) {
            batch.done = true;
            return;
        }
        let bounds = (self.keys.bound(lo), self.keys.bound(hi));
        // The index outlives `'t` (the field's docs): its keys may be kept
        // for `'t` (keys are never removed while an index lives).
        let index = match self.index {
            Some(i) if !matches!(self.tb, Tb::Named(t) if t.is_dropped()) => i,
            _ => {
                self.failed = Some(match self.tb {
                    Tb::Named(t) => t.dropped(),
                    Tb::Default => unreachable!("the default table never drops"),
                });
                return;
            }
        };
        let store = &self.txn.session.engine.store;
        let guard = store.collector.pin();
        // `examined`: index entries looked at (bounds a batch);
        // `versions`: version statuses loaded (the `ver/read` counter).
        let (mut examined, mut versions) = (0, 0);
        let mut last: Option<&'t [u8]> = None;
        let mut conflict = None;
        let mut exhausted = true;
        // A tracked refill keeps the entries it visits for the
        // transaction's validation (`Tracker::visit`).
        let serial = &mut self.txn.session.serial;
        let mut keeping = serial.track.then(|| serial.scan_starts(index));
        let mut visit = |k: &'e [u8], e: &'e crate::store::raw::chain::KeyEntry| {
            if let Some(keeping) = keeping.as_mut() {
                serial.visit(keeping, k, e);
            }
            examined += 1;
            last = Some(k);
            match e.read_counted(&view, &guard, &mut versions) {
                Found::Value(v) => {
                    let a = batch.arena.len();
                    batch.arena.extend_from_slice(v);
                    batch.items.push((k, a, batch.arena.len()));
                }
                Found::Deleted | Found::Absent => {}
                Found::PrepareConflict => {
                    conflict = Some(k.to_vec());
                    return false;
                }
            }
            if batch.items.len() >= BATCH || examined >= EXAMINE {
                exhausted = false;
                return false;
            }
            true
        };
        index.range(bounds, forward, &guard, &mut visit);
        drop(guard);
        self.txn.inner.count(Count::Reads, examined as u64);
        self.txn.inner.count(Count::VersionsRead, versions);
        batch.done = exhausted;
        if let Some(keeping) = keeping {
            let track = &mut self.txn.session.serial;
            track.note_refill(self.tb, bounds, forward, exhausted, last, keeping);
        }
        if let Some(key) = conflict {
            self.txn.inner.count(Count::PrepareConflicts, 1);
            self.failed = Some(Error::PrepareConflict { key });
            return;
        }
        if let Some(k) = last {
            if forward {
                self.front_scan = At::Excluded(Key::Index(k));
            } else {
                self.back_scan = At::Excluded(Key::Index(k));
            }
        }
    }
}

impl<'t, M: Machinery> Iterator for Cursor<'t, '_, '_, M> {
    type Item = Result<(&'t [u8], Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_ref()?.map(|(k, v)| (k, v.to_vec())))
    }
}

impl<M: Machinery> DoubleEndedIterator for Cursor<'_, '_, '_, M> {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some(self.next_back_ref()?.map(|(k, v)| (k, v.to_vec())))
    }
}

impl<M: Machinery> std::iter::FusedIterator for Cursor<'_, '_, '_, M> {}
