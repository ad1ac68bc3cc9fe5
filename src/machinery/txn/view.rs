//! Beginning a transaction and reading: the lazy snapshot and its pin, the
//! read timestamp, the read view, and the id a first write allocates.

use super::{recover_leaked, State, Transaction};
use crate::config::{Isolation, PrepareConflicts, TxnOptions};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::machinery::manager::TxnSession;
use crate::machinery::rules::Machinery;
use crate::machinery::version::{ReadView, VersionStatus};
use crate::sync::{mutant as m, mutant_on};
use crate::ts::Timestamp;

impl<'s, 'm, M: Machinery> Transaction<'s, 'm, M> {
    #[inline]
    pub(in crate::machinery) fn begin(
        sess: &'s mut TxnSession<'m, M>,
        opts: &TxnOptions,
    ) -> Result<Self> {
        let opts = *opts;
        if opts.read_timestamp.is_some() || opts.read_at_stable {
            return Self::begin_with_view(sess, opts);
        }
        // The common begin (a lazy snapshot) inline; the options that
        // take a view at begin out of line.
        Ok(Self::begin_lazy(sess, opts))
    }

    /// [`begin`](Self::begin) with `read_timestamp` or `read_at_stable`.
    #[inline(never)]
    fn begin_with_view(sess: &'s mut TxnSession<'m, M>, opts: TxnOptions) -> Result<Self> {
        if let Some(ts) = opts.read_timestamp {
            check_ts(TimestampRole::Read, ts)?;
            if opts.read_at_stable {
                return Err(Error::IncompatibleOptions {
                    first: "read_at_stable",
                    second: "read_timestamp",
                });
            }
        }
        let mut t = Self::begin_lazy(sess, opts);
        let mgr = t.sess.mgr;
        let ctr = t.sess.ctr();
        if opts.read_at_stable {
            let sv = mgr.machinery.begin_at_stable(t.sess.slot, ctr);
            t.sess.cur.pinned = true;
            // With no stable timestamp set, a view "at stable 0" would see
            // untimestamped versions that pruning may cut once oldest is set
            // (no pin can hold the timestamp horizon at 0): read the latest
            // committed snapshot instead (still read-only). Found by the
            // differential fuzzer (tests/transactions/fuzz_corpus_replay.rs).
            if sv.stable != Timestamp::NONE {
                t.sess.cur.read_ts = sv.stable;
                t.sess.cur.stable = Some(sv);
                t.sess.cur.snapped = true;
                return Ok(t);
            }
            // The snapshot comes later, lazily, with its own pin; until
            // then this one publishes nothing (as any lazy begin).
            mgr.machinery.end(t.sess.slot);
            t.sess.cur.pinned = false;
        }
        if let Some(ts) = opts.read_timestamp {
            // One handshake for the snapshot and the read timestamp
            // (`begin_at_read_ts`). On error `t` drops here, which ends it
            // and clears its pins.
            t.set_read_timestamp(ts)?;
        }
        Ok(t)
    }

    /// Opens the transaction with no view yet (taken lazily): the whole
    /// of a begin without `read_timestamp` or `read_at_stable`.
    #[inline(always)]
    fn begin_lazy(sess: &'s mut TxnSession<'m, M>, opts: TxnOptions) -> Self {
        if sess.open.live {
            recover_leaked(sess, |_| {});
        }
        sess.open.live = true;
        let rmw_at_begin = crate::sync::thread_rmw_count().unwrap_or(0);
        let ctr = sess.ctr();
        ctr.begins.bump(1);
        // Field by field, in place in the session (no struct built on the
        // stack and copied).
        let c = &mut sess.cur;
        c.opts = opts;
        c.state = State::Active;
        c.id = 0;
        c.read_ts = Timestamp::NONE;
        c.commit_ts = Timestamp::NONE;
        c.prepare_ts = Timestamp::NONE;
        c.durable_ts = Timestamp::NONE;
        c.stable = None;
        c.snapped = false;
        c.pinned = false;
        c.rmw_at_begin = rmw_at_begin;
        Transaction { sess }
    }

    /// Takes the snapshot and publishes its pin (handshake 1).
    #[inline]
    fn take_snapshot_now(&mut self) {
        self.sess.cur.snapped = true;
        if mutant_on(m::LAZY_VIEW_SKIPS_SNAPSHOT) && self.sess.snap.generation != 0 {
            // Broken on purpose (loom only): read with the session's cached
            // snapshot from an earlier transaction.
            return;
        }
        let ctr = self.sess.ctr();
        self.sess
            .mgr
            .machinery
            .begin(self.sess.slot, &mut self.sess.snap, ctr);
        self.sess.cur.pinned = true;
    }

    /// See [`Transaction::take_snapshot`](crate::machinery::Transaction::take_snapshot).
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.check_usable()?;
        if !self.sess.cur.snapped {
            self.take_snapshot_now();
        }
        Ok(())
    }

    /// See [`Transaction::has_snapshot`](crate::machinery::Transaction::has_snapshot).
    #[inline]
    pub fn has_snapshot(&self) -> bool {
        self.sess.cur.snapped
    }

    /// See [`Transaction::set_read_timestamp`](crate::machinery::Transaction::set_read_timestamp).
    #[inline]
    pub fn set_read_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        let ts = ts.into();
        self.check_usable()?;
        check_ts(TimestampRole::Read, ts)?;
        if !self.sess.cur.read_ts.is_none() {
            return Err(Error::ReadTimestampAlreadySet {
                current: self.sess.cur.read_ts,
            });
        }
        let ctr = self.sess.ctr();
        let machinery = &self.sess.mgr.machinery;
        let r = if self.sess.cur.snapped {
            machinery.set_read_timestamp(
                self.sess.slot,
                &mut self.sess.snap,
                ts,
                self.sess.cur.opts.roundup_read,
                ctr,
            )?
        } else {
            // The lazy snapshot comes with the read timestamp: one
            // handshake for both pins.
            let r = machinery.begin_at_read_ts(
                self.sess.slot,
                &mut self.sess.snap,
                ts,
                self.sess.cur.opts.roundup_read,
                ctr,
            )?;
            self.sess.cur.snapped = true;
            self.sess.cur.pinned = true;
            r
        };
        self.sess.cur.read_ts = r;
        Ok(r)
    }

    /// The view, once taken (`snapped`): only `read_view` and
    /// `new_version` call it, after taking the snapshot.
    #[inline]
    fn view(&self) -> ReadView<'_> {
        debug_assert!(
            self.sess.cur.snapped,
            "a view is only built after the snapshot"
        );
        let ignore = self.sess.cur.opts.prepare_conflicts != PrepareConflicts::Enforce;
        let prepared = &self.sess.mgr.prepared;
        let id = self.sess.cur.id;
        match self.sess.cur.stable {
            Some(sv) => ReadView::stable(id, sv.stable, sv.complete_below, ignore, prepared),
            None => {
                let (snap, read_ts) = (&self.sess.snap, self.sess.cur.read_ts);
                ReadView::snapshot(id, snap, read_ts, ignore, prepared)
            }
        }
    }

    /// See [`Transaction::read_view`](crate::machinery::Transaction::read_view).
    #[inline]
    pub fn read_view(&mut self) -> Result<ReadView<'_>> {
        // The common case inline (an active transaction that has its view
        // and need not refresh it); the rest, which takes a snapshot or
        // refreshes one, out of line, so this one saves no registers.
        let c = &self.sess.cur;
        if c.state == State::Active
            && c.snapped
            && (c.opts.isolation != Isolation::ReadCommitted || c.stable.is_some())
        {
            return Ok(self.view());
        }
        self.read_view_slow()
    }

    /// [`read_view`](Self::read_view) when the view must be taken or
    /// refreshed, or the transaction is not active.
    #[inline(never)]
    fn read_view_slow(&mut self) -> Result<ReadView<'_>> {
        self.check_usable()?;
        if !self.sess.cur.snapped {
            self.take_snapshot_now();
        } else if self.sess.cur.opts.isolation == Isolation::ReadCommitted
            && self.sess.cur.stable.is_none()
        {
            let ctr = self.sess.ctr();
            self.sess
                .mgr
                .machinery
                .refresh(self.sess.slot, &mut self.sess.snap, ctr);
        }
        Ok(self.view())
    }

    /// The view [`read_view`](Self::read_view) would return now, for an
    /// active transaction that has taken its snapshot and is not
    /// `ReadCommitted` (which refreshes it); `None` otherwise. No snapshot
    /// taken, no refresh: the serializable validation's view.
    #[inline]
    pub(crate) fn current_view(&self) -> Option<ReadView<'_>> {
        let c = &self.sess.cur;
        (c.snapped && c.state == State::Active && c.opts.isolation != Isolation::ReadCommitted)
            .then(|| self.view())
    }

    /// See [`Transaction::check_writable`](crate::machinery::Transaction::check_writable).
    #[inline]
    pub fn check_writable(&self) -> Result<()> {
        self.check_usable()?;
        if self.sess.cur.opts.read_only
            || self.sess.cur.opts.read_at_stable
            || self.sess.cur.opts.prepare_conflicts == PrepareConflicts::Ignore
        {
            return Err(Error::ReadOnlyTransaction);
        }
        Ok(())
    }

    /// See [`Transaction::new_version`](crate::machinery::Transaction::new_version).
    #[inline]
    pub fn new_version(&mut self) -> Result<(VersionStatus, ReadView<'_>)> {
        self.check_writable()?;
        self.read_view()?;
        if self.sess.cur.id == 0 {
            // The id comes with the first write: a read-only transaction never
            // allocates one.
            self.sess.cur.id = self.sess.mgr.machinery.allocate_id(self.sess.slot);
            self.sess.open.id = self.sess.cur.id;
        }
        Ok((VersionStatus::new(self.sess.cur.id), self.view()))
    }

    /// See [`Transaction::mark_write_conflict`](crate::machinery::Transaction::mark_write_conflict).
    pub fn mark_write_conflict(&mut self) {
        if self.sess.cur.state == State::Active {
            self.doom();
            self.sess.ctr().write_conflicts.bump(1);
        }
    }

    /// Dooms an active transaction, as a write conflict does, without
    /// counting one: it stays open, and everything but rollback (or a
    /// commit, which rolls it back) returns
    /// [`Error::MustRollBack`](crate::Error::MustRollBack).
    pub(crate) fn doom(&mut self) {
        if self.sess.cur.state == State::Active {
            self.sess.cur.state = State::Doomed;
        }
    }
}
