//! What the loom models in `loom_tests/` need from the machinery's
//! internals (`--cfg loom` test builds only): the lock-free machinery
//! driven slot by slot, snapshot copies, and the version statuses and read
//! views the chain-level models build by hand. Everything here forwards to
//! the real code; no protocol step is re-implemented.

use super::lockfree::LockFree;
use super::raw::descriptor::SessionRetired;
use super::rules::MachineryImpl;
use super::version::{ReadView, VersionStatus};
use super::Horizon;
use crate::config::EngineConfig;
use crate::stats::Counters;
use crate::ts::Timestamp;

pub(crate) use super::snapshot::Snapshot;
pub(crate) use super::version::PreparedTable;

/// Version states, as stored in a version's status word.
pub(crate) mod state {
    /// Prepared (timestamp: the prepare timestamp).
    pub(crate) const PREPARED: u64 = crate::machinery::version::PREPARED;
    /// Committed (timestamp: the commit timestamp, 0 for none).
    pub(crate) const COMMITTED: u64 = crate::machinery::version::COMMITTED;
}

/// `(generation, xmin, xmax, running)` of a snapshot copy.
pub(crate) fn snapshot_parts(s: &Snapshot) -> (u64, u64, u64, Vec<u64>) {
    (s.generation, s.xmin, s.xmax, s.running.clone())
}

/// A snapshot that treats every transaction below `xmax` as completed and
/// none at or above it (for chain-level models that need no machinery).
pub(crate) fn snapshot_below(xmax: u64) -> Snapshot {
    Snapshot {
        generation: 1,
        xmin: xmax,
        xmax,
        running: Vec::new(),
    }
}

/// Does snapshot `s` treat transaction `id` as completed?
pub(crate) fn snapshot_sees(s: &Snapshot, id: u64) -> bool {
    s.sees(id)
}

/// The lock-free snapshot machinery (`lockfree/`) with one counter block
/// per slot plus one for the horizon advancer, as the engine has.
pub(crate) struct Machine {
    machinery: LockFree,
    ctr: Box<[Counters]>,
    /// Per slot, the list a session owns (`TxnSession::retired`). A std
    /// mutex, invisible to loom, so it adds no happens-before edge to a
    /// model: only the slot's own model thread takes it, never contended.
    retired: Box<[std::sync::Mutex<SessionRetired>]>,
}

impl Machine {
    /// A machinery with `max_sessions` slots.
    pub(crate) fn new(max_sessions: usize) -> Machine {
        let cfg = EngineConfig {
            max_sessions,
            ..EngineConfig::default()
        };
        Machine {
            machinery: LockFree::new(&cfg),
            ctr: (0..=max_sessions).map(|_| Counters::default()).collect(),
            retired: (0..max_sessions).map(|_| Default::default()).collect(),
        }
    }

    /// Claims a slot (`SessionTableFull` when none is free).
    pub(crate) fn open_session(&self) -> crate::Result<usize> {
        self.machinery.open_session()
    }

    /// Releases a slot.
    pub(crate) fn close_session(&self, slot: usize) {
        self.machinery
            .close_session(slot, &mut self.retired_of(slot))
    }

    /// Takes a snapshot into `snap` and publishes its pin (`begin`).
    pub(crate) fn begin(&self, slot: usize, snap: &mut Snapshot) {
        self.machinery.begin(slot, snap, &self.ctr[slot])
    }

    /// Replaces `snap` with a current snapshot (`refresh`).
    pub(crate) fn refresh(&self, slot: usize, snap: &mut Snapshot) {
        self.machinery.refresh(slot, snap, &self.ctr[slot])
    }

    /// Publishes and validates a read timestamp, then refreshes `snap`.
    pub(crate) fn set_read_timestamp(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: u64,
        roundup: bool,
    ) -> crate::Result<u64> {
        self.machinery
            .set_read_timestamp(slot, snap, Timestamp::new(ts), roundup, &self.ctr[slot])
            .map(Timestamp::get)
    }

    /// The pins of every open slot: `(slot, snapshot xmin, read ts)`.
    pub(crate) fn pins(&self) -> Vec<(usize, u64, u64)> {
        self.machinery.pins()
    }

    /// Clears the slot's read pins (end of a transaction).
    pub(crate) fn end(&self, slot: usize) {
        self.machinery.end(slot)
    }

    /// Allocates a transaction id.
    pub(crate) fn allocate_id(&self, slot: usize) -> u64 {
        self.machinery.allocate_id(slot)
    }

    /// Transaction `id` leaves the running set (descriptor install).
    pub(crate) fn complete(&self, slot: usize, id: u64) {
        self.machinery
            .complete(slot, id, None, &mut self.retired_of(slot), &self.ctr[slot])
    }

    /// A commit's completion: as [`Machine::complete`], and the installed
    /// descriptor is left in `snap`, the session's snapshot cache.
    pub(crate) fn complete_keeping(&self, slot: usize, id: u64, snap: &mut Snapshot) {
        self.machinery.complete(
            slot,
            id,
            Some(snap),
            &mut self.retired_of(slot),
            &self.ctr[slot],
        )
    }

    /// The slot's list, locked.
    fn retired_of(&self, slot: usize) -> std::sync::MutexGuard<'_, SessionRetired> {
        self.retired[slot].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Recomputes the reclaim horizon.
    pub(crate) fn advance_horizon(&self) {
        self.machinery
            .advance_horizon(&self.ctr[self.ctr.len() - 1])
    }

    /// Begins a read-only fast-path view: `(stable, complete_below)`, its
    /// pins published.
    pub(crate) fn begin_at_stable(&self, slot: usize) -> (u64, u64) {
        let v = self.machinery.begin_at_stable(slot, &self.ctr[slot]);
        (v.stable.get(), v.complete_below)
    }

    /// The current descriptor, copied (no pin published).
    pub(crate) fn descriptor(&self) -> Snapshot {
        let mut s = Snapshot::default();
        // Generation 0 is never published, so this always copies.
        self.machinery
            .refresh(0, &mut s, &self.ctr[self.ctr.len() - 1]);
        s
    }
}

/// A fresh in-progress status written by transaction `writer`.
pub(crate) fn new_status(writer: u64) -> VersionStatus {
    VersionStatus::new(writer)
}

/// Flips `status` to `state` at `ts`, as a `Completion` does (the models
/// flip before they complete, as the machinery's commit closure does).
pub(crate) fn set_status(status: &VersionStatus, state: u64, ts: u64) {
    status.set(state, ts)
}

/// A snapshot read view for transaction `own` (read timestamp `read_ts`,
/// 0: none).
pub(crate) fn snapshot_view<'a>(
    own: u64,
    snap: &'a Snapshot,
    read_ts: u64,
    ignore: bool,
    prepared: &'a PreparedTable,
) -> ReadView<'a> {
    ReadView::snapshot(own, snap, Timestamp::new(read_ts), ignore, prepared)
}

/// A read-only fast-path view (`ReadAs::Stable`).
pub(crate) fn stable_view(
    stable: u64,
    complete_below: u64,
    ignore: bool,
    prepared: &PreparedTable,
) -> ReadView<'_> {
    ReadView::stable(0, Timestamp::new(stable), complete_below, ignore, prepared)
}

/// A horizon from its parts.
pub(crate) fn horizon(xmin: u64, ts: u64) -> Horizon {
    Horizon { xmin, ts }
}

impl Drop for Machine {
    /// Hands what the models' completions retired to the collector, as a
    /// session's close does (a model may leave its slots open).
    fn drop(&mut self) {
        for r in self.retired.iter() {
            let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
            self.machinery.flush_retired(&mut r);
        }
    }
}
