//! The snapshot machinery as a trait, so the store and transaction code is
//! shared between the lock-free engine and the read-write-lock baseline and
//! a benchmark ratio isolates the machinery.

use super::raw::descriptor::SessionRetired;
use super::snapshot::Snapshot;
use super::version::Horizon;
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate};
use crate::error::{Error, Result};
use crate::stats::Counters;
use crate::ts::Timestamp;

/// What a read-only transaction at the stable watermark reads with.
#[derive(Clone, Copy, Debug)]
pub struct StableView {
    /// The stable timestamp it reads at ([`Timestamp::NONE`]: none set).
    pub(crate) stable: Timestamp,
    /// Untimestamped versions by transactions below this are visible.
    pub(crate) complete_below: u64,
}

/// A snapshot machinery a [`TxnManager`](super::TxnManager) (and so an
/// [`Engine`](crate::Engine)) can run on: the
/// lock-free [`LockFree`](crate::with_machinery::LockFree) (the default) or the read-write
/// lock baseline the benchmarks compare it with. Sealed: its methods are the
/// crate's internals.
pub trait Machinery: MachineryImpl {
    /// A short name for reports (`"lock-free"`, ...).
    const NAME: &'static str;
}

impl Machinery for super::lockfree::LockFree {
    const NAME: &'static str = "lock-free";
}

/// Internals of a snapshot machinery (sealed: the trait is not nameable
/// outside the crate).
pub trait MachineryImpl: Send + Sync + Sized + 'static {
    /// Builds the machinery for an engine.
    fn new(config: &EngineConfig) -> Self;

    /// Claims a session slot.
    fn open_session(&self) -> Result<usize>;
    /// Releases a session slot, clearing its pins (invariant 12), and hands
    /// the session's replaced descriptors to the collector.
    fn close_session(&self, slot: usize, retired: &mut SessionRetired);

    /// Takes a snapshot for a transaction into `snap` and publishes its
    /// pin. A transaction calls it lazily, at its first read or write, not
    /// at begin.
    fn begin(&self, slot: usize, snap: &mut Snapshot, ctr: &Counters);
    /// Takes a transaction's first snapshot together with its read
    /// timestamp: publishes both pins, validates them, and returns the read
    /// timestamp in force (rounded up when `roundup`). On an error nothing
    /// stays published and `snap` is not a snapshot of this transaction.
    /// The default is [`MachineryImpl::begin`] then
    /// [`MachineryImpl::set_read_timestamp`] (two handshakes); the lock-free
    /// machinery does one.
    ///
    /// # Errors
    /// As [`MachineryImpl::set_read_timestamp`].
    fn begin_at_read_ts(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp> {
        self.begin(slot, snap, ctr);
        self.set_read_timestamp(slot, snap, ts, roundup, ctr)
            .inspect_err(|_| self.end(slot))
    }
    /// Replaces `snap` with a current snapshot (read-committed, or after a
    /// read timestamp is set). The pin published at begin stays valid.
    fn refresh(&self, slot: usize, snap: &mut Snapshot, ctr: &Counters);
    /// Publishes and validates a read timestamp, then refreshes `snap`.
    /// Returns the timestamp in force (rounded up when `roundup`).
    fn set_read_timestamp(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp>;
    /// The read-only fast path: publish pins for a read at stable.
    fn begin_at_stable(&self, slot: usize, ctr: &Counters) -> StableView;
    /// Clears the session's read pins at the end of a transaction.
    fn end(&self, slot: usize);

    /// Allocates a transaction id (first write).
    fn allocate_id(&self, slot: usize) -> u64;
    /// Validates `ts` against stable and claims it until
    /// [`MachineryImpl::release_claim`] (a commit timestamp, or a prepared
    /// commit's durable timestamp).
    fn claim_commit(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()>;
    /// Transaction `id` leaves the running set (commit, rollback, prepare).
    ///
    /// `keep` is the session's snapshot cache, given by a commit (the
    /// transaction reads nothing afterwards): the machinery may leave in it
    /// a copy of the descriptor its completion installed, under that
    /// descriptor's generation, so the session's next snapshot reuses it
    /// while no other completion has been published (invariants
    /// 5 and 7). The lock baselines ignore it.
    /// `retired` is the session's own list of the descriptors its
    /// completions replaced.
    fn complete(
        &self,
        slot: usize,
        id: u64,
        keep: Option<&mut Snapshot>,
        retired: &mut SessionRetired,
        ctr: &Counters,
    );
    /// Makes room in `retired` for the descriptor one completion replaces,
    /// so that completion hands nothing to the collector, and allocates the
    /// descriptor it installs, so it calls no allocator: a caller that
    /// completes while holding a lock other committers wait on (the
    /// serializable gate) calls it before taking the lock. The default
    /// does nothing (for a machinery whose completions retire nothing).
    fn make_room(&self, retired: &mut SessionRetired) {
        let _ = retired;
    }
    /// Ends the claim of `claim_commit`, recording `durable`.
    fn release_claim(&self, slot: usize, durable: Timestamp);
    /// Validates and publishes a prepare timestamp (after stable, not below
    /// an active read timestamp); returns it, rounded up when asked.
    fn claim_prepare(&self, slot: usize, ts: Timestamp, roundup: bool) -> Result<Timestamp>;
    /// Announces a timestamp ahead of commit (a commit timestamp set early,
    /// or a prepared transaction's durable timestamp), validated against
    /// stable and counted by `all_durable` until [`MachineryImpl::release_prepare`].
    fn announce(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()>;
    /// Clears the prepare claim and any announcement when the transaction
    /// resolves.
    fn release_prepare(&self, slot: usize);

    /// The current reclaim horizon.
    fn horizon(&self) -> Horizon;
    /// Recomputes the reclaim horizon (scans the session table).
    fn advance_horizon(&self, ctr: &Counters);
    /// Current (oldest, stable) for validation.
    fn oldest_stable(&self) -> (Timestamp, Timestamp);
    /// Sets global timestamps.
    fn set_timestamps(&self, update: &TimestampUpdate) -> Result<()>;
    /// Reports a global timestamp.
    fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp>;
    /// The xmin of a snapshot taken now (no pin).
    fn current_xmin(&self) -> u64;
    /// Slots in use now.
    fn sessions_open(&self) -> usize;
    /// The pins each open session holds: `(slot, snapshot xmin, read ts)`.
    fn pins(&self) -> Vec<(usize, u64, u64)>;
    /// Whether handshake 1 uses the asymmetric fence pair (a compiler
    /// fence on the readers' side, a membarrier on the advancer's;
    /// `EngineConfig::asymmetric_fences`). False unless the machinery has
    /// one.
    fn asymmetric_fences(&self) -> bool {
        false
    }
    /// Adds counts the machinery keeps itself (work done in methods that get
    /// no `Counters`) for one slot, or for every slot with `None`.
    fn add_stats(&self, _slot: Option<usize>, _stats: &mut crate::stats::Stats) {}
}

/// What one session contributes to a global timestamp report: its read
/// timestamp, its commit claim and its announced timestamp (0: none).
#[derive(Clone, Copy)]
pub(crate) struct SlotTimestamps {
    pub(crate) read_ts: Timestamp,
    pub(crate) claim: Timestamp,
    pub(crate) announced: Timestamp,
}

/// `Engine::query_timestamp` for any machinery: `oldest` and `stable` are
/// the globals, `durable` the all-durable timestamp, `slots` every
/// session's contribution (read once per report).
/// The horizon a scan of the published pins gives: the lowest nonzero
/// `(xmin, read_ts)` pin of each kind, starting from `start` (the floors,
/// or the descriptor xmin and oldest). `0` is "no pin". Shared by both
/// machineries' horizon advances; each loads the pins with its own
/// ordering argument and feeds them in slot order.
#[inline]
pub(crate) fn lowest_pins(start: (u64, u64), pins: impl Iterator<Item = (u64, u64)>) -> (u64, u64) {
    let (mut hx, mut ht) = start;
    for (x, r) in pins {
        // Equivalent: `<=` (at equality the assignment changes nothing).
        if x != 0 && x < hx {
            hx = x;
        }
        if r != 0 && r < ht {
            ht = r;
        }
    }
    (hx, ht)
}

/// The read-timestamp rule (every machinery): read
/// timestamp `r` (the caller asked for `asked`) stands when it is at least
/// `bound`, the lowest timestamp still readable (oldest, or the horizon's
/// timestamp floor when that is higher); below it, it is rounded up to
/// `bound` with `roundup` and refused otherwise.
///
/// # Errors
/// [`Error::ReadTimestampTooOld`] with the `asked` timestamp and `bound`,
/// when `r` is below `bound` and `roundup` is off.
pub(crate) fn read_ts_rule(asked: Timestamp, r: u64, bound: u64, roundup: bool) -> Result<u64> {
    // A timestamp rule, not an ordering: a read timestamp at exactly the
    // bound stands. Refusing it (`r > bound`) would refuse a read at exactly
    // oldest and, with roundup, make the lock-free retry loops spin forever.
    // Checked by the `tests/timestamps/timestamp_rules.rs` rows "at exactly oldest"
    // and "roundup_read rounds ...", not by loom.
    if r >= bound {
        Ok(r)
    } else if roundup {
        Ok(bound)
    } else {
        Err(Error::ReadTimestampTooOld {
            read: asked,
            oldest: Timestamp::new(bound),
        })
    }
}

pub(crate) fn report_timestamp(
    kind: TimestampKind,
    oldest: Timestamp,
    stable: Timestamp,
    durable: Timestamp,
    slots: impl Iterator<Item = SlotTimestamps>,
) -> Option<Timestamp> {
    let mut oldest_reader: Option<Timestamp> = None;
    let mut all_durable = durable;
    for s in slots {
        if s.read_ts != Timestamp::NONE {
            oldest_reader = Some(oldest_reader.map_or(s.read_ts, |r| r.min(s.read_ts)));
        }
        for t in [s.claim, s.announced] {
            if t != Timestamp::NONE {
                all_durable = all_durable.min(Timestamp::new(t.get() - 1));
            }
        }
    }
    let v = match kind {
        TimestampKind::Oldest => oldest,
        TimestampKind::Stable => stable,
        TimestampKind::AllDurable => all_durable,
        TimestampKind::OldestReader => oldest_reader.unwrap_or(Timestamp::NONE),
        // The storage's, not the machinery's (`Engine::query_timestamp`).
        TimestampKind::Recovery => Timestamp::NONE,
        TimestampKind::Pinned => match oldest_reader {
            // Equivalent: `<=` (at r == oldest both arms give the same
            // value).
            Some(r) if oldest == Timestamp::NONE || r < oldest => r,
            _ => oldest,
        },
    };
    v.to_option()
}

/// "A prepare timestamp is not below any other session's active read
/// timestamp": `reads` yields every slot's read timestamp (0: none), in slot
/// order; `slot` is the preparing session's own.
pub(crate) fn check_prepare_against_readers(
    slot: usize,
    prepare: u64,
    reads: impl Iterator<Item = u64>,
) -> Result<()> {
    for (i, r) in reads.enumerate() {
        if i != slot && r != 0 && prepare < r {
            return Err(crate::Error::PrepareTimestampBeforeActiveRead {
                prepare: Timestamp::new(prepare),
                read: Timestamp::new(r),
            });
        }
    }
    Ok(())
}
