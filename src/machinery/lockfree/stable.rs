//! Handshakes 2 and 3 (`mod.rs`, `# Orderings`): commit claims and
//! prepared transactions' announced durable timestamps against the stable
//! timestamp, and `set_timestamps`, which moves oldest, stable and the
//! all-durable timestamp.

use super::LockFree;
use crate::config::TimestampUpdate;
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::machinery::rules::check_prepare_against_readers;
use crate::stats::Counters;
use crate::sync::{fence, mutant as m, mutant_on, spin_hint, Ordering};
use crate::ts::Timestamp;

impl LockFree {
    pub(super) fn claim_commit(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
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

    pub(super) fn release_claim(&self, slot: usize, durable: Timestamp) {
        if !durable.is_none() {
            self.record_durable(slot, durable);
        }
        // Release: pairs with the setter's Acquire load while it waits; the
        // commit (status flips, descriptor install) happens-before the
        // setter's Release store of the new stable.
        self.slots.get(slot).claim.store(0, Ordering::Release);
    }

    pub(super) fn claim_prepare(
        &self,
        slot: usize,
        ts: Timestamp,
        roundup: bool,
    ) -> Result<Timestamp> {
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

    pub(super) fn announce(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
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

    pub(super) fn release_prepare(&self, slot: usize) {
        let s = self.slots.get(slot);
        // Release: pairs with the setter's Acquire loads. Stronger than
        // needed: values the setter compares, not guards for data (the
        // resolution's status flips are published by their own Release
        // stores).
        s.prepared.store(0, Ordering::Release);
        s.announced.store(0, Ordering::Release);
    }

    pub(super) fn oldest_stable(&self) -> (Timestamp, Timestamp) {
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

    pub(super) fn set_timestamps(&self, u: &TimestampUpdate) -> Result<()> {
        let c = &self.clocks;
        let guard = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let cur_oldest = Timestamp::new(c.oldest.load(Ordering::Relaxed));
        let cur_stable = Timestamp::new(c.stable.load(Ordering::Relaxed));
        let (new_oldest, new_stable) = checked_update(u, cur_oldest, cur_stable)?;
        // Equivalent: `>=` (it redoes the wait and the store for an
        // unchanged stable, which is idempotent).
        if new_stable > cur_stable {
            self.raise_stable(new_stable)?;
        }
        if let Some(d) = u.durable {
            self.set_durable(d);
        }
        // Equivalent: `>=` (an unchanged oldest is stored again and the
        // horizon advanced once more; both idempotent).
        let oldest_moved = new_oldest > cur_oldest;
        if oldest_moved {
            // Release: pairs with the Acquire load in `advance_horizon`.
            // Stronger than needed, as said there: a compared value.
            c.oldest.store(new_oldest.get(), Ordering::Release);
        }
        drop(guard);
        if oldest_moved {
            self.advance_horizon(&Counters::default());
        }
        Ok(())
    }

    /// Raises stable to `new_stable` (under `admin`): the setter's side of
    /// handshakes 2 and 3. Refused, with the bound put back, while a
    /// prepared transaction's announced durable timestamp is at or below
    /// it; otherwise it waits for every commit claimed at or below it, then
    /// publishes it.
    fn raise_stable(&self, new_stable: Timestamp) -> Result<()> {
        let c = &self.clocks;
        let new_stable_raw = new_stable.get();
        let early = mutant_on(m::STABLE_BEFORE_WAIT);
        if early {
            c.stable.store(new_stable_raw, Ordering::Release);
        }
        let old_bound = c.stable_bound.load(Ordering::Relaxed);
        c.stable_bound.store(new_stable_raw, Ordering::Relaxed);
        // SeqCst fence: handshakes 2 and 3; pairs with the fences in
        // `claim_commit` and `announce`.
        fence(Ordering::SeqCst);
        for s in self.slots.iter() {
            // Acquire: pairs with the Release stores in `claim_prepare`
            // and `announce`. Stronger than needed: compared values,
            // ordered by the handshake-3 fence above.
            let p = s.prepared.load(Ordering::Acquire);
            let a = s.announced.load(Ordering::Acquire);
            if p != 0 && a != 0 && a <= new_stable_raw {
                c.stable_bound.store(old_bound, Ordering::Relaxed);
                return Err(Error::StablePastPreparedDurable {
                    stable: new_stable,
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
                if claim == 0 || claim > new_stable_raw {
                    break;
                }
                spin_hint();
            }
        }
        if !early {
            // Release: pairs with the Acquire load in `begin_at_stable`
            // and `oldest_stable`; every commit at or below it is done
            // (invariant 8).
            c.stable.store(new_stable_raw, Ordering::Release);
        }
        Ok(())
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

/// The oldest and stable timestamps `u` asks for (the current ones where
/// it gives none), checked: each in range (a durable timestamp in `u`
/// too), neither moving backwards, and oldest not after a set stable.
fn checked_update(
    u: &TimestampUpdate,
    cur_oldest: Timestamp,
    cur_stable: Timestamp,
) -> Result<(Timestamp, Timestamp)> {
    let new_oldest = match u.oldest {
        Some(o) => check_ts(TimestampRole::Oldest, o)?,
        None => cur_oldest,
    };
    let new_stable = match u.stable {
        Some(s) => check_ts(TimestampRole::Stable, s)?,
        None => cur_stable,
    };
    if let Some(d) = u.durable {
        check_ts(TimestampRole::GlobalDurable, d)?;
    }
    if new_oldest < cur_oldest {
        return Err(Error::TimestampMovedBackwards {
            role: TimestampRole::Oldest,
            requested: new_oldest,
            current: cur_oldest,
        });
    }
    if new_stable < cur_stable {
        return Err(Error::TimestampMovedBackwards {
            role: TimestampRole::Stable,
            requested: new_stable,
            current: cur_stable,
        });
    }
    if new_stable != Timestamp::NONE && new_oldest > new_stable {
        return Err(Error::OldestAfterStable {
            oldest: new_oldest,
            stable: new_stable,
        });
    }
    Ok((new_oldest, new_stable))
}
