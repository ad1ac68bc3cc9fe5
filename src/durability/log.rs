//! The commit log: numbered segment files of framed records
//! (`record.rs`, `log/segment.rs`), appended through one writer with group
//! commit.
//!
//! A committer frames its record into the shared pending buffer under the
//! `pending` lock, which hands out log sequence numbers (lsns) in buffer
//! order. To make it reach the OS (and, for `Sync`, the disk) it calls
//! [`Log::flush`].
//!
//! # Group commit
//!
//! One committer at a time is the *leader* (`Group::leading`): it takes
//! the whole pending buffer under the `out` lock, writes it with one
//! `write` and, if a record in it waits for a sync, syncs it with one
//! `fdatasync`, then wakes every waiting committer at once. A committer whose record is not yet covered when it
//! calls `flush` waits on the `group` condition variable while a leader
//! works, never on the `out` lock, so it learns that a batch covered it
//! the moment that batch ends, without a syscall. Records framed while a
//! leader writes and syncs pile up in the pending buffer; when it is done,
//! the first woken committer still uncovered leads the next batch and
//! takes all of them. A group thus holds every record framed while the
//! previous sync ran (RocksDB's write groups, PostgreSQL's WAL flush).
//! Taken the moment a sync ends, the next batch would hold only the
//! records framed during that sync, not those of the committers it just
//! released, so `n` writers in a loop would share a sync about `n / 2` at a
//! time. A leader of a synced batch therefore first gathers
//! (`Log::gather`, PostgreSQL's `commit_delay` made adaptive): it waits
//! until as many records are pending as the previous synced batch held, or
//! half the recent sync time has passed, whichever comes first.
//! A record framed after the leader took the buffer is not in the batch
//! that sync covers, so a commit is acknowledged only by a sync that began
//! after its record was written (invariant D2, DESIGN.md "Durability").
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
//!
//! # Orderings
//!
//! `written` and `synced` are stored with Release only after the batch's
//! write (and sync) returned, and read with Acquire in [`Log::is_done`]: a
//! committer that sees its lsn covered is ordered after the syscalls that
//! covered it. The `leading` flag and the wake-ups live under the `group`
//! mutex, whose lock and unlock order them.

mod background;
mod segment;

use super::fs::{Fs, FsFile};
use super::record;
use crate::error::{Error, Result};
use crate::sync::{AtomicU64, Ordering};
use background::{background, BgShared};
use parking_lot::{Condvar, Mutex};
#[cfg(feature = "replication")]
pub(crate) use segment::create_synced;
use segment::{new_segment, roll_record};
pub(crate) use segment::{
    parse_segment, scan_segment, segment_name, Roll, Segment, SEGMENT_HEADER,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// The segment's length at its last successful sync.
    synced_len: u64,
    /// The `through` of the last `synced` record written to the segment.
    marked: u64,
    /// The previous pending buffer, cleared, swapped back in next time.
    spare: Vec<u8>,
    /// Records in the last synced batch, and a moving average of the sync
    /// time in nanoseconds: what `Log::gather` waits for, and how long.
    last_batch: u64,
    sync_nanos: u64,
}

/// Who is writing a batch now (see "Group commit").
struct Group {
    /// A leader is writing (and syncing) a batch: other committers whose
    /// records are not yet covered wait on `Log::group_cv` for it.
    leading: bool,
}

/// Ends a leader's turn, also when it unwinds: clears `leading` and wakes
/// every waiting committer, so none waits for a leader that is gone.
struct Turn<'a>(&'a Log);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.group.lock().leading = false;
        self.0.group_cv.notify_all();
    }
}

/// Where the synced log ended at [`Log::sync_point`].
pub(crate) struct SyncPoint {
    /// The segment being written then.
    pub(crate) seq: u64,
    /// Its synced length, a frame boundary: every record below `next_lsn`
    /// is below it in this segment, or in an earlier one.
    pub(crate) len: u64,
    /// Every record below this lsn is synced.
    pub(crate) next_lsn: u64,
    /// How long the writer lock was held (writers waited at most this).
    pub(crate) held: Duration,
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
    /// The segment and its writer state; held by a leader, a checkpoint's
    /// cut, the background flusher and `close` while they write.
    out: Mutex<Out>,
    group: Mutex<Group>,
    /// Wakes the committers waiting for a leader's batch.
    group_cv: Condvar,
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

impl Log {
    /// A log writing to a new segment `seq` whose first record gets
    /// `next_lsn`; `interval` starts the periodic background sync. If
    /// segment `seq - 1` is in `dir`, it is synced first and ends with a
    /// `roll` record naming the new one (`log/segment.rs`, "Roll-over").
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        dir: &Path,
        seq: u64,
        next_lsn: u64,
        segment_bytes: u64,
        interval: Option<Duration>,
    ) -> Result<Arc<Log>> {
        let prev_name = segment_name(seq.wrapping_sub(1));
        let has_prev = seq > 1
            && fs
                .list(dir)
                .map_err(|e| io_error("list", dir, &e))?
                .contains(&prev_name);
        let mut prev = None;
        if has_prev {
            let path = dir.join(prev_name);
            let mut f = fs
                .append_to(&path)
                .map_err(|e| io_error("open", &path, &e))?;
            // What recovery read may not be on the disk yet (a killed
            // process's writes): on it before the next segment exists.
            f.sync().map_err(|e| io_error("sync", &path, &e))?;
            prev = Some((f, path));
        }
        let (file, path) = new_segment(&*fs, dir, seq, next_lsn)?;
        if let Some((mut f, p)) = prev {
            // A failure here leaves the previous segment without a whole
            // roll-over record and the new one empty: recovery drops the
            // new one.
            f.append(&roll_record(seq, next_lsn))
                .map_err(|e| io_error("write", &p, &e))?;
            f.sync().map_err(|e| io_error("sync", &p, &e))?;
        }
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
                len: SEGMENT_HEADER as u64,
                synced_len: SEGMENT_HEADER as u64,
                marked: SEGMENT_HEADER as u64,
                spare: Vec::new(),
                last_batch: 0,
                sync_nanos: 0,
            }),
            group: Mutex::new(Group { leading: false }),
            group_cv: Condvar::new(),
            written: AtomicU64::new(next_lsn),
            synced: AtomicU64::new(next_lsn),
            failed: OnceLock::new(),
            bg: Arc::new(BgShared::new()),
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

    /// Stops the log with `e` (the first failure stays): every later
    /// commit gets it.
    pub(crate) fn fail(&self, e: Error) -> Error {
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
        // `rotate`: seeing the lsn covered orders this committer after the
        // write or sync that covered it (required).
        c.load(Ordering::Acquire) > lsn
    }

    /// Makes record `lsn` reach the OS, and with `sync` the disk: by a
    /// batch this caller leads, or by one another committer leads (see
    /// "Group commit").
    ///
    /// # Errors
    /// The batch holding the record failed, or the log had failed before
    /// it was written: [`Error::Io`], the same for every later call. The
    /// record is then not in the log (see "Outcomes").
    pub(crate) fn flush(&self, lsn: u64, sync: bool) -> Result<()> {
        if self.is_done(lsn, sync) {
            return Ok(());
        }
        let mut g = self.group.lock();
        loop {
            // Done first: a batch that succeeded stays done even if a
            // later step (a checkpoint's roll-over) stopped the log since.
            if self.is_done(lsn, sync) {
                return Ok(());
            }
            if let Some(e) = self.failed.get() {
                return Err(e.clone());
            }
            if !g.leading {
                break;
            }
            self.group_cv.wait(&mut g);
        }
        g.leading = true;
        drop(g);
        let _turn = Turn(self);
        let mut out = self.out.lock();
        // A checkpoint's cut or the background flusher may have covered
        // the record (or failed) while this leader waited for `out`.
        if self.is_done(lsn, sync) {
            return Ok(());
        }
        if let Some(e) = self.failed.get() {
            return Err(e.clone());
        }
        if sync {
            self.gather(&out);
        }
        self.flush_locked(&mut out, sync).map(|_| ())
    }

    /// Before a synced batch, lets the committers the previous sync
    /// released frame their next records (see "Group commit"): returns once
    /// as many records are pending as that batch held, or after half the
    /// moving average of the sync time. Waits for nothing with no sync
    /// measured yet or a batch of one.
    fn gather(&self, out: &Out) {
        let want = out.last_batch;
        if want <= 1 || out.sync_nanos == 0 {
            return;
        }
        // Relaxed: `written` is stored only under `out`, which this leader
        // holds, so the lock orders the load (the start of the pending
        // buffer: every earlier batch is written).
        let first = self.written.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_nanos(out.sync_nanos / 2);
        while self.pending.lock().next_lsn - first < want && Instant::now() < deadline {
            std::thread::yield_now();
        }
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
        let mut data = data;
        let r = r.and_then(|()| self.write_sync(out, &mut data, end, sync || wanted));
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

    /// Writes `data` (the records below `end`, and at their end a `synced`
    /// record if the segment was synced since the last one) and with `sync`
    /// syncs the segment; publishes `written` (and `synced`) only once both
    /// succeeded.
    fn write_sync(&self, out: &mut Out, data: &mut Vec<u8>, end: u64, sync: bool) -> Result<()> {
        let before = out.len;
        if !data.is_empty() {
            let mark = out.synced_len > out.marked;
            if mark {
                record::frame_synced(data, out.synced_len);
            }
            if let Err(e) = out.file.append(data) {
                return Err(self.fail_batch(out, before, io_error("write", &out.path, &e)));
            }
            if mark {
                out.marked = out.synced_len;
            }
            out.len += data.len() as u64;
            self.counters.writes.fetch_add(1, Ordering::Relaxed);
            self.counters
                .bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        let sync = sync && self.synced.load(Ordering::Relaxed) < end;
        if sync {
            let started = Instant::now();
            if let Err(e) = out.file.sync() {
                return Err(self.fail_batch(out, before, io_error("sync", &out.path, &e)));
            }
            let took = started.elapsed();
            #[cfg(all(feature = "bench-hooks", not(loom)))]
            crate::bench_api::note_log_sync(took);
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            out.sync_nanos = if out.sync_nanos == 0 {
                nanos
            } else {
                out.sync_nanos / 8 * 7 + nanos / 8
            };
            // Relaxed: stored only under `out`, held here.
            out.last_batch = end - self.written.load(Ordering::Relaxed);
            out.synced_len = out.len;
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

    /// Ends the current segment and starts the next (`log/segment.rs`,
    /// "Roll-over"): syncs it, creates the next, appends the `roll` record
    /// naming it and syncs that. Any failure stops the log; nothing is
    /// written to the next segment before all of it succeeded.
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
        let next = out.seq + 1;
        let (file, path) =
            new_segment(&*self.fs, &self.dir, next, end).map_err(|e| self.fail(e))?;
        let before = out.len;
        if let Err(e) = out.file.append(&roll_record(next, end)) {
            return Err(self.fail_batch(out, before, io_error("write", &out.path, &e)));
        }
        if let Err(e) = out.file.sync() {
            return Err(self.fail_batch(out, before, io_error("sync", &out.path, &e)));
        }
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        out.file = file;
        out.path = path;
        out.seq = next;
        out.len = SEGMENT_HEADER as u64;
        out.synced_len = out.len;
        out.marked = out.len;
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

    /// For a backup (`backup.rs`): writes and syncs everything pending and
    /// returns where the synced log ends. Holds the writer lock only for
    /// that one batch.
    ///
    /// # Errors
    /// As [`Log::flush`].
    pub(crate) fn sync_point(&self) -> Result<SyncPoint> {
        let mut out = self.out.lock();
        let started = Instant::now();
        if let Some(e) = self.failed.get() {
            return Err(e.clone());
        }
        self.flush_locked(&mut out, true)?;
        Ok(SyncPoint {
            seq: out.seq,
            len: out.synced_len,
            // Relaxed: stored only under `out`, held here.
            next_lsn: self.synced.load(Ordering::Relaxed),
            held: started.elapsed(),
        })
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
        let (mut data, end, _) = self.take_pending(&mut out);
        let r = self.write_sync(&mut out, &mut data, end, true);
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

#[cfg(all(test, not(loom)))]
mod tests;
