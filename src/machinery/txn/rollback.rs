//! Ending a transaction without committing: rollback, the drop of an open
//! transaction, and a leaked transaction's recovery at the next begin.

use super::{Completion, State, Transaction};
use crate::error::{Error, Result};
use crate::machinery::manager::{OpenTxn, TxnSession};
use crate::machinery::rules::Machinery;
use crate::machinery::version::ABORTED;
use crate::ts::Timestamp;

impl<M: Machinery> Transaction<'_, '_, M> {
    /// See [`Transaction::rollback`](crate::machinery::Transaction::rollback).
    #[inline]
    pub fn rollback(&mut self, flip: impl FnOnce(&Completion<'_>)) -> Result<()> {
        if self.sess.cur.id == 0
            && matches!(self.sess.cur.state, State::Active | State::Doomed)
            && self.sess.cur.commit_ts.is_none()
        {
            // Wrote nothing, announced nothing: no status to flip, no
            // running-set entry, no claim; clear the pins and count it,
            // as a read-only commit does.
            self.sess.ctr().rollbacks.bump(1);
            self.finish();
            return Ok(());
        }
        self.rollback_slow(flip)
    }

    /// [`rollback`](Self::rollback) of a transaction that wrote or
    /// announced, or has ended: out of line, so the read-only rollback
    /// inlined into its callers stays small.
    #[inline(never)]
    fn rollback_slow(&mut self, flip: impl FnOnce(&Completion<'_>)) -> Result<()> {
        if matches!(self.sess.cur.state, State::Finished | State::Poisoned) {
            return Err(Error::TransactionFinished);
        }
        self.rollback_open(flip);
        Ok(())
    }

    pub(super) fn rollback_open(&mut self, flip: impl FnOnce(&Completion<'_>)) {
        let announced = self.announced();
        rollback(
            self.sess,
            self.sess.cur.id,
            self.sess.cur.state == State::Prepared,
            announced,
            flip,
        );
        self.finish();
    }
}

impl<M: Machinery> Drop for Transaction<'_, '_, M> {
    #[inline]
    fn drop(&mut self) {
        // Inline and cheap for a finished transaction (the common case: the
        // begin workload's hot loop drops one per iteration).
        if self.sess.cur.state != State::Finished {
            self.drop_open();
        }
    }
}

impl<M: Machinery> Transaction<'_, '_, M> {
    #[cold]
    #[inline(never)]
    fn drop_open(&mut self) {
        // Dropping an open transaction (including during a panic) rolls it
        // back and clears its pins (invariant 12). A commit whose status
        // flips panicked part-way never leaves the running set (its
        // versions stay invisible): only its claims and pins go.
        match self.sess.cur.state {
            State::Finished => {}
            State::Poisoned => {
                let slot = self.sess.slot;
                // A prepare whose flips unwound: nobody flips the ones that
                // were done; readers settle them as aborted.
                self.sess.mgr.prepared.clear(slot);
                self.sess.mgr.machinery.release_claim(slot, Timestamp::NONE);
                self.sess.mgr.machinery.release_prepare(slot);
                self.finish();
            }
            _ => self.rollback_open(|_| {}),
        }
    }
}

/// Rolls back transaction `id`: `flip` marks its statuses aborted (a
/// storage that unlinks rolled-back versions does it inside `flip`, before
/// flipping each, while no other writer can prepend on top of one: see
/// `kv/txn.rs` `unlink_then_abort`), it leaves the running set
/// (unless prepare already took it out), and any prepare claim or
/// announcement is released.
fn rollback<M: Machinery>(
    sess: &mut TxnSession<'_, M>,
    id: u64,
    prepared: bool,
    announced: bool,
    flip: impl FnOnce(&Completion<'_>),
) {
    let mgr = sess.mgr;
    let slot = sess.slot;
    let ctr = sess.ctr();
    flip(&Completion::new(id, ABORTED, 0));
    if prepared {
        // After the flips (none when dropped): a settler that sees the
        // entry cleared and the status still prepared knows nobody flipped
        // it, and settles it as aborted (`version.rs`, "Orderings").
        mgr.prepared.clear(slot);
    }
    if id != 0 && !prepared {
        mgr.machinery
            .complete(slot, id, None, &mut sess.retired, ctr);
    }
    if announced {
        mgr.machinery.release_prepare(slot);
    }
    ctr.rollbacks.bump(1);
}

/// The previous transaction on this session never ended: it was leaked
/// with `mem::forget`, so neither commit, rollback nor drop ran. Roll it
/// back now, as its drop would have, so its versions never become visible,
/// its id leaves the running set and its pins go.
#[cold]
pub(in crate::machinery) fn recover_leaked<M: Machinery>(
    sess: &mut TxnSession<'_, M>,
    flip: impl FnOnce(&Completion<'_>),
) {
    let open = sess.open;
    rollback(sess, open.id, open.prepared, true, flip);
    sess.mgr.machinery.end(sess.slot);
    sess.open = OpenTxn::default();
}
