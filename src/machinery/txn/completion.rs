//! [`Completion`]: the one way a transaction's outcome reaches the statuses
//! of the versions it wrote.

use crate::machinery::version::{VersionState, VersionStatus, COMMITTED, PREPARED};
use crate::ts::Timestamp;
use std::marker::PhantomData;

/// The moment a transaction's outcome is decided, handed to the closure
/// given to [`Transaction::commit`], [`Transaction::prepare`] or
/// [`Transaction::rollback`]: [`flip`](Completion::flip) every status the
/// transaction wrote. It exists only while that closure runs, which is
/// before the writer leaves the running set, so a flip can never come too
/// late (invariant 9); there is no other way to change a status (the
/// machinery itself settles only a dropped prepared transaction's statuses
/// to aborted, see [`Transaction`]).
///
/// [`Transaction`]: crate::machinery::Transaction
/// [`Transaction::commit`]: crate::machinery::Transaction::commit
/// [`Transaction::prepare`]: crate::machinery::Transaction::prepare
/// [`Transaction::rollback`]: crate::machinery::Transaction::rollback
pub struct Completion<'a> {
    own: u64,
    state: u64,
    ts: u64,
    _only_here: PhantomData<&'a mut ()>,
}

impl Completion<'_> {
    #[inline]
    pub(super) fn new(own: u64, state: u64, ts: u64) -> Self {
        Completion {
            own,
            state,
            ts,
            _only_here: PhantomData,
        }
    }

    /// Sets `status` to this outcome (a Release store). Returns `false`,
    /// changing nothing, if `status` was not written by this transaction.
    #[inline]
    pub fn flip(&self, status: &VersionStatus) -> bool {
        if status.writer().get() != self.own || self.own == 0 {
            return false;
        }
        status.set(self.state, self.ts);
        true
    }

    /// The state `flip` sets.
    pub fn outcome(&self) -> VersionState {
        let ts = Timestamp::new(self.ts);
        match self.state {
            PREPARED => VersionState::Prepared(ts),
            COMMITTED => VersionState::Committed(ts),
            _ => VersionState::Aborted,
        }
    }
}
