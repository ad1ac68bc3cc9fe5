//! Crate internals for the loom models in `loom_tests/` (`--cfg loom` builds
//! only; not part of the public API).
//!
//! The engine-level models drive [`Engine`](crate::Engine) through its public
//! API. Under `--cfg loom` its key index is a mutex-protected stand-in
//! (`store/mod.rs`), and every lookup takes that mutex: a model whose reader and
//! writer both look a key up gains a happens-before edge the real lock-free
//! index does not give, which can hide an ordering bug in the snapshot
//! protocol. The lower-level models therefore run the same protocol code
//! (the lock-free machinery, descriptor cell, slots and version chains) with
//! no index, through the thin wrappers below. The wrappers only forward; no
//! protocol step is re-implemented here.

use crate::machinery::epoch::Collector;
use crate::machinery::loom_support::{
    horizon as make_horizon, new_status, set_status, snapshot_view, stable_view, PreparedTable,
};
use crate::machinery::{Completion, Horizon, ReadView, VersionStatus};
use crate::store::raw::chain::{Found, KeyEntry, Version};

pub(crate) use crate::machinery::loom_support::{
    snapshot_below, snapshot_parts, snapshot_sees, state, Machine, Snapshot,
};

/// What a read found (a copy of the value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The visible value.
    Value(Vec<u8>),
    /// The visible version is a tombstone.
    Deleted,
    /// Nothing visible.
    Absent,
    /// A prepared update at or below the read timestamp.
    PrepareConflict,
}

/// A version this model wrote, to finish later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VersionRef(*mut Version);

// SAFETY: a VersionRef is only a name for a version the writing model thread
// owns until it finishes it; `Chain::set_status` documents who may use it.
unsafe impl Send for VersionRef {}

/// One key's version chain (`store/raw/chain.rs`) with its collector.
pub(crate) struct Chain {
    entry: KeyEntry,
    collector: Collector,
    /// Lists the writers this model prepared (by `set_status`), as the
    /// manager does for a prepared transaction, so readers treat them as
    /// still prepared.
    prepared: PreparedTable,
}

impl Default for Chain {
    fn default() -> Self {
        Chain::new()
    }
}

impl Chain {
    /// An empty chain.
    pub(crate) fn new() -> Chain {
        Chain {
            entry: KeyEntry::new(),
            collector: Collector::new(),
            prepared: PreparedTable::new(1),
        }
    }

    /// Prepends `value` by transaction `own` reading with `snap` (conflict
    /// check included). `None` on a write conflict.
    pub(crate) fn put(&self, own: u64, snap: &Snapshot, value: &[u8]) -> Option<VersionRef> {
        let guard = self.collector.pin();
        let view = snapshot_view(own, snap, 0, false, &self.prepared);
        let status = new_status(own);
        self.entry
            .prepend(Version::alloc(status, Some(value)), &view, &guard)
            .ok()
            .map(|(p, _)| VersionRef(p))
    }

    /// Sets the status of a version this thread wrote (commit, abort,
    /// prepare).
    ///
    /// # Safety
    /// `v` came from [`Chain::put`] on this chain, and the transaction that
    /// wrote it has not finished (an unfinished version is never pruned).
    pub(crate) unsafe fn set_status(&self, v: VersionRef, state: u64, ts: u64) {
        // SAFETY: the caller guarantees the version is still linked and
        // owned by the calling transaction (kv/txn.rs's argument, invariant 3:
        // pruning only cuts below a committed version).
        let status = &unsafe { &*v.0 }.status;
        if state == state::PREPARED {
            // Before the flip, as `Transaction::prepare` does.
            self.prepared.publish(0, status.writer().get());
        }
        set_status(status, state, ts)
    }

    /// Commits a version this thread wrote at `ts` (0: none), as a
    /// committing transaction does (`kv/txn.rs` `flip_all`): links the
    /// key's previous committed version to it, then flips its status.
    ///
    /// # Safety
    /// As for [`Chain::set_status`].
    pub(crate) unsafe fn commit(&self, v: VersionRef, ts: u64) {
        let _guard = self.collector.pin();
        // SAFETY: as for `set_status`; we hold a guard.
        unsafe {
            self.entry
                .commit_version(v.0, ts, |st| set_status(st, state::COMMITTED, ts))
        };
    }

    /// Prepends `value` with a status from the public machinery layer
    /// ([`Transaction::new_version`](crate::machinery::Transaction::new_version)),
    /// checked against its `view` (first updater wins). `None` on a write
    /// conflict.
    pub(crate) fn put_version(
        &self,
        status: VersionStatus,
        view: &ReadView<'_>,
        value: &[u8],
    ) -> Option<VersionRef> {
        let guard = self.collector.pin();
        self.entry
            .prepend(Version::alloc(status, Some(value)), view, &guard)
            .ok()
            .map(|(p, _)| VersionRef(p))
    }

    /// Commits a version written through [`Chain::put_version`] inside its
    /// transaction's commit closure, as the bundled store's commit does:
    /// links the key's previous committed version to it, then `done` flips
    /// it.
    ///
    /// # Safety
    /// As for [`Chain::set_status`].
    pub(crate) unsafe fn commit_with(&self, v: VersionRef, ts: u64, done: &Completion<'_>) {
        let _guard = self.collector.pin();
        // SAFETY: as for `set_status`; we hold a guard.
        unsafe {
            self.entry.commit_version(v.0, ts, |st| {
                done.flip(st);
            })
        };
    }

    /// Reads with a view from the public machinery layer
    /// ([`Transaction::read_view`](crate::machinery::Transaction::read_view)).
    pub(crate) fn read_with(&self, view: &ReadView<'_>) -> Read {
        self.read_view(view)
    }

    /// Prunes to a horizon from the public machinery layer
    /// ([`TxnManager::horizon`](crate::machinery::TxnManager::horizon)) and
    /// moves the finger up to `stable`; returns versions retired.
    pub(crate) fn prune_to(&self, horizon: Horizon, stable: u64) -> u64 {
        let guard = self.collector.pin();
        self.entry
            .prune(horizon, stable, &self.collector, &guard, || |_| {})
            .cut
    }

    fn read_view(&self, view: &ReadView<'_>) -> Read {
        self.read_view_counted(view).0
    }

    /// Reads with `view`; also returns the versions the read examined.
    fn read_view_counted(&self, view: &ReadView<'_>) -> (Read, u64) {
        let guard = self.collector.pin();
        let mut n = 0;
        let got = match self.entry.read_counted(view, &guard, &mut n) {
            Found::Value(v) => Read::Value(v.to_vec()),
            Found::Deleted => Read::Deleted,
            Found::Absent => Read::Absent,
            Found::PrepareConflict => Read::PrepareConflict,
        };
        (got, n)
    }

    /// Reads with a snapshot and read timestamp (0: none).
    pub(crate) fn read(
        &self,
        own: u64,
        snap: &Snapshot,
        read_ts: u64,
        ignore_prepared: bool,
    ) -> Read {
        self.read_view(&snapshot_view(
            own,
            snap,
            read_ts,
            ignore_prepared,
            &self.prepared,
        ))
    }

    /// Reads as the read-only fast path does (`ReadAs::Stable`).
    pub(crate) fn read_stable(&self, stable: u64, complete_below: u64) -> Read {
        self.read_view(&stable_view(stable, complete_below, false, &self.prepared))
    }

    /// As [`Chain::read_stable`], skipping prepared updates
    /// (`PrepareConflicts::Ignore`).
    pub(crate) fn read_stable_ignoring(&self, stable: u64, complete_below: u64) -> Read {
        self.read_view(&stable_view(stable, complete_below, true, &self.prepared))
    }

    /// As [`Chain::read_stable`], also returning the versions the read
    /// examined (status words loaded).
    pub(crate) fn read_stable_counted(&self, stable: u64, complete_below: u64) -> (Read, u64) {
        self.read_view_counted(&stable_view(stable, complete_below, false, &self.prepared))
    }

    /// Prunes to the horizon `(xmin, ts)` and moves the finger up to
    /// `stable`; returns versions retired.
    pub(crate) fn prune(&self, horizon: (u64, u64), stable: u64) -> u64 {
        let guard = self.collector.pin();
        let h = make_horizon(horizon.0, horizon.1);
        self.entry
            .prune(h, stable, &self.collector, &guard, || |_| {})
            .cut
    }

    /// Is the key's finger (if set) still linked, at or above its floor?
    /// (Invariant 13; checked at the end of the models.)
    pub(crate) fn finger_linked(&self) -> bool {
        let guard = self.collector.pin();
        self.entry.finger_linked(&guard)
    }

    /// Is the key's hint (if set) still linked? (Invariant 18; checked at
    /// the end of the models.)
    pub(crate) fn hint_linked(&self) -> bool {
        let guard = self.collector.pin();
        self.entry.hint_linked(&guard)
    }

    /// Is the key unordered?
    pub(crate) fn is_unordered(&self) -> bool {
        self.entry.is_unordered()
    }

    /// Versions still linked.
    pub(crate) fn len(&self) -> usize {
        let guard = self.collector.pin();
        self.entry.chain_len(&guard)
    }
}
