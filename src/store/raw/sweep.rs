//! The stable sweep (DESIGN.md, "Version chains and the index", Finger):
//! fingers moved up once the stable timestamp passes a commit, not only
//! when the key is next written.
//!
//! A key's finger is moved up to stable by each prune of the key, and a
//! committer prunes the keys it wrote with the stable of that moment. A key
//! not written again keeps that finger while stable moves on, so a read at
//! a later stable climbs from it past every version stable has passed
//! since. So, with `EngineConfig::stable_sweep`, each session keeps the
//! default-table keys its timestamped commits wrote above the stable they
//! were pruned to ([`Item`], 16 bytes, in commit order), and each of its
//! later commits, after pruning its own keys, prunes again the oldest of
//! them that stable has passed since ([`Sweep::run`]: [`KeyEntry::cut`](super::chain::KeyEntry::cut) moves
//! the finger up to stable and refreshes the hint under the key's pruning
//! lock, invariants 13 and 18) and refreshes their slots' hints. A read at
//! stable then starts at its own version, which the slot prefetches beside
//! the node. A key whose noted commit is still its newest is passed over:
//! a read at stable takes its head.
//!
//! Nothing here is new to readers: it is one more prune by a committer, of
//! a key it wrote. The work is the committers' (hence off by default):
//! about one more prune of a cold key per write. A commit sweeps
//! [`PER_WRITE`] keys per key it wrote, rounded up to a group of
//! [`GROUP`] whose misses overlap, so a backlog drains without one commit
//! paying for it. A session keeps at most [`CAP`] items (past it, new ones
//! are not kept: those keys keep their older fingers, as without the
//! sweep). Its items are dropped with it.

use super::chain::{KeyEntry, Tails};
use super::hashindex::SlotAt;
use super::index::{Index, KeyRef};
use crate::machinery::epoch::Guard;
use crate::machinery::Horizon;
use std::collections::VecDeque;

/// Items a session keeps at most: 16 MiB of 16-byte items.
pub(crate) const CAP: usize = 1 << 20;

/// Keys a commit sweeps at most per key it wrote (more than one, so a
/// backlog drains), in groups of [`GROUP`].
pub(crate) const PER_WRITE: usize = 2;

/// Keys one group of a sweep prunes, their misses overlapped.
const GROUP: usize = 8;

/// One key a timestamped commit wrote, and that commit's timestamp.
#[derive(Clone, Copy, Debug)]
struct Item {
    key: KeyRef,
    cts: u64,
}

impl Item {
    /// A group's unused place.
    const NONE: Item = Item {
        key: KeyRef::NONE,
        cts: 0,
    };
}

/// One session's keys waiting for stable to pass their commits. Every
/// item names a key of the store's default index: the only index
/// [`Sweep::run`] is given and the only one [`Sweep::note`] is told of
/// (the write set's contract), whose nodes live as long as the store.
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    items: VecDeque<Item>,
}

impl Sweep {
    /// Keeps key `key` (of the store's default index), committed at `cts`
    /// above the stable it was pruned to; nothing past [`CAP`].
    #[inline]
    pub(crate) fn note(&mut self, key: KeyRef, cts: u64) {
        // Equivalent mutant (`<=`: one item more kept at the cap).
        if self.items.len() < CAP {
            self.items.push_back(Item { key, cts });
        }
    }

    /// Prunes (to `horizon`, moving the finger up to `stable`) the oldest
    /// kept keys whose commits are at or below `stable`, at most `budget`
    /// of them (rounded up to a [`GROUP`]), handing cut tails to `tails`
    /// and refreshing each key's slot hints. Keys go in groups whose cache
    /// misses overlap: every node, then every floor, finger and home slot,
    /// then the versions above floor and finger are requested before the
    /// first prune. Returns the pruning's work.
    ///
    /// # Safety
    /// `index` is the store's default index, whose keys every `note` named.
    pub(crate) unsafe fn run(
        &mut self,
        index: &Index,
        horizon: Horizon,
        stable: u64,
        budget: usize,
        tails: &mut Tails,
        guard: &Guard,
    ) -> super::chain::Pruned {
        let mut out = super::chain::Pruned::default();
        let mut n = 0;
        // Equivalent mutant (`<=`: one group more a commit; a pace, not
        // a bound anything relies on).
        while n < budget {
            let mut group = [Item::NONE; GROUP];
            let mut len = 0;
            // Commit order: a key committed later at a lower timestamp
            // waits behind the one before it (it is swept a little late).
            while len < GROUP {
                match self.items.front() {
                    // Equivalent mutant (`<`: an item exactly at stable
                    // waits for the next stable; a read there climbs one
                    // version more meanwhile, same answer).
                    Some(it) if it.cts <= stable => {}
                    _ => break,
                }
                let Some(it) = self.items.pop_front() else {
                    break;
                };
                index.prefetch_key(it.key);
                group[len] = it;
                len += 1;
            }
            if len == 0 {
                break;
            }
            n += len;
            let mut keys: [Option<(&[u8], &KeyEntry)>; GROUP] = [None; GROUP];
            for (k, it) in keys.iter_mut().zip(&group[..len]) {
                // SAFETY: the caller's contract: `it.key` names a key of
                // `index`.
                let (key, entry) = unsafe { index.key_of(it.key) };
                // Still the key's newest: a read at stable takes the head.
                if !entry.newest_at(it.cts) {
                    entry.prefetch_prune(true, guard);
                    index.prefetch_slot(key, guard);
                    *k = Some((key, entry));
                }
            }
            for (_, e) in keys.iter().flatten() {
                e.prefetch_prune(false, guard);
            }
            for &(key, entry) in keys.iter().flatten() {
                let p = entry.cut(horizon, stable, tails, guard);
                index.hint(key, entry, SlotAt::NONE, guard);
                out.cut += p.cut;
                out.examined += p.examined;
            }
        }
        out
    }
}
