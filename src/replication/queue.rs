//! The hand-off from the write path to the batcher: commits queued for
//! the next log entry, and the [`Slot`] where each one's outcome goes.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::entry::CommitRecord;
use super::error::ReplicaError;

/// A commit waiting for its log entry, and where its outcome goes.
pub(crate) struct Queued {
    pub(crate) rec: CommitRecord,
    /// `rec.encoded_len()`, computed once at submit.
    pub(crate) bytes: usize,
    /// The proposal's sequence number (`Origin::seq`).
    pub(crate) seq: u64,
    pub(crate) slot: Arc<Slot>,
}

/// Commits queued for the next log entry.
#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) items: Vec<Queued>,
    /// The batcher has stopped: nothing more is taken.
    pub(crate) closed: bool,
}

/// The outcome of one queued commit, and when it became known.
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) outcome: Mutex<Option<(Result<(), ReplicaError>, Instant)>>,
    pub(crate) cv: Condvar,
}

impl Slot {
    /// Hands over the outcome and wakes the waiter.
    pub(crate) fn set(&self, r: Result<(), ReplicaError>) {
        *self.outcome.lock() = Some((r, Instant::now()));
        self.cv.notify_all();
    }
}
