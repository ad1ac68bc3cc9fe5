//! [`Txn`]'s per-read control of serializable tracking, as users name it
//! (the generic forms are in `kv/serializable.rs`).

use super::Txn;
use crate::error::Result;

impl Txn<'_, '_> {
    /// Reads `key` as [`Txn::get`] does, without tracking the read.
    ///
    /// In an [`Isolation::Serializable`](crate::Isolation::Serializable)
    /// transaction, what this read returns is not validated at commit: a
    /// transaction that writes the key after this one's snapshot does not
    /// make this one fail, so the commit is serializable only if nothing
    /// it wrote depends on this value (a hint, a cache fill, a read whose
    /// staleness the application accepts). It buys a smaller read set (no
    /// tracked bytes, nothing to check at commit) and fewer conflicts. In
    /// any other transaction it is [`Txn::get`].
    ///
    /// ```
    /// # use snapshot_engine::{CommitOptions, Engine, Isolation, TxnOptions};
    /// let engine = Engine::default();
    /// let mut session = engine.session()?;
    /// let serializable = TxnOptions { isolation: Isolation::Serializable, ..TxnOptions::default() };
    /// let mut txn = session.begin(&serializable)?;
    /// assert_eq!(txn.get_untracked("config")?, None);
    /// assert_eq!(txn.tracked_bytes(), 0);
    /// # Ok::<(), snapshot_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Txn::get`].
    #[inline]
    pub fn get_untracked(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.0.get_untracked(key)
    }

    /// Reads `key` as [`Txn::get`] does, and tracks the read, as a
    /// serializable transaction tracks each of its reads (RocksDB's
    /// `GetForUpdate` in an optimistic transaction).
    ///
    /// In a snapshot-isolation transaction, a commit after any tracked read
    /// validates it under the engine's serializable commit gate: if the
    /// key has a newer version than the one read (committed after this
    /// transaction's snapshot, or in progress, or prepared), the commit
    /// rolls the transaction back with
    /// [`Error::SerializationConflict`](crate::Error::SerializationConflict).
    /// It buys a read-modify-write on a key the transaction does not write
    /// back (a check of a balance it then debits elsewhere) the protection
    /// a write of that key would give; it costs the tracked key's bytes and
    /// a gated commit. It does not make the transaction serializable: its
    /// other reads stay untracked. In an
    /// [`Isolation::Serializable`](crate::Isolation::Serializable)
    /// transaction it is [`Txn::get`].
    ///
    /// # Errors
    /// As [`Txn::get`], and
    /// [`Error::IncompatibleOptions`](crate::Error::IncompatibleOptions) in
    /// an [`Isolation::ReadCommitted`](crate::Isolation::ReadCommitted)
    /// transaction (each of its reads has its own snapshot, so there is no
    /// one view to validate the read against).
    #[inline]
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.0.get_for_update(key)
    }

    /// The bytes this transaction's serializable tracking holds now: the
    /// keys and range bounds it read, with their entries, and the entries
    /// each scanned range kept for its validation, up to 32 a range (the
    /// keys it wrote are checked from its write set, which every
    /// transaction keeps). 0 for a snapshot-isolation transaction
    /// with no [`Txn::get_for_update`]. Freed (kept for the session's next
    /// transaction, up to 64 KiB) when the transaction ends.
    #[inline]
    pub fn tracked_bytes(&self) -> usize {
        self.0.tracked_bytes()
    }
}
