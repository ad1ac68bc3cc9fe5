//! Beginning a transaction and reading: the lazy snapshot and its pin, the
//! read timestamp, the read view, and the id a first write allocates.

use super::{recover_leaked, State, Transaction};
use crate::config::{Isolation, PrepareConflicts, TxnOptions};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::machinery::manager::TxnSession;
use crate::machinery::protocol::Protocol;
use crate::machinery::version::{ReadView, VersionStatus};
use crate::sync::{mutant as m, mutant_on};
use crate::ts::Timestamp;

impl<'s, 'm, P: Protocol> Transaction<'s, 'm, P> {
    #[inline]
    pub(in crate::machinery) fn begin(
        sess: &'s mut TxnSession<'m, P>,
        opts: &TxnOptions,
    ) -> Result<Self> {
        let opts = *opts;
        if let Some(ts) = opts.read_timestamp {
            check_ts(TimestampRole::Read, ts)?;
            if opts.read_at_stable {
                return Err(Error::IncompatibleOptions {
                    first: "read_at_stable",
                    second: "read_timestamp",
                });
            }
        }
        if sess.open.live {
            recover_leaked(sess, |_| {});
        }
        sess.open.live = true;
        let rmw_at_begin = crate::sync::thread_rmw_count().unwrap_or(0);
        let mgr = sess.mgr;
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
        let mut t = Transaction { sess };
        if opts.read_at_stable {
            let sv = mgr.proto.begin_at_stable(t.sess.slot, ctr);
            t.sess.cur.pinned = true;
            // With no stable timestamp set, a view "at stable 0" would see
            // untimestamped versions that pruning may cut once oldest is set
            // (no pin can hold the timestamp horizon at 0): read the latest
            // committed snapshot instead (still read-only). Found by the
            // differential fuzzer (tests/fuzz_corpus_replay.rs).
            if sv.stable != 0 {
                t.sess.cur.read_ts = Timestamp::new(sv.stable);
                t.sess.cur.stable = Some(sv);
                t.sess.cur.snapped = true;
                return Ok(t);
            }
            // The snapshot comes later, lazily, with its own pin; until
            // then this one publishes nothing (as any lazy begin).
            mgr.proto.end(t.sess.slot);
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
            .proto
            .begin(self.sess.slot, &mut self.sess.snap, ctr);
        self.sess.cur.pinned = true;
    }

    /// Takes the transaction's snapshot now, if it has none yet. A
    /// transaction takes its snapshot at its first read
    /// ([`read_view`](Self::read_view)), write
    /// ([`new_version`](Self::new_version)) or read timestamp, not at
    /// begin; call this to fix its point in time earlier (for instance
    /// before waiting for another thread), at the cost begin used to pay.
    /// A no-op once it has one.
    ///
    /// # Errors
    /// As [`Transaction::check_usable`].
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.check_usable()?;
        if !self.sess.cur.snapped {
            self.take_snapshot_now();
        }
        Ok(())
    }

    /// Has the transaction taken its snapshot (or, with `read_at_stable`,
    /// its stable view) yet? See [`Transaction::take_snapshot`].
    #[inline]
    pub fn has_snapshot(&self) -> bool {
        self.sess.cur.snapped
    }

    /// Sets the read timestamp after begin (once). Publishes it, validates
    /// it against oldest (an error, or round up to oldest with
    /// `roundup_read`), and takes a fresh snapshot: a commit that landed
    /// since begin is seen if its commit timestamp is at or below `ts`. No
    /// lock. Returns the timestamp in force.
    ///
    /// After an error the transaction is still usable and may set a valid
    /// read timestamp.
    ///
    /// # Errors
    /// The transaction is not usable; `ts` is 0 or out of range; a read
    /// timestamp is already set; `ts` is below oldest (without
    /// `roundup_read`).
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
        let proto = &self.sess.mgr.proto;
        let r = if self.sess.cur.snapped {
            proto.set_read_timestamp(
                self.sess.slot,
                &mut self.sess.snap,
                ts,
                self.sess.cur.opts.roundup_read,
                ctr,
            )?
        } else {
            // The lazy snapshot comes with the read timestamp: one
            // handshake for both pins.
            let r = proto.begin_at_read_ts(
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
                let (snap, read_ts) = (&self.sess.snap, self.sess.cur.read_ts.get());
                ReadView::snapshot(id, snap, read_ts, ignore, prepared)
            }
        }
    }

    /// The view to read with now. The transaction's first call takes its
    /// snapshot (and publishes its pin); with [`Isolation::ReadCommitted`]
    /// every later call takes a fresh one (one load when nothing completed
    /// since).
    ///
    /// # Errors
    /// As [`Transaction::check_usable`].
    #[inline]
    pub fn read_view(&mut self) -> Result<ReadView<'_>> {
        self.check_usable()?;
        if !self.sess.cur.snapped {
            self.take_snapshot_now();
        } else if self.sess.cur.opts.isolation == Isolation::ReadCommitted
            && self.sess.cur.stable.is_none()
        {
            let ctr = self.sess.ctr();
            self.sess
                .mgr
                .proto
                .refresh(self.sess.slot, &mut self.sess.snap, ctr);
        }
        Ok(self.view())
    }

    /// May this transaction write?
    ///
    /// # Errors
    /// As [`Transaction::check_usable`], and [`Error::ReadOnlyTransaction`]
    /// for a `read_only` or `read_at_stable` transaction or one that ignores
    /// prepared updates.
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

    /// Starts a write: the transaction gets its id now if this is its first
    /// write, and you get the [`VersionStatus`] to embed
    /// in the new version, with the view to check the key's existing
    /// versions against ([`ReadView::write_check`], first updater wins)
    /// before you link it.
    ///
    /// # Errors
    /// As [`Transaction::check_writable`].
    #[inline]
    pub fn new_version(&mut self) -> Result<(VersionStatus, ReadView<'_>)> {
        self.check_writable()?;
        self.read_view()?;
        if self.sess.cur.id == 0 {
            // The id comes with the first write: a read-only transaction never
            // allocates one.
            self.sess.cur.id = self.sess.mgr.proto.allocate_id(self.sess.slot);
            self.sess.open.id = self.sess.cur.id;
        }
        Ok((VersionStatus::new(self.sess.cur.id), self.view()))
    }

    /// Records a write-write conflict ([`WriteCheck::Conflict`](crate::machinery::WriteCheck::Conflict)):
    /// from now on the transaction may only roll back (every other call is
    /// [`Error::MustRollBack`]).
    pub fn mark_write_conflict(&mut self) {
        if self.sess.cur.state == State::Active {
            self.sess.cur.state = State::Doomed;
            self.sess.ctr().write_conflicts.bump(1);
        }
    }
}
