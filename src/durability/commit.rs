//! The commit path: [`CommitLog`], an open engine's durability, the log
//! record each committing write transaction appends, and the records that
//! create and drop a table.

use super::catalog::TableDef;
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
use std::num::NonZeroU32;
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

    /// Logs a commit at `commit_ts` of `writes` (each the table, 0 for the
    /// default one, the key and its value, `None`: a tombstone, in write
    /// order), durable at `durable_ts` (the commit timestamp unless
    /// `prepared`), and waits as `mode` (the engine's durability when
    /// `None`) asks; `appended` runs once the record is framed (its lsn
    /// taken), before that wait. Returns its lsn.
    ///
    /// Every table written must have been created through this log
    /// ([`CommitLog::log_create_table`] returned for it; a recovered one
    /// counts): recovery refuses a write to a table never created as
    /// corruption. A write logged after its table's drop is skipped at
    /// recovery.
    ///
    /// # Errors
    /// [`Error::Io`]: the record is not in the log, and no recovery replays
    /// it (see [`Durability`], "A commit's outcome").
    pub(crate) fn log_commit<'a>(
        &self,
        writes: impl ExactSizeIterator<Item = (u32, &'a [u8], Option<&'a [u8]>)>,
        commit_ts: Timestamp,
        durable_ts: Timestamp,
        prepared: bool,
        mode: Option<CommitMode>,
        appended: impl FnOnce(),
    ) -> Result<u64> {
        self.log_payload(mode, appended, |p| {
            record::begin_commit(
                p,
                commit_ts.get(),
                durable_ts.get(),
                prepared,
                writes.len() as u32,
            );
            for (t, k, v) in writes {
                record::push_write(p, t, k, v);
            }
        })
    }

    /// Logs the creation of table `def` and waits as `mode` (the engine's
    /// durability when `None`) asks: with `Sync`, the record is synced
    /// before this returns. Returns its lsn.
    ///
    /// The caller logs a table's create before any write to it, and logs
    /// creates and drops in the order its catalog makes them (under the
    /// catalog's lock), with ids never used before and names that no live
    /// table holds: recovery applies them in log order (`catalog.rs`,
    /// "Replay rules"). Until the record is durable a crash may lose it,
    /// and with it every record logged after it.
    ///
    /// # Errors
    /// [`Error::Io`]: the record is not in the log, and no recovery
    /// replays it.
    pub(crate) fn log_create_table(&self, def: &TableDef, mode: Option<CommitMode>) -> Result<u64> {
        self.log_payload(mode, || {}, |p| record::begin_create(p, def))
    }

    /// Logs the drop of table `id` (one created through this log) and
    /// waits as `mode` (the engine's durability when `None`) asks: with
    /// `Sync`, the record is synced before this returns. Returns its lsn.
    /// Until the record is durable a crash may lose it: the table then
    /// comes back with what the log kept of it.
    ///
    /// # Errors
    /// [`Error::Io`]: the record is not in the log, and no recovery
    /// replays it.
    pub(crate) fn log_drop_table(&self, id: NonZeroU32, mode: Option<CommitMode>) -> Result<u64> {
        self.log_payload(mode, || {}, |p| record::begin_drop(p, id.get()))
    }

    /// Frames the payload `fill` writes (its lsn a placeholder), appends
    /// it, runs `appended`, and waits as `mode` asks; returns its lsn.
    fn log_payload(
        &self,
        mode: Option<CommitMode>,
        appended: impl FnOnce(),
        fill: impl FnOnce(&mut Vec<u8>),
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
            fill(&mut p);
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
