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

use super::protocol::{
    check_prepare_against_readers, lowest_pins, read_ts_rule, report_timestamp, ProtocolImpl,
    SlotTimestamps, StableView,
};
use super::raw::descriptor::{DescriptorCell, SessionRetired};
use super::raw::durable::DurableCell;
use super::raw::reclaim::{Collector, RETIRE_BATCH};
use super::raw::slots::SlotTable;
use super::snapshot::Snapshot;
use super::version::Horizon;
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::stats::Counters;
use crate::sync::{
    fence, mutant as m, mutant_on, spin_hint, AtomicBool, AtomicU64, Fences, Mutex, Ordering,
};
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

/// Top two bits of a slot's `durable` word: its restart tag (timestamps
/// use the low 62).
const DURABLE_TAG: u64 = !Timestamp::MAX.get();

/// The lock-free snapshot machinery: the default for [`Engine`](crate::Engine).
pub struct LockFree {
    desc: CachePadded<DescriptorCell>,
    next_id: CachePadded<AtomicU64>,
    clocks: CachePadded<Clocks>,
    /// The global durable timestamp the application set last, with every
    /// slot's `durable` word as that set found it (`raw/durable.rs`). The
    /// reported one (`all_durable`, before unfinished commits hold it
    /// down) is the max of the set value and every word changed since: a
    /// commit raises only its own slot's word, so it pays no shared
    /// read-modify-write for it. Replaced by `set_timestamps` only.
    durable: DurableCell,
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
    /// Publishes `snap.xmin` as the session's pin and validates it against
    /// the floor (handshake 1); retakes a newer snapshot if the advancer got
    /// ahead.
    fn publish_xmin(&self, slot: usize, snap: &mut Snapshot, ctr: &Counters) {
        let s = self.slots.get(slot);
        loop {
            s.xmin.store(snap.xmin, Ordering::Relaxed);
            if !mutant_on(m::PIN_WITHOUT_FENCE) {
                // Light fence (a SeqCst fence, or a compiler fence with the
                // asymmetric pair): pairs with the advancer's heavy fence
                // between its floor store and its scan (handshake 1,
                // invariant 2).
                self.fences.light();
            }
            // Relaxed: ordered after our pin store by the fence above.
            let floor = self.clocks.floor_xmin.load(Ordering::Relaxed);
            if floor <= snap.xmin {
                return;
            }
            // The advancer may have passed our snapshot without seeing our
            // pin: take the current descriptor, whose xmin is at least the
            // floor (xmin never goes backwards), and publish again.
            self.desc.copy_into(&self.collector, snap);
            ctr.snapshot_rebuilt.bump(1);
        }
    }

    /// Hands a session's replaced descriptors to the collector.
    pub(super) fn flush_retired(&self, retired: &mut SessionRetired) {
        retired
            .batch()
            .flush(&self.collector, &self.collector.pin(), |_| {});
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

impl ProtocolImpl for LockFree {
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
            durable: DurableCell::new(config.max_sessions),
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

    fn begin_at_read_ts(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp> {
        // Handshake 1 for both pins at once: a lazy snapshot
        // taken with its read timestamp pays one store-fence-load, where
        // `begin` then `set_read_timestamp` pay two.
        let s = self.slots.get(slot);
        self.take_snapshot(snap, ctr);
        let mut r = ts.get();
        loop {
            let late = mutant_on(m::LAZY_PINS_AFTER_CHECK);
            if !late {
                s.xmin.store(snap.xmin, Ordering::Relaxed);
                s.read_ts.store(r, Ordering::Relaxed);
                // Light fence: pairs with the advancer's heavy fence between
                // its floor stores and its scan (handshake 1 for `xmin`
                // against `floor_xmin` and `read_ts` against `floor_ts`,
                // invariant 2; loom models `pin_horizon/at_read_ts`,
                // `read_ts_oldest`).
                self.fences.light();
            }
            // Relaxed: ordered after both pins by the fence above. The
            // timestamp floor is a copy of an earlier oldest, so max() also
            // covers a stale oldest (as in `set_read_timestamp`).
            let fx = self.clocks.floor_xmin.load(Ordering::Relaxed);
            let oldest = self.clocks.oldest.load(Ordering::Relaxed);
            let ft = self.clocks.floor_ts.load(Ordering::Relaxed);
            if late {
                s.xmin.store(snap.xmin, Ordering::Relaxed);
                s.read_ts.store(r, Ordering::Relaxed);
            }
            // `>`, as `publish_xmin`'s `floor <= xmin` passes: a snapshot at
            // the floor is protected by the floor itself.
            if fx > snap.xmin {
                // The advancer may have passed our snapshot without seeing
                // our pin: retake it (its xmin is at least the floor) and
                // publish both pins again.
                self.desc.copy_into(&self.collector, snap);
                ctr.snapshot_rebuilt.bump(1);
                continue;
            }
            match read_ts_rule(ts, r, oldest.max(ft), roundup) {
                Ok(v) if v == r => return Ok(Timestamp::new(r)),
                // Rounded up: publish the new timestamp and check again.
                Ok(v) => r = v,
                Err(e) => {
                    // Nothing stays published: the transaction has no
                    // snapshot yet and may set a valid read timestamp later.
                    s.clear_pins();
                    return Err(e);
                }
            }
        }
    }

    #[inline]
    fn refresh(&self, _slot: usize, snap: &mut Snapshot, ctr: &Counters) {
        // The new snapshot's xmin is at least the old one's, so the pin
        // published at begin still protects it (invariant 2).
        self.take_snapshot(snap, ctr);
    }

    fn set_read_timestamp(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp> {
        let s = self.slots.get(slot);
        let mut r = ts.get();
        loop {
            let late = mutant_on(m::READ_TS_PUBLISH_AFTER_CHECK);
            if !late {
                s.read_ts.store(r, Ordering::Relaxed);
                // Light fence: handshake 1 for timestamps; pairs with the
                // advancer's heavy fence after it stores `floor_ts`
                // (invariant 2).
                self.fences.light();
            }
            // Relaxed: ordered after the pin by the fence. The floor is a
            // copy of an earlier oldest, so max() also covers a stale oldest.
            let oldest = self.clocks.oldest.load(Ordering::Relaxed);
            let floor = self.clocks.floor_ts.load(Ordering::Relaxed);
            match read_ts_rule(ts, r, oldest.max(floor), roundup) {
                Ok(v) if v == r => {}
                // Rounded up: publish the new timestamp and check again.
                Ok(v) => {
                    r = v;
                    continue;
                }
                Err(e) => {
                    s.read_ts.store(0, Ordering::Relaxed);
                    return Err(e);
                }
            }
            if late {
                s.read_ts.store(r, Ordering::Relaxed);
            }
            break;
        }
        // A fresh snapshot is one load of the published generation (and a
        // copy only if a completion happened since begin).
        self.take_snapshot(snap, ctr);
        Ok(Timestamp::new(r))
    }

    fn begin_at_stable(&self, slot: usize, _ctr: &Counters) -> StableView {
        let s = self.slots.get(slot);
        loop {
            // Acquire: pairs with the Release store of `stable` in
            // `set_timestamps`, made after every commit at or below it
            // finished (invariant 8). Required with the asymmetric pair,
            // whose light fence below is only a compiler fence; loom runs
            // that fence as a SeqCst fence, which acquires for this load
            // too, so no model can show it.
            let stable = self.clocks.stable.load(Ordering::Acquire);
            // Acquire: pairs with the advancer's Release store of the floor;
            // transactions below it completed and their status flips are
            // visible. Required with the asymmetric pair, as for `stable`.
            let below = self.clocks.floor_xmin.load(Ordering::Acquire);
            let early = mutant_on(m::STABLE_VIEW_CHECKS_BEFORE_PINS);
            let (mut fx, mut ft) = (0, 0);
            if early {
                fx = self.clocks.floor_xmin.load(Ordering::Relaxed);
                ft = self.clocks.floor_ts.load(Ordering::Relaxed);
            }
            s.read_ts.store(stable, Ordering::Relaxed);
            s.xmin.store(below, Ordering::Relaxed);
            // Light fence: handshake 1, as in `publish_xmin` (loom model
            // `stable_view`). The loads above are Acquire themselves, so
            // nothing here leans on this fence as an acquire fence (which
            // the compiler fence of the asymmetric pair would not be).
            self.fences.light();
            if !early {
                // Relaxed: ordered after the pins by the fence above.
                fx = self.clocks.floor_xmin.load(Ordering::Relaxed);
                ft = self.clocks.floor_ts.load(Ordering::Relaxed);
            }
            // `stable == 0` (none set): no timestamp pin can protect this
            // view, and `ft <= 0` would never hold once oldest is set (this
            // loop used to spin forever); `Txn::begin` falls back to an
            // ordinary snapshot for it.
            if fx <= below && (ft <= stable || stable == 0) {
                return StableView {
                    stable,
                    complete_below: below,
                };
            }
        }
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

    fn claim_commit(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
        let s = self.slots.get(slot);
        s.claim.store(ts.get(), Ordering::Relaxed);
        // SeqCst fence: handshake 2; pairs with the setter's fence between
        // raising `stable_bound` and scanning claims (invariant 8).
        fence(Ordering::SeqCst);
        let bound = self.clocks.stable_bound.load(Ordering::Relaxed);
        if ts.get() <= bound {
            // Release: the clear every claim gets, paired with the setter's
            // Acquire load. Stronger than needed: a refused claim published
            // nothing (no status flip, no install) for that load to see.
            s.claim.store(0, Ordering::Release);
            return Err(not_after_stable(ts, bound, prepared));
        }
        Ok(())
    }

    fn complete(
        &self,
        _slot: usize,
        id: u64,
        keep: Option<&mut Snapshot>,
        retired: &mut SessionRetired,
        ctr: &Counters,
    ) {
        let retired = retired.batch();
        let cost = self.desc.complete(&self.collector, id, retired, keep);
        // Not a safety bound: a retired descriptor is unreachable whatever
        // the batch size, so `>` (batches of RETIRE_BATCH + 1) only changes
        // when it is freed.
        if retired.len() >= RETIRE_BATCH {
            retired.flush(&self.collector, &self.collector.pin(), |_| {});
        }
        ctr.descriptor_installs.bump(1);
        ctr.descriptor_cas_retries.bump(cost.cas_retries);
    }

    fn release_claim(&self, slot: usize, durable: Timestamp) {
        if !durable.is_none() {
            // The commit's share of the global durable timestamp, in this
            // slot's own word: loads and a plain store, no shared
            // read-modify-write. `query_timestamp` folds the words.
            // Relaxed throughout: `durable` is a report (all_durable), not a
            // guard for any data, and only this session writes its slot's
            // `durable` and `durable_seen`.
            let s = self.slots.get(slot);
            let d = durable.get();
            let resets = self.clocks.durable_resets.load(Ordering::Relaxed);
            let w = s.durable.load(Ordering::Relaxed);
            // The timestamp in the word, its restart tag masked off.
            let made = if mutant_on(m::DURABLE_COMPARE_KEEPS_TAG) {
                w
            } else {
                w & !DURABLE_TAG
            };
            let next = if s.durable_seen.load(Ordering::Relaxed) != resets {
                // The application set the global durable timestamp since
                // this word last restarted: what the slot made durable
                // before counts no more (it may have been set backwards).
                // A new tag makes the word differ from the one that set
                // captured even when `d` equals its value.
                s.durable_seen.store(resets, Ordering::Relaxed);
                let tag = if mutant_on(m::DURABLE_RESTART_KEEPS_TAG) {
                    w & DURABLE_TAG
                } else {
                    (w & DURABLE_TAG).wrapping_add(1 << 62)
                };
                tag | d
            } else if d > made {
                // Only a higher durable timestamp raises the word (a lower
                // one would lower what AllDurable reports: timestamp_rules
                // "a session's later commit at a lower timestamp"). `>=` is
                // equivalent: an equal value rebuilds the same word, and
                // `next != w` skips the store.
                (w & DURABLE_TAG) | d
            } else {
                w
            };
            if next != w {
                s.durable.store(next, Ordering::Relaxed);
            }
        }
        // Release: pairs with the setter's Acquire load while it waits; the
        // commit (status flips, descriptor install) happens-before the
        // setter's Release store of the new stable.
        self.slots.get(slot).claim.store(0, Ordering::Release);
    }

    fn claim_prepare(&self, slot: usize, ts: Timestamp, roundup: bool) -> Result<Timestamp> {
        let s = self.slots.get(slot);
        // Stronger than needed: `stable_bound` is stored Relaxed (handshakes
        // 2 and 3 order it with fences), so this Acquire pairs with nothing.
        // The check is not race-free and need not be: stable may pass a
        // prepare timestamp; what stable may not pass, the durable
        // timestamp, is checked race-free by `announce` and `claim_commit`.
        let stable = self.clocks.stable_bound.load(Ordering::Acquire);
        let mut p = ts.get();
        // `<=`: a prepare at stable is refused. The `claim_commit(p)` that
        // `Txn::prepare` takes next also checks it, race-free, so `<` here
        // is equivalent; kept because this is where the rounding up happens
        // and it refuses before anything is published.
        if p <= stable {
            if !roundup {
                return Err(Error::PrepareTimestampNotAfterStable {
                    prepare: ts,
                    stable: Timestamp::new(stable),
                });
            }
            p = stable + 1;
        }
        // "Not below any active read timestamp": checked against the pins we
        // can see. A reader publishing concurrently may miss the check; it
        // then meets the prepared update at or below its read timestamp and
        // gets PrepareConflict, never a wrong value.
        // Acquire: pairs with the Release pin clears. Stronger than needed:
        // a report, nothing is read through these loads.
        check_prepare_against_readers(
            slot,
            p,
            self.slots.iter().map(|o| o.read_ts.load(Ordering::Acquire)),
        )?;
        // Release: pairs with the setter's Acquire load of `prepared`.
        // Stronger than needed: the setter only compares the value, which
        // the fence in `announce` (handshake 3) orders.
        s.prepared.store(p, Ordering::Release);
        Ok(Timestamp::new(p))
    }

    fn announce(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
        let s = self.slots.get(slot);
        // Relaxed: only this session writes its slot's `announced`.
        let previous = s.announced.load(Ordering::Relaxed);
        s.announced.store(ts.get(), Ordering::Relaxed);
        if !mutant_on(m::ANNOUNCE_WITHOUT_FENCE) {
            // SeqCst fence: handshake 3; pairs with the setter's fence
            // between raising `stable_bound` and scanning announcements
            // (invariant 10; loom model `announce_stable`).
            fence(Ordering::SeqCst);
        }
        let bound = self.clocks.stable_bound.load(Ordering::Relaxed);
        if ts.get() <= bound {
            // A refused re-announcement keeps the earlier one in force (it
            // was validated, and every setter since saw it or this value).
            // Release: pairs with the setter's Acquire load. Stronger than
            // needed: a value the setter compares, not a guard for data.
            s.announced.store(previous, Ordering::Release);
            return Err(not_after_stable(ts, bound, prepared));
        }
        Ok(())
    }

    fn release_prepare(&self, slot: usize) {
        let s = self.slots.get(slot);
        // Release: pairs with the setter's Acquire loads. Stronger than
        // needed: values the setter compares, not guards for data (the
        // resolution's status flips are published by their own Release
        // stores).
        s.prepared.store(0, Ordering::Release);
        s.announced.store(0, Ordering::Release);
    }

    #[inline]
    fn horizon(&self) -> Horizon {
        Horizon {
            // Acquire: pairs with the advancer's Release stores. Stronger
            // than needed: the horizon's value is right with any ordering
            // (handshake 1's fences decide it); the edge only hands the
            // pruner the flips the advancer saw, and a pruner that sees a
            // status stale stops climbing there, so Relaxed only prunes
            // later.
            xmin: self.clocks.horizon_xmin.load(Ordering::Acquire),
            ts: self.clocks.horizon_ts.load(Ordering::Acquire),
        }
    }

    fn advance_horizon(&self, ctr: &Counters) {
        // Acquire: pairs with the previous advancer's Release clear in
        // `Advancing::drop`, so floors and horizons only move forward.
        // Required: without it an advancer need not see the previous one's
        // floors or descriptor and could store a lower floor (invariant 4,
        // then 1); loom, asked with two advancer threads, never produces
        // the stale load, so no model shows it.
        if self
            .advancing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        // Clears `advancing` on every exit, unwinding included: a panic
        // in here must not stop every later advance (and so all pruning).
        let _advancing = Advancing(&self.advancing);
        let c = &self.clocks;
        let fx = self
            .desc
            .xmin(&self.collector)
            .max(c.floor_xmin.load(Ordering::Relaxed));
        // Acquire: pairs with the Release store of oldest in
        // `set_timestamps`. With no oldest set, no timestamped version may
        // be discarded (ts floor 0). Stronger than needed: oldest is only
        // compared (a stale one gives a lower floor, and `set_timestamps`
        // advances after its own store).
        let ft = c
            .oldest
            .load(Ordering::Acquire)
            .max(c.floor_ts.load(Ordering::Relaxed));
        // Release: a reader that acquires the floor sees the completions
        // below it (used by the read-only fast path).
        c.floor_xmin.store(fx, Ordering::Release);
        // Before the fence, as `floor_xmin`: handshake 1 for timestamps.
        // Required before the fence: `begin_at_stable` validates against
        // this floor alone (`set_read_timestamp` also checks `oldest`,
        // stored before the advance began); the interleaving that needs it
        // takes more preemptions than the bounded loom run explores.
        // Release: pairs with the readers' loads of the floor. Stronger
        // than needed: readers only compare it, and the fences order it.
        c.floor_ts.store(ft, Ordering::Release);
        if !mutant_on(m::SCAN_WITHOUT_FENCE) && !mutant_on(m::ADVANCE_LIGHT_FENCE) {
            // Heavy fence (a SeqCst fence, plus a membarrier with the
            // asymmetric pair): handshake 1; pairs with the readers' light
            // fences between publishing a pin and loading the floor
            // (invariant 2). The mutant drops the whole heavy side.
            self.fences.heavy();
        }
        if mutant_on(m::ADVANCE_LIGHT_FENCE) {
            self.fences.light();
        }
        let (hx, ht) = lowest_pins(
            (fx, ft),
            self.slots.iter().map(|s| {
                // Relaxed: ordered after the floor stores by the fence.
                (
                    s.xmin.load(Ordering::Relaxed),
                    s.read_ts.load(Ordering::Relaxed),
                )
            }),
        );
        // A pin below the previous horizon is legal here: a reader that
        // stored it after an earlier scan and has not validated it yet. It
        // will see a floor at least that horizon, fail validation and retake
        // its snapshot (or its read timestamp is refused or rounded up), so
        // the pin protects nothing and must not pull the horizon back:
        // max() keeps the horizon monotonic (invariant 4). Every *validated*
        // pin is at or above the horizon (invariant 1). Loom model
        // `pin_horizon/two_advances` runs this interleaving.
        let hx = hx.max(c.horizon_xmin.load(Ordering::Relaxed));
        let ht = ht.max(c.horizon_ts.load(Ordering::Relaxed));
        // Release: pairs with the Acquire loads in `horizon`. Stronger than
        // needed, as said there.
        c.horizon_xmin.store(hx, Ordering::Release);
        c.horizon_ts.store(ht, Ordering::Release);
        ctr.horizon_advances.bump(1);
    }

    fn oldest_stable(&self) -> (Timestamp, Timestamp) {
        // Acquire: pairs with the Release stores in `set_timestamps`.
        // Stronger than needed: oldest is only compared (`Txn` checks; an
        // Acquire does not make it fresher). Stable also bounds how far
        // pruning moves the finger, which climbs only over versions whose
        // committed status it loads itself; the read at stable that
        // invariant 8 guards loads stable in `begin_at_stable`.
        (
            Timestamp::new(self.clocks.oldest.load(Ordering::Acquire)),
            Timestamp::new(self.clocks.stable.load(Ordering::Acquire)),
        )
    }

    fn set_timestamps(&self, u: &TimestampUpdate) -> Result<()> {
        let c = &self.clocks;
        let guard = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let cur_oldest = c.oldest.load(Ordering::Relaxed);
        let cur_stable = c.stable.load(Ordering::Relaxed);
        let new_oldest = match u.oldest {
            Some(o) => check_ts(TimestampRole::Oldest, o)?.get(),
            None => cur_oldest,
        };
        let new_stable = match u.stable {
            Some(s) => check_ts(TimestampRole::Stable, s)?.get(),
            None => cur_stable,
        };
        if let Some(d) = u.durable {
            check_ts(TimestampRole::GlobalDurable, d)?;
        }
        if new_oldest < cur_oldest {
            return Err(Error::TimestampMovedBackwards {
                role: TimestampRole::Oldest,
                requested: Timestamp::new(new_oldest),
                current: Timestamp::new(cur_oldest),
            });
        }
        if new_stable < cur_stable {
            return Err(Error::TimestampMovedBackwards {
                role: TimestampRole::Stable,
                requested: Timestamp::new(new_stable),
                current: Timestamp::new(cur_stable),
            });
        }
        if new_stable != 0 && new_oldest > new_stable {
            return Err(Error::OldestAfterStable {
                oldest: Timestamp::new(new_oldest),
                stable: Timestamp::new(new_stable),
            });
        }
        // Equivalent: `>=` (it redoes the wait and the store for an
        // unchanged stable, which is idempotent).
        if new_stable > cur_stable {
            let early = mutant_on(m::STABLE_BEFORE_WAIT);
            if early {
                c.stable.store(new_stable, Ordering::Release);
            }
            let old_bound = c.stable_bound.load(Ordering::Relaxed);
            c.stable_bound.store(new_stable, Ordering::Relaxed);
            // SeqCst fence: handshakes 2 and 3; pairs with the fences in
            // `claim_commit` and `announce`.
            fence(Ordering::SeqCst);
            for s in self.slots.iter() {
                // Acquire: pairs with the Release stores in `claim_prepare`
                // and `announce`. Stronger than needed: compared values,
                // ordered by the handshake-3 fence above.
                let p = s.prepared.load(Ordering::Acquire);
                let a = s.announced.load(Ordering::Acquire);
                if p != 0 && a != 0 && a <= new_stable {
                    c.stable_bound.store(old_bound, Ordering::Relaxed);
                    return Err(Error::StablePastPreparedDurable {
                        stable: Timestamp::new(new_stable),
                        durable: Timestamp::new(a),
                    });
                }
            }
            for s in self.slots.iter() {
                loop {
                    // Acquire: pairs with the Release clear in
                    // `release_claim`: the commit is fully installed, and
                    // the install happens-before our Release store of
                    // stable (invariant 8). Required: a reader at the new
                    // stable must see the commit; loom does not give the
                    // model's reader the stale generation or status word
                    // this would allow, so no model shows it.
                    let claim = s.claim.load(Ordering::Acquire);
                    if claim == 0 || claim > new_stable {
                        break;
                    }
                    spin_hint();
                }
            }
            if !early {
                // Release: pairs with the Acquire load in `begin_at_stable`
                // and `oldest_stable`; every commit at or below it is done
                // (invariant 8).
                c.stable.store(new_stable, Ordering::Release);
            }
        }
        if let Some(d) = u.durable {
            // The global durable timestamp may move backwards, as in
            // WiredTiger (invariant 4's exception): commits made before this
            // set stop counting. Record the value with every slot's word as
            // found now, then bump the reset count that makes later commits
            // restart their words. A commit racing this set either leaves
            // its word as recorded (it counts as made before the set) or
            // changes it (made after); both orders are allowed for a commit
            // concurrent with the set. Relaxed word loads: a report, each
            // word written by its owner only; the `admin` lock serializes
            // sets (`bump`: this is the count's only writer).
            self.durable.set(
                &self.collector,
                d.get(),
                self.slots.iter().map(|s| s.durable.load(Ordering::Relaxed)),
            );
            c.durable_resets.bump(1);
        }
        // Equivalent: `>=` (an unchanged oldest is stored again and the
        // horizon advanced once more; both idempotent).
        let oldest_moved = new_oldest > cur_oldest;
        if oldest_moved {
            // Release: pairs with the Acquire load in `advance_horizon`.
            // Stronger than needed, as said there: a compared value.
            c.oldest.store(new_oldest, Ordering::Release);
        }
        drop(guard);
        if oldest_moved {
            self.advance_horizon(&Counters::default());
        }
        Ok(())
    }

    fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        let c = &self.clocks;
        let durable = if kind == TimestampKind::AllDurable {
            // No lock: the set's value and words come as one record. Relaxed
            // word loads: a report, each word written by its owner's commits
            // only; a commit that returned before this query is ordered
            // before it by whatever told the caller so (coherence does the
            // rest).
            self.durable.report(
                &self.collector,
                self.slots.iter().map(|s| s.durable.load(Ordering::Relaxed)),
                DURABLE_TAG,
            )
        } else {
            0
        };
        // Acquire loads: each pairs with the Release store that set the value
        // (set_timestamps, release_claim, announce). Stronger than needed:
        // a report, nothing is read through them.
        report_timestamp(
            kind,
            c.oldest.load(Ordering::Acquire),
            c.stable.load(Ordering::Acquire),
            durable,
            self.slots.iter().map(|s| SlotTimestamps {
                read_ts: s.read_ts.load(Ordering::Acquire),
                claim: s.claim.load(Ordering::Acquire),
                announced: s.announced.load(Ordering::Acquire),
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

/// Clears the advancer flag when dropped (`advance_horizon`).
struct Advancing<'a>(&'a AtomicBool);

impl Drop for Advancing<'_> {
    fn drop(&mut self) {
        // Release: pairs with the next advancer's Acquire CAS, so the floors
        // and horizons it reads are at least ours. Required, as that CAS is
        // (see `advance_horizon`).
        self.0.store(false, Ordering::Release);
    }
}

/// The error for a commit (or, for a prepared transaction, durable)
/// timestamp at or below the stable bound.
fn not_after_stable(ts: Timestamp, bound: u64, prepared: bool) -> Error {
    let stable = Timestamp::new(bound);
    if prepared {
        Error::DurableTimestampNotAfterStable {
            durable: ts,
            stable,
        }
    } else {
        Error::CommitTimestampNotAfterStable { commit: ts, stable }
    }
}

/// Which side of handshake 1's fence pair each call site issues. Loom runs
/// the light and the heavy fence as the same SeqCst fence, so it cannot
/// tell a call site that issues the wrong one; these count the fences (and
/// membarriers) the calls issue on this thread (`sync::fence_count`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{fence_count, mutant};

    fn machinery(asymmetric_fences: bool) -> LockFree {
        LockFree::new(&EngineConfig {
            max_sessions: 2,
            asymmetric_fences,
            ..EngineConfig::default()
        })
    }

    /// `(light, heavy, membarrier)` issued by `f` on this thread.
    fn fences_of(f: impl FnOnce()) -> (u64, u64, u64) {
        let a = fence_count::now();
        f();
        let b = fence_count::now();
        (b.0 - a.0, b.1 - a.1, b.2 - a.2)
    }

    /// Turns the thread's mutant off again, also when the twin unwinds.
    struct Reset;

    impl Drop for Reset {
        fn drop(&mut self) {
            mutant::set_for_thread(mutant::NONE);
        }
    }

    /// One advance issues exactly one heavy fence and no light one, on both
    /// pairs; on the asymmetric pair the heavy fence is one membarrier.
    fn check_advance() {
        for asymmetric in [true, false] {
            let lf = machinery(asymmetric);
            let membarriers = u64::from(lf.fences.is_asymmetric());
            let got = fences_of(|| lf.advance_horizon(&Counters::default()));
            assert_eq!(
                got,
                (0, 1, membarriers),
                "advance_horizon issued (light, heavy, membarrier) = {got:?}, not one heavy \
                 fence (asymmetric pair: {})",
                lf.fences.is_asymmetric()
            );
        }
    }

    #[test]
    fn an_advance_issues_one_heavy_fence() {
        check_advance();
    }

    #[test]
    #[should_panic(expected = "advance_horizon issued (light, heavy, membarrier) = (1, 0, 0)")]
    fn mutant_advance_light_fence() {
        let _reset = Reset;
        mutant::set_for_thread(mutant::ADVANCE_LIGHT_FENCE);
        check_advance();
    }

    /// Every way a reader publishes a pin issues exactly one light fence
    /// and no heavy one (a heavy fence there would be correct, but a
    /// membarrier per snapshot on the asymmetric pair).
    #[test]
    fn a_pin_publication_issues_one_light_fence() {
        for asymmetric in [true, false] {
            let lf = machinery(asymmetric);
            let ctr = Counters::default();
            let slot = lf.open_session().unwrap();
            let mut snap = Snapshot::default();
            let ts = Timestamp::new;
            type Call<'a> = &'a dyn Fn(&mut Snapshot);
            let calls: [(&str, Call<'_>); 4] = [
                ("begin", &|snap| lf.begin(slot, snap, &ctr)),
                ("set_read_timestamp", &|snap| {
                    lf.set_read_timestamp(slot, snap, ts(7), false, &ctr)
                        .unwrap();
                }),
                ("begin_at_read_ts", &|snap| {
                    lf.begin_at_read_ts(slot, snap, ts(7), false, &ctr).unwrap();
                }),
                ("begin_at_stable", &|_| {
                    lf.begin_at_stable(slot, &ctr);
                }),
            ];
            for (name, call) in calls {
                let got = fences_of(|| call(&mut snap));
                lf.end(slot);
                assert_eq!(
                    got,
                    (1, 0, 0),
                    "{name} issued (light, heavy, membarrier) = {got:?}, not one light fence"
                );
            }
            lf.close_session(slot, &mut SessionRetired::default());
        }
    }
}
