//! The commit log: numbered segment files of framed records
//! (`record.rs`), appended through one writer with group commit.
//!
//! A committer frames its record into the shared pending buffer under the
//! `pending` lock, which hands out log sequence numbers (lsns) in buffer
//! order. To make it reach the OS (and, for `Sync`, the disk) it calls
//! [`Log::flush`]: under the `out` lock the first committer to get there
//! takes the whole pending buffer, writes it with one `write`, and syncs it
//! with one `fdatasync`; every committer whose record was in that buffer
//! finds its lsn covered when it gets the lock (or before, on the atomic
//! counters) and returns without a syscall of its own. A record framed
//! while a sync is running is not in the buffer that sync covers, so a
//! commit is acknowledged only by a sync that began after its record was
//! written (invariant D2, DESIGN.md "Durability").
//!
//! # Outcomes
//!
//! A batch is all or nothing for its committers. The counters `written`
//! and `synced` move only once every step of a batch succeeded: its write,
//! its sync (a batch holding a record whose committer waits for a sync is
//! synced, whoever flushes it), and the roll-over before it. A step that
//! fails stops the log and cuts the segment back to where the batch began
//! (`Log::fail_batch`), so no record of a commit that gets the error stays
//! in the log, while every record below the counters stays. A segment is
//! rolled over *before* a batch is written into a full one, never after a
//! batch was written, so a failed roll-over writes nothing of the batch.
//! The one gap: the file system also refuses the cut; the error then says
//! so (`op: "truncate"`), and the batch may be replayed at recovery.

use super::fs::{Fs, FsFile};
use super::record::{self, FILE_HEADER, SEGMENT_MAGIC};
use crate::error::{Error, Result};
use crate::sync::{AtomicU64, Ordering};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::Duration;

/// A segment's file name: `log-` and the sequence number in 16 hex digits.
pub(crate) fn segment_name(seq: u64) -> String {
    record::numbered_name("log-", seq, ".seg")
}

/// The sequence number in a segment's file name.
pub(crate) fn parse_segment(name: &str) -> Option<u64> {
    record::parse_numbered(name, "log-", ".seg")
}

/// An I/O error as the engine reports it.
pub(crate) fn io_error(op: &'static str, path: &Path, e: &std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.to_path_buf(),
        kind: e.kind(),
        message: e.to_string(),
    }
}

struct Pending {
    buf: Vec<u8>,
    /// The lsn the next framed record gets.
    next_lsn: u64,
    /// A record in `buf` belongs to a committer that waits for its sync:
    /// the batch that writes it syncs it too.
    sync: bool,
}

struct Out {
    file: Box<dyn FsFile>,
    path: PathBuf,
    seq: u64,
    len: u64,
    /// The previous pending buffer, cleared, swapped back in next time.
    spare: Vec<u8>,
}

/// What the background flusher waits on.
#[derive(Default)]
struct Bg {
    /// Async commits waiting for their lsn to be synced: (lsn, waker).
    waiters: Vec<(u64, Waker)>,
    /// A blocking async waiter or a waker asked for a sync.
    wanted: bool,
    stop: bool,
}

pub(crate) struct BgShared {
    state: Mutex<Bg>,
    cv: Condvar,
}

/// Counters of the log's work.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) records: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) syncs: AtomicU64,
}

pub(crate) struct Log {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    segment_bytes: u64,
    pending: Mutex<Pending>,
    out: Mutex<Out>,
    /// Every lsn below this is written to the OS, in a batch that
    /// succeeded whole (see "Outcomes").
    written: AtomicU64,
    /// Every lsn below this is synced.
    synced: AtomicU64,
    /// The first write or sync failure; every later commit gets it.
    failed: OnceLock<Error>,
    bg: Arc<BgShared>,
    /// The background flusher, joined by [`Log::close`].
    flusher: Mutex<Option<JoinHandle<()>>>,
    pub(crate) counters: Counters,
}

/// Creates the file `path` in `dir` holding `first`, and syncs it and the
/// directory, so that a record synced in it later is found after a crash
/// (a new segment of the commit log or of a replica's raft log).
pub(crate) fn create_synced(
    fs: &dyn Fs,
    dir: &Path,
    path: &Path,
    first: &[u8],
) -> Result<Box<dyn FsFile>> {
    let mut f = fs.create(path).map_err(|e| io_error("create", path, &e))?;
    f.append(first).map_err(|e| io_error("write", path, &e))?;
    f.sync().map_err(|e| io_error("sync", path, &e))?;
    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))?;
    Ok(f)
}

/// Creates segment `seq` with its header ([`create_synced`]).
fn new_segment(fs: &dyn Fs, dir: &Path, seq: u64) -> Result<(Box<dyn FsFile>, PathBuf)> {
    let path = dir.join(segment_name(seq));
    let f = create_synced(fs, dir, &path, &record::file_header(SEGMENT_MAGIC, seq))?;
    Ok((f, path))
}

impl Log {
    /// A log writing to a new segment `seq` whose first record gets
    /// `next_lsn`; `interval` starts the periodic background sync.
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        dir: &Path,
        seq: u64,
        next_lsn: u64,
        segment_bytes: u64,
        interval: Option<Duration>,
    ) -> Result<Arc<Log>> {
        let (file, path) = new_segment(&*fs, dir, seq)?;
        let log = Arc::new(Log {
            fs,
            dir: dir.to_path_buf(),
            segment_bytes,
            pending: Mutex::new(Pending {
                buf: Vec::new(),
                next_lsn,
                sync: false,
            }),
            out: Mutex::new(Out {
                file,
                path,
                seq,
                len: FILE_HEADER as u64,
                spare: Vec::new(),
            }),
            written: AtomicU64::new(next_lsn),
            synced: AtomicU64::new(next_lsn),
            failed: OnceLock::new(),
            bg: Arc::new(BgShared {
                state: Mutex::new(Bg::default()),
                cv: Condvar::new(),
            }),
            flusher: Mutex::new(None),
            counters: Counters::default(),
        });
        let weak = Arc::downgrade(&log);
        let bg = log.bg.clone();
        let handle = std::thread::Builder::new()
            .name("snapshot-engine-log".into())
            .spawn(move || background(weak, bg, interval))
            .map_err(|e| io_error("spawn the log flusher for", dir, &e))?;
        *log.flusher.lock() = Some(handle);
        Ok(log)
    }

    /// The failure that stopped the log, if any.
    pub(crate) fn failed(&self) -> Option<&Error> {
        self.failed.get()
    }

    fn fail(&self, e: Error) -> Error {
        let _ = self.failed.set(e);
        self.failed.get().cloned().expect("just set")
    }

    /// Frames `payload` (a commit payload with its lsn placeholder) into
    /// the pending buffer; returns its lsn. `sync`: its committer will
    /// wait for the record to be synced (the batch that writes it syncs).
    pub(crate) fn append(&self, payload: &mut [u8], sync: bool) -> u64 {
        let mut p = self.pending.lock();
        let lsn = p.next_lsn;
        p.next_lsn += 1;
        p.sync |= sync;
        payload[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
        record::frame_into(&mut p.buf, payload);
        drop(p);
        self.counters.records.fetch_add(1, Ordering::Relaxed);
        lsn
    }

    /// Whether `lsn` is written (or, with `sync`, synced), for good: the
    /// batch that holds it succeeded whole.
    #[inline]
    pub(crate) fn is_done(&self, lsn: u64, sync: bool) -> bool {
        let c = if sync { &self.synced } else { &self.written };
        // Acquire: pairs with the Release stores in `write_sync` and
        // `rotate`: seeing
        // the lsn covered orders this committer after the write or sync
        // that covered it (required).
        c.load(Ordering::Acquire) > lsn
    }

    /// Makes record `lsn` reach the OS, and with `sync` the disk: by this
    /// caller's own write and sync, or by another committer's that covered
    /// it (group commit).
    ///
    /// # Errors
    /// The batch holding the record failed, or the log had failed before
    /// it was written: [`Error::Io`], the same for every later call. The
    /// record is then not in the log (see "Outcomes").
    pub(crate) fn flush(&self, lsn: u64, sync: bool) -> Result<()> {
        if self.is_done(lsn, sync) {
            return Ok(());
        }
        let mut out = self.out.lock();
        // Done first: a batch that succeeded stays done even if a later
        // step (a checkpoint's roll-over) stopped the log since.
        if self.is_done(lsn, sync) {
            return Ok(());
        }
        if let Some(e) = self.failed.get() {
            return Err(e.clone());
        }
        self.flush_locked(&mut out, sync).map(|_| ())
    }

    /// Takes the pending buffer: (records, the lsn after them, whether
    /// they must be synced).
    fn take_pending(&self, out: &mut Out) -> (Vec<u8>, u64, bool) {
        let mut p = self.pending.lock();
        out.spare.clear();
        std::mem::swap(&mut p.buf, &mut out.spare);
        let sync = std::mem::take(&mut p.sync);
        (std::mem::take(&mut out.spare), p.next_lsn, sync)
    }

    /// Writes the whole pending buffer (and syncs it with `sync`, or when a
    /// record in it asks to be), rolling the segment over first if it is
    /// full; returns the lsn after the last record written.
    fn flush_locked(&self, out: &mut Out, sync: bool) -> Result<u64> {
        let (data, end, wanted) = self.take_pending(out);
        let r = if !data.is_empty() && out.len >= self.segment_bytes {
            self.rotate(out)
        } else {
            Ok(())
        };
        let r = r.and_then(|()| self.write_sync(out, &data, end, sync || wanted));
        out.spare = data;
        r.map(|()| end)
    }

    /// A failed step of a batch: stops the log with `e` and cuts the
    /// segment back to `len`, where the batch began, so that no commit
    /// this error fails comes back at recovery. If the cut fails too, the
    /// error says so (`truncate`): the batch may come back.
    fn fail_batch(&self, out: &Out, len: u64, e: Error) -> Error {
        let e = match self.fs.truncate(&out.path, len) {
            Ok(()) => e,
            Err(t) => Error::Io {
                op: "truncate",
                path: out.path.clone(),
                kind: t.kind(),
                message: format!(
                    "{t}; cutting back a batch after: {e}; its commits may be replayed at recovery"
                ),
            },
        };
        self.fail(e)
    }

    /// Writes `data` (the records below `end`) and with `sync` syncs the
    /// segment; publishes `written` (and `synced`) only once both
    /// succeeded.
    fn write_sync(&self, out: &mut Out, data: &[u8], end: u64, sync: bool) -> Result<()> {
        let before = out.len;
        if !data.is_empty() {
            if let Err(e) = out.file.append(data) {
                return Err(self.fail_batch(out, before, io_error("write", &out.path, &e)));
            }
            out.len += data.len() as u64;
            self.counters.writes.fetch_add(1, Ordering::Relaxed);
            self.counters
                .bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        let sync = sync && self.synced.load(Ordering::Relaxed) < end;
        if sync {
            if let Err(e) = out.file.sync() {
                return Err(self.fail_batch(out, before, io_error("sync", &out.path, &e)));
            }
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        }
        // Release: pairs with the Acquire in `is_done` (required).
        self.written.store(end, Ordering::Release);
        if sync {
            // Release: pairs with the Acquire in `is_done` (required).
            self.synced.store(end, Ordering::Release);
        }
        Ok(())
    }

    /// Syncs the current segment and starts the next. Any failure stops
    /// the log; nothing is written to the next segment before all of it
    /// succeeded.
    fn rotate(&self, out: &mut Out) -> Result<()> {
        let end = self.written.load(Ordering::Relaxed);
        if self.synced.load(Ordering::Relaxed) < end {
            // The records below `end` were reported written: a failed sync
            // leaves them (their commits returned `Ok`).
            out.file
                .sync()
                .map_err(|e| self.fail(io_error("sync", &out.path, &e)))?;
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            // Release: pairs with the Acquire in `is_done` (required).
            self.synced.store(end, Ordering::Release);
        }
        let (file, path) =
            new_segment(&*self.fs, &self.dir, out.seq + 1).map_err(|e| self.fail(e))?;
        out.file = file;
        out.path = path;
        out.seq += 1;
        out.len = FILE_HEADER as u64;
        Ok(())
    }

    /// Writes and syncs everything pending.
    ///
    /// # Errors
    /// As [`Log::flush`].
    pub(crate) fn sync_all(&self) -> Result<()> {
        let mut out = self.out.lock();
        if let Some(e) = self.failed.get() {
            return Err(e.clone());
        }
        self.flush_locked(&mut out, true).map(|_| ())
    }

    /// For a checkpoint: syncs everything pending and starts a new segment.
    /// Returns the new segment's sequence number and the lsn its first
    /// record will get: every record below it is in an older segment.
    ///
    /// # Errors
    /// As [`Log::flush`]. A failed roll-over after the pending records were
    /// written and synced stops the log; those records' commits succeed.
    pub(crate) fn cut(&self) -> Result<(u64, u64)> {
        let mut out = self.out.lock();
        if let Some(e) = self.failed.get() {
            return Err(e.clone());
        }
        let (data, end, _) = self.take_pending(&mut out);
        let r = self.write_sync(&mut out, &data, end, true);
        out.spare = data;
        r?;
        self.rotate(&mut out)?;
        Ok((out.seq, end))
    }

    /// Registers an async waiter for `lsn` and wakes the flusher; after
    /// [`Log::close`], wakes it at once (its lsn is synced, or the log
    /// failed).
    pub(crate) fn wait_async(&self, lsn: u64, waker: Waker) {
        let mut st = self.bg.state.lock();
        if st.stop {
            drop(st);
            waker.wake();
            return;
        }
        st.waiters.push((lsn, waker));
        st.wanted = true;
        drop(st);
        self.bg.cv.notify_one();
    }

    /// Closes the log: stops the background flusher and waits for it to
    /// end (unless called on it), then writes and syncs everything pending
    /// and wakes every async waiter. Afterwards every record appended
    /// before is synced, or the log failed; nothing is written again.
    /// Idempotent.
    pub(crate) fn close(&self) {
        self.bg.state.lock().stop = true;
        self.bg.cv.notify_all();
        let flusher = self.flusher.lock().take();
        if let Some(h) = flusher {
            if h.thread().id() != std::thread::current().id() {
                // The flusher holds the log only between waits, so it ends
                // once its current sync is done. It never panics; if it
                // did, its waiters are woken below all the same.
                let _ = h.join();
            }
        }
        let mut out = self.out.lock();
        if self.failed.get().is_none() {
            // A clean close leaves every record synced.
            let _ = self.flush_locked(&mut out, true);
        }
        drop(out);
        let waiters = std::mem::take(&mut self.bg.state.lock().waiters);
        for (_, w) in waiters {
            w.wake();
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.close();
    }
}

/// The background flusher: every `interval` (Periodic durability) and
/// whenever an async commit waits, writes and syncs what is pending, then
/// wakes the async commits it covered. Holds the log only while it works;
/// [`Log::close`] stops it and waits for it.
fn background(log: Weak<Log>, bg: Arc<BgShared>, interval: Option<Duration>) {
    loop {
        {
            let mut st = bg.state.lock();
            if !st.wanted && !st.stop {
                match interval {
                    Some(d) => {
                        bg.cv.wait_for(&mut st, d);
                    }
                    None => bg.cv.wait(&mut st),
                }
            }
            if st.stop {
                return;
            }
            st.wanted = false;
        }
        let Some(log) = log.upgrade() else { return };
        let _ = log.sync_all();
        let failed = log.failed().is_some();
        let mut st = bg.state.lock();
        st.waiters.retain(|(lsn, w)| {
            let done = failed || log.is_done(*lsn, true);
            if done {
                w.wake_by_ref();
            }
            !done
        });
        if !st.waiters.is_empty() {
            st.wanted = true;
        }
        drop(st);
        drop(log);
    }
}
