//! The read-write-lock baseline: the classic snapshot machinery the
//! benchmarks compare the lock-free one with, written the way WiredTiger
//! writes it (and PostgreSQL's ProcArray), with its own fast paths kept.
//!
//! * One [`parking_lot::RwLock`] guards the global transaction state (the
//!   generation, the oldest and the stable timestamps). Every session
//!   has a cache-padded entry in a table beside it: its transaction id, the
//!   xmin its snapshot pins, its read timestamp, its commit claim, its
//!   prepare timestamp and an announced durable timestamp. A session writes
//!   only its own entry; pins and claims are published while holding the
//!   read lock, so a scan under the write lock sees every one of them.
//! * A snapshot is built by scanning the table under the read lock:
//!   `xmax = current` (the next id to allocate), running = the ids of the
//!   sessions with an active transaction id, `xmin = min(running, xmax)`.
//! * Snapshot reuse, as WiredTiger's per-session snapshot generation: a
//!   global generation is bumped under the write lock by every completion
//!   (commit, rollback or prepare of a transaction with an id). A session whose
//!   cached snapshot carries the current generation reuses it instead of
//!   scanning.
//! * Ids are allocated under a small mutex (WiredTiger's `id_lock`): the id is
//!   published in the session's entry before `current` is raised, and a
//!   snapshot loads `current` before it scans, so an id below its `xmax` is
//!   either listed as running or already completed.
//! * Completions, horizon (oldest/pinned) updates and global timestamp
//!   updates take the write lock; commit-timestamp, prepare and announcement
//!   validation against stable take the read lock.
//!
//! Two modes, one type: [`RwLockBaseline`] (`PATCHED = false`) takes the lock
//! three times in a transaction that sets its read timestamp after begin
//! when a writer committed in between (begin; check and publish the read
//! timestamp; rebuild the snapshot), as WiredTiger develop does.
//! [`RwLockBaselinePatched`] (`PATCHED = true`) is the published fix: the check,
//! the publish and the rebuild share one acquisition (two in all).
//!
//! Lock acquisitions are counted into the session's
//! [`Stats`](crate::Stats): `read_lock_acquisitions`,
//! `write_lock_acquisitions` and `lock_wait_ns` (time spent blocked; an
//! acquisition that succeeds at once is not timed, so counting costs nothing
//! on the uncontended path). Under the `count-rmw` feature each acquisition
//! also counts two read-modify-writes on the shared lock word (acquire and
//! release on parking_lot's uncontended path; a contended acquisition does
//! more, so this is a lower bound).
//!
//! # Orderings
//!
//! The lock orders everything published under it. Outside it:
//! * `current` and the entries' `id`: the allocator stores the id in its
//!   entry, then stores `current + 1` with Release; a snapshot loads
//!   `current` with Acquire before scanning, so it sees every id below
//!   the `current` it loaded (or 0 if that transaction already completed,
//!   which happened under the write lock before our read lock).
//! * `gen_pub` mirrors the generation for the lock-free "has anything
//!   completed since my snapshot" check: Release store under the write lock,
//!   Acquire load. A commit returns only after its bump, so a transaction
//!   that checks after a commit returned sees the new generation.
//! * Clearing pins and claims at the end of a transaction needs no lock:
//!   a stale pin only holds the horizon back. Claims are cleared with Release
//!   (pairs with the stable setter's Acquire load under the write lock, so the
//!   commit's status flips happen-before the new stable is published).
//! * `horizon_*`, `oldest_pub` and `stable_pub` mirror values written under
//!   the write lock (Release) for lock-free reads (Acquire), like
//!   WiredTiger's volatile global timestamps.

use super::raw::descriptor::SessionRetired;
use super::rules::{
    check_prepare_against_readers, lowest_pins, read_ts_rule, report_timestamp, Machinery,
    MachineryImpl, SlotTimestamps, StableView,
};
use super::snapshot::Snapshot;
use super::version::Horizon;
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::stats::{Counters, Stats};
use crate::sync::{count_rmw, spin_hint, AtomicBool, AtomicU64, Ordering};
use crate::ts::Timestamp;
use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

/// The global state the lock guards.
struct Global {
    /// Bumped by every completion; a cached snapshot with this generation is
    /// current.
    generation: u64,
    oldest: u64,
    stable: u64,
}

/// One session's entry in the transaction table. `0` means "none".
struct Entry {
    in_use: AtomicBool,
    /// The active transaction's id.
    id: AtomicU64,
    /// The xmin of the snapshot the session reads with.
    xmin: AtomicU64,
    /// The session's read timestamp.
    read_ts: AtomicU64,
    /// An unfinished commit's validated commit (or durable) timestamp.
    claim: AtomicU64,
    /// A prepared, unresolved transaction's prepare timestamp.
    prepared: AtomicU64,
    /// A timestamp announced ahead of commit (counted by `all_durable`).
    announced: AtomicU64,
    /// Lock acquisitions made in methods that get no `Counters`.
    /// Owner-only bumps, except open/close (made under the write lock).
    untracked_read: AtomicU64,
    untracked_write: AtomicU64,
    untracked_wait_ns: AtomicU64,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            in_use: AtomicBool::new(false),
            id: AtomicU64::new(0),
            xmin: AtomicU64::new(0),
            read_ts: AtomicU64::new(0),
            claim: AtomicU64::new(0),
            prepared: AtomicU64::new(0),
            announced: AtomicU64::new(0),
            untracked_read: AtomicU64::new(0),
            untracked_write: AtomicU64::new(0),
            untracked_wait_ns: AtomicU64::new(0),
        }
    }
}

/// The read-write-lock baseline machinery. `PATCHED = false` (the default,
/// [`RwLockBaseline`]) is WiredTiger develop's three acquisitions;
/// `PATCHED = true` ([`RwLockBaselinePatched`]) is the published two-acquisition
/// fix. Use it as `Engine::<RwLockBaseline>::with_machinery(config)`.
pub struct RwLockMachinery<const PATCHED: bool> {
    lock: CachePadded<RwLock<Global>>,
    /// The next transaction id (WiredTiger `txn_global->current`).
    current: CachePadded<AtomicU64>,
    /// Serializes id allocation (WiredTiger's `id_lock`).
    id_lock: Mutex<()>,
    /// A lock-free mirror of `Global::generation`.
    gen_pub: CachePadded<AtomicU64>,
    /// Lock-free mirrors of values written under the write lock.
    oldest_pub: AtomicU64,
    stable_pub: AtomicU64,
    horizon_xmin: AtomicU64,
    horizon_ts: AtomicU64,
    /// The all-durable timestamp: max of every commit's durable timestamp
    /// and the one the application set (a report, as in the lock-free
    /// engine: `fetch_max`, no lock).
    durable: CachePadded<AtomicU64>,
    entries: Box<[CachePadded<Entry>]>,
}

/// WiredTiger develop: a read timestamp set after begin takes the lock three
/// times when a writer committed in between.
pub type RwLockBaseline = RwLockMachinery<false>;
/// The published fix: twice.
pub type RwLockBaselinePatched = RwLockMachinery<true>;

impl Machinery for RwLockBaseline {
    const NAME: &'static str = "rwlock3";
}

impl Machinery for RwLockBaselinePatched {
    const NAME: &'static str = "rwlock2";
}

/// Where an acquisition is counted.
#[derive(Clone, Copy)]
enum Ctr<'a> {
    Session(&'a Counters),
    Untracked(&'a Entry),
    None,
}

impl Ctr<'_> {
    #[inline]
    fn add(self, write: bool, wait_ns: u64) {
        match self {
            Ctr::Session(c) => {
                if write {
                    c.write_lock_acquisitions.bump(1);
                } else {
                    c.read_lock_acquisitions.bump(1);
                }
                if wait_ns != 0 {
                    c.lock_wait_ns.bump(wait_ns);
                }
            }
            Ctr::Untracked(e) => {
                if write {
                    e.untracked_write.bump(1);
                } else {
                    e.untracked_read.bump(1);
                }
                if wait_ns != 0 {
                    e.untracked_wait_ns.bump(wait_ns);
                }
            }
            Ctr::None => {}
        }
    }
}

/// Counts the two shared-word read-modify-writes of one acquisition
/// (acquire, release) under `count-rmw`.
#[inline(always)]
fn count_lock_rmw() {
    count_rmw();
    count_rmw();
}

/// Takes the lock (read or write side), counting the acquisition and, only
/// when the uncontended attempt fails, the time spent waiting.
#[inline]
fn acquire<G>(
    ctr: Ctr<'_>,
    write: bool,
    try_lock: impl FnOnce() -> Option<G>,
    lock: impl FnOnce() -> G,
) -> G {
    count_lock_rmw();
    if let Some(g) = try_lock() {
        ctr.add(write, 0);
        return g;
    }
    let t = Instant::now();
    let g = lock();
    ctr.add(write, t.elapsed().as_nanos() as u64);
    g
}

impl<const PATCHED: bool> RwLockMachinery<PATCHED> {
    #[inline]
    fn read(&self, ctr: Ctr<'_>) -> RwLockReadGuard<'_, Global> {
        acquire(ctr, false, || self.lock.try_read(), || self.lock.read())
    }

    #[inline]
    fn write(&self, ctr: Ctr<'_>) -> RwLockWriteGuard<'_, Global> {
        acquire(ctr, true, || self.lock.try_write(), || self.lock.write())
    }

    #[inline]
    fn entry(&self, slot: usize) -> &Entry {
        &self.entries[slot]
    }

    /// Builds a snapshot by scanning the table. Call with the lock held
    /// (read or write): completions, which clear ids, are then excluded.
    fn scan_into(&self, g: &Global, snap: &mut Snapshot) {
        // Acquire: pairs with the Release store of `current` in
        // `allocate_id`; every id below it is published in its entry.
        let xmax = self.current.load(Ordering::Acquire);
        snap.running.clear();
        for e in self.entries.iter() {
            // Relaxed: ordered after the `current` load above (Acquire) and,
            // for completions, by the lock.
            let id = e.id.load(Ordering::Relaxed);
            if id != 0 && id < xmax {
                snap.running.push(id);
            }
        }
        snap.running.sort_unstable();
        snap.xmin = snap.running.first().copied().unwrap_or(xmax);
        snap.xmax = xmax;
        snap.generation = g.generation;
    }

    /// Takes a snapshot under a held lock: reuse the cached one when the
    /// generation has not changed, else scan.
    #[inline]
    fn snapshot_locked(&self, g: &Global, snap: &mut Snapshot, ctr: &Counters) {
        if snap.generation == g.generation {
            ctr.snapshot_reused.bump(1);
        } else {
            self.scan_into(g, snap);
            ctr.snapshot_rebuilt.bump(1);
        }
    }

    /// Has a completion happened since `snap` was taken? One Acquire load.
    #[inline]
    fn stale(&self, snap: &Snapshot) -> bool {
        // Acquire: pairs with the Release store in `complete`.
        self.gen_pub.load(Ordering::Acquire) != snap.generation
    }

    /// Validates `ts` against oldest and publishes it, under a held lock.
    fn check_publish_read_ts(
        &self,
        g: &Global,
        slot: usize,
        ts: Timestamp,
        roundup: bool,
    ) -> Result<Timestamp> {
        let r = read_ts_rule(ts, ts.get(), g.oldest, roundup)?;
        // Relaxed: published under the read lock; the horizon scan runs
        // under the write lock.
        self.entry(slot).read_ts.store(r, Ordering::Relaxed);
        Ok(Timestamp::new(r))
    }

    /// The stable bound for validation, under a held lock.
    fn check_after_stable(g: &Global, ts: Timestamp, prepared: bool) -> Result<()> {
        if ts.get() <= g.stable {
            let stable = Timestamp::new(g.stable);
            return Err(if prepared {
                Error::DurableTimestampNotAfterStable {
                    durable: ts,
                    stable,
                }
            } else {
                Error::CommitTimestampNotAfterStable { commit: ts, stable }
            });
        }
        Ok(())
    }

    /// Recomputes the horizon; call with the write lock held.
    fn advance_locked(&self, g: &Global) {
        let mut snap = Snapshot::default();
        self.scan_into(g, &mut snap);
        // Relaxed pin loads: we hold the write lock and pins are published
        // under the read lock, so the lock orders them; a clear (made
        // outside the lock) seen late only holds the horizon back.
        let (hx, ht) = lowest_pins(
            (snap.xmin, g.oldest),
            self.entries.iter().map(|e| {
                (
                    e.xmin.load(Ordering::Relaxed),
                    e.read_ts.load(Ordering::Relaxed),
                )
            }),
        );
        // Monotonic (invariant 4): pins are published under the read lock
        // at or above the horizon of their time, so this max() is a guard.
        let hx = hx.max(self.horizon_xmin.load(Ordering::Relaxed));
        let ht = ht.max(self.horizon_ts.load(Ordering::Relaxed));
        // Release: pairs with the Acquire loads in `horizon`.
        self.horizon_xmin.store(hx, Ordering::Release);
        self.horizon_ts.store(ht, Ordering::Release);
    }
}

impl<const PATCHED: bool> MachineryImpl for RwLockMachinery<PATCHED> {
    fn new(config: &EngineConfig) -> Self {
        RwLockMachinery {
            lock: CachePadded::new(RwLock::new(Global {
                generation: 1,
                oldest: 0,
                stable: 0,
            })),
            durable: CachePadded::new(AtomicU64::new(0)),
            current: CachePadded::new(AtomicU64::new(1)),
            id_lock: Mutex::new(()),
            gen_pub: CachePadded::new(AtomicU64::new(1)),
            oldest_pub: AtomicU64::new(0),
            stable_pub: AtomicU64::new(0),
            horizon_xmin: AtomicU64::new(1),
            horizon_ts: AtomicU64::new(0),
            entries: (0..config.max_sessions)
                .map(|_| CachePadded::new(Entry::new()))
                .collect(),
        }
    }

    fn open_session(&self) -> Result<usize> {
        let _g = self.write(Ctr::None);
        for (i, e) in self.entries.iter().enumerate() {
            if !e.in_use.load(Ordering::Relaxed) {
                e.in_use.store(true, Ordering::Relaxed);
                Ctr::Untracked(e).add(true, 0);
                return Ok(i);
            }
        }
        Err(Error::SessionTableFull {
            max_sessions: self.entries.len(),
        })
    }

    fn close_session(&self, slot: usize, _retired: &mut SessionRetired) {
        let e = self.entry(slot);
        let _g = self.write(Ctr::Untracked(e));
        for w in [
            &e.id,
            &e.xmin,
            &e.read_ts,
            &e.claim,
            &e.prepared,
            &e.announced,
        ] {
            w.store(0, Ordering::Relaxed);
        }
        e.in_use.store(false, Ordering::Relaxed);
    }

    #[inline]
    fn begin(&self, slot: usize, snap: &mut Snapshot, ctr: &Counters) {
        // Acquisition 1: take (or reuse) a snapshot and publish its pin
        // under the read lock, so no horizon scan can miss it.
        let g = self.read(Ctr::Session(ctr));
        self.snapshot_locked(&g, snap, ctr);
        self.entry(slot).xmin.store(snap.xmin, Ordering::Relaxed);
        drop(g);
    }

    #[inline]
    fn refresh(&self, _slot: usize, snap: &mut Snapshot, ctr: &Counters) {
        if self.stale(snap) {
            let g = self.read(Ctr::Session(ctr));
            self.scan_into(&g, snap);
            ctr.snapshot_rebuilt.bump(1);
        } else {
            ctr.snapshot_reused.bump(1);
        }
    }

    fn set_read_timestamp(
        &self,
        slot: usize,
        snap: &mut Snapshot,
        ts: Timestamp,
        roundup: bool,
        ctr: &Counters,
    ) -> Result<Timestamp> {
        if PATCHED {
            // The fix: check, publish and rebuild under one acquisition.
            let g = self.read(Ctr::Session(ctr));
            let r = self.check_publish_read_ts(&g, slot, ts, roundup)?;
            self.snapshot_locked(&g, snap, ctr);
            Ok(r)
        } else {
            // Acquisition 2: check against oldest and publish.
            let r = {
                let g = self.read(Ctr::Session(ctr));
                self.check_publish_read_ts(&g, slot, ts, roundup)?
            };
            // Acquisition 3, only when a writer completed since begin: the
            // snapshot taken at begin no longer matches the read timestamp.
            if self.stale(snap) {
                let g = self.read(Ctr::Session(ctr));
                self.scan_into(&g, snap);
                ctr.snapshot_rebuilt.bump(1);
            } else {
                ctr.snapshot_reused.bump(1);
            }
            Ok(r)
        }
    }

    fn begin_at_stable(&self, slot: usize, ctr: &Counters) -> StableView {
        let e = self.entry(slot);
        let g = self.read(Ctr::Session(ctr));
        // Acquire: pairs with the Release store in `allocate_id`, as in
        // `scan_into`.
        let xmax = self.current.load(Ordering::Acquire);
        let mut below = xmax;
        for o in self.entries.iter() {
            let id = o.id.load(Ordering::Relaxed);
            if id != 0 && id < below {
                below = id;
            }
        }
        e.read_ts.store(g.stable, Ordering::Relaxed);
        e.xmin.store(below, Ordering::Relaxed);
        StableView {
            stable: Timestamp::new(g.stable),
            complete_below: below,
        }
    }

    #[inline]
    fn end(&self, slot: usize) {
        let e = self.entry(slot);
        // Release: pairs with the Acquire loads of reports (`pins`,
        // `query_timestamp`); the horizon scan runs under the write lock.
        // No lock here: a stale pin only holds the horizon back.
        e.xmin.store(0, Ordering::Release);
        e.read_ts.store(0, Ordering::Release);
    }

    fn allocate_id(&self, slot: usize) -> u64 {
        let e = self.entry(slot);
        let _g = self.id_lock.lock();
        count_lock_rmw();
        let id = self.current.load(Ordering::Relaxed);
        e.id.store(id, Ordering::Relaxed);
        // Release: publishes the entry's id before the new `current`; pairs
        // with the Acquire load in `scan_into`.
        self.current.store(id + 1, Ordering::Release);
        id
    }

    fn claim_commit(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
        let e = self.entry(slot);
        let g = self.read(Ctr::Untracked(e));
        Self::check_after_stable(&g, ts, prepared)?;
        e.claim.store(ts.get(), Ordering::Relaxed);
        Ok(())
    }

    fn complete(
        &self,
        slot: usize,
        _id: u64,
        _keep: Option<&mut Snapshot>,
        _retired: &mut SessionRetired,
        ctr: &Counters,
    ) {
        // `_keep` unused: the baselines rebuild under the lock as
        // WiredTiger does (their lock counts are the comparison).
        let e = self.entry(slot);
        let mut g = self.write(Ctr::Session(ctr));
        e.id.store(0, Ordering::Relaxed);
        g.generation += 1;
        // Release: pairs with the Acquire load in `stale`.
        self.gen_pub.store(g.generation, Ordering::Release);
    }

    fn release_claim(&self, slot: usize, durable: Timestamp) {
        let e = self.entry(slot);
        if !durable.is_none() {
            // Relaxed: a report (all_durable), not a guard for any data.
            self.durable.fetch_max(durable.get(), Ordering::Relaxed);
        }
        // Release: pairs with the setter's Acquire load; the commit is
        // installed before stable may pass it.
        e.claim.store(0, Ordering::Release);
    }

    fn claim_prepare(&self, slot: usize, ts: Timestamp, roundup: bool) -> Result<Timestamp> {
        let e = self.entry(slot);
        let g = self.read(Ctr::Untracked(e));
        let mut p = ts.get();
        if p <= g.stable {
            if !roundup {
                return Err(Error::PrepareTimestampNotAfterStable {
                    prepare: ts,
                    stable: Timestamp::new(g.stable),
                });
            }
            p = g.stable + 1;
        }
        check_prepare_against_readers(
            slot,
            p,
            self.entries
                .iter()
                .map(|o| o.read_ts.load(Ordering::Relaxed)),
        )?;
        e.prepared.store(p, Ordering::Relaxed);
        Ok(Timestamp::new(p))
    }

    fn announce(&self, slot: usize, ts: Timestamp, prepared: bool) -> Result<()> {
        let e = self.entry(slot);
        let g = self.read(Ctr::Untracked(e));
        Self::check_after_stable(&g, ts, prepared)?;
        e.announced.store(ts.get(), Ordering::Relaxed);
        Ok(())
    }

    fn release_prepare(&self, slot: usize) {
        let e = self.entry(slot);
        // Release: as in `release_claim`.
        e.prepared.store(0, Ordering::Release);
        e.announced.store(0, Ordering::Release);
    }

    #[inline]
    fn horizon(&self) -> Horizon {
        Horizon {
            // Acquire: pairs with the Release stores in `advance_locked`.
            xmin: self.horizon_xmin.load(Ordering::Acquire),
            ts: self.horizon_ts.load(Ordering::Acquire),
        }
    }

    fn advance_horizon(&self, ctr: &Counters) {
        let g = self.write(Ctr::Session(ctr));
        self.advance_locked(&g);
        ctr.horizon_advances.bump(1);
    }

    fn oldest_stable(&self) -> (Timestamp, Timestamp) {
        // Acquire: pairs with the Release stores in `set_timestamps`.
        (
            Timestamp::new(self.oldest_pub.load(Ordering::Acquire)),
            Timestamp::new(self.stable_pub.load(Ordering::Acquire)),
        )
    }

    fn set_timestamps(&self, u: &TimestampUpdate) -> Result<()> {
        if let Some(o) = u.oldest {
            check_ts(TimestampRole::Oldest, o)?;
        }
        if let Some(s) = u.stable {
            check_ts(TimestampRole::Stable, s)?;
        }
        if let Some(d) = u.durable {
            check_ts(TimestampRole::GlobalDurable, d)?;
        }
        loop {
            let mut g = self.write(Ctr::None);
            let new_oldest = u.oldest.map_or(g.oldest, Timestamp::get);
            let new_stable = u.stable.map_or(g.stable, Timestamp::get);
            if new_oldest < g.oldest {
                return Err(Error::TimestampMovedBackwards {
                    role: TimestampRole::Oldest,
                    requested: Timestamp::new(new_oldest),
                    current: Timestamp::new(g.oldest),
                });
            }
            if new_stable < g.stable {
                return Err(Error::TimestampMovedBackwards {
                    role: TimestampRole::Stable,
                    requested: Timestamp::new(new_stable),
                    current: Timestamp::new(g.stable),
                });
            }
            if new_stable != 0 && new_oldest > new_stable {
                return Err(Error::OldestAfterStable {
                    oldest: Timestamp::new(new_oldest),
                    stable: Timestamp::new(new_stable),
                });
            }
            if new_stable > g.stable {
                let mut busy = false;
                for e in self.entries.iter() {
                    // Acquire: pairs with the Release stores of `prepared`
                    // and `announced`. Stronger than needed: both are
                    // published under the read lock, which our write lock
                    // excludes.
                    let p = e.prepared.load(Ordering::Acquire);
                    let a = e.announced.load(Ordering::Acquire);
                    if p != 0 && a != 0 && a <= new_stable {
                        return Err(Error::StablePastPreparedDurable {
                            stable: Timestamp::new(new_stable),
                            durable: Timestamp::new(a),
                        });
                    }
                    // Acquire: pairs with the Release clear in
                    // `release_claim`.
                    let c = e.claim.load(Ordering::Acquire);
                    busy |= c != 0 && c <= new_stable;
                }
                if busy {
                    // A commit at or below the new stable is in flight
                    // (claimed under the read lock): let it finish.
                    drop(g);
                    spin_hint();
                    continue;
                }
                g.stable = new_stable;
                // Release: pairs with the Acquire load in `oldest_stable`.
                self.stable_pub.store(new_stable, Ordering::Release);
            }
            if let Some(d) = u.durable {
                // May move backwards, as in WiredTiger (invariant 4's
                // exception).
                self.durable.store(d.get(), Ordering::Relaxed);
            }
            if new_oldest > g.oldest {
                g.oldest = new_oldest;
                self.oldest_pub.store(new_oldest, Ordering::Release);
                self.advance_locked(&g);
            }
            return Ok(());
        }
    }

    fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        let g = self.read(Ctr::None);
        report_timestamp(
            kind,
            Timestamp::new(g.oldest),
            Timestamp::new(g.stable),
            // Acquire loads: pair with the Release stores that set each
            // value. Stronger than needed: a report, nothing is read
            // through them.
            Timestamp::new(self.durable.load(Ordering::Acquire)),
            self.entries.iter().map(|e| SlotTimestamps {
                read_ts: Timestamp::new(e.read_ts.load(Ordering::Relaxed)),
                claim: Timestamp::new(e.claim.load(Ordering::Acquire)),
                announced: Timestamp::new(e.announced.load(Ordering::Acquire)),
            }),
        )
    }

    fn current_xmin(&self) -> u64 {
        let g = self.read(Ctr::None);
        let mut s = Snapshot::default();
        self.scan_into(&g, &mut s);
        s.xmin
    }

    fn sessions_open(&self) -> usize {
        self.entries
            .iter()
            // Acquire: pairs with the Release clear of `in_use`. Stronger
            // than needed: a report.
            .filter(|e| e.in_use.load(Ordering::Acquire))
            .count()
    }

    fn pins(&self) -> Vec<(usize, u64, u64)> {
        let _g = self.read(Ctr::None);
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.in_use.load(Ordering::Relaxed))
            .map(|(i, e)| {
                (
                    i,
                    e.xmin.load(Ordering::Relaxed),
                    e.read_ts.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    fn add_stats(&self, slot: Option<usize>, stats: &mut Stats) {
        let mut add = |e: &Entry| {
            stats.read_lock_acquisitions += e.untracked_read.load(Ordering::Relaxed);
            stats.write_lock_acquisitions += e.untracked_write.load(Ordering::Relaxed);
            stats.lock_wait_ns += e.untracked_wait_ns.load(Ordering::Relaxed);
        };
        match slot {
            Some(i) => add(self.entry(i)),
            None => self.entries.iter().for_each(|e| add(e)),
        }
    }
}
