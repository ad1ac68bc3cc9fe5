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

use crate::config::EngineConfig;
use crate::machinery::epoch::Collector as Reclaimer;
use crate::machinery::protocol::Machinery;
use crate::machinery::version::PreparedTable;
use crate::machinery::LockFree;
use crate::machinery::{Completion, Horizon, ReadView, VersionStatus};
use crate::stats::Counters;
use crate::store::raw::chain::{Found, KeyEntry, Version};
use crate::ts::Timestamp;

pub use crate::machinery::snapshot::Snapshot;

/// Version states, as stored in a version's status word.
pub mod state {
    /// Written, not finished.
    pub const IN_PROGRESS: u64 = crate::machinery::version::IN_PROGRESS;
    /// Prepared (timestamp: the prepare timestamp).
    pub const PREPARED: u64 = crate::machinery::version::PREPARED;
    /// Committed (timestamp: the commit timestamp, 0 for none).
    pub const COMMITTED: u64 = crate::machinery::version::COMMITTED;
    /// Rolled back.
    pub const ABORTED: u64 = crate::machinery::version::ABORTED;
}

/// `(generation, xmin, xmax, running)` of a snapshot copy.
pub fn snapshot_parts(s: &Snapshot) -> (u64, u64, u64, Vec<u64>) {
    (s.generation, s.xmin, s.xmax, s.running.clone())
}

/// A snapshot that treats every transaction below `xmax` as completed and
/// none at or above it (for chain-level models that need no machinery).
pub fn snapshot_below(xmax: u64) -> Snapshot {
    Snapshot {
        generation: 1,
        xmin: xmax,
        xmax,
        running: Vec::new(),
    }
}

/// Does snapshot `s` treat transaction `id` as completed?
pub fn snapshot_sees(s: &Snapshot, id: u64) -> bool {
    s.sees(id)
}

/// The lock-free snapshot machinery (`lockfree.rs`) with one counter block
/// per slot plus one for the horizon advancer, as the engine has.
pub struct Machine {
    proto: LockFree,
    ctr: Box<[Counters]>,
}

impl Machine {
    /// A machinery with `max_sessions` slots.
    pub fn new(max_sessions: usize) -> Machine {
        let cfg = EngineConfig {
            max_sessions,
            ..EngineConfig::default()
        };
        Machine {
            proto: LockFree::new(&cfg),
            ctr: (0..=max_sessions).map(|_| Counters::default()).collect(),
        }
    }

    /// Claims a slot (`SessionTableFull` when none is free).
    pub fn open_session(&self) -> crate::Result<usize> {
        self.proto.open_session()
    }

    /// Releases a slot.
    pub fn close_session(&self, slot: usize) {
        self.proto.close_session(slot)
    }

    /// Takes a snapshot into `snap` and publishes its pin (`begin`).
    pub fn begin(&self, slot: usize, snap: &mut Snapshot) {
        self.proto.begin(slot, snap, &self.ctr[slot])
    }

    /// Replaces `snap` with a current snapshot (`refresh`).
    pub fn refresh(&self, slot: usize, snap: &mut Snapshot) {
        self.proto.refresh(slot, snap, &self.ctr[slot])
    }

    /// Publishes and validates a read timestamp, then refreshes `snap`.
    pub fn set_read_timestamp(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: u64,
        roundup: bool,
    ) -> crate::Result<u64> {
        self.proto
            .set_read_timestamp(slot, snap, Timestamp::new(ts), roundup, &self.ctr[slot])
            .map(Timestamp::get)
    }

    /// The pins of every open slot: `(slot, snapshot xmin, read ts)`.
    pub fn pins(&self) -> Vec<(usize, u64, u64)> {
        self.proto.pins()
    }

    /// Clears the slot's read pins (end of a transaction).
    pub fn end(&self, slot: usize) {
        self.proto.end(slot)
    }

    /// Allocates a transaction id.
    pub fn allocate_id(&self, slot: usize) -> u64 {
        self.proto.allocate_id(slot)
    }

    /// Transaction `id` leaves the running set (descriptor install).
    pub fn complete(&self, slot: usize, id: u64) {
        self.proto.complete(slot, id, None, &self.ctr[slot])
    }

    /// A commit's completion: as [`Machine::complete`], and the installed
    /// descriptor is left in `snap`, the session's snapshot cache (issue
    /// 14w).
    pub fn complete_keeping(&self, slot: usize, id: u64, snap: &mut Snapshot) {
        self.proto.complete(slot, id, Some(snap), &self.ctr[slot])
    }

    /// Recomputes the reclaim horizon.
    pub fn advance_horizon(&self) {
        self.proto.advance_horizon(&self.ctr[self.ctr.len() - 1])
    }

    /// Begins a read-only fast-path view: `(stable, complete_below)`, its
    /// pins published.
    pub fn begin_at_stable(&self, slot: usize) -> (u64, u64) {
        let v = self.proto.begin_at_stable(slot, &self.ctr[slot]);
        (v.stable, v.complete_below)
    }

    /// The current descriptor, copied (no pin published).
    pub fn descriptor(&self) -> Snapshot {
        let mut s = Snapshot::default();
        // Generation 0 is never published, so this always copies.
        self.proto.refresh(0, &mut s, &self.ctr[self.ctr.len() - 1]);
        s
    }
}

/// What a read found (a copy of the value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
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
pub struct VersionRef(*mut Version);

// SAFETY: a VersionRef is only a name for a version the writing model thread
// owns until it finishes it; `Chain::set_status` documents who may use it.
unsafe impl Send for VersionRef {}

/// One key's version chain (`store/raw/chain.rs`) with its collector.
pub struct Chain {
    entry: KeyEntry,
    rc: Reclaimer,
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
    pub fn new() -> Chain {
        Chain {
            entry: KeyEntry::new(),
            rc: Reclaimer::new(),
            prepared: PreparedTable::new(1),
        }
    }

    /// Prepends `value` by transaction `own` reading with `snap` (conflict
    /// check included). `None` on a write conflict.
    pub fn put(&self, own: u64, snap: &Snapshot, value: &[u8]) -> Option<VersionRef> {
        let guard = self.rc.pin();
        let view = ReadView::loom_snapshot(own, snap, 0, false, &self.prepared);
        let status = VersionStatus::loom_new(own);
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
    pub unsafe fn set_status(&self, v: VersionRef, state: u64, ts: u64) {
        // SAFETY: the caller guarantees the version is still linked and
        // owned by the calling transaction (kv/txn.rs's argument, invariant 3:
        // pruning only cuts below a committed version).
        let status = &unsafe { &*v.0 }.status;
        if state == state::PREPARED {
            // Before the flip, as `Transaction::prepare` does.
            self.prepared.publish(0, status.writer().get());
        }
        status.loom_set(state, ts)
    }

    /// Commits a version this thread wrote at `ts` (0: none), as a
    /// committing transaction does (`kv/txn.rs` `flip_all`): links the
    /// key's previous committed version to it, then flips its status.
    ///
    /// # Safety
    /// As for [`Chain::set_status`].
    pub unsafe fn commit(&self, v: VersionRef, ts: u64) {
        let _guard = self.rc.pin();
        // SAFETY: as for `set_status`; we hold a guard.
        unsafe {
            self.entry
                .commit_version(v.0, ts, |st| st.loom_set(state::COMMITTED, ts))
        };
    }

    /// Prepends `value` with a status from the public machinery layer
    /// ([`Transaction::new_version`](crate::machinery::Transaction::new_version)),
    /// checked against its `view` (first updater wins). `None` on a write
    /// conflict.
    pub fn put_version(
        &self,
        status: VersionStatus,
        view: &ReadView<'_>,
        value: &[u8],
    ) -> Option<VersionRef> {
        let guard = self.rc.pin();
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
    pub unsafe fn commit_with(&self, v: VersionRef, ts: u64, done: &Completion<'_>) {
        let _guard = self.rc.pin();
        // SAFETY: as for `set_status`; we hold a guard.
        unsafe {
            self.entry.commit_version(v.0, ts, |st| {
                done.flip(st);
            })
        };
    }

    /// Reads with a view from the public machinery layer
    /// ([`Transaction::read_view`](crate::machinery::Transaction::read_view)).
    pub fn read_with(&self, view: &ReadView<'_>) -> Read {
        self.read_view(view)
    }

    /// Prunes to a horizon from the public machinery layer
    /// ([`TxnManager::horizon`](crate::machinery::TxnManager::horizon)) and
    /// moves the finger up to `stable`; returns versions retired.
    pub fn prune_to(&self, horizon: Horizon, stable: u64) -> u64 {
        let guard = self.rc.pin();
        self.entry
            .prune(horizon, stable, &self.rc, &guard, || |_| {})
            .cut
    }

    fn read_view(&self, view: &ReadView<'_>) -> Read {
        self.read_view_counted(view).0
    }

    /// Reads with `view`; also returns the versions the read examined.
    fn read_view_counted(&self, view: &ReadView<'_>) -> (Read, u64) {
        let guard = self.rc.pin();
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
    pub fn read(&self, own: u64, snap: &Snapshot, read_ts: u64, ignore_prepared: bool) -> Read {
        self.read_view(&ReadView::loom_snapshot(
            own,
            snap,
            read_ts,
            ignore_prepared,
            &self.prepared,
        ))
    }

    /// Reads as the read-only fast path does (`ReadAs::Stable`).
    pub fn read_stable(&self, stable: u64, complete_below: u64) -> Read {
        self.read_view(&ReadView::loom_stable(
            stable,
            complete_below,
            false,
            &self.prepared,
        ))
    }

    /// As [`Chain::read_stable`], skipping prepared updates
    /// (`PrepareConflicts::Ignore`).
    pub fn read_stable_ignoring(&self, stable: u64, complete_below: u64) -> Read {
        self.read_view(&ReadView::loom_stable(
            stable,
            complete_below,
            true,
            &self.prepared,
        ))
    }

    /// As [`Chain::read_stable`], also returning the versions the read
    /// examined (status words loaded).
    pub fn read_stable_counted(&self, stable: u64, complete_below: u64) -> (Read, u64) {
        self.read_view_counted(&ReadView::loom_stable(
            stable,
            complete_below,
            false,
            &self.prepared,
        ))
    }

    /// Prunes to the horizon `(xmin, ts)` and moves the finger up to
    /// `stable`; returns versions retired.
    pub fn prune(&self, horizon: (u64, u64), stable: u64) -> u64 {
        let guard = self.rc.pin();
        let h = Horizon::from_parts(horizon.0, horizon.1);
        self.entry.prune(h, stable, &self.rc, &guard, || |_| {}).cut
    }

    /// Is the key's finger (if set) still linked, at or above its floor?
    /// (Invariant 13; checked at the end of the models.)
    pub fn finger_linked(&self) -> bool {
        let guard = self.rc.pin();
        self.entry.finger_linked(&guard)
    }

    /// Versions still linked.
    pub fn len(&self) -> usize {
        let guard = self.rc.pin();
        self.entry.chain_len(&guard)
    }

    /// Is the chain empty?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
