//! The first phase of a two-phase commit: prepare, and the durable
//! timestamp a prepared transaction announces before it resolves.

use super::{Completion, PoisonOnUnwind, State, Transaction};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::machinery::rules::Machinery;
use crate::machinery::version::PREPARED;
use crate::sync::{mutant as m, mutant_on};
use crate::ts::Timestamp;

impl<M: Machinery> Transaction<'_, '_, M> {
    /// See [`Transaction::set_durable_timestamp`](crate::machinery::Transaction::set_durable_timestamp).
    pub fn set_durable_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        let ts = ts.into();
        if self.sess.cur.state != State::Prepared {
            self.check_usable()?;
            check_ts(TimestampRole::Durable, ts)?;
            return Err(Error::DurableTimestampWithoutPrepare { durable: ts });
        }
        check_ts(TimestampRole::Durable, ts)?;
        if !self.sess.cur.commit_ts.is_none() && ts < self.sess.cur.commit_ts {
            return Err(Error::DurableTimestampBeforeCommit {
                durable: ts,
                commit: self.sess.cur.commit_ts,
            });
        }
        self.sess.mgr.machinery.announce(self.sess.slot, ts, true)?;
        self.sess.cur.durable_ts = ts;
        Ok(())
    }

    /// See [`Transaction::prepare`](crate::machinery::Transaction::prepare).
    pub fn prepare(
        &mut self,
        ts: impl Into<Timestamp>,
        flip: impl FnOnce(&Completion<'_>),
    ) -> Result<Timestamp> {
        let ts = ts.into();
        if self.sess.cur.state == State::Prepared {
            return Err(Error::AlreadyPrepared);
        }
        self.check_usable()?;
        if !self.sess.cur.commit_ts.is_none() {
            return Err(Error::PrepareAfterCommitTimestamp {
                commit: self.sess.cur.commit_ts,
            });
        }
        check_ts(TimestampRole::Prepare, ts)?;
        let p = self.claim_prepare_ts(ts)?;
        let mgr = self.sess.mgr;
        // The flips to prepared happen under a commit claim at `p`, so
        // raising stable to `p` or past waits for them (handshake 2,
        // invariant 8): a read-at-stable reader, which has no snapshot to
        // hide this transaction, never reads one of its versions still in
        // progress and, after the flips and a commit at or below stable,
        // another one committed (a torn read found by examples/own_storage/tests.rs).
        let slot = self.sess.slot;
        let claim = !mutant_on(m::PREPARE_WITHOUT_CLAIM);
        let claimed = if claim {
            mgr.machinery.claim_commit(slot, p, false)
        } else {
            Ok(())
        };
        if let Err(e) = claimed {
            mgr.machinery.release_prepare(slot);
            return Err(match e {
                Error::CommitTimestampNotAfterStable { stable, .. } => {
                    Error::PrepareTimestampNotAfterStable { prepare: p, stable }
                }
                e => e,
            });
        }
        self.flip_prepared(p, flip);
        if claim {
            mgr.machinery.release_claim(slot, Timestamp::NONE);
        }
        self.sess.cur.prepare_ts = p;
        self.sess.cur.state = State::Prepared;
        self.sess.open.prepared = true;
        Ok(p)
    }

    /// Claims a prepare timestamp for the asked `ts` (validated already):
    /// at or above oldest (or rounded up to it), after stable and not below
    /// an active read timestamp (`claim_prepare`, which rounds up past
    /// stable), nor below this transaction's own read timestamp. A refused
    /// claim leaves nothing published.
    fn claim_prepare_ts(&self, ts: Timestamp) -> Result<Timestamp> {
        let mgr = self.sess.mgr;
        let slot = self.sess.slot;
        let (oldest, stable) = mgr.machinery.oldest_stable();
        let mut want = ts;
        if want < oldest {
            if !self.sess.cur.opts.roundup_prepared {
                // Stable is checked first: with stable set, oldest <= stable,
                // so a prepare below oldest is also not after stable, and
                // that is the error the rules promise (DESIGN.md, "The timestamp contract").
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
        let p = mgr
            .machinery
            .claim_prepare(slot, want, self.sess.cur.opts.roundup_prepared)?;
        let refused = if p > Timestamp::MAX {
            // Rounded up past the largest timestamp: stable is at MAX.
            Some(Error::PrepareTimestampNotAfterStable {
                prepare: ts,
                stable: Timestamp::MAX,
            })
        } else if !self.sess.cur.read_ts.is_none() && p < self.sess.cur.read_ts {
            Some(Error::PrepareTimestampBeforeActiveRead {
                prepare: p,
                read: self.sess.cur.read_ts,
            })
        } else {
            None
        };
        if let Some(e) = refused {
            // Nothing else was published yet: no announcement exists before
            // prepare (a commit timestamp refuses prepare above).
            mgr.machinery.release_prepare(slot);
            return Err(e);
        }
        Ok(p)
    }

    /// Flips the transaction's statuses to prepared at `p` (through `flip`),
    /// with its id listed as prepared first, then takes it out of the
    /// running set.
    fn flip_prepared(&mut self, p: Timestamp, flip: impl FnOnce(&Completion<'_>)) {
        let mgr = self.sess.mgr;
        let slot = self.sess.slot;
        let publish_late = mutant_on(m::PREPARED_PUBLISHED_AFTER_FLIP);
        if self.sess.cur.id != 0 && !publish_late {
            // Before the flips: a reader or writer that meets a prepared
            // status finds its writer listed until it resolves
            // (`version.rs`, "Orderings"; loom model
            // `dropped_prepared/write_check`).
            mgr.prepared.publish(slot, self.sess.cur.id);
        }
        let poisoned = PoisonOnUnwind(&mut self.sess.cur.state);
        flip(&Completion::new(self.sess.cur.id, PREPARED, p.get()));
        std::mem::forget(poisoned);
        if self.sess.cur.id != 0 && publish_late {
            mgr.prepared.publish(slot, self.sess.cur.id);
        }
        if self.sess.cur.id != 0 && !mutant_on(m::PREPARE_SKIPS_EXIT) {
            // Prepare is an exit from the running set: the generation is
            // bumped (invariant 5; PostgreSQL's two-phase-commit bug).
            let ctr = self.sess.ctr();
            mgr.machinery.complete(
                self.sess.slot,
                self.sess.cur.id,
                None,
                &mut self.sess.retired,
                ctr,
            );
        }
    }
}
