//! The all-durable timestamp without a shared read-modify-write per
//! commit: a commit raises only its own slot's `durable` word
//! (`record_durable`); a set records the application's value with every
//! slot's word as found then, and bumps `durable_resets`, which makes later
//! commits restart their words (`set_durable`); the report is the max of
//! the set value and every word changed since (`all_durable_report`,
//! `raw/all_durable.rs`), before unfinished commits hold `all_durable` down.

use super::LockFree;
use crate::sync::{mutant as m, mutant_on, Ordering};
use crate::ts::Timestamp;

/// Top two bits of a slot's `durable` word: its restart tag (timestamps
/// use the low 62).
const DURABLE_TAG: u64 = !Timestamp::MAX.get();

impl LockFree {
    /// Counts a commit's durable timestamp in its slot's word
    /// (`release_claim`).
    pub(super) fn record_durable(&self, slot: usize, durable: Timestamp) {
        // The commit's share of the all-durable timestamp, in this
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
        let made = if mutant_on(m::ALL_DURABLE_COMPARE_KEEPS_TAG) {
            w
        } else {
            w & !DURABLE_TAG
        };
        let next = if s.durable_seen.load(Ordering::Relaxed) != resets {
            // The application set the all-durable timestamp since
            // this word last restarted: what the slot made durable
            // before counts no more (it may have been set backwards).
            // A new tag makes the word differ from the one that set
            // captured even when `d` equals its value.
            s.durable_seen.store(resets, Ordering::Relaxed);
            let tag = if mutant_on(m::ALL_DURABLE_RESTART_KEEPS_TAG) {
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

    /// Records the all-durable timestamp the application set
    /// (`set_timestamps`, under `admin`).
    pub(super) fn set_durable(&self, d: Timestamp) {
        // The all-durable timestamp may move backwards, as in
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
        self.clocks.durable_resets.bump(1);
    }

    /// The all-durable timestamp as set, raised by every commit counted
    /// since (`query_timestamp`).
    pub(super) fn all_durable_report(&self) -> u64 {
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
    }
}
