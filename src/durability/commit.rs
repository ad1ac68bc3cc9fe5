//! The commit path: [`CommitLog`], an open engine's durability, and the
//! log record each committing write transaction appends.

use super::checkpoint::State;
use super::fs::{Fs, FsLock};
use super::handle::CommitHandle;
use super::log::Log;
use super::options::Durability;
use super::record;
use super::report::{LogStats, RecoveryReport};
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

/// A session's log bookkeeping for its open transaction: the keys it wrote
/// (the store's versions hold values, not keys), in write order.
#[derive(Default)]
pub(crate) struct SessionLog {
    keys: Vec<u8>,
    ends: Vec<usize>,
    /// This commit's durability, when not the engine's.
    pub(crate) mode: Option<CommitMode>,
    /// The durable timestamp set with `set_durable_timestamp`.
    pub(crate) durable_ts: Option<Timestamp>,
    pub(crate) prepared: bool,
}

impl SessionLog {
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.keys.clear();
        self.ends.clear();
        self.mode = None;
        self.durable_ts = None;
        self.prepared = false;
    }

    pub(crate) fn push_key(&mut self, key: &[u8]) {
        self.keys.extend_from_slice(key);
        self.ends.push(self.keys.len());
    }

    /// Keeps the first `writes` keys (a rollback to a savepoint).
    pub(crate) fn truncate(&mut self, writes: usize) {
        if writes < self.ends.len() {
            self.ends.truncate(writes);
            self.keys.truncate(self.ends.last().copied().unwrap_or(0));
        }
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.keys[start..self.ends[i]]
    }
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

    /// Logs a commit at `commit_ts` of `values` (one per write, keys from
    /// `sl`) and waits as its mode asks. Returns its lsn.
    ///
    /// # Errors
    /// [`Error::Io`]: the record is not in the log, and no recovery replays
    /// it (see [`Durability`], "A commit's outcome").
    pub(crate) fn log_commit<'a>(
        &self,
        sl: &SessionLog,
        values: impl ExactSizeIterator<Item = Option<&'a [u8]>>,
        commit_ts: u64,
        durable_opt: Option<Timestamp>,
    ) -> Result<u64> {
        if let Some(e) = self.log.failed() {
            return Err(e.clone());
        }
        let durable_ts = if sl.prepared {
            durable_opt
                .or(sl.durable_ts)
                .map_or(commit_ts, Timestamp::get)
        } else {
            commit_ts
        };
        let sync = match sl.mode.unwrap_or(CommitMode::Durability(self.mode)) {
            CommitMode::Durability(Durability::Sync) => true,
            CommitMode::Durability(_) | CommitMode::Async => false,
        };
        let lsn = PAYLOAD.with(|p| {
            let mut p = p.borrow_mut();
            record::begin_commit(
                &mut p,
                commit_ts,
                durable_ts,
                sl.prepared,
                values.len() as u32,
            );
            for (i, v) in values.enumerate() {
                record::push_write(&mut p, sl.key(i), v);
            }
            self.log.append(&mut p, sync)
        });
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
