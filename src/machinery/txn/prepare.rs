//! The first phase of a two-phase commit: prepare, and the durable
//! timestamp a prepared transaction announces before it resolves.

use super::{Completion, PoisonOnUnwind, State, Transaction};
use crate::error::{check_ts, Error, Result, TimestampRole};
use crate::machinery::protocol::Protocol;
use crate::machinery::version::PREPARED;
use crate::sync::{mutant as m, mutant_on};
use crate::ts::Timestamp;

impl<P: Protocol> Transaction<'_, '_, P> {
    /// Announces a prepared transaction's durable timestamp before it
    /// resolves: it must be after stable and at or above a commit timestamp
    /// already set, and becomes the durable timestamp `commit` uses unless
    /// [`CommitOptions::durable_ts`](crate::CommitOptions::durable_ts) gives another. Stable may not pass it
    /// until the transaction commits or rolls back
    /// ([`Error::StablePastPreparedDurable`]); `all_durable` stays below it.
    /// Setting it again replaces it (a refused value keeps the old one).
    ///
    /// # Errors
    /// The transaction is not prepared; the timestamp is 0 or out of range,
    /// below the commit timestamp, or not after stable.
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
        self.sess.mgr.proto.announce(self.sess.slot, ts, true)?;
        self.sess.cur.durable_ts = ts;
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
    ///
    /// Once every check has passed, `flip` gets a
    /// [`Completion`] that marks the statuses it is given prepared; call
    /// [`Completion::flip`] on every version this transaction wrote. It runs
    /// before the transaction leaves the running set (invariants 5, 9).
    ///
    /// # Errors
    /// Already prepared, not usable, a commit timestamp already set, or a
    /// prepare timestamp that breaks a rule above; `flip` is not called and
    /// the transaction stays usable.
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
        // another one committed (a torn read found by tests/own_storage.rs).
        let slot = self.sess.slot;
        let claim = !mutant_on(m::PREPARE_WITHOUT_CLAIM);
        let claimed = if claim {
            mgr.proto.claim_commit(slot, p, false)
        } else {
            Ok(())
        };
        if let Err(e) = claimed {
            mgr.proto.release_prepare(slot);
            return Err(match e {
                Error::CommitTimestampNotAfterStable { stable, .. } => {
                    Error::PrepareTimestampNotAfterStable { prepare: p, stable }
                }
                e => e,
            });
        }
        self.flip_prepared(p, flip);
        if claim {
            mgr.proto.release_claim(slot, Timestamp::NONE);
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
        let (oldest, stable) = mgr.proto.oldest_stable();
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
            .proto
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
            mgr.proto.release_prepare(slot);
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
            mgr.proto.complete(
                self.sess.slot,
                self.sess.cur.id,
                None,
                &mut self.sess.retired,
                ctr,
            );
        }
    }
}
