//! What a user embeds in each version ([`VersionStatus`]), how a
//! transaction judges it ([`ReadView`]), and when it may be discarded
//! ([`Horizon`]).
//!
//! # Orderings
//!
//! * The status word is written only by the machinery, with a Release store,
//!   at the moment the transaction's outcome is decided (prepare, commit,
//!   rollback: `Completion::flip`), and always before the descriptor install
//!   that tells other snapshots the writer completed (invariant 9). The one
//!   other store settles a dropped prepared writer's status to aborted
//!   (below). Every
//!   read of it is an Acquire load inside this file, so a reader that sees
//!   `Committed(ts)` also sees everything the writer wrote into the version
//!   before it committed (the value bytes included).
//! * Users never name an ordering: [`VersionStatus`] has no store, and its
//!   only load ([`VersionStatus::state`]) is the Acquire one.
//! * A transaction dropped after prepare has no completion to flip its
//!   statuses with, so they keep saying `Prepared`. The manager's
//!   [`PreparedTable`] lists, per session slot, the id of the prepared
//!   transaction open there. Prepare publishes the id before its flips (a
//!   Relaxed store, carried by the flips' Release); commit and rollback clear
//!   it after theirs, drop without any (a Release store). A reader, writer or
//!   pruner that meets a `Prepared` status it would act on (a conflict)
//!   scans the table (Acquire loads: they pair with the clear) and, if the
//!   writer is not there, loads the word again: if it still says `Prepared`,
//!   no flip came before the clear, so the writer was dropped; the word is
//!   settled to `Aborted` with a compare-and-swap (PostgreSQL's hint bits).
//!   Either the scan finds the id (still prepared: a conflict, as before), or
//!   it sees the clear and then the reload sees the outcome's flip; never a
//!   resolved transaction taken for a dropped one (loom model
//!   `dropped_prepared`). The common path (no prepared status met) pays
//!   nothing.

use super::snapshot::Snapshot;
use crate::sync::{mutant as m, mutant_on, ordering_or_mutant, AtomicU64, Ordering};
use crate::ts::{Timestamp, TxnId};

/// Version states, in the top two bits of the status word.
pub(super) const IN_PROGRESS: u64 = 0;
/// Prepared: the timestamp bits hold the prepare timestamp.
pub(super) const PREPARED: u64 = 1;
/// Committed: the timestamp bits hold the commit timestamp (0: none).
pub(super) const COMMITTED: u64 = 2;
/// Aborted: never visible to anyone.
pub(super) const ABORTED: u64 = 3;
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
#[inline]
fn decode(w: u64) -> VersionState {
    let ts = Timestamp::new(ts_of(w));
    match state_of(w) {
        IN_PROGRESS => VersionState::InProgress,
        PREPARED => VersionState::Prepared(ts),
        COMMITTED => VersionState::Committed(ts),
        _ => VersionState::Aborted,
    }
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

    /// The state in the word now (one Acquire load). A version whose writer
    /// was dropped without rollback still reads [`VersionState::InProgress`]
    /// or [`VersionState::Prepared`] here until something settles it;
    /// [`TxnManager::version_state`](super::TxnManager::version_state)
    /// knows the writer is gone and says [`VersionState::Aborted`].
    #[inline]
    pub fn state(&self) -> VersionState {
        decode(self.word())
    }

    #[inline]
    fn word(&self) -> u64 {
        // Acquire: pairs with the Release store in `set`.
        self.word.load(Ordering::Acquire)
    }

    /// [`TxnManager::version_state`](super::TxnManager::version_state):
    /// the state, with a dropped writer's versions aborted (`xmin`: every
    /// writer below it has completed).
    pub(super) fn settled_state(&self, prepared: &PreparedTable, xmin: u64) -> VersionState {
        let w = self.word();
        let w = match state_of(w) {
            PREPARED => self.settle_prepared(w, prepared),
            // Completed without flipping: rolled back (invariant 9).
            IN_PROGRESS if self.writer < xmin => pack(ABORTED, 0),
            _ => w,
        };
        decode(w)
    }

    /// Settles a `Prepared` word `w` whose writer is gone (dropped without
    /// rollback) to `Aborted`; returns the word to judge: `w` while the
    /// writer is still prepared, else what the status says now (aborted,
    /// or the flip of a commit or rollback that resolved it meanwhile).
    /// Called only on the paths that would otherwise report a conflict.
    #[cold]
    #[inline(never)]
    fn settle_prepared(&self, w: u64, prepared: &PreparedTable) -> u64 {
        if prepared.is_live(self.writer) {
            return w;
        }
        // The scan saw this writer's slot cleared (or reused), and the
        // clear is a Release store after any flip of its outcome: this
        // Acquire load sees that flip, if there was one (module docs).
        let now = self.word();
        if now != w {
            return now;
        }
        // No flip before the clear: the transaction was dropped while
        // prepared, and nobody will ever flip this status again (every
        // other settler stores the same value). Relaxed: `Aborted`
        // publishes nothing, a reader never reads through it.
        let aborted = pack(ABORTED, 0);
        self.word.store(aborted, Ordering::Relaxed);
        aborted
    }

    /// Sets the status word (commit, rollback, prepare). Only `Completion`
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

/// Which transactions are prepared now: per session slot, the id of the
/// prepared transaction open there (0: none). Kept by the manager; read only
/// when a `Prepared` status is met (module docs, "Orderings").
pub(crate) struct PreparedTable {
    ids: Box<[AtomicU64]>,
}

impl PreparedTable {
    pub(crate) fn new(slots: usize) -> PreparedTable {
        PreparedTable {
            ids: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Transaction `id` on `slot` is about to flip its statuses to prepared.
    #[inline]
    pub(crate) fn publish(&self, slot: usize, id: u64) {
        // Relaxed: a reader acts on this entry only after an Acquire load of
        // a status the prepare flipped, and those flips are Release stores
        // after this one.
        self.ids[slot].store(id, Ordering::Relaxed);
    }

    /// The prepared transaction on `slot` resolved (after the flips of its
    /// commit or rollback) or was dropped (no flips).
    #[inline]
    pub(super) fn clear(&self, slot: usize) {
        // Release: pairs with the Acquire loads in `is_live`, so a settler
        // that sees the slot cleared also sees the outcome's flips.
        self.ids[slot].store(
            0,
            ordering_or_mutant(Ordering::Release, m::PREPARED_CLEAR_RELAXED),
        );
    }

    /// Is transaction `id` still prepared (not resolved, not dropped)?
    fn is_live(&self, id: u64) -> bool {
        // Acquire: pairs with the Release store in `clear`.
        let o = ordering_or_mutant(Ordering::Acquire, m::PREPARED_SCAN_RELAXED);
        self.ids.iter().any(|a| a.load(o) == id)
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
    Snapshot {
        snap: &'a Snapshot,
        read_ts: Timestamp,
    },
    /// The read-only fast path: committed at or below
    /// `stable`; untimestamped versions only when their writer is below
    /// `complete_below` (completed before the reader began).
    Stable {
        stable: Timestamp,
        complete_below: u64,
    },
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
    /// Who is prepared now, to settle a dropped writer's statuses.
    prepared: &'a PreparedTable,
    /// Skip prepared updates instead of reporting a conflict.
    ignore_prepared: bool,
}

impl<'a> ReadView<'a> {
    #[inline]
    pub(super) fn snapshot(
        own: u64,
        snap: &'a Snapshot,
        read_ts: Timestamp,
        ignore: bool,
        prepared: &'a PreparedTable,
    ) -> Self {
        ReadView {
            own,
            how: ReadAs::Snapshot { snap, read_ts },
            prepared,
            ignore_prepared: ignore,
        }
    }

    #[inline]
    pub(super) fn stable(
        own: u64,
        stable: Timestamp,
        complete_below: u64,
        ignore: bool,
        prepared: &'a PreparedTable,
    ) -> Self {
        ReadView {
            own,
            how: ReadAs::Stable {
                stable,
                complete_below,
            },
            prepared,
            ignore_prepared: ignore,
        }
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
    /// finger and `newer` links, DESIGN.md "Version chains and the index").
    #[inline]
    pub fn timestamp_bound(&self) -> Option<Timestamp> {
        match self.how {
            ReadAs::Snapshot { read_ts, .. } => read_ts.to_option(),
            ReadAs::Stable { stable, .. } => Some(stable),
        }
    }

    /// Is a committed version by `txn` at `cts` visible?
    #[inline]
    fn committed_visible(&self, txn: u64, cts: u64) -> bool {
        match self.how {
            ReadAs::Snapshot { snap, read_ts } => {
                snap.sees(txn) && (read_ts.is_none() || cts == 0 || cts <= read_ts.get())
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
                    cts <= stable.get()
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
                snap.sees(txn) && (read_ts.is_none() || pts <= read_ts.get())
            }
            ReadAs::Stable { stable, .. } => pts <= stable.get(),
        }
    }

    /// Judges one version, for a reader walking a key's versions newest
    /// first: the first [`Visibility::Visible`] one is what it reads; no
    /// read-modify-write, one Acquire load.
    ///
    /// A transaction sees its own versions (unless aborted), and of the
    /// others' the committed ones its snapshot and read timestamp accept.
    ///
    /// A prepared version whose transaction was dropped without rollback
    /// reads as aborted (and its word is settled to `Aborted` on the way).
    #[inline(always)]
    pub fn visibility(&self, status: &VersionStatus) -> Visibility {
        let w = status.word();
        match self.judge(status, w) {
            Visibility::PrepareConflict => {
                self.judge(status, status.settle_prepared(w, self.prepared))
            }
            v => v,
        }
    }

    #[inline(always)]
    fn judge(&self, status: &VersionStatus, w: u64) -> Visibility {
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
    ///
    /// A version whose writer was dropped without rollback is
    /// [`WriteCheck::Skip`], as an aborted one: in progress, by a writer
    /// this snapshot sees completed (a commit or prepare flips before its
    /// writer leaves the running set, invariant 9, so it rolled back); or
    /// prepared, by a transaction that is no longer prepared and never
    /// flipped it.
    #[inline]
    pub fn write_check(&self, status: &VersionStatus) -> WriteCheck {
        if status.writer == self.own {
            return WriteCheck::Allowed;
        }
        let w = status.word();
        match self.write_judge(status, w) {
            WriteCheck::Conflict if state_of(w) == PREPARED => {
                self.write_judge(status, status.settle_prepared(w, self.prepared))
            }
            c => c,
        }
    }

    /// A serializable transaction's validation of a key it read, judging
    /// one version newest first, as [`ReadView::write_check`] does, except
    /// that another transaction's version still in progress is
    /// [`WriteCheck::Skip`]: that writer has not committed, and when it
    /// does it validates its own reads, after this transaction's (the
    /// first committer wins). Prepared, and committed outside this view,
    /// are [`WriteCheck::Conflict`].
    #[inline]
    pub fn read_check(&self, status: &VersionStatus) -> WriteCheck {
        if status.writer != self.own && state_of(status.word()) == IN_PROGRESS {
            return WriteCheck::Skip;
        }
        self.write_check(status)
    }

    #[inline]
    fn write_judge(&self, status: &VersionStatus, w: u64) -> WriteCheck {
        match state_of(w) {
            ABORTED => WriteCheck::Skip,
            COMMITTED if self.committed_visible(status.writer, ts_of(w)) => WriteCheck::Allowed,
            IN_PROGRESS if self.sees_completed(status.writer) => WriteCheck::Skip,
            _ => WriteCheck::Conflict,
        }
    }

    /// Did `txn` complete before this view's snapshot? (`false` for the
    /// fast path, which never writes.)
    #[inline]
    fn sees_completed(&self, txn: u64) -> bool {
        match self.how {
            ReadAs::Snapshot { snap, .. } => snap.sees(txn),
            ReadAs::Stable { .. } => false,
        }
    }
}

/// The reclaim horizon: a committed version is visible to every current and
/// future reader when its writer is below `xmin` and its commit timestamp is
/// `0` or at most `ts`. From [`TxnManager::horizon`](super::TxnManager::horizon).
///
/// The **safe point** of a key (invariant 3) is its newest version the
/// horizon [`covers`](Horizon::covers): every reader that judges it now
/// stops there or above, so every older version may be unlinked and, once
/// no epoch guard can reach it, freed ([`epoch`](super::epoch)).
///
/// One reader may already be past it: one that ignores prepared updates and
/// judged the version while it was still prepared (and so skipped it), if
/// its transaction then committed at a timestamp the horizon covers. A
/// store that unlinks versions while readers walk them must let that reader
/// find out: the bundled store unlinks with a Release store of the link,
/// and a reader that finds the link below a version it skipped gone judges
/// that version again (an Acquire load after its Acquire load of the
/// link), which then sees the commit and finds it visible (the horizon
/// that covered it never passes the reader's pins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Horizon {
    pub(super) xmin: u64,
    pub(super) ts: u64,
}

impl Horizon {
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
    /// it covers is the key's safe point: keep it, cut everything older
    /// (and see [`Horizon`] for the reader that skipped it while it was
    /// prepared).
    #[inline]
    pub fn covers(&self, status: &VersionStatus) -> bool {
        let w = status.word();
        state_of(w) == COMMITTED
            && ((status.writer < self.xmin && (ts_of(w) == 0 || ts_of(w) <= self.ts))
                || mutant_on(m::PRUNE_PAST_SAFE_POINT))
    }
}
