//! [`CommitHandle`]: the future of an asynchronous commit's sync.

use super::log::Log;
use crate::error::Result;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// An asynchronous commit's durability ([`Txn::commit_async`]): the commit
/// is visible already; this resolves once its log record is synced. Wait
/// for it with [`CommitHandle::wait`] (blocking) or `.await` it (a
/// [`Future`] on any runtime: the engine's log flusher wakes it).
///
/// [`Txn::commit_async`]: crate::Txn::commit_async
pub struct CommitHandle {
    /// `None`: nothing to wait for (an in-memory engine, or a commit that
    /// wrote nothing).
    pub(super) log: Option<Arc<Log>>,
    pub(super) lsn: u64,
}

impl fmt::Debug for CommitHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommitHandle")
            .field("lsn", &self.lsn)
            .field("durable", &self.is_durable())
            .finish()
    }
}

impl CommitHandle {
    /// A handle with nothing to wait for.
    pub(crate) fn ready() -> CommitHandle {
        CommitHandle { log: None, lsn: 0 }
    }

    /// Is the commit's record synced?
    pub fn is_durable(&self) -> bool {
        self.log.as_ref().is_none_or(|l| l.is_done(self.lsn, true))
    }

    /// Blocks until the commit's record is synced (syncing it now, shared
    /// with any committer syncing too).
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io): the log failed before the record
    /// was synced; the commit may be lost at a crash.
    pub fn wait(&self) -> Result<()> {
        match &self.log {
            Some(l) => l.flush(self.lsn, true),
            None => Ok(()),
        }
    }
}

impl Future for CommitHandle {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let Some(log) = &self.log else {
            return Poll::Ready(Ok(()));
        };
        if log.is_done(self.lsn, true) {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = log.failed() {
            return Poll::Ready(Err(e.clone()));
        }
        log.wait_async(self.lsn, cx.waker().clone());
        // The flusher may have finished between the check and the
        // registration: look again (a spurious wake later is harmless).
        if log.is_done(self.lsn, true) {
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }
}
