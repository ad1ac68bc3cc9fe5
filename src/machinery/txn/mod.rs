//! [`Transaction`]: everything about a transaction that is not data —
//! options, read timestamp, the read-only fast path, the lazy id, commit,
//! durable and prepare timestamps with their rules, and the completion that
//! flips the statuses of the versions it wrote (invariant 9).
//!
//! One file per step of its life: `view.rs` (begin, the lazy snapshot, the
//! read timestamp and the read view), `commit.rs` (the commit timestamp's
//! rules and commit), `prepare.rs` (prepare and the prepared durable
//! timestamp), `rollback.rs` (rollback, drop, a leaked transaction) and
//! `completion.rs` (the [`Completion`] every outcome flips statuses with).
//! This file holds the state they share.

mod commit;
mod completion;
mod prepare;
mod rollback;
mod view;

pub use completion::Completion;
pub(super) use rollback::recover_leaked;

use super::lockfree::LockFree;
use super::manager::{count_into, Count, OpenTxn, TxnSession};
use super::rules::{Machinery, StableView};
use crate::config::TxnOptions;
use crate::error::{Error, Result};
use crate::ts::{Timestamp, TxnId};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Active,
    /// A write conflict: only rollback is allowed.
    Doomed,
    Prepared,
    /// A commit's status flips unwound: the transaction never completes.
    Poisoned,
    Finished,
}

/// The generic form of [`Transaction`](crate::machinery::Transaction), on
/// snapshot protocol `M` (only the workload driver and the tests choose
/// one).
pub struct Transaction<'s, 'm, M: Machinery = LockFree> {
    /// Everything else the transaction is lives in `sess.cur`: a
    /// `Transaction` is one pointer, so `begin`'s result moves through its
    /// `Result` layers (machinery, KV `Txn`, caller) as a pointer, not as a
    /// 120-byte struct whose copies stall on store forwarding.
    sess: &'s mut TxnSession<'m, M>,
}

/// The state of the transaction open on a session ([`Transaction`] points
/// at it through the session).
#[derive(Clone, Copy)]
pub(super) struct TxnCore {
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
    /// Has it taken its view (a snapshot, or the stable view)? A
    /// transaction takes its snapshot lazily, at its first read, write or
    /// read timestamp.
    snapped: bool,
    /// Has it published a pin that `finish` must clear?
    pinned: bool,
    rmw_at_begin: u64,
}

impl Default for TxnCore {
    fn default() -> Self {
        TxnCore {
            opts: TxnOptions::default(),
            state: State::Finished,
            id: 0,
            read_ts: Timestamp::NONE,
            commit_ts: Timestamp::NONE,
            prepare_ts: Timestamp::NONE,
            durable_ts: Timestamp::NONE,
            stable: None,
            snapped: false,
            pinned: false,
            rmw_at_begin: 0,
        }
    }
}

impl<'s, 'm, M: Machinery> Transaction<'s, 'm, M> {
    /// See [`Transaction::id`](crate::machinery::Transaction::id).
    pub fn id(&self) -> TxnId {
        TxnId(self.sess.cur.id)
    }

    /// See [`Transaction::read_timestamp`](crate::machinery::Transaction::read_timestamp).
    pub fn read_timestamp(&self) -> Timestamp {
        self.sess.cur.read_ts
    }

    /// The commit timestamp set before commit (`NONE`: none set).
    pub(crate) fn commit_timestamp(&self) -> Timestamp {
        self.sess.cur.commit_ts
    }

    /// The prepare timestamp (`NONE`: not prepared).
    pub(crate) fn prepare_timestamp(&self) -> Timestamp {
        self.sess.cur.prepare_ts
    }

    /// See [`Transaction::options`](crate::machinery::Transaction::options).
    pub fn options(&self) -> &TxnOptions {
        &self.sess.cur.opts
    }

    /// See [`Transaction::is_open`](crate::machinery::Transaction::is_open).
    #[inline]
    pub fn is_open(&self) -> bool {
        self.sess.cur.state != State::Finished
    }

    /// See [`Transaction::is_prepared`](crate::machinery::Transaction::is_prepared).
    #[inline]
    pub fn is_prepared(&self) -> bool {
        self.sess.cur.state == State::Prepared
    }

    /// See [`Transaction::durable_timestamp`](crate::machinery::Transaction::durable_timestamp).
    #[inline]
    pub fn durable_timestamp(&self) -> Timestamp {
        self.sess.cur.durable_ts
    }

    /// See [`Transaction::session`](crate::machinery::Transaction::session).
    pub fn session(&self) -> &TxnSession<'m, M> {
        self.sess
    }

    /// See [`Transaction::manager`](crate::machinery::Transaction::manager).
    pub fn manager(&self) -> &'m super::manager::TxnManager<M> {
        self.sess.mgr
    }

    /// See [`Transaction::count`](crate::machinery::Transaction::count).
    #[inline]
    pub fn count(&self, what: Count, n: u64) {
        count_into(self.sess.ctr(), what, n);
    }

    /// Hands the session's replaced descriptors to the collector now if
    /// this transaction's completion would, and allocates the descriptor
    /// it installs (`MachineryImpl::make_room`): a caller about to complete
    /// under a lock (the serializable gate) calls it first, so the
    /// completion hands nothing on and calls no allocator under the lock.
    pub(crate) fn make_room_for_completion(&mut self) {
        self.sess.mgr.machinery.make_room(&mut self.sess.retired);
    }

    /// See [`Transaction::check_usable`](crate::machinery::Transaction::check_usable).
    pub fn check_usable(&self) -> Result<()> {
        match self.sess.cur.state {
            State::Active => Ok(()),
            State::Doomed => Err(Error::MustRollBack),
            State::Prepared => Err(Error::TransactionPrepared),
            State::Finished | State::Poisoned => Err(Error::TransactionFinished),
        }
    }

    /// Has this transaction published a prepare claim or an announcement
    /// in its slot (prepare, or a commit timestamp set before commit)?
    #[inline]
    fn announced(&self) -> bool {
        self.sess.cur.state == State::Prepared || !self.sess.cur.commit_ts.is_none()
    }

    #[inline]
    fn finish(&mut self) {
        let ctr = self.sess.ctr();
        if self.sess.cur.id == 0 {
            ctr.read_only_txns.bump(1);
            if let Some(now) = crate::sync::thread_rmw_count() {
                ctr.read_rmw.bump(now - self.sess.cur.rmw_at_begin);
            }
        }
        if self.sess.cur.pinned {
            self.sess.mgr.machinery.end(self.sess.slot);
        }
        self.sess.open = OpenTxn::default();
        self.sess.cur.state = State::Finished;
    }
}

/// Marks the transaction poisoned if the status flips of a commit unwind
/// (defused with `mem::forget` when they return).
struct PoisonOnUnwind<'a>(&'a mut State);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        *self.0 = State::Poisoned;
    }
}
