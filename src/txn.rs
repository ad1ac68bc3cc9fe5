//! [`Txn`]: reads, writes, timestamps, prepare, commit and rollback.

use crate::config::{CommitOptions, Isolation, PrepareConflicts, TxnOptions};
use crate::engine::{OpenTxn, Session, WriteRec};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::lockfree::LockFree;
use crate::protocol::{Protocol, StableView};
use crate::raw::chain::{Found, ReadAs, Version, View, ABORTED, PREPARED};
use crate::raw::reclaim::RETIRE_BATCH;
use crate::ts::{Timestamp, TxnId};
use std::ops::{Bound, RangeBounds};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Active,
    /// A write conflict: only rollback is allowed.
    Doomed,
    Prepared,
    Finished,
}

/// A transaction. Reads see one snapshot (or, with `read_at_stable`, the
/// stable watermark); writes are visible to others only after commit.
///
/// Dropping an open transaction rolls it back.
pub struct Txn<'s, 'e, P: Protocol = LockFree> {
    sess: &'s mut Session<'e, P>,
    opts: TxnOptions,
    state: State,
    id: u64,
    read_ts: Timestamp,
    commit_ts: Timestamp,
    prepare_ts: Timestamp,
    /// A prepared transaction's durable timestamp from
    /// `set_durable_timestamp` (the default for its commit).
    durable_ts: Timestamp,
    stable: Option<StableView>,
    rmw_at_begin: u64,
}

impl<'s, 'e, P: Protocol> Txn<'s, 'e, P> {
    #[inline]
    pub(crate) fn begin(sess: &'s mut Session<'e, P>, opts: &TxnOptions) -> Result<Self> {
        let opts = *opts;
        if let Some(ts) = opts.read_timestamp {
            check_ts(TimestampRole::Read, ts)?;
            if opts.read_at_stable {
                return Err(Error::ReadTimestampAlreadySet {
                    current: sess.engine.proto.oldest_stable().1,
                });
            }
        }
        if sess.open.live {
            recover_leaked(sess);
        }
        sess.open.live = true;
        let rmw_at_begin = crate::sync::thread_rmw_count().unwrap_or(0);
        let engine = sess.engine;
        let ctr = sess.ctr();
        ctr.begins.bump(1);
        let mut t = Txn {
            opts,
            state: State::Active,
            id: 0,
            read_ts: Timestamp::NONE,
            commit_ts: Timestamp::NONE,
            prepare_ts: Timestamp::NONE,
            durable_ts: Timestamp::NONE,
            stable: None,
            rmw_at_begin,
            sess,
        };
        if opts.read_at_stable {
            let sv = engine.proto.begin_at_stable(t.sess.slot, ctr);
            // With no stable timestamp set, a view "at stable 0" would see
            // untimestamped versions that pruning may cut once oldest is set
            // (no pin can hold the timestamp horizon at 0): read the latest
            // committed snapshot instead (still read-only). Found by the
            // differential fuzzer (tests/fuzz_corpus_replay.rs).
            if sv.stable != 0 {
                t.read_ts = Timestamp::new(sv.stable);
                t.stable = Some(sv);
                return Ok(t);
            }
        }
        engine.proto.begin(t.sess.slot, &mut t.sess.snap, ctr);
        if let Some(ts) = opts.read_timestamp {
            // On error `t` drops here, which ends it and clears its pins.
            t.set_read_timestamp(ts)?;
        }
        Ok(t)
    }

    /// This transaction's id: [`TxnId::NONE`] until its first write.
    pub fn id(&self) -> TxnId {
        TxnId(self.id)
    }

    /// The read timestamp in force ([`Timestamp::NONE`] if none). For a
    /// `read_at_stable` transaction, the stable timestamp it reads at.
    pub fn read_timestamp(&self) -> Timestamp {
        self.read_ts
    }

    /// The options it began with.
    pub fn options(&self) -> &TxnOptions {
        &self.opts
    }

    fn check_usable(&self) -> Result<()> {
        match self.state {
            State::Active => Ok(()),
            State::Doomed => Err(Error::MustRollBack),
            State::Prepared => Err(Error::TransactionPrepared),
            State::Finished => Err(Error::TransactionFinished),
        }
    }

    /// Sets the read timestamp after begin (once). Publishes it, validates
    /// it against oldest (an error, or round up to oldest with
    /// `roundup_read`), and takes a fresh snapshot: a commit that landed
    /// since begin is seen if its commit timestamp is at or below `ts`. No
    /// lock. Returns the timestamp in force.
    ///
    /// After an error the transaction is still usable and may set a valid
    /// read timestamp.
    pub fn set_read_timestamp(&mut self, ts: Timestamp) -> Result<Timestamp> {
        self.check_usable()?;
        check_ts(TimestampRole::Read, ts)?;
        if !self.read_ts.is_none() {
            return Err(Error::ReadTimestampAlreadySet {
                current: self.read_ts,
            });
        }
        let ctr = self.sess.ctr();
        let r = self.sess.engine.proto.set_read_timestamp(
            self.sess.slot,
            &mut self.sess.snap,
            ts,
            self.opts.roundup_read,
            ctr,
        )?;
        self.read_ts = r;
        Ok(r)
    }

    #[inline]
    fn view(&self) -> View<'_> {
        View {
            own: self.id,
            how: match self.stable {
                Some(sv) => ReadAs::Stable {
                    stable: sv.stable,
                    complete_below: sv.complete_below,
                },
                None => ReadAs::Snapshot {
                    snap: &self.sess.snap,
                    read_ts: self.read_ts.get(),
                },
            },
            ignore_prepared: self.opts.prepare_conflicts != PrepareConflicts::Enforce,
        }
    }

    #[inline]
    fn before_read(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.opts.isolation == Isolation::ReadCommitted && self.stable.is_none() {
            let ctr = self.sess.ctr();
            self.sess
                .engine
                .proto
                .refresh(self.sess.slot, &mut self.sess.snap, ctr);
        }
        Ok(())
    }

    /// Calls `f` with the visible value of `key` (or `None`), borrowed from
    /// the store with no copy. The epoch guard is held only while `f` runs.
    pub fn get_with<R>(&mut self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        self.before_read()?;
        let store = &self.sess.engine.store;
        let guard = store.rc.pin();
        let mut examined = 0;
        let found = match store.index.get(key, &guard) {
            Some(e) => e.read_counted(&self.view(), &guard, &mut examined),
            None => Found::Absent,
        };
        let ctr = self.sess.ctr();
        ctr.reads.bump(1);
        ctr.versions_read.bump(examined);
        match found {
            Found::Value(v) => Ok(f(Some(v))),
            Found::Deleted | Found::Absent => Ok(f(None)),
            Found::PrepareConflict => {
                self.sess.ctr().prepare_conflicts.bump(1);
                Err(Error::PrepareConflict { key: key.to_vec() })
            }
        }
    }

    /// The visible value of `key`, copied out.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// Visits the visible key-value pairs with keys in `range`, in key
    /// order (tombstones hidden), until `f` returns `false`. Values are
    /// borrowed; the epoch guard is held for the scan.
    pub fn scan<Q, R>(&mut self, range: R, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()>
    where
        Q: AsRef<[u8]> + ?Sized,
        R: RangeBounds<Q>,
    {
        self.before_read()?;
        let bounds = (map_bound(range.start_bound()), map_bound(range.end_bound()));
        let store = &self.sess.engine.store;
        let guard = store.rc.pin();
        let view = self.view();
        let mut conflict: Option<Vec<u8>> = None;
        let (mut reads, mut examined) = (0, 0);
        store.index.range(bounds, &guard, |k, e| {
            reads += 1;
            match e.read_counted(&view, &guard, &mut examined) {
                Found::Value(v) => f(k, v),
                Found::Deleted | Found::Absent => true,
                Found::PrepareConflict => {
                    conflict = Some(k.to_vec());
                    false
                }
            }
        });
        drop(guard);
        let ctr = self.sess.ctr();
        ctr.reads.bump(reads);
        ctr.versions_read.bump(examined);
        match conflict {
            Some(key) => {
                self.sess.ctr().prepare_conflicts.bump(1);
                Err(Error::PrepareConflict { key })
            }
            None => Ok(()),
        }
    }

    /// The visible key-value pairs with keys in `range`, in key order.
    pub fn range<Q, R>(&mut self, range: R) -> Result<Vec<(Vec<u8>, Vec<u8>)>>
    where
        Q: AsRef<[u8]> + ?Sized,
        R: RangeBounds<Q>,
    {
        let mut out = Vec::new();
        self.scan(range, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Writes `value` under `key`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let max = self.sess.engine.config.max_value_len;
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.write(key, Some(value))
    }

    /// Deletes `key` (writes a tombstone).
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.write(key, None)
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.check_usable()?;
        if self.opts.read_only
            || self.opts.read_at_stable
            || self.opts.prepare_conflicts == PrepareConflicts::Ignore
        {
            return Err(Error::ReadOnlyTransaction);
        }
        let max = self.sess.engine.config.max_key_len;
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        self.before_read()?;
        let engine = self.sess.engine;
        if self.id == 0 {
            // PROTOCOL rule 3: the id comes with the first write.
            self.id = engine.proto.allocate_id(self.sess.slot);
            self.sess.open.id = self.id;
        }
        let store = &engine.store;
        let guard = store.rc.pin();
        let entry = store.index.get_or_insert(key, &store.rc, &guard);
        let v = Version::alloc(self.id, value);
        match entry.prepend(v, &self.view(), &guard) {
            Ok((version, retries)) => {
                self.sess.ctr().chain_cas_retries.bump(retries);
                self.sess.writes.push(WriteRec {
                    entry: entry as *const _,
                    version,
                });
                Ok(())
            }
            Err(_) => {
                self.state = State::Doomed;
                self.sess.ctr().write_conflicts.bump(1);
                Err(Error::WriteConflict { key: key.to_vec() })
            }
        }
    }

    /// With `roundup_prepared`, a prepared transaction's commit timestamp
    /// below its prepare timestamp is rounded up to it (as WiredTiger's
    /// `roundup_timestamps=(prepared=true)` does).
    fn round_commit_ts(&self, commit: Timestamp) -> Timestamp {
        if self.state == State::Prepared && self.opts.roundup_prepared && commit < self.prepare_ts {
            self.prepare_ts
        } else {
            commit
        }
    }

    /// Validates a commit timestamp against oldest (unprepared only), the
    /// read timestamp and the prepare timestamp. Stable is checked where the
    /// timestamp is claimed or announced.
    fn check_commit_ts(&self, commit: Timestamp) -> Result<()> {
        check_ts(TimestampRole::Commit, commit)?;
        let (oldest, _) = self.sess.engine.proto.oldest_stable();
        // A prepared transaction's commit timestamp is bounded by its prepare
        // timestamp, not by oldest: oldest and stable may move past a
        // prepared transaction, and a two-phase commit's timestamp is chosen
        // by its coordinator (WiredTiger checks only `commit >= prepare`).
        if self.prepare_ts.is_none() && commit < oldest {
            return Err(Error::CommitTimestampBeforeOldest { commit, oldest });
        }
        if !self.read_ts.is_none() && commit < self.read_ts {
            return Err(Error::CommitTimestampBeforeRead {
                commit,
                read: self.read_ts,
            });
        }
        if !self.prepare_ts.is_none() && commit < self.prepare_ts {
            return Err(Error::CommitTimestampBeforePrepare {
                commit,
                prepare: self.prepare_ts,
            });
        }
        Ok(())
    }

    /// Sets the commit timestamp before commit (one per transaction; the
    /// same value again is accepted and validated again, as WiredTiger
    /// does). Unprepared: it must
    /// be after stable and at or above oldest and the read timestamp, and is
    /// counted by `all_durable` from now until the transaction ends.
    /// Prepared: it must be at or above the prepare timestamp (rounded up to
    /// it with `roundup_prepared`) and at or below a durable timestamp
    /// already set; it may be at or below stable and oldest, and is not
    /// counted by `all_durable` (the durable timestamp is). After an error
    /// the transaction is still usable.
    ///
    /// # Errors
    ///
    /// [`Error::CommitTimestampAlreadySet`] for a value other than the one
    /// already set (after rounding), prepared or not; otherwise the
    /// commit-timestamp errors of the rules above.
    pub fn set_commit_timestamp(&mut self, ts: Timestamp) -> Result<()> {
        match self.state {
            State::Active | State::Prepared => {}
            _ => self.check_usable()?,
        }
        let ts = self.round_commit_ts(check_ts(TimestampRole::Commit, ts)?);
        // A second, different value is refused (deliberate difference 6);
        // the same one again goes through the checks below as the first
        // did (re-announcing it is idempotent).
        if !self.commit_ts.is_none() && ts != self.commit_ts {
            return Err(Error::CommitTimestampAlreadySet {
                current: self.commit_ts,
            });
        }
        self.check_commit_ts(ts)?;
        if !self.durable_ts.is_none() && self.durable_ts < ts {
            return Err(Error::DurableTimestampBeforeCommit {
                durable: self.durable_ts,
                commit: ts,
            });
        }
        if self.state != State::Prepared {
            self.sess.engine.proto.announce(self.sess.slot, ts, false)?;
        }
        self.commit_ts = ts;
        Ok(())
    }

    /// Announces a prepared transaction's durable timestamp before it
    /// resolves: it must be after stable and at or above a commit timestamp
    /// already set, and becomes the durable timestamp `commit` uses unless
    /// [`CommitOptions::durable_ts`] gives another. Stable may not pass it
    /// until the transaction commits or rolls back
    /// ([`Error::StablePastPreparedDurable`]); `all_durable` stays below it.
    /// Setting it again replaces it (a refused value keeps the old one).
    pub fn set_durable_timestamp(&mut self, ts: Timestamp) -> Result<()> {
        if self.state != State::Prepared {
            self.check_usable()?;
            check_ts(TimestampRole::Durable, ts)?;
            return Err(Error::DurableTimestampWithoutPrepare { durable: ts });
        }
        check_ts(TimestampRole::Durable, ts)?;
        if !self.commit_ts.is_none() && ts < self.commit_ts {
            return Err(Error::DurableTimestampBeforeCommit {
                durable: ts,
                commit: self.commit_ts,
            });
        }
        self.sess.engine.proto.announce(self.sess.slot, ts, true)?;
        self.durable_ts = ts;
        Ok(())
    }

    /// Prepares the transaction (two-phase commit) at `ts`: it must be after
    /// stable and at or above oldest (or rounded up to the first timestamp
    /// that is, with `roundup_prepared`) and not below any active read
    /// timestamp, this transaction's own included. Afterwards the
    /// transaction may only commit (with `commit_ts >= prepare_ts` and
    /// `durable_ts >= commit_ts`, `durable_ts` after stable) or roll back;
    /// readers at or above `ts` meet its updates as prepare conflicts.
    /// Returns the prepare timestamp in force.
    pub fn prepare(&mut self, ts: Timestamp) -> Result<Timestamp> {
        if self.state == State::Prepared {
            return Err(Error::AlreadyPrepared);
        }
        self.check_usable()?;
        if !self.commit_ts.is_none() {
            return Err(Error::PrepareAfterCommitTimestamp {
                commit: self.commit_ts,
            });
        }
        check_ts(TimestampRole::Prepare, ts)?;
        let engine = self.sess.engine;
        let (oldest, stable) = engine.proto.oldest_stable();
        let mut want = ts;
        if want < oldest {
            if !self.opts.roundup_prepared {
                // Stable is checked first: with stable set, oldest <= stable,
                // so a prepare below oldest is also not after stable, and
                // that is the error the rules promise (DESIGN.md, "Prepare").
                // `PrepareTimestampBeforeOldest` is for no stable set.
                if !stable.is_none() {
                    return Err(Error::PrepareTimestampNotAfterStable {
                        prepare: ts,
                        stable,
                    });
                }
                return Err(Error::PrepareTimestampBeforeOldest {
                    prepare: ts,
                    oldest,
                });
            }
            // Rounded up to oldest here; `claim_prepare` rounds it further
            // up past stable.
            want = oldest;
        }
        let p = engine
            .proto
            .claim_prepare(self.sess.slot, want, self.opts.roundup_prepared)?;
        let refused = if p > Timestamp::MAX {
            // Rounded up past the largest timestamp: stable is at MAX.
            Some(Error::PrepareTimestampNotAfterStable {
                prepare: ts,
                stable: Timestamp::MAX,
            })
        } else if !self.read_ts.is_none() && p < self.read_ts {
            Some(Error::PrepareTimestampBeforeActiveRead {
                prepare: p,
                read: self.read_ts,
            })
        } else {
            None
        };
        if let Some(e) = refused {
            // Nothing else was published yet: no announcement exists before
            // prepare (a commit timestamp refuses prepare above).
            engine.proto.release_prepare(self.sess.slot);
            return Err(e);
        }
        for w in &self.sess.writes {
            // SAFETY: our own versions stay linked until we finish (pruning
            // cuts only below committed versions; only we unlink ours), and
            // the store outlives the session.
            unsafe { &*w.version }.set_status(PREPARED, p.get());
        }
        if self.id != 0 && !crate::sync::mutant_on(crate::sync::mutant::PREPARE_SKIPS_EXIT) {
            // Prepare is an exit from the running set: the generation is
            // bumped (invariant 5; PostgreSQL's two-phase-commit bug).
            engine
                .proto
                .complete(self.sess.slot, self.id, self.sess.ctr());
        }
        self.prepare_ts = p;
        self.state = State::Prepared;
        self.sess.open.prepared = true;
        Ok(p)
    }

    /// Commits. With a commit timestamp (here or set earlier) it must be
    /// after stable and at or above oldest and the read timestamp; a
    /// prepared transaction needs one at or above its prepare timestamp
    /// (stable and oldest do not bound it), and its durable timestamp (given
    /// here, else the one set with `set_durable_timestamp`, else the commit
    /// timestamp) must be at or above it and after stable. A timestamp error
    /// leaves the transaction open and usable;
    /// a transaction that hit a write conflict is rolled back and gets
    /// [`Error::MustRollBack`].
    #[inline]
    pub fn commit(&mut self, opts: CommitOptions) -> Result<()> {
        if self.id == 0
            && self.state == State::Active
            && self.commit_ts.is_none()
            && opts == CommitOptions::default()
        {
            // Read-only, nothing announced: no validation, nothing to
            // install; clear the pins and count it.
            self.sess.ctr().commits.bump(1);
            self.finish();
            return Ok(());
        }
        self.commit_slow(opts)
    }

    fn commit_slow(&mut self, opts: CommitOptions) -> Result<()> {
        match self.state {
            State::Doomed => {
                self.abort();
                return Err(Error::MustRollBack);
            }
            State::Finished => return Err(Error::TransactionFinished),
            State::Active | State::Prepared => {}
        }
        let prepared = self.state == State::Prepared;
        let given = match opts.commit_ts {
            // An explicit 0 is an error, not "untimestamped".
            Some(t) => Some(self.round_commit_ts(check_ts(TimestampRole::Commit, t)?)),
            None => None,
        };
        let commit = match (given, self.commit_ts.to_option()) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::CommitTimestampAlreadySet { current: b })
            }
            (a, b) => a.or(b).unwrap_or(Timestamp::NONE),
        };
        let durable = match (prepared, opts.durable_ts) {
            (false, Some(d)) => return Err(Error::DurableTimestampWithoutPrepare { durable: d }),
            (false, None) => commit,
            (true, d) => {
                if commit.is_none() {
                    return Err(Error::PreparedCommitNeedsTimestamp);
                }
                let d = d.or(self.durable_ts.to_option()).unwrap_or(commit);
                check_ts(TimestampRole::Durable, d)?;
                if d < commit {
                    return Err(Error::DurableTimestampBeforeCommit { durable: d, commit });
                }
                d
            }
        };
        if !commit.is_none() {
            self.check_commit_ts(commit)?;
        }
        let engine = self.sess.engine;
        let slot = self.sess.slot;
        let ctr = self.sess.ctr();
        if self.id != 0 || prepared {
            let claim = if prepared { durable } else { commit };
            if !claim.is_none() {
                engine.proto.claim_commit(slot, claim, prepared)?;
            }
            let guard = engine.store.rc.pin();
            let mut examined = 0;
            for w in &self.sess.writes {
                // SAFETY: as in `prepare`: our versions are linked and
                // alive, unfinished, written by us; key entries live until
                // the store drops; we hold `guard`.
                examined += unsafe { (*w.entry).commit_version(w.version, commit.get()) };
            }
            drop(guard);
            ctr.commit_versions_examined.bump(examined);
            let early = crate::sync::mutant_on(crate::sync::mutant::CLAIM_RELEASED_BEFORE_INSTALL);
            if early {
                engine.proto.release_claim(slot, durable);
            }
            if self.id != 0 && !prepared {
                // The status flips above happen-before the Release CAS that
                // installs the next descriptor (invariant 9).
                engine.proto.complete(slot, self.id, ctr);
            }
            if !early {
                // After the install: a stable setter waiting for this claim
                // publishes stable only once a snapshot taken at it sees
                // this commit (handshake 2, invariant 8; loom model
                // `stable/snapshot`).
                engine.proto.release_claim(slot, durable);
            }
        }
        if self.announced() {
            engine.proto.release_prepare(slot);
        }
        ctr.commits.bump(1);
        self.prune_written();
        self.finish();
        Ok(())
    }

    /// Prunes the chains this transaction wrote, and refreshes the horizon
    /// every `horizon_refresh_commits` commits.
    fn prune_written(&mut self) {
        if self.sess.writes.is_empty() {
            return;
        }
        let engine = self.sess.engine;
        let ctr = self.sess.ctr();
        self.sess.commits += 1;
        if self.sess.commits >= engine.config.horizon_refresh_commits {
            self.sess.commits = 0;
            engine.proto.advance_horizon(ctr);
        }
        let h = engine.proto.horizon();
        let (_, stable) = engine.proto.oldest_stable();
        let store = &engine.store;
        let guard = store.rc.pin();
        let (mut pruned, mut examined) = (0, 0);
        let sess = &mut *self.sess;
        for w in &sess.writes {
            // SAFETY: key entries live until the store drops (keys are never
            // removed), and the store outlives the session.
            let n = unsafe { &*w.entry }.cut(h, stable.get(), &mut sess.tails, &guard);
            pruned += n.cut;
            examined += n.examined;
        }
        if sess.tails.len() >= RETIRE_BATCH {
            sess.tails.flush(&store.rc, &guard, store.on_free());
        }
        ctr.versions_pruned.bump(pruned);
        ctr.commit_versions_examined.bump(examined);
    }

    /// Rolls back: the transaction's writes are never seen by anyone.
    pub fn rollback(&mut self) -> Result<()> {
        if self.state == State::Finished {
            return Err(Error::TransactionFinished);
        }
        self.abort();
        Ok(())
    }

    fn abort(&mut self) {
        let announced = self.announced();
        roll_back(self.sess, self.id, self.state == State::Prepared, announced);
        self.finish();
    }

    /// Has this transaction published a prepare claim or an announcement
    /// in its slot (prepare, or a commit timestamp set before commit)?
    #[inline]
    fn announced(&self) -> bool {
        self.state == State::Prepared || !self.commit_ts.is_none()
    }

    #[inline]
    fn finish(&mut self) {
        let ctr = self.sess.ctr();
        if self.id == 0 {
            ctr.read_only_txns.bump(1);
            if let Some(now) = crate::sync::thread_rmw_count() {
                ctr.read_rmw_raw.bump(now - self.rmw_at_begin);
            }
        }
        self.sess.engine.proto.end(self.sess.slot);
        self.sess.writes.clear();
        self.sess.open = OpenTxn::default();
        self.state = State::Finished;
    }
}

impl<P: Protocol> Drop for Txn<'_, '_, P> {
    fn drop(&mut self) {
        // Dropping an open transaction (including during a panic) rolls it
        // back and clears its pins (invariant 12).
        if self.state != State::Finished {
            self.abort();
        }
    }
}

fn map_bound<Q: AsRef<[u8]> + ?Sized>(b: Bound<&Q>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Rolls back the writes in `sess.writes` of transaction `id`: unlinks its
/// versions, flips them to aborted, takes the transaction out of the running
/// set (unless prepare already did), and releases any prepare claim or
/// announcement.
///
/// Unlinking comes first, while the versions are still in progress (or
/// prepared): no other writer can prepend on top of one (its conflict check
/// refuses), so each is its chain's head once our own newer versions above
/// it are gone (newest first), and the unlink always succeeds. Flipped to
/// aborted first, a concurrent writer of the key could skip it and prepend
/// on top; the unlink then failed and the aborted version stayed in the
/// chain above the safe point for as long as a reader held the horizon
/// (issue 16).
fn roll_back<P: Protocol>(sess: &mut Session<'_, P>, id: u64, prepared: bool, announced: bool) {
    let engine = sess.engine;
    let slot = sess.slot;
    let ctr = sess.ctr();
    let store = &engine.store;
    let guard = store.rc.pin();
    let flip = |sess: &Session<'_, P>| {
        for w in &sess.writes {
            // SAFETY: our versions were linked and alive when `guard` was
            // pinned; those unlinked are retired under it, so none is freed
            // before it drops (invariant 11). Readers that loaded one before
            // the unlink see it aborted (or still in progress: invisible).
            unsafe { &*w.version }.set_status(ABORTED, 0);
        }
    };
    let flip_first = crate::sync::mutant_on(crate::sync::mutant::ROLLBACK_FLIPS_BEFORE_UNLINK);
    if flip_first {
        flip(sess);
    }
    let mut unlinked = 0;
    for w in sess.writes.iter().rev() {
        // SAFETY: key entries live until the store drops; our version is
        // still linked (we have not unlinked it yet).
        if unsafe { &*w.entry }.unlink_head(w.version, &store.rc, &guard) {
            unlinked += 1;
        }
    }
    if !flip_first {
        flip(sess);
    }
    drop(guard);
    if id != 0 && !prepared {
        // The flips above happen-before the descriptor CAS (invariant 9).
        engine.proto.complete(slot, id, ctr);
    }
    if announced {
        engine.proto.release_prepare(slot);
    }
    ctr.versions_pruned.bump(unlinked);
    ctr.rollbacks.bump(1);
}

/// The previous transaction on this session never ended: it was leaked
/// with `mem::forget`, so neither commit, rollback nor drop ran. Roll it
/// back now, as its drop would have, so its versions never become visible,
/// its id leaves the running set and its pins go.
#[cold]
pub(crate) fn recover_leaked<P: Protocol>(sess: &mut Session<'_, P>) {
    let open = sess.open;
    roll_back(sess, open.id, open.prepared, true);
    sess.engine.proto.end(sess.slot);
    sess.writes.clear();
    sess.open = OpenTxn::default();
}
