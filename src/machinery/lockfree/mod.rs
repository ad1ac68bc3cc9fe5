//! The lock-free snapshot machinery: no lock and no scan of the session
//! table on any reader or writer path.
//!
//! * Snapshots: one Acquire load of the published generation; when it has
//!   not changed the session reuses its cached copy, otherwise it copies the
//!   current descriptor under a pin (`raw/descriptor.rs`).
//! * Completions derive the next descriptor and CAS it in; nobody scans the
//!   session table to take a snapshot.
//! * Pins: each session publishes its snapshot xmin and read timestamp in its
//!   own slot (`raw/slots.rs`) and validates them against the floors the
//!   horizon advancer publishes.
//!
//! # Orderings
//!
//! Three store-fence-load handshakes, each written with a fence on both
//! sides (loom models SeqCst accesses as AcqRel but models fences
//! correctly, so a handshake checked by loom must use fences). Handshakes 2 and 3 use `fence(SeqCst)`;
//! handshake 1 uses the pair in `sync::Fences`: the readers' light fence (a
//! compiler fence when the engine asked for the asymmetric pair, off by
//! default, and the process registered for
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`; else `fence(SeqCst)`)
//! and the advancer's heavy fence (`fence(SeqCst)`, then the membarrier in
//! that mode). DESIGN.md "Slots and the three handshakes" gives the argument.
//!
//! 1. **Snapshot pin versus horizon** (invariants 1, 2). Reader: store
//!    `slot.xmin`, light fence, load `floor_xmin`. Advancer: store
//!    `floor_xmin`, heavy fence, load every `slot.xmin`. Either the
//!    advancer's scan sees the pin (and the horizon stays at or below it) or
//!    the reader sees the new floor (and retakes a newer snapshot, whose
//!    xmin is at least the floor); never neither. The same handshake covers `slot.read_ts` against
//!    `floor_ts`.
//! 2. **Commit timestamp versus stable** (invariant 8). Committer: store
//!    `slot.claim`, fence, load `stable_bound`. Stable setter: store
//!    `stable_bound`, fence, load every `slot.claim`, wait for claims at or
//!    below the new stable, then store `stable` with Release. Either the
//!    setter sees the claim and waits for the commit to finish, or the
//!    committer sees the bound and refuses its timestamp.
//! 3. **Announced prepared durable timestamp versus stable** (invariant
//!    10): the same shape as 2, but the setter refuses instead of waiting.
//!
//! Handshake 1 lives in `pin_horizon.rs`, handshakes 2 and 3 and the
//! timestamp setter in `stable.rs`, the all-durable timestamp's
//! per-slot words in `all_durable.rs`; this file holds the shared state and
//! the snapshot, session and descriptor steps that need no handshake.

mod all_durable;
mod pin_horizon;
mod stable;

use super::raw::all_durable::AllDurableCell;
use super::raw::descriptor::{DescriptorCell, SessionRetired};
use super::raw::reclaim::{Collector, RETIRE_BATCH};
use super::raw::slots::SlotTable;
use super::rules::{report_timestamp, MachineryImpl, SlotTimestamps, StableView};
use super::snapshot::Snapshot;
use super::version::Horizon;
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate};
use crate::error::{Error, Result};
use crate::stats::Counters;
use crate::sync::{AtomicBool, AtomicU64, Fences, Mutex, Ordering};
use crate::ts::Timestamp;
use crossbeam_utils::CachePadded;

/// Global timestamps and the floors readers validate against. Read-mostly:
/// written by the timestamp setter and the horizon advancer only.
struct Clocks {
    oldest: AtomicU64,
    stable: AtomicU64,
    /// The value committers check against: raised before `stable`, after
    /// which the setter waits for claims at or below it.
    stable_bound: AtomicU64,
    /// Published by the horizon advancer before its scan: no horizon
    /// computed after a reader saw `floor_xmin <= pin` passes the pin.
    floor_xmin: AtomicU64,
    floor_ts: AtomicU64,
    horizon_xmin: AtomicU64,
    horizon_ts: AtomicU64,
    /// How many times the application has set the global durable
    /// timestamp. Written by `set_timestamps` (under `admin`), loaded by
    /// every commit with a durable timestamp, which restarts its slot's
    /// `durable` word when the count moved. Here because
    /// committers already load `stable_bound` from this line.
    durable_resets: AtomicU64,
}

/// The lock-free snapshot machinery: the default for [`Engine`](crate::Engine).
pub struct LockFree {
    desc: CachePadded<DescriptorCell>,
    next_id: CachePadded<AtomicU64>,
    clocks: CachePadded<Clocks>,
    /// The all-durable timestamp the application set last, with every
    /// slot's `durable` word as that set found it (`raw/all_durable.rs`). The
    /// reported one (`all_durable`, before unfinished commits hold it
    /// down) is the max of the set value and every word changed since: a
    /// commit raises only its own slot's word, so it pays no shared
    /// read-modify-write for it. Replaced by `set_timestamps` only.
    durable: AllDurableCell,
    advancing: AtomicBool,
    /// Handshake 1's fence pair (`sync::Fences`): the readers' light fence
    /// and the advancer's heavy one. Decided at construction, never changed.
    fences: Fences,
    /// Serializes `set_timestamps` callers (the timekeeper); readers and
    /// writers never touch it.
    admin: Mutex<()>,
    slots: SlotTable,
    collector: Collector,
}

impl LockFree {
    /// Hands a session's replaced descriptors to the collector (which
    /// passes them on for reuse once no guard can reach them).
    pub(super) fn flush_retired(&self, retired: &mut SessionRetired) {
        self.desc.retire(&self.collector, retired);
    }

    /// Takes the current snapshot into `snap`, reusing the cached copy when
    /// the published generation has not changed (invariant 5).
    #[inline]
    fn take_snapshot(&self, snap: &mut Snapshot, ctr: &Counters) {
        if self.desc.published_generation() == snap.generation {
            ctr.snapshot_reused.bump(1);
        } else {
            self.desc.copy_into(&self.collector, snap);
            ctr.snapshot_rebuilt.bump(1);
        }
    }
}

// The handshakes' steps are inherent methods of the same names in the file
// of their handshake (`pin_horizon.rs`, `stable.rs`): an inherent method
// takes precedence over the trait's, so `LockFree::name(self, ..)` below
// calls it.
#[cfg(test)]
thread_local! {
    /// The retire batches this thread's completions handed to the
    /// collector themselves (`complete`): a unit test counts them.
    pub(crate) static COMPLETION_FLUSHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl MachineryImpl for LockFree {
    fn new(config: &EngineConfig) -> Self {
        LockFree {
            desc: CachePadded::new(DescriptorCell::new()),
            next_id: CachePadded::new(AtomicU64::new(1)),
            clocks: CachePadded::new(Clocks {
                oldest: AtomicU64::new(0),
                stable: AtomicU64::new(0),
                stable_bound: AtomicU64::new(0),
                floor_xmin: AtomicU64::new(1),
                floor_ts: AtomicU64::new(0),
                horizon_xmin: AtomicU64::new(1),
                horizon_ts: AtomicU64::new(0),
                durable_resets: AtomicU64::new(0),
            }),
            durable: AllDurableCell::new(config.max_sessions),
            advancing: AtomicBool::new(false),
            fences: Fences::new(config.asymmetric_fences),
            admin: Mutex::new(()),
            slots: SlotTable::new(config.max_sessions),
            collector: Collector::new(),
        }
    }

    fn open_session(&self) -> Result<usize> {
        self.slots.claim().ok_or(Error::SessionTableFull {
            max_sessions: self.slots.len(),
        })
    }

    fn close_session(&self, slot: usize, retired: &mut SessionRetired) {
        self.flush_retired(retired);
        self.slots.release(slot);
    }

    #[inline]
    fn begin(&self, slot: usize, snap: &mut Snapshot, ctr: &Counters) {
        self.take_snapshot(snap, ctr);
        self.publish_xmin(slot, snap, ctr);
    }

    #[inline]
    fn begin_at_read_ts(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp> {
        LockFree::begin_at_read_ts(self, slot, snap, ts, roundup, ctr)
    }

    #[inline]
    fn refresh(&self, _slot: usize, snap: &mut Snapshot, ctr: &Counters) {
        // The new snapshot's xmin is at least the old one's, so the pin
        // published at begin still protects it (invariant 2).
        self.take_snapshot(snap, ctr);
    }

    #[inline]
    fn set_read_timestamp(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp> {
        LockFree::set_read_timestamp(self, slot, snap, ts, roundup, ctr)
    }

    #[inline]
    fn begin_at_stable(&self, slot: usize, ctr: &Counters) -> StableView {
        LockFree::begin_at_stable(self, slot, ctr)
    }

    #[inline]
    fn end(&self, slot: usize) {
        self.slots.get(slot).clear_pins();
    }

    #[inline]
    fn allocate_id(&self, _slot: usize) -> u64 {
        // Relaxed: ids only need to be unique; visibility of the writer's
        // versions is decided by the descriptor, not by the id counter.
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    #[inline]
    fn claim_commit(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
        LockFree::claim_commit(self, slot, ts, prepared)
    }

    fn complete(
        &self,
        _slot: usize,
        id: u64,
        keep: Option<&mut Snapshot>,
        retired: &mut SessionRetired,
        ctr: &Counters,
    ) {
        let cost = self.desc.complete(&self.collector, id, retired, keep);
        // Not a safety bound: a retired descriptor is unreachable whatever
        // the batch size, so `>` (batches of RETIRE_BATCH + 1) only changes
        // when it is reused.
        if retired.batch().len() >= RETIRE_BATCH {
            #[cfg(test)]
            COMPLETION_FLUSHES.with(|n| n.set(n.get() + 1));
            self.flush_retired(retired);
            // The next completions' descriptors: a batch replaced earlier
            // whose grace period has passed, if there is one.
            self.desc.refill(retired);
        }
        ctr.descriptor_installs.bump(1);
        ctr.descriptor_cas_retries.bump(cost.cas_retries);
    }

    fn make_room(&self, retired: &mut SessionRetired) {
        // A completion pushes one descriptor and flushes a batch that
        // reaches RETIRE_BATCH (`complete`): flushing one that would reach
        // it leaves that completion nothing to hand on. Not a safety bound.
        if retired.batch().len() + 1 >= RETIRE_BATCH {
            self.flush_retired(retired);
            self.desc.refill(retired);
        }
        // And the descriptor it installs is readied now (reused, or
        // allocated), not under the caller's lock.
        retired.ready_spare();
    }

    #[inline]
    fn release_claim(&self, slot: usize, durable: Timestamp) {
        LockFree::release_claim(self, slot, durable)
    }

    #[inline]
    fn claim_prepare(&self, slot: usize, ts: Timestamp, roundup: bool) -> Result<Timestamp> {
        LockFree::claim_prepare(self, slot, ts, roundup)
    }

    #[inline]
    fn announce(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
        LockFree::announce(self, slot, ts, prepared)
    }

    #[inline]
    fn release_prepare(&self, slot: usize) {
        LockFree::release_prepare(self, slot)
    }

    #[inline]
    fn horizon(&self) -> Horizon {
        LockFree::horizon(self)
    }

    #[inline]
    fn advance_horizon(&self, ctr: &Counters) {
        LockFree::advance_horizon(self, ctr)
    }

    #[inline]
    fn oldest_stable(&self) -> (Timestamp, Timestamp) {
        LockFree::oldest_stable(self)
    }

    #[inline]
    fn set_timestamps(&self, u: &TimestampUpdate) -> Result<()> {
        LockFree::set_timestamps(self, u)
    }

    fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        let c = &self.clocks;
        let durable = if kind == TimestampKind::AllDurable {
            Timestamp::new(self.all_durable_report())
        } else {
            Timestamp::NONE
        };
        // Acquire loads: each pairs with the Release store that set the value
        // (set_timestamps, release_claim, announce). Stronger than needed:
        // a report, nothing is read through them.
        report_timestamp(
            kind,
            Timestamp::new(c.oldest.load(Ordering::Acquire)),
            Timestamp::new(c.stable.load(Ordering::Acquire)),
            durable,
            self.slots.iter().map(|s| SlotTimestamps {
                read_ts: Timestamp::new(s.read_ts.load(Ordering::Acquire)),
                claim: Timestamp::new(s.claim.load(Ordering::Acquire)),
                announced: Timestamp::new(s.announced.load(Ordering::Acquire)),
            }),
        )
    }

    fn current_xmin(&self) -> u64 {
        self.desc.xmin(&self.collector)
    }

    fn sessions_open(&self) -> usize {
        (0..self.slots.len())
            .filter(|&i| self.slots.in_use(i))
            .count()
    }

    fn asymmetric_fences(&self) -> bool {
        self.fences.is_asymmetric()
    }

    fn pins(&self) -> Vec<(usize, u64, u64)> {
        (0..self.slots.len())
            .filter(|&i| self.slots.in_use(i))
            .map(|i| {
                let s = self.slots.get(i);
                // Acquire: pairs with the Release pin clears. Stronger than
                // needed: a report (`Engine::pins`), nothing is read through
                // these loads.
                (
                    i,
                    s.xmin.load(Ordering::Acquire),
                    s.read_ts.load(Ordering::Acquire),
                )
            })
            .collect()
    }
}
