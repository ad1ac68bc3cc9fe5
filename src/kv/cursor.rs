//! [`Cursor`]: an iterator over a transaction's visible key-value pairs
//! that holds no epoch guard between batches.

use super::txn::Txn;
use crate::error::{Error, Result};
use crate::machinery::{Count, LockFree, Protocol};
use crate::store::raw::chain::Found;
use std::ops::Bound;

/// Visible pairs a cursor copies per batch (under one epoch guard).
const BATCH: usize = 64;
/// Index entries a batch looks at, at most, visible or not, so one guard
/// never covers a long run of deleted or invisible keys.
const EXAMINE: usize = 1024;

/// A key the cursor positions by: the caller's bound (copied once), or a
/// key of the store's index, which lives until the store drops.
#[derive(Clone, Copy)]
enum At<'t> {
    Unbounded,
    Included(&'t [u8]),
    Excluded(&'t [u8]),
}

impl<'t> At<'t> {
    fn bound(self) -> Bound<&'t [u8]> {
        match self {
            At::Unbounded => Bound::Unbounded,
            At::Included(k) => Bound::Included(k),
            At::Excluded(k) => Bound::Excluded(k),
        }
    }

    /// Does `k` lie above this lower bound?
    fn below(self, k: &[u8]) -> bool {
        match self {
            At::Unbounded => true,
            At::Included(b) => b <= k,
            At::Excluded(b) => b < k,
        }
    }

    /// Does `k` lie below this upper bound?
    fn above(self, k: &[u8]) -> bool {
        match self {
            At::Unbounded => true,
            At::Included(b) => k <= b,
            At::Excluded(b) => k < b,
        }
    }
}

/// One direction's buffered pairs: keys point into the index, values are
/// copied into `arena`.
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
/// reverse scan; the two ends meet and stop), and [`Cursor::seek`] to move
/// the front. Nothing is collected up front.
///
/// Items are `(key, value)`: the key borrowed with no copy (keys live in
/// the store's index until the engine drops), the value copied out, since a
/// value may be freed once no epoch guard covers it. [`Cursor::next_ref`]
/// lends the value instead, from a buffer the cursor reuses.
///
/// What an open cursor holds: a `&mut` borrow of the transaction (so the
/// transaction makes no writes while the cursor lives), its position, and
/// up to one batch of copied values per direction. It holds **no epoch
/// guard** between calls: each refill pins the store's guard, copies up to
/// 64 visible pairs (looking at no more than 1024 index entries), and drops
/// it (PROTOCOL.md: a guard never outlives one operation), so a cursor left
/// open for minutes stalls no one's reclamation. Its reads are those of the
/// transaction: one snapshot (with [`Isolation::ReadCommitted`](crate::Isolation),
/// a fresh one per batch), its own writes included.
///
/// After an error (a prepare conflict, or a transaction that can no longer
/// read) the cursor yields it once and then ends.
///
/// Cost: a forward step is a copy of the value plus, once per batch, a
/// search of the index for where the batch starts; the callback
/// [`Txn::scan`] is about three times faster over a whole table because it
/// keeps one guard and copies nothing. A backward step costs a search of the
/// index each (the skiplist has no back links), about ten times a forward
/// step (`benches/scan.rs`).
///
/// ```
/// # use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
/// let engine = Engine::new(EngineConfig::default());
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
pub struct Cursor<'t, 's, 'e, P: Protocol = LockFree> {
    txn: &'t mut Txn<'s, 'e, P>,
    /// The caller's bounds, copied (the `At`s below borrow them).
    _bounds: (Box<[u8]>, Box<[u8]>),
    /// The caller's lower bound.
    lo: At<'t>,
    /// The last sought key (`front_floor` borrows it after a seek).
    sought: Box<[u8]>,
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

impl<'t, 's, 'e, P: Protocol> Cursor<'t, 's, 'e, P> {
    pub(super) fn new(txn: &'t mut Txn<'s, 'e, P>, bounds: (Bound<&[u8]>, Bound<&[u8]>)) -> Self {
        let copy = |b: Bound<&[u8]>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Box::<[u8]>::from(k),
            Bound::Unbounded => Box::default(),
        };
        let (lo, hi) = (copy(bounds.0), copy(bounds.1));
        // SAFETY: `lo` and `hi` are boxed (their bytes never move) and
        // never replaced while the cursor lives; the `At`s that borrow them
        // are fields of the same cursor and never leave it (only index keys
        // are handed out).
        let (lo_ref, hi_ref): (&'t [u8], &'t [u8]) =
            unsafe { (&*(&*lo as *const [u8]), &*(&*hi as *const [u8])) };
        let at = |b: Bound<&[u8]>, r: &'t [u8]| match b {
            Bound::Included(_) => At::Included(r),
            Bound::Excluded(_) => At::Excluded(r),
            Bound::Unbounded => At::Unbounded,
        };
        let (front, back) = (at(bounds.0, lo_ref), at(bounds.1, hi_ref));
        Cursor {
            txn,
            _bounds: (lo, hi),
            lo: front,
            sought: Box::default(),
            front_floor: front,
            front_scan: front,
            back_ceil: back,
            back_scan: back,
            front: Batch::default(),
            back: Batch::default(),
            failed: None,
            finished: false,
        }
    }

    /// Moves the front to the first visible key at or after `key` (within
    /// the cursor's range): the next [`next`](Iterator::next) starts there,
    /// forwards or backwards from where the front was. The back end is
    /// unchanged; a key past it leaves nothing to yield.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        if self.lo.below(key) {
            // Both front positions are replaced below, so nothing borrows
            // the previous `sought` once it is dropped here.
            self.sought = Box::from(key);
            // SAFETY: as in `new`: `sought` is boxed and replaced only here,
            // together with every `At` that borrows it.
            let r: &'t [u8] = unsafe { &*(&*self.sought as *const [u8]) };
            self.front_floor = At::Included(r);
        } else {
            // The caller's lower bound still applies.
            self.front_floor = self.lo;
        }
        self.front_scan = self.front_floor;
        self.front.reset();
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
                    self.back_ceil.above(k)
                } else {
                    self.front_floor.below(k)
                };
                if !inside {
                    self.finished = true;
                    return None;
                }
                if forward {
                    self.front_floor = At::Excluded(k);
                } else {
                    self.back_ceil = At::Excluded(k);
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
        if is_empty(lo, hi) {
            batch.done = true;
            return;
        }
        let store = &self.txn.session.engine.store;
        let guard = store.collector.pin();
        // `examined`: index entries looked at (bounds a batch);
        // `versions`: version statuses loaded (the `ver/read` counter).
        let (mut examined, mut versions) = (0, 0);
        let mut last: Option<&'t [u8]> = None;
        let mut conflict = None;
        let mut exhausted = true;
        let mut visit = |k: &[u8], e: &crate::store::raw::chain::KeyEntry| {
            examined += 1;
            // SAFETY: index keys are never removed or moved until the store
            // drops (DESIGN.md, "Boundaries"), and the store outlives `'t`
            // (the cursor borrows the transaction, which borrows the
            // session that keeps the engine alive).
            let k: &'t [u8] = unsafe { &*(k as *const [u8]) };
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
        if forward {
            store
                .index
                .range((lo.bound(), hi.bound()), &guard, &mut visit);
        } else {
            store
                .index
                .range_rev((lo.bound(), hi.bound()), &guard, &mut visit);
        }
        drop(guard);
        self.txn.inner.count(Count::Reads, examined as u64);
        self.txn.inner.count(Count::VersionsRead, versions);
        batch.done = exhausted;
        if let Some(key) = conflict {
            self.txn.inner.count(Count::PrepareConflicts, 1);
            self.failed = Some(Error::PrepareConflict { key });
            return;
        }
        if let Some(k) = last {
            if forward {
                self.front_scan = At::Excluded(k);
            } else {
                self.back_scan = At::Excluded(k);
            }
        }
    }
}

/// Is the range between `lo` and `hi` empty (the index's range walk
/// requires `lo <= hi`)?
fn is_empty(lo: At<'_>, hi: At<'_>) -> bool {
    let (l, l_in) = match lo {
        At::Unbounded => return false,
        At::Included(k) => (k, true),
        At::Excluded(k) => (k, false),
    };
    let (h, h_in) = match hi {
        At::Unbounded => return false,
        At::Included(k) => (k, true),
        At::Excluded(k) => (k, false),
    };
    l > h || (l == h && !(l_in && h_in))
}

impl<'t, P: Protocol> Iterator for Cursor<'t, '_, '_, P> {
    type Item = Result<(&'t [u8], Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_ref()?.map(|(k, v)| (k, v.to_vec())))
    }
}

impl<P: Protocol> DoubleEndedIterator for Cursor<'_, '_, '_, P> {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some(self.next_back_ref()?.map(|(k, v)| (k, v.to_vec())))
    }
}

impl<P: Protocol> std::iter::FusedIterator for Cursor<'_, '_, '_, P> {}
