//! [`Cursor`] as users name it.

use crate::error::Result;
use crate::with_machinery::{self as generic, LockFree};

/// A cursor over the visible key-value pairs of a key range in one transaction
/// ([`Txn::iter`](crate::Txn::iter), [`Txn::cursor`](crate::Txn::cursor)): an
/// [`Iterator`] in key order, a [`DoubleEndedIterator`] (`.rev()`, or
/// `next_back`, for a reverse scan; the two ends meet and stop), with
/// [`Cursor::seek`] and
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
/// [`Txn::scan`](crate::Txn::scan) is faster over a whole table (by about a fifth) because it
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
pub struct Cursor<'t, 's, 'e>(pub(super) generic::Cursor<'t, 's, 'e, LockFree>);

impl<'t> Cursor<'t, '_, '_> {
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
    #[inline]
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        self.0.seek(key)
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
    #[inline]
    pub fn seek_back(&mut self, key: impl AsRef<[u8]>) {
        self.0.seek_back(key)
    }

    /// The next pair from the front with the value lent from the cursor's
    /// buffer (no allocation once the buffer has grown): zero-copy for the
    /// key, one copy for the value. `None` at the end of the range (or where
    /// the back end already is).
    ///
    /// # Errors
    /// [`Error::PrepareConflict`](crate::Error::PrepareConflict) on a prepared
    /// update at or below the read timestamp, or the transaction is not usable
    /// ([`Transaction::check_usable`](crate::machinery::Transaction::check_usable));
    /// the cursor then ends.
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<(&'t [u8], &[u8])>> {
        self.0.next_ref()
    }

    /// As [`Cursor::next_ref`], from the back.
    ///
    /// # Errors
    /// As [`Cursor::next_ref`].
    #[inline]
    pub fn next_back_ref(&mut self) -> Option<Result<(&'t [u8], &[u8])>> {
        self.0.next_back_ref()
    }
}

impl<'t> Iterator for Cursor<'t, '_, '_> {
    type Item = Result<(&'t [u8], Vec<u8>)>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl DoubleEndedIterator for Cursor<'_, '_, '_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl std::iter::FusedIterator for Cursor<'_, '_, '_> {}
