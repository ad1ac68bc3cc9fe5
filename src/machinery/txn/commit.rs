//! Committing: the commit timestamp's rules (set before commit or given
//! to it) and the commit itself, whose completion flips the transaction's
//! statuses before the descriptor install that publishes it (invariant 9).

use super::{Completion, PoisonOnUnwind, State, Transaction};
use crate::config::CommitOptions;
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::machinery::rules::Machinery;
use crate::machinery::version::COMMITTED;
use crate::sync::{mutant as m, mutant_on};
use crate::ts::Timestamp;

impl<M: Machinery> Transaction<'_, '_, M> {
    /// With `roundup_prepared`, a prepared transaction's commit timestamp
    /// below its prepare timestamp is rounded up to it (as WiredTiger's
    /// `roundup_timestamps=(prepared=true)` does).
    fn round_commit_ts(&self, commit: Timestamp) -> Timestamp {
        // Equivalent: `<=` (at equality both arms return the prepare
        // timestamp).
        if self.sess.cur.state == State::Prepared
            && self.sess.cur.opts.roundup_prepared
            && commit < self.sess.cur.prepare_ts
        {
            self.sess.cur.prepare_ts
        } else {
            commit
        }
    }

    /// Validates a commit timestamp against oldest (unprepared only), the
    /// read timestamp and the prepare timestamp. Stable is checked where the
    /// timestamp is claimed or announced.
    fn check_commit_ts(&self, commit: Timestamp) -> Result<()> {
        check_ts(TimestampRole::Commit, commit)?;
        let (oldest, _) = self.sess.mgr.machinery.oldest_stable();
        // A prepared transaction's commit timestamp is bounded by its prepare
        // timestamp, not by oldest: oldest and stable may move past a
        // prepared transaction, and a two-phase commit's timestamp is chosen
        // by its coordinator (WiredTiger checks only `commit >= prepare`).
        if self.sess.cur.prepare_ts.is_none() && commit < oldest {
            return Err(Error::CommitTimestampBeforeOldest { commit, oldest });
        }
        if !self.sess.cur.read_ts.is_none() && commit < self.sess.cur.read_ts {
            return Err(Error::CommitTimestampBeforeRead {
                commit,
                read: self.sess.cur.read_ts,
            });
        }
        if !self.sess.cur.prepare_ts.is_none() && commit < self.sess.cur.prepare_ts {
            return Err(Error::CommitTimestampBeforePrepare {
                commit,
                prepare: self.sess.cur.prepare_ts,
            });
        }
        Ok(())
    }

    /// See [`Transaction::set_commit_timestamp`](crate::machinery::Transaction::set_commit_timestamp).
    pub fn set_commit_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        let ts = ts.into();
        match self.sess.cur.state {
            State::Active | State::Prepared => {}
            _ => self.check_usable()?,
        }
        let ts = self.round_commit_ts(check_ts(TimestampRole::Commit, ts)?);
        // A second, different value is refused (deliberate difference 6);
        // the same one again goes through the checks below as the first
        // did (re-announcing it is idempotent).
        if !self.sess.cur.commit_ts.is_none() && ts != self.sess.cur.commit_ts {
            return Err(Error::CommitTimestampAlreadySet {
                current: self.sess.cur.commit_ts,
            });
        }
        self.check_commit_ts(ts)?;
        if !self.sess.cur.durable_ts.is_none() && self.sess.cur.durable_ts < ts {
            return Err(Error::DurableTimestampBeforeCommit {
                durable: self.sess.cur.durable_ts,
                commit: ts,
            });
        }
        if self.sess.cur.state != State::Prepared {
            self.sess
                .mgr
                .machinery
                .announce(self.sess.slot, ts, false)?;
        }
        self.sess.cur.commit_ts = ts;
        Ok(())
    }

    /// See [`Transaction::commit`](crate::machinery::Transaction::commit).
    #[inline]
    pub fn commit(
        &mut self,
        opts: CommitOptions,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<()> {
        if self.sess.cur.id == 0
            && self.sess.cur.state == State::Active
            && self.sess.cur.commit_ts.is_none()
            && opts == CommitOptions::default()
        {
            // Read-only, nothing announced: no validation, nothing to
            // install; clear the pins and count it.
            self.sess.ctr().commits.bump(1);
            self.finish();
            return Ok(());
        }
        self.commit_slow(opts, flip)
    }

    fn commit_slow(
        &mut self,
        opts: CommitOptions,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<()> {
        match self.sess.cur.state {
            State::Doomed => {
                self.rollback_open(flip);
                return Err(Error::MustRollBack);
            }
            State::Finished | State::Poisoned => return Err(Error::TransactionFinished),
            State::Active | State::Prepared => {}
        }
        let prepared = self.sess.cur.state == State::Prepared;
        let (commit, durable) = self.commit_timestamps(opts, prepared)?;
        let mgr = self.sess.mgr;
        let slot = self.sess.slot;
        let ctr = self.sess.ctr();
        if self.sess.cur.id != 0 || prepared {
            self.commit_under_claim(commit, durable, prepared, flip)?;
        }
        if self.announced() {
            mgr.machinery.release_prepare(slot);
        }
        ctr.commits.bump(1);
        self.finish();
        Ok(())
    }

    /// The commit and durable timestamps a commit with `opts` uses (the
    /// given ones, else those set earlier), checked against the rules of
    /// [`Transaction::commit`].
    fn commit_timestamps(
        &self,
        opts: CommitOptions,
        prepared: bool,
    ) -> Result<(Timestamp, Timestamp)> {
        let given = match opts.commit_ts {
            // An explicit 0 is an error, not "untimestamped".
            Some(t) => Some(self.round_commit_ts(check_ts(TimestampRole::Commit, t)?)),
            None => None,
        };
        let commit = match (given, self.sess.cur.commit_ts.to_option()) {
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
                let d = d.or(self.sess.cur.durable_ts.to_option()).unwrap_or(commit);
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
        Ok((commit, durable))
    }

    /// The commit of a transaction with an id or a prepare, under a claim
    /// at its timestamp (the durable one, prepared): the status flips, the
    /// prepared entry's clear, the descriptor install, then the claim's
    /// release.
    fn commit_under_claim(
        &mut self,
        commit: Timestamp,
        durable: Timestamp,
        prepared: bool,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<()> {
        let mgr = self.sess.mgr;
        let slot = self.sess.slot;
        let ctr = self.sess.ctr();
        let claim = if prepared { durable } else { commit };
        if !claim.is_none() {
            mgr.machinery.claim_commit(slot, claim, prepared)?;
        }
        let done = Completion::new(self.sess.cur.id, COMMITTED, commit.get());
        let clear_early = prepared && mutant_on(m::PREPARED_CLEARED_BEFORE_FLIP);
        if clear_early {
            mgr.prepared.clear(slot);
        }
        let poisoned = PoisonOnUnwind(&mut self.sess.cur.state);
        flip(&done);
        std::mem::forget(poisoned);
        if prepared && !clear_early {
            // After the flips: a settler that sees the entry cleared sees
            // them (`version.rs`, "Orderings").
            mgr.prepared.clear(slot);
        }
        let early = mutant_on(m::CLAIM_RELEASED_BEFORE_INSTALL);
        if early {
            mgr.machinery.release_claim(slot, durable);
        }
        if self.sess.cur.id != 0 && !prepared {
            // The status flips above happen-before the Release CAS that
            // installs the next descriptor (invariant 9). The session's
            // snapshot cache gets the installed descriptor: this
            // transaction reads nothing more, and the next one reuses
            // it if no other completion is published by then
            // (invariants 5, 7).
            mgr.machinery.complete(
                slot,
                self.sess.cur.id,
                Some(&mut self.sess.snap),
                &mut self.sess.retired,
                ctr,
            );
        }
        if !early {
            // After the install: a stable setter waiting for this claim
            // publishes stable only once a snapshot taken at it sees
            // this commit (handshake 2, invariant 8; loom model
            // `stable/snapshot`).
            mgr.machinery.release_claim(slot, durable);
        }
        Ok(())
    }
}
