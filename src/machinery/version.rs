//! What a user embeds in each version ([`VersionStatus`]), how a
//! transaction judges it ([`ReadView`]), and when it may be discarded
//! ([`Horizon`]).
//!
//! # Orderings
//!
//! * The status word is written only by the machinery, with a Release store,
//!   at the moment the transaction's outcome is decided (prepare, commit,
//!   rollback: `Completion::flip`), and always before the descriptor install
//!   that tells other snapshots the writer completed (invariant 9). Every
//!   read of it is an Acquire load inside this file, so a reader that sees
//!   `Committed(ts)` also sees everything the writer wrote into the version
//!   before it committed (the value bytes included).
//! * Users never name an ordering: [`VersionStatus`] has no store, and its
//!   only load ([`VersionStatus::state`]) is the Acquire one.

use super::snapshot::Snapshot;
use crate::sync::{mutant as m, mutant_on, ordering_or_mutant, AtomicU64, Ordering};
use crate::ts::{Timestamp, TxnId};

/// Version states, in the top two bits of the status word (`pub(crate)`
/// for `loom_api` only; the store never names them).
pub(crate) const IN_PROGRESS: u64 = 0;
/// Prepared: the timestamp bits hold the prepare timestamp.
pub(crate) const PREPARED: u64 = 1;
/// Committed: the timestamp bits hold the commit timestamp (0: none).
pub(crate) const COMMITTED: u64 = 2;
/// Aborted: never visible to anyone.
pub(crate) const ABORTED: u64 = 3;
const SHIFT: u32 = 62;
const TS_MASK: u64 = (1 << SHIFT) - 1;

#[inline]
const fn pack(state: u64, ts: u64) -> u64 {
    (state << SHIFT) | (ts & TS_MASK)
}
#[inline]
const fn state_of(w: u64) -> u64 {
    w >> SHIFT
}
#[inline]
const fn ts_of(w: u64) -> u64 {
    w & TS_MASK
}

/// The metadata a storage engine embeds in every version it writes: the
/// writer's transaction id and one packed word holding the version's state
/// and timestamp.
///
/// Made by [`Transaction::new_version`](super::Transaction::new_version)
/// (which gives the transaction its id at its first write). Only the
/// machinery changes the state, through the [`Completion`](super::Completion)
/// that commit, prepare and rollback hand to your closure, at the moment the
/// protocol requires (before the writer leaves the running set); you only
/// read it, through a [`ReadView`] or [`VersionStatus::state`].
#[derive(Debug)]
pub struct VersionStatus {
    writer: u64,
    word: AtomicU64,
}

impl VersionStatus {
    #[inline]
    pub(super) fn new(writer: u64) -> VersionStatus {
        VersionStatus {
            writer,
            word: AtomicU64::new(pack(IN_PROGRESS, 0)),
        }
    }

    /// The transaction that wrote this version.
    #[inline]
    pub fn writer(&self) -> TxnId {
        TxnId(self.writer)
    }

    /// The state now (one Acquire load).
    #[inline]
    pub fn state(&self) -> VersionState {
        let w = self.word();
        let ts = Timestamp::new(ts_of(w));
        match state_of(w) {
            IN_PROGRESS => VersionState::InProgress,
            PREPARED => VersionState::Prepared(ts),
            COMMITTED => VersionState::Committed(ts),
            _ => VersionState::Aborted,
        }
    }

    #[inline]
    fn word(&self) -> u64 {
        // Acquire: pairs with the Release store in `set`.
        self.word.load(Ordering::Acquire)
    }

    /// A status for `loom_api`'s hand-driven models (loom builds only).
    #[cfg(loom)]
    pub(crate) fn loom_new(writer: u64) -> VersionStatus {
        VersionStatus::new(writer)
    }

    /// `set` for `loom_api`'s hand-driven models (loom builds only), which
    /// flip before they complete, as `Completion` does.
    #[cfg(loom)]
    pub(crate) fn loom_set(&self, state: u64, ts: u64) {
        self.set(state, ts)
    }

    /// Sets the status word (commit, abort, prepare). Only `Completion`
    /// calls it, before the writer's descriptor install (invariant 9).
    #[inline]
    pub(super) fn set(&self, state: u64, ts: u64) {
        // Release: pairs with the Acquire load in `word` (readers, the
        // conflict check, pruning); invariant 9.
        self.word.store(
            pack(state, ts),
            ordering_or_mutant(Ordering::Release, m::RELAXED_STATUS_STORE),
        );
    }
}

/// A version's state, from [`VersionStatus::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionState {
    /// Written by a transaction that has not finished.
    InProgress,
    /// Its transaction prepared at this timestamp.
    Prepared(Timestamp),
    /// Committed at this timestamp ([`Timestamp::NONE`]: untimestamped).
    Committed(Timestamp),
    /// Rolled back: nobody ever sees it.
    Aborted,
}

/// How a reader decides visibility.
#[derive(Clone, Copy)]
enum ReadAs<'a> {
    /// A snapshot, optionally with a read timestamp (0: none).
    Snapshot { snap: &'a Snapshot, read_ts: u64 },
    /// The read-only fast path (PROTOCOL rule 7): committed at or below
    /// `stable`; untimestamped versions only when their writer is below
    /// `complete_below` (completed before the reader began).
    Stable { stable: u64, complete_below: u64 },
}

/// What a reader does with one version, from [`ReadView::visibility`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    /// This is the version the transaction reads (stop here).
    Visible,
    /// Not visible: go on to the next older version.
    Skip,
    /// A prepared update at or below the read timestamp: the read must
    /// report a prepare conflict (WiredTiger's `WT_PREPARE_CONFLICT`).
    PrepareConflict,
}

/// What a writer does with one existing version of the key it is about to
/// write, newest first, from [`ReadView::write_check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCheck {
    /// No conflict: write (this is the transaction's own version, or a
    /// committed version its snapshot sees).
    Allowed,
    /// An aborted version: look at the next older one (no older version:
    /// allowed).
    Skip,
    /// First updater wins: another transaction's update is in progress,
    /// prepared, or committed outside this snapshot. The transaction must
    /// roll back ([`Transaction::mark_write_conflict`](super::Transaction::mark_write_conflict)).
    Conflict,
}

/// A transaction's view: which versions it sees. Borrowed from a
/// [`Transaction`](super::Transaction) for one read or one write; `Copy`.
#[derive(Clone, Copy)]
pub struct ReadView<'a> {
    /// The reader's own transaction id (0: none).
    own: u64,
    how: ReadAs<'a>,
    /// Skip prepared updates instead of reporting a conflict.
    ignore_prepared: bool,
}

impl<'a> ReadView<'a> {
    #[inline]
    pub(super) fn snapshot(own: u64, snap: &'a Snapshot, read_ts: u64, ignore: bool) -> Self {
        ReadView {
            own,
            how: ReadAs::Snapshot { snap, read_ts },
            ignore_prepared: ignore,
        }
    }

    #[inline]
    pub(super) fn stable(own: u64, stable: u64, complete_below: u64, ignore: bool) -> Self {
        ReadView {
            own,
            how: ReadAs::Stable {
                stable,
                complete_below,
            },
            ignore_prepared: ignore,
        }
    }

    /// A snapshot view for `loom_api`'s hand-driven models (loom only).
    #[cfg(loom)]
    pub(crate) fn loom_snapshot(own: u64, snap: &'a Snapshot, read_ts: u64, ignore: bool) -> Self {
        ReadView::snapshot(own, snap, read_ts, ignore)
    }

    /// A fast-path view for `loom_api`'s hand-driven models (loom only).
    #[cfg(loom)]
    pub(crate) fn loom_stable(stable: u64, complete_below: u64) -> Self {
        ReadView::stable(0, stable, complete_below, false)
    }

    /// The transaction this view belongs to ([`TxnId::NONE`] before its
    /// first write).
    #[inline]
    pub fn own(&self) -> TxnId {
        TxnId(self.own)
    }

    /// The timestamp above which this view rejects every timestamped
    /// version, whatever its writer: the read timestamp, or for the
    /// read-only fast path the stable timestamp it reads at; `None` for a
    /// snapshot read without a read timestamp.
    ///
    /// A store that keeps its committed versions ordered by timestamp can
    /// use it to skip versions it knows are too new (the bundled store's
    /// finger and `newer` links, DESIGN.md "Version chains").
    #[inline]
    pub fn timestamp_bound(&self) -> Option<Timestamp> {
        match self.how {
            ReadAs::Snapshot { read_ts, .. } => Timestamp::new(read_ts).to_option(),
            ReadAs::Stable { stable, .. } => Some(Timestamp::new(stable)),
        }
    }

    /// Is a committed version by `txn` at `cts` visible?
    #[inline]
    fn committed_visible(&self, txn: u64, cts: u64) -> bool {
        match self.how {
            ReadAs::Snapshot { snap, read_ts } => {
                snap.sees(txn) && (read_ts == 0 || cts == 0 || cts <= read_ts)
            }
            ReadAs::Stable {
                stable,
                complete_below,
            } => {
                if cts == 0 {
                    if mutant_on(m::FAST_PATH_BELOW_INCLUSIVE) {
                        return txn <= complete_below;
                    }
                    txn < complete_below
                } else {
                    cts <= stable
                }
            }
        }
    }

    /// Does a prepared version by `txn` at `pts` conflict with this read?
    /// (`false`: it is invisible and the reader moves on.)
    #[inline]
    fn prepared_conflicts(&self, txn: u64, pts: u64) -> bool {
        match self.how {
            // A snapshot taken before the prepare treats the writer as
            // running: invisible, no conflict.
            ReadAs::Snapshot { snap, read_ts } => {
                snap.sees(txn) && (read_ts == 0 || pts <= read_ts)
            }
            ReadAs::Stable { stable, .. } => pts <= stable,
        }
    }

    /// Judges one version, for a reader walking a key's versions newest
    /// first: the first [`Visibility::Visible`] one is what it reads; no
    /// read-modify-write, one Acquire load.
    ///
    /// A transaction sees its own versions (unless aborted), and of the
    /// others' the committed ones its snapshot and read timestamp accept.
    #[inline]
    pub fn visibility(&self, status: &VersionStatus) -> Visibility {
        let w = status.word();
        if self.own != 0 && status.writer == self.own {
            return if state_of(w) != ABORTED {
                Visibility::Visible
            } else {
                Visibility::Skip
            };
        }
        match state_of(w) {
            COMMITTED if self.committed_visible(status.writer, ts_of(w)) => Visibility::Visible,
            PREPARED
                if !self.ignore_prepared && self.prepared_conflicts(status.writer, ts_of(w)) =>
            {
                Visibility::PrepareConflict
            }
            _ => Visibility::Skip,
        }
    }

    /// First updater wins: judges one existing version of a key this
    /// transaction is about to write, newest first.
    #[inline]
    pub fn write_check(&self, status: &VersionStatus) -> WriteCheck {
        if status.writer == self.own {
            return WriteCheck::Allowed;
        }
        let w = status.word();
        match state_of(w) {
            ABORTED => WriteCheck::Skip,
            COMMITTED if self.committed_visible(status.writer, ts_of(w)) => WriteCheck::Allowed,
            _ => WriteCheck::Conflict,
        }
    }
}

/// The reclaim horizon: a committed version is visible to every current and
/// future reader when its writer is below `xmin` and its commit timestamp is
/// `0` or at most `ts`. From [`TxnManager::horizon`](super::TxnManager::horizon).
///
/// The **safe point** of a key (invariant 3) is its newest version the
/// horizon [`covers`](Horizon::covers): every reader stops there or above,
/// so every older version may be unlinked and, once no epoch guard can reach
/// it, freed ([`epoch`](super::epoch)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Horizon {
    pub(super) xmin: u64,
    pub(super) ts: u64,
}

impl Horizon {
    /// A horizon from its parts (loom models of pruning only).
    #[cfg(loom)]
    pub(crate) fn from_parts(xmin: u64, ts: u64) -> Horizon {
        Horizon { xmin, ts }
    }

    /// Every transaction below this id has completed and no snapshot that
    /// can still read treats one of them as running.
    #[inline]
    pub fn xmin(&self) -> TxnId {
        TxnId(self.xmin)
    }

    /// No reader reads below this timestamp (0: no timestamp horizon).
    #[inline]
    pub fn timestamp(&self) -> Timestamp {
        Timestamp::new(self.ts)
    }

    /// Is this version committed and visible to every current and future
    /// reader? (One Acquire load.) Walking newest first, the first version
    /// it covers is the key's safe point: keep it, cut everything older.
    #[inline]
    pub fn covers(&self, status: &VersionStatus) -> bool {
        let w = status.word();
        state_of(w) == COMMITTED
            && ((status.writer < self.xmin && (ts_of(w) == 0 || ts_of(w) <= self.ts))
                || mutant_on(m::PRUNE_PAST_SAFE_POINT))
    }
}
