//! [`Cursor`] as users name it.

use crate::error::Result;
use crate::with_protocol::{self as generic, LockFree};

/// A cursor over the visible key-value pairs of a key range in one transaction
/// ([`Txn::iter`](crate::Txn::iter), [`Txn::cursor`](crate::Txn::cursor)): an
/// [`Iterator`] in key order, a [`DoubleEndedIterator`] (`.rev()`, or
/// `next_back`, for a reverse scan; the two ends meet and stop), with
/// [`Cursor::seek`] and
/// [`Cursor::seek_back`] to move the front and the back. Nothing is
/// collected up front.
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
/// After an error (a prepare conflict, or a transaction that can no longer
/// read) the cursor yields it once and then ends.
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
    /// Moves the front to the first visible key at or after `key` (within
    /// the cursor's range): the next [`next`](Iterator::next) starts there,
    /// forwards or backwards from where the front was. The back end is
    /// unchanged; a key past it leaves nothing to yield.
    #[inline]
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        self.0.seek(key)
    }

    /// Moves the back to the last visible key at or before `key` (within
    /// the cursor's range): the next [`next_back`](DoubleEndedIterator::next_back)
    /// starts there, a reverse scan from `key` on the same cursor. The front
    /// end is unchanged; a key before it leaves nothing to yield.
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
