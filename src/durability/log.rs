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
//!
//! # Roll-over
//!
//! Segment `n` ends, once segment `n+1` exists, with a `roll` record
//! naming it and the lsn it starts at; segment `n+1` starts with a
//! `segment` record repeating its number and that lsn. The steps: sync
//! segment `n`; create `n+1` with its header, sync it and the directory;
//! append the `roll` record to `n` and sync it; only then write records
//! into `n+1`. So every segment followed by another that holds a record
//! names it, and every record below the lsn `n+1` starts at is synced in
//! `n` before `n+1` exists. A crash inside a roll-over leaves `n` without
//! its `roll` record and `n+1` with nothing but its header (a leftover
//! that recovery drops). An open continues the log the same way: the last
//! segment recovery kept is synced, the new segment created, and the
//! `roll` record appended to the old one ([`Fs::append_to`]).

use super::fs::{Fs, FsFile};
use super::record::{
    self, Commit, End, ANCHOR_PAYLOAD, FILE_HEADER, FRAME_HEADER, KIND_ROLL, KIND_SEGMENT,
    KIND_SYNCED, SEGMENT_MAGIC, SEGMENT_MAGIC_V1, SEGMENT_VERSION,
};
use crate::error::{Error, Result};
use crate::sync::{AtomicU64, Ordering};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bytes before a segment's first commit record: the file header and the
/// framed `segment` record.
pub(crate) const SEGMENT_HEADER: usize = FILE_HEADER + FRAME_HEADER + ANCHOR_PAYLOAD;

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

/// Segment `seq`'s header: the file header and the `segment` record
/// saying its first record gets `first_lsn`.
fn segment_header(seq: u64, first_lsn: u64) -> Vec<u8> {
    let mut h = record::file_header(SEGMENT_MAGIC, seq).to_vec();
    record::frame_into(&mut h, &record::anchor(KIND_SEGMENT, seq, first_lsn));
    debug_assert_eq!(h.len(), SEGMENT_HEADER);
    h
}

/// The framed `roll` record that ends a segment: the next is `next_seq`,
/// whose first record gets `next_lsn`.
fn roll_record(next_seq: u64, next_lsn: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity(FRAME_HEADER + ANCHOR_PAYLOAD);
    record::frame_into(&mut r, &record::anchor(KIND_ROLL, next_seq, next_lsn));
    r
}

/// A segment's `roll` record: the next segment and the lsn it starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Roll {
    /// Where the record starts in the file.
    pub(crate) offset: u64,
    pub(crate) next_seq: u64,
    pub(crate) next_lsn: u64,
}

/// A segment file as read back ([`scan_segment`]).
#[derive(Debug)]
pub(crate) struct Segment {
    /// The lsn its first record gets, from its `segment` record; `None`:
    /// the header is torn (the file ends, or is zeros, before the header
    /// is whole), as a crash while the segment was being created leaves
    /// it. No record can follow a torn header.
    pub(crate) first_lsn: Option<u64>,
    /// Its commit records with their offsets, up to the first damage.
    pub(crate) records: Vec<(u64, Commit)>,
    /// Its `roll` record, if it ends with a whole one.
    pub(crate) roll: Option<Roll>,
    /// The largest offset a whole `synced` record names ([`SEGMENT_HEADER`]
    /// if none): every byte below it was synced.
    pub(crate) synced_through: u64,
    /// How the scan ended: `Torn { offset: 0 }` for a torn header.
    pub(crate) end: End,
    /// The file's length.
    pub(crate) len: u64,
}

/// Reads segment `seq` from `buf` (the file `path`): its header, its
/// records, its `roll` record. A damaged header is `End::Corrupt` at its
/// offset; a record after the `roll` record, or one that is neither a
/// commit nor a `roll`, is `End::Corrupt` there.
///
/// # Errors
/// [`Error::UnsupportedFormat`] for a segment of format version 1.
pub(crate) fn scan_segment(buf: &[u8], path: &Path, seq: u64) -> Result<Segment> {
    let mut seg = Segment {
        first_lsn: None,
        records: Vec::new(),
        roll: None,
        synced_through: SEGMENT_HEADER as u64,
        end: End::Torn { offset: 0 },
        len: buf.len() as u64,
    };
    if buf.iter().all(|&b| b == 0) {
        return Ok(seg);
    }
    let head = &buf[..FILE_HEADER.min(buf.len())];
    if buf.len() >= FILE_HEADER && buf[..8] == SEGMENT_MAGIC_V1[..] {
        return Err(Error::UnsupportedFormat {
            file: path.to_path_buf(),
            version: 1,
            supported: SEGMENT_VERSION,
        });
    }
    let want = record::file_header(SEGMENT_MAGIC, seq);
    if head != &want[..head.len()] {
        seg.end = End::Corrupt {
            offset: 0,
            reason: "not a log segment of this number (bad file header)",
        };
        return Ok(seg);
    }
    if buf.len() < FILE_HEADER {
        return Ok(seg);
    }
    let (frames, end) = record::scan(buf, FILE_HEADER);
    let mut frames = frames.into_iter();
    let Some((offset, range)) = frames.next() else {
        // No whole `segment` record: torn (from 0: nothing before it
        // counts) or corrupt where the scan stopped.
        if let End::Corrupt { offset, reason } = end {
            seg.end = End::Corrupt { offset, reason };
        }
        return Ok(seg);
    };
    match record::decode_anchor(KIND_SEGMENT, &buf[range]) {
        Some((s, first_lsn)) if s == seq => seg.first_lsn = Some(first_lsn),
        _ => {
            seg.end = End::Corrupt {
                offset,
                reason: "bad segment header record",
            };
            return Ok(seg);
        }
    }
    seg.end = end;
    for (offset, range) in frames {
        let payload = &buf[range];
        if let Some(r) = seg.roll.take() {
            // Reported at the roll-over record, which goes with it: a cut
            // there leaves a segment that names no successor.
            seg.end = End::Corrupt {
                offset: r.offset,
                reason: "record after the segment's roll-over record",
            };
            break;
        }
        if payload.first() == Some(&KIND_SYNCED) {
            match record::decode_synced(payload) {
                Some(t) if (SEGMENT_HEADER as u64..=offset).contains(&t) => {
                    seg.synced_through = seg.synced_through.max(t);
                    continue;
                }
                _ => {
                    seg.end = End::Corrupt {
                        offset,
                        reason: "malformed synced-through record",
                    };
                    break;
                }
            }
        }
        if let Some((next_seq, next_lsn)) = record::decode_anchor(KIND_ROLL, payload) {
            seg.roll = Some(Roll {
                offset,
                next_seq,
                next_lsn,
            });
            continue;
        }
        match record::decode_commit(payload) {
            Some(c) => seg.records.push((offset, c)),
            None => {
                seg.end = End::Corrupt {
                    offset,
                    reason: "malformed log record",
                };
                break;
            }
        }
    }
    if seg.roll.is_some() && seg.end != End::Clean {
        // A roll-over record is the segment's last write: anything after
        // it, even torn, is damage (reported as above).
        let offset = seg.roll.take().map_or(0, |r| r.offset);
        seg.end = End::Corrupt {
            offset,
            reason: "bytes after the segment's roll-over record",
        };
    }
    Ok(seg)
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

/// Creates segment `seq`, whose first record gets `first_lsn`, with its
/// header ([`create_synced`]).
fn new_segment(
    fs: &dyn Fs,
    dir: &Path,
    seq: u64,
    first_lsn: u64,
) -> Result<(Box<dyn FsFile>, PathBuf)> {
    let path = dir.join(segment_name(seq));
    let f = create_synced(fs, dir, &path, &segment_header(seq, first_lsn))?;
    Ok((f, path))
}

impl Log {
    /// A log writing to a new segment `seq` whose first record gets
    /// `next_lsn`; `interval` starts the periodic background sync. If
    /// segment `seq - 1` is in `dir`, it is synced first and ends with a
    /// `roll` record naming the new one (see "Roll-over").
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
            if let Err(e) = out.file.sync() {
                return Err(self.fail_batch(out, before, io_error("sync", &out.path, &e)));
            }
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

    /// Ends the current segment and starts the next (see "Roll-over"):
    /// syncs it, creates the next, appends the `roll` record naming it and
    /// syncs that. Any failure stops the log; nothing is written to the
    /// next segment before all of it succeeded.
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::durability::fs::MemFs;

    fn commit_payload(lsn: u64) -> Vec<u8> {
        let mut p = Vec::new();
        record::begin_commit(&mut p, 0, 0, false, 1);
        record::push_write(&mut p, b"k", Some(b"v"));
        p[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
        p
    }

    fn scan(buf: &[u8]) -> Result<Segment> {
        scan_segment(buf, Path::new("/d/log"), 3)
    }

    #[test]
    fn a_segment_scans_back_with_its_anchors() {
        let mut b = segment_header(3, 10);
        record::frame_into(&mut b, &commit_payload(10));
        let through = b.len() as u64;
        record::frame_synced(&mut b, through);
        record::frame_into(&mut b, &commit_payload(11));
        let roll_at = b.len() as u64;
        b.extend_from_slice(&roll_record(4, 12));
        let seg = scan(&b).unwrap();
        assert_eq!(seg.first_lsn, Some(10));
        assert_eq!(seg.end, End::Clean);
        let lsns: Vec<u64> = seg.records.iter().map(|(_, c)| c.lsn).collect();
        assert_eq!(lsns, [10, 11]);
        assert_eq!(seg.synced_through, through);
        let want = Roll {
            offset: roll_at,
            next_seq: 4,
            next_lsn: 12,
        };
        assert_eq!(seg.roll, Some(want));
        // Every cut inside the header is a torn header, never a panic.
        for cut in 0..SEGMENT_HEADER {
            let s = scan(&b[..cut]).unwrap();
            assert_eq!(
                (s.first_lsn, s.end),
                (None, End::Torn { offset: 0 }),
                "{cut}"
            );
        }
        // Anything after the roll-over record is damage.
        let mut after = b.clone();
        record::frame_into(&mut after, &commit_payload(12));
        let s = scan(&after).unwrap();
        assert!(matches!(s.end, End::Corrupt { offset, .. } if offset == roll_at));
        assert_eq!(s.roll, None);
        after.truncate(b.len() + 3);
        assert!(matches!(scan(&after).unwrap().end, End::Corrupt { .. }));
    }

    #[test]
    fn bad_anchors_are_corrupt_and_an_old_format_is_refused() {
        // A header naming another segment, a mark past its own offset.
        let other = segment_header(4, 10);
        assert!(matches!(scan(&other).unwrap().end, End::Corrupt { .. }));
        let mut b = segment_header(3, 10);
        let past = b.len() as u64 + 1;
        record::frame_synced(&mut b, past);
        assert!(matches!(
            scan(&b).unwrap().end,
            End::Corrupt { offset, .. } if offset == SEGMENT_HEADER as u64
        ));
        let mut v1 = SEGMENT_MAGIC_V1.to_vec();
        v1.extend_from_slice(&3u64.to_le_bytes());
        assert!(matches!(
            scan(&v1),
            Err(Error::UnsupportedFormat {
                version: 1,
                supported: 2,
                ..
            })
        ));
        assert_eq!(scan(&[0; 40]).unwrap().first_lsn, None);
    }

    /// A batch written after a sync ends with a mark of what that sync
    /// covered; one written with nothing synced since the last mark has
    /// none.
    #[test]
    fn batches_after_a_sync_mark_what_it_covered() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let dir = Path::new("/d");
        let log = Log::create(fs.clone(), dir, 1, 1, 1 << 20, None).unwrap();
        let path = dir.join(segment_name(1));
        let mut p = commit_payload(0);
        let a = log.append(&mut p, true);
        log.flush(a, true).unwrap();
        let first_sync = fs.read(&path).unwrap().len() as u64;
        let b = log.append(&mut p, false);
        log.flush(b, false).unwrap();
        let c = log.append(&mut p, false);
        log.flush(c, false).unwrap();
        let seg = scan_segment(&fs.read(&path).unwrap(), &path, 1).unwrap();
        assert_eq!(seg.end, End::Clean);
        assert_eq!(seg.records.len(), 3);
        assert_eq!(seg.synced_through, first_sync);
        let marks = record::scan(&fs.read(&path).unwrap(), FILE_HEADER)
            .0
            .iter()
            .filter(|(o, _)| fs.read(&path).unwrap()[*o as usize + FRAME_HEADER] == KIND_SYNCED)
            .count();
        assert_eq!(marks, 1);
    }
}
