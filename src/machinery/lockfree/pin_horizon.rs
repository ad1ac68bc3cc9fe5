//! Handshake 1 (`mod.rs`, `# Orderings`): a reader's pins (snapshot
//! xmin and read timestamp) against the floors and the horizon the
//! advancer publishes. The readers' side (`publish_xmin`,
//! `begin_at_read_ts`, `set_read_timestamp`, `begin_at_stable`) issues the
//! light fence of `sync::Fences`, the advancer's side (`advance_horizon`)
//! the heavy one.

use super::LockFree;
use crate::error::Result;
use crate::machinery::rules::{lowest_pins, read_ts_rule, StableView};
use crate::machinery::snapshot::Snapshot;
use crate::machinery::version::Horizon;
use crate::stats::Counters;
use crate::sync::{mutant as m, mutant_on, AtomicBool, Ordering};
use crate::ts::Timestamp;

impl LockFree {
    /// Publishes `snap.xmin` as the session's pin and validates it against
    /// the floor (handshake 1); retakes a newer snapshot if the advancer got
    /// ahead.
    pub(super) fn publish_xmin(&self, slot: usize, snap: &mut Snapshot, ctr: &Counters) {
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

    /// Inline: the first pass of its loop is a lazy reader's whole
    /// begin at a read timestamp (a call would cost its register saves
    /// and the `Result` through memory).
    #[inline]
    pub(super) fn begin_at_read_ts(
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

    pub(super) fn set_read_timestamp(
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

    pub(super) fn begin_at_stable(&self, slot: usize, _ctr: &Counters) -> StableView {
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
                    stable: Timestamp::new(stable),
                    complete_below: below,
                };
            }
        }
    }

    #[inline]
    pub(super) fn horizon(&self) -> Horizon {
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

    pub(super) fn advance_horizon(&self, ctr: &Counters) {
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

/// Which side of handshake 1's fence pair each call site issues. Loom runs
/// the light and the heavy fence as the same SeqCst fence, so it cannot
/// tell a call site that issues the wrong one; these count the fences (and
/// membarriers) the calls issue on this thread (`sync::fence_count`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::EngineConfig;
    use crate::machinery::raw::descriptor::SessionRetired;
    use crate::machinery::rules::MachineryImpl;
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
