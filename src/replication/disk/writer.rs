//! The log writer: one thread owns the current segment; every record is
//! queued in call order, and the thread writes what is queued with one
//! `write`, syncs it (as [`LogOptions::durability`] says), and only then
//! completes the callers. [`LogOptions`]: how a durable node keeps its log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use openraft::storage::LogFlushed;
use openraft::{LogId, Vote};
use parking_lot::{Condvar, Mutex};

use super::format::{
    framed, segment_name, Segment, KIND_COMMITTED, KIND_PURGE, KIND_TRUNCATE, KIND_VOTE, LOG_MAGIC,
};
use crate::durability::record;
use crate::durability::{create_synced, io_error, Durability, Fs, FsFile};
use crate::replication::entry::{NodeId, TypeConfig};
use crate::sync::{AtomicU64, Ordering};
use crate::Error;

/// How a durable node
/// ([`Replica::open`](crate::replication::Replica::open)) keeps its
/// raft log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOptions {
    /// When an appended entry or a vote counts as stored: [`Durability::Sync`]
    /// (the default) syncs before openraft is told, so an entry a node
    /// acknowledged survives a power cut; [`Durability::Periodic`] and
    /// [`Durability::None`] report it once it is written to the OS, which
    /// survives the process's death but not the machine's.
    pub durability: Durability,
    /// A segment is synced and the next started once it holds this many
    /// bytes (4096 to 2^40; default 64 MiB).
    pub segment_bytes: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            durability: Durability::Sync,
            segment_bytes: 64 << 20,
        }
    }
}

impl LogOptions {
    /// Checks the bounds.
    ///
    /// # Errors
    /// [`Error::InvalidDurabilityOption`] naming the setting and its range.
    pub fn validate(&self) -> Result<(), Error> {
        crate::durability::validate_log(self.durability, self.segment_bytes)
    }
}

/// How a queued record's caller learns that it is stored.
enum Done {
    /// An append: openraft's callback.
    Flushed(LogFlushed<TypeConfig>),
    /// A vote, truncate or purge: the waiting caller.
    Notify(tokio::sync::oneshot::Sender<Result<(), Error>>),
    /// Nobody waits (the committed point).
    Nothing,
}

/// One queued record.
struct Job {
    frames: Vec<u8>,
    /// The newest entry index among the frames.
    max_index: Option<u64>,
    /// The vote, committed or purge frame to repeat at the head of every
    /// later segment.
    state: Option<(u8, Vec<u8>)>,
    /// A purge: segments whose entries are all at or below this index can
    /// go once it is synced.
    purge_upto: Option<u64>,
    done: Done,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    stop: bool,
}

/// What the node's log store shares with the writer thread.
pub(crate) struct Writer {
    queue: Mutex<Queue>,
    cv: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// `write` calls on segments. Relaxed, as every counter here: a report
    /// that publishes nothing.
    pub(crate) writes: AtomicU64,
    /// `fdatasync` calls on segments.
    pub(crate) syncs: AtomicU64,
    /// Nanoseconds spent in them.
    pub(crate) sync_ns: AtomicU64,
}

/// The writer thread's own state.
struct Out {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    options: LogOptions,
    file: Box<dyn FsFile>,
    len: u64,
    /// Every segment, the current one last.
    segments: Vec<Segment>,
    /// The latest vote, committed and purge frames, by kind.
    state: BTreeMap<u8, Vec<u8>>,
    last_sync: Instant,
    /// The first write or sync failure: every later record gets it.
    failed: Option<Error>,
}

/// Starts the writer thread on a new segment of `dir` that opens with the
/// state frames `head`, after the recovered `segments`.
///
/// # Errors
/// [`Error::Io`] if the segment cannot be made or the thread cannot start.
pub(super) fn start(
    fs: Arc<dyn Fs>,
    dir: &Path,
    options: LogOptions,
    mut segments: Vec<Segment>,
    head: BTreeMap<u8, Vec<u8>>,
) -> Result<Arc<Writer>, Error> {
    let seq = segments.last().map_or(1, |s| s.seq + 1);
    let (file, path, len) = new_segment(&*fs, dir, seq, &head)?;
    segments.push(Segment {
        seq,
        path,
        max_index: None,
    });
    let out = Out {
        fs,
        dir: dir.to_path_buf(),
        options,
        file,
        len,
        segments,
        state: head,
        last_sync: Instant::now(),
        failed: None,
    };
    let writer = Arc::new(Writer {
        queue: Mutex::default(),
        cv: Condvar::new(),
        thread: Mutex::new(None),
        writes: AtomicU64::new(0),
        syncs: AtomicU64::new(0),
        sync_ns: AtomicU64::new(0),
    });
    let w = writer.clone();
    let handle = std::thread::Builder::new()
        .name("raft-log".to_string())
        .spawn(move || w.run(out))
        .map_err(|e| io_error("spawn the log writer for", dir, &e))?;
    *writer.thread.lock() = Some(handle);
    Ok(writer)
}

/// Creates segment `seq` holding the state frames, synced with its
/// directory entry, so that a record synced in it later is found.
fn new_segment(
    fs: &dyn Fs,
    dir: &Path,
    seq: u64,
    head: &BTreeMap<u8, Vec<u8>>,
) -> Result<(Box<dyn FsFile>, PathBuf, u64), Error> {
    let path = dir.join(segment_name(seq));
    let mut buf = record::file_header(LOG_MAGIC, seq).to_vec();
    head.values().for_each(|h| buf.extend_from_slice(h));
    let f = create_synced(fs, dir, &path, &buf)?;
    Ok((f, path, buf.len() as u64))
}

impl Writer {
    fn push(&self, job: Job) {
        let mut q = self.queue.lock();
        q.jobs.push(job);
        self.cv.notify_one();
    }

    /// Queues the entry frames `frames` ([`frame_entry`]), the newest at
    /// index `max_index`; `callback` is called once they are stored.
    pub(crate) fn append(
        &self,
        frames: Vec<u8>,
        max_index: Option<u64>,
        callback: LogFlushed<TypeConfig>,
    ) {
        self.push(Job {
            frames,
            max_index,
            state: None,
            purge_upto: None,
            done: Done::Flushed(callback),
        });
    }

    /// Queues a record and waits until it is stored.
    async fn stored(
        &self,
        frames: Vec<u8>,
        state: Option<(u8, Vec<u8>)>,
        purge_upto: Option<u64>,
    ) -> Result<(), Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.push(Job {
            frames,
            max_index: None,
            state,
            purge_upto,
            done: Done::Notify(tx),
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::Io {
                op: "write",
                path: PathBuf::from("the raft log"),
                kind: std::io::ErrorKind::BrokenPipe,
                message: "the log writer stopped".to_string(),
            })
        })
    }

    /// Stores the vote.
    pub(crate) async fn save_vote(&self, vote: &Vote<NodeId>) -> Result<(), Error> {
        let f = framed(KIND_VOTE, vote);
        self.stored(f.clone(), Some((KIND_VOTE, f)), None).await
    }

    /// Queues the committed point (not waited for: openraft re-learns it
    /// from the leader, and one found older only re-applies less at start).
    pub(crate) fn save_committed(&self, committed: &Option<LogId<NodeId>>) {
        let f = framed(KIND_COMMITTED, committed);
        self.push(Job {
            frames: f.clone(),
            max_index: None,
            state: Some((KIND_COMMITTED, f)),
            purge_upto: None,
            done: Done::Nothing,
        });
    }

    /// Stores a truncation at `index`.
    pub(crate) async fn truncate(&self, index: u64) -> Result<(), Error> {
        self.stored(framed(KIND_TRUNCATE, &index), None, None).await
    }

    /// Stores a purge up to `log_id`, then removes the segments it empties.
    pub(crate) async fn purge(&self, log_id: LogId<NodeId>) -> Result<(), Error> {
        let f = framed(KIND_PURGE, &log_id);
        self.stored(f.clone(), Some((KIND_PURGE, f)), Some(log_id.index))
            .await
    }

    /// Ends the writer thread after it has written what is queued.
    pub(crate) fn stop(&self) {
        self.queue.lock().stop = true;
        self.cv.notify_one();
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }

    fn run(&self, mut out: Out) {
        let period = match out.options.durability {
            Durability::Periodic(d) => Some(d),
            _ => None,
        };
        loop {
            let jobs = {
                let mut q = self.queue.lock();
                while q.jobs.is_empty() && !q.stop {
                    match period {
                        Some(d) => {
                            if self.cv.wait_for(&mut q, d).timed_out() {
                                break;
                            }
                        }
                        None => self.cv.wait(&mut q),
                    }
                }
                if q.jobs.is_empty() && q.stop {
                    drop(q);
                    let _ = out.sync(self);
                    return;
                }
                std::mem::take(&mut q.jobs)
            };
            let res = out.write(&jobs, self);
            for job in jobs {
                let r = res.clone();
                match job.done {
                    Done::Flushed(cb) => {
                        cb.log_io_completed(r.map_err(|e| std::io::Error::other(e.to_string())))
                    }
                    Done::Notify(tx) => {
                        let _ = tx.send(r);
                    }
                    Done::Nothing => {}
                }
            }
        }
    }
}

impl Out {
    fn io(&mut self, e: Error) -> Error {
        self.failed.get_or_insert(e).clone()
    }

    /// The current segment's path (for errors).
    fn current_path(&self) -> &Path {
        &self.segments.last().expect("a current segment").path
    }

    fn sync(&mut self, w: &Writer) -> Result<(), Error> {
        w.syncs.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        match self.file.sync() {
            Ok(()) => {
                self.last_sync = Instant::now();
                let ns = self.last_sync.duration_since(started).as_nanos();
                w.sync_ns
                    .fetch_add(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                let err = io_error("sync", self.current_path(), &e);
                Err(self.io(err))
            }
        }
    }

    /// Writes `jobs` (rolling to a new segment first if the current one is
    /// full), syncs as the durability says, and removes purged segments.
    fn write(&mut self, jobs: &[Job], w: &Writer) -> Result<(), Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.len >= self.options.segment_bytes {
            self.roll(w)?;
        }
        let mut buf = Vec::new();
        let mut purge_upto = None;
        for job in jobs {
            buf.extend_from_slice(&job.frames);
            if let Some((kind, f)) = &job.state {
                self.state.insert(*kind, f.clone());
            }
            let seg = self.segments.last_mut().expect("a current segment");
            seg.max_index = seg.max_index.max(job.max_index);
            purge_upto = purge_upto.max(job.purge_upto);
        }
        if buf.is_empty() {
            // A periodic wake-up with nothing queued: only the sync below.
        } else {
            w.writes.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = self.file.append(&buf) {
                let err = io_error("write", self.current_path(), &e);
                return Err(self.io(err));
            }
        }
        self.len += buf.len() as u64;
        // A committed point alone waits for nobody: the next record's sync
        // covers it.
        let waited = jobs.iter().any(|j| !matches!(j.done, Done::Nothing));
        let due = match self.options.durability {
            Durability::Sync => waited,
            Durability::Periodic(d) => self.last_sync.elapsed() >= d,
            Durability::None => false,
        };
        if due || purge_upto.is_some() {
            self.sync(w)?;
        }
        if let Some(upto) = purge_upto {
            self.remove_purged(upto);
        }
        Ok(())
    }

    /// Syncs the full segment and starts the next one with the state
    /// frames.
    fn roll(&mut self, w: &Writer) -> Result<(), Error> {
        self.sync(w)?;
        let seq = self.segments.last().map_or(1, |s| s.seq + 1);
        match new_segment(&*self.fs, &self.dir, seq, &self.state) {
            Ok((file, path, len)) => {
                self.file = file;
                self.len = len;
                self.segments.push(Segment {
                    seq,
                    path,
                    max_index: None,
                });
                Ok(())
            }
            Err(e) => Err(self.io(e)),
        }
    }

    /// Removes the oldest segments (never the current one) whose entries
    /// are all at or below `upto`, once the purge that empties them is
    /// synced. Best effort: a segment left behind is replayed and purged
    /// again at the next open.
    fn remove_purged(&mut self, upto: u64) {
        let keep_from = self.segments[..self.segments.len() - 1]
            .iter()
            .position(|s| s.max_index.is_some_and(|m| m > upto))
            .unwrap_or(self.segments.len() - 1);
        let mut removed = 0;
        for s in &self.segments[..keep_from] {
            if self.fs.remove(&s.path).is_err() {
                break;
            }
            removed += 1;
        }
        if removed > 0 {
            self.segments.drain(..removed);
            let _ = self.fs.sync_dir(&self.dir);
        }
    }
}
