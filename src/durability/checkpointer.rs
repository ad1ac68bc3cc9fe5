//! Taking checkpoints: [`CommitLog::checkpoint`] (on call, or from the
//! background checkpointer thread that [`Opened`] owns) and rollback to
//! stable's log half.

use super::checkpoint::{self, State};
use super::commit::CommitLog;
use super::log::{io_error, parse_segment, scan_segment, segment_name};
use super::recovery::{fold_whole_segment, newest_checkpoint, segments_in};
use super::report::CheckpointReport;
use crate::error::{Error, Result};
use crate::sync::Ordering;
use crate::ts::Timestamp;
use parking_lot::{Condvar, Mutex};
use std::ops::Deref;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

struct Stopper {
    stop: Mutex<bool>,
    cv: Condvar,
}

/// What an engine from `Engine::open` holds: its [`CommitLog`] state and
/// the background checkpointer, if any. Dropping it stops the checkpointer
/// and waits for it to end (a checkpoint it is taking finishes first), so
/// the state's last reference, and with it the log and the directory lock,
/// is released by the dropping thread before the drop returns. The
/// checkpointer holds the state only through a `Weak`, upgraded while it
/// works, and never holds this handle, so the drop never runs on it.
pub(crate) struct Opened {
    durable: Arc<CommitLog>,
    checkpointer: Option<(Arc<Stopper>, JoinHandle<()>)>,
}

impl Deref for Opened {
    type Target = CommitLog;

    fn deref(&self) -> &CommitLog {
        &self.durable
    }
}

impl Opened {
    /// Makes `durable` an engine's, with a background checkpointer taking
    /// a checkpoint `every` so often (`None`: none).
    ///
    /// # Errors
    /// [`Error::Io`] when the checkpointer thread cannot be spawned.
    pub(super) fn start(durable: CommitLog, every: Option<Duration>) -> Result<Opened> {
        let mut opened = Opened {
            durable: Arc::new(durable),
            checkpointer: None,
        };
        if let Some(every) = every {
            let stopper = Arc::new(Stopper {
                stop: Mutex::new(false),
                cv: Condvar::new(),
            });
            let weak = Arc::downgrade(&opened.durable);
            let s = stopper.clone();
            let thread = std::thread::Builder::new()
                .name("snapshot-engine-checkpoint".into())
                .spawn(move || checkpoints(weak, s, every))
                .map_err(|e| io_error("spawn the checkpointer for", &opened.dir, &e))?;
            opened.checkpointer = Some((stopper, thread));
        }
        Ok(opened)
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Some((stopper, thread)) = self.checkpointer.take() {
            *stopper.stop.lock() = true;
            stopper.cv.notify_all();
            // It never panics (it drops a checkpoint's error); if it did,
            // its `Weak` is gone all the same once it has ended.
            let _ = thread.join();
        }
    }
}

impl CommitLog {
    /// Takes a checkpoint at the noted stable timestamp (see
    /// `checkpoint.rs`). Holds no lock a reader or writer takes, except the
    /// log's writer lock for the one sync and segment switch of the cut.
    pub(crate) fn checkpoint(&self) -> Result<CheckpointReport> {
        let stable = Timestamp::new(self.stable.load(Ordering::Relaxed));
        self.fold_checkpoint(stable, false).map(|(r, _)| r)
    }

    /// Rollback to stable's log half: a checkpoint at `stable` (the
    /// engine's, which cannot move: the caller holds the engine
    /// exclusively) that drops every record not covered at `stable`
    /// instead of carrying it, and covers every segment written so far, so
    /// that no later recovery replays a dropped record. Every `create` and
    /// `drop` stays (they carry no timestamp): a table created above
    /// stable stays, empty of what was written above it; a dropped one
    /// stays dropped. Returns the checkpoint and the number of records
    /// dropped.
    pub(crate) fn rollback_to_stable(&self, stable: Timestamp) -> Result<(CheckpointReport, u64)> {
        self.fold_checkpoint(stable, true)
    }

    /// A checkpoint at `stable`; with `drop_uncovered`, the records it would
    /// carry are dropped instead (returns how many).
    fn fold_checkpoint(
        &self,
        stable: Timestamp,
        drop_uncovered: bool,
    ) -> Result<(CheckpointReport, u64)> {
        let mut guard = self.ckpt.lock();
        let mut st = match guard.take() {
            Some(st) => st,
            None => newest_checkpoint(&*self.fs, &self.dir)?.map_or_else(
                || Ok(State::empty()),
                |(_, p)| checkpoint::load(&*self.fs, &p),
            )?,
        };
        if drop_uncovered && stable < st.stable {
            let checkpoint = st.stable;
            *guard = Some(st);
            return Err(Error::RollbackBelowCheckpoint { stable, checkpoint });
        }
        // Stable first (the caller's load), then the cut: every commit at or
        // below this stable finished (and so appended its record) before
        // stable was published.
        let (cut_seq, cut_lsn) = self.log.cut()?;
        let seqs = segments_in(&*self.fs, &self.dir)?;
        let mut records = Vec::new();
        let mut expect = st.next_lsn;
        let mut catalog = st.catalog.clone();
        for &seq in seqs.iter().filter(|&&s| s >= st.first_seq && s < cut_seq) {
            let path = self.dir.join(segment_name(seq));
            let buf = self
                .fs
                .read(&path)
                .map_err(|e| io_error("read", &path, &e))?;
            let seg = scan_segment(&buf, &path, seq)?;
            fold_whole_segment(seg, seq, &mut expect, &path, &mut records, &mut catalog)?;
        }
        // A `.ckpt.tmp` an earlier failed checkpoint could not remove.
        for name in self.fs.list(&self.dir).unwrap_or_default() {
            if name.ends_with(".ckpt.tmp") {
                let _ = self.fs.remove(&self.dir.join(name));
            }
        }
        let folded = records.len() as u64;
        let mut dropped = 0;
        if drop_uncovered {
            let before = st.carried.len() + records.len();
            st.carried.retain(|c| c.covered_by(stable.get()));
            records.retain(|r| r.covered_by(stable.get()));
            dropped = (before - st.carried.len() - records.len()) as u64;
        }
        st.fold(records, stable, cut_seq, cut_lsn);
        let (path, bytes) = checkpoint::write(&*self.fs, &self.dir, &st)?;
        // The checkpoint is in force (D5): from here the call succeeds. What
        // it covers is removed on a best-effort basis: a file left behind
        // (a failed remove) is below the newest checkpoint's cut, which
        // recovery never replays, and the next checkpoint removes it;
        // `segments_removed` counts only what went.
        let mut removed = 0;
        for name in self.fs.list(&self.dir).unwrap_or_default() {
            let old_seg = parse_segment(&name).is_some_and(|s| s < cut_seq);
            let old_ckpt = checkpoint::parse_checkpoint(&name).is_some_and(|s| s < cut_seq);
            if old_seg || old_ckpt {
                let p = self.dir.join(&name);
                if self.fs.remove(&p).is_ok() {
                    removed += u64::from(old_seg);
                }
            }
        }
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            // The directory's state is unknown after a failed sync: the log
            // stops, as after any failed sync, and a reopen's recovery
            // settles the directory (the checkpoint stands either way).
            self.log.fail(io_error("sync", &self.dir, &e));
        }
        let report = CheckpointReport {
            stable: st.stable.to_option(),
            path,
            keys: st.base_keys(),
            carried: st.carried.len() as u64,
            bytes,
            records_folded: folded,
            segments_removed: removed,
        };
        *guard = Some(st);
        Ok((report, dropped))
    }
}

fn checkpoints(d: Weak<CommitLog>, stopper: Arc<Stopper>, every: Duration) {
    loop {
        {
            let mut stop = stopper.stop.lock();
            if !*stop {
                stopper.cv.wait_for(&mut stop, every);
            }
            if *stop {
                return;
            }
        }
        let Some(d) = d.upgrade() else { return };
        // A failed background checkpoint leaves the previous one in force
        // (and removes its temporary file); commits go on unless the
        // failure was the log's own cut, which stops the log and fails
        // every later commit with that error. Either way the outcome is
        // kept for `Engine::checkpointer_status`.
        let outcome = d.checkpoint();
        let mut b = d.background.lock();
        match outcome {
            Ok(r) => {
                b.completed += 1;
                b.last = Some(r);
                b.last_error = None;
            }
            Err(e) => {
                b.failed += 1;
                b.last_error = Some(e);
            }
        }
        drop(b);
        // Dropped before the next wait: `Opened::drop` waits for this
        // thread, never for this reference.
        drop(d);
    }
}
