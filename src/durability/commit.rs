//! The commit path: [`CommitLog`], an open engine's durability, and the
//! log record each committing write transaction appends.

use super::checkpoint::State;
use super::fs::{Fs, FsLock};
use super::handle::CommitHandle;
use super::log::Log;
use super::options::Durability;
use super::record;
use super::report::{CheckpointerStatus, LogStats, RecoveryReport};
use crate::error::{Error, Result};
use crate::sync::{AtomicU64, Ordering};
use crate::ts::Timestamp;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;

/// How one commit is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitMode {
    Durability(Durability),
    /// Written to the OS; [`CommitHandle`] waits for the sync.
    Async,
}

thread_local! {
    static PAYLOAD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// An open engine's durability: the log, the checkpoint state, the lock.
pub(crate) struct CommitLog {
    pub(crate) log: Arc<Log>,
    pub(super) mode: Durability,
    pub(super) fs: Arc<dyn Fs>,
    pub(super) dir: PathBuf,
    pub(super) report: RecoveryReport,
    pub(super) recovery_ts: Timestamp,
    /// The stable timestamp as of the last successful `set_timestamps`.
    pub(super) stable: AtomicU64,
    /// The last checkpoint's state (`None` after a failed checkpoint: the
    /// next one reloads it from the file).
    pub(super) ckpt: Mutex<Option<State>>,
    /// What the background checkpointer did (`checkpointer.rs`).
    pub(super) background: Mutex<CheckpointerStatus>,
    // Last: the lock is released only after the log has closed.
    pub(super) _lock: Box<dyn FsLock>,
}

impl Drop for CommitLog {
    fn drop(&mut self) {
        // Closed here, not when the last `CommitHandle` lets it go: every
        // record is synced and the flusher has ended before the lock is
        // released.
        self.log.close();
    }
}

impl CommitLog {
    /// The error a commit with writes is refused with, once the log failed.
    #[inline]
    pub(crate) fn refusal(&self) -> Option<Error> {
        self.log.failed().cloned()
    }

    /// Logs a commit at `commit_ts` of `writes` (each key with its value,
    /// `None`: a tombstone, in write order), durable at `durable_ts` (the
    /// commit timestamp unless `prepared`), and waits as `mode` (the
    /// engine's durability when `None`) asks; `appended` runs once the
    /// record is framed (its lsn taken), before that wait. Returns its lsn.
    ///
    /// # Errors
    /// [`Error::Io`]: the record is not in the log, and no recovery replays
    /// it (see [`Durability`], "A commit's outcome").
    pub(crate) fn log_commit<'a>(
        &self,
        writes: impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
        commit_ts: Timestamp,
        durable_ts: Timestamp,
        prepared: bool,
        mode: Option<CommitMode>,
        appended: impl FnOnce(),
    ) -> Result<u64> {
        if let Some(e) = self.log.failed() {
            return Err(e.clone());
        }
        let sync = match mode.unwrap_or(CommitMode::Durability(self.mode)) {
            CommitMode::Durability(Durability::Sync) => true,
            CommitMode::Durability(_) | CommitMode::Async => false,
        };
        let lsn = PAYLOAD.with(|p| {
            let mut p = p.borrow_mut();
            record::begin_commit(
                &mut p,
                commit_ts.get(),
                durable_ts.get(),
                prepared,
                writes.len() as u32,
            );
            for (k, v) in writes {
                record::push_write(&mut p, k, v);
            }
            self.log.append(&mut p, sync)
        });
        appended();
        self.log.flush(lsn, sync)?;
        Ok(lsn)
    }

    /// Notes a stable timestamp that `set_timestamps` published.
    pub(crate) fn note_stable(&self, stable: Timestamp) {
        self.stable.fetch_max(stable.get(), Ordering::Relaxed);
    }

    pub(crate) fn recovery_ts(&self) -> Timestamp {
        self.recovery_ts
    }

    pub(crate) fn report(&self) -> &RecoveryReport {
        &self.report
    }

    pub(crate) fn handle(&self, lsn: Option<u64>) -> CommitHandle {
        CommitHandle {
            log: lsn.map(|_| self.log.clone()),
            lsn: lsn.unwrap_or(0),
        }
    }

    pub(crate) fn checkpointer_status(&self) -> CheckpointerStatus {
        self.background.lock().clone()
    }

    pub(crate) fn log_stats(&self) -> LogStats {
        let c = &self.log.counters;
        LogStats {
            records: c.records.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
        }
    }
}
