//! A durable node's files: its raft log (entries, vote, committed and purge
//! points) and its state machine's snapshot, in the node's data directory.
//! The engine itself stays in memory: on restart it is rebuilt from the
//! snapshot and the committed log after it, as openraft expects of a state
//! machine with a persistent snapshot (DESIGN.md, "Replication", durable
//! nodes).
//!
//! Files:
//! * `LOCK`: held while the node runs (the platform's advisory lock,
//!   released when the process dies).
//! * `raft-<seq>.log`: the log's segments, in the durability layer's frame
//!   format (`durable/record.rs`: a 16-byte file header, then frames of
//!   length, payload checksum and header checksum), magic `SNAPRFT1`.
//! * `snapshot`: the newest snapshot, magic `SNAPRSS1`, written whole as
//!   `snapshot.tmp`, synced and renamed over it.
//!
//! A log payload is a kind byte, then bincode:
//!
//! ```text
//! entry     = 1 | Entry        an appended entry (taking its index)
//! vote      = 2 | Vote
//! committed = 3 | Option<LogId>
//! truncate  = 4 | u64          entries at and above this index are gone
//! purge     = 5 | LogId        entries at and below it are gone
//! ```
//!
//! Replaying the segments in order gives the state the node had when the
//! last record reached the disk (invariant R6). Every segment starts with
//! the vote, committed and purge points of the moment it was made, so a
//! segment older than the current one whose entries are all purged can be
//! removed without losing any of them. One writer thread owns the current
//! segment: every record is queued in call order, and the thread writes
//! what is queued with one `write`, syncs it (as [`Durability`] says), and
//! only then completes the callers, so an append is reported flushed, and a
//! vote returns, only once its record is on disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use openraft::storage::LogFlushed;
use openraft::{BasicNode, Entry, LogId, SnapshotMeta, Vote};
use parking_lot::{Condvar, Mutex};

use super::{NodeId, TypeConfig};
use crate::durable::record::{self, corrupt, End, FILE_HEADER};
use crate::durable::{create_synced, io_error, Damage, Durability, Fs, FsFile, FsLock, StdFs};
use crate::sync::{AtomicU64, Ordering};
use crate::Error;

/// A log segment's magic bytes.
const LOG_MAGIC: &[u8; 8] = b"SNAPRFT1";
/// The snapshot file's magic bytes.
const SNAPSHOT_MAGIC: &[u8; 8] = b"SNAPRSS1";
/// The snapshot file.
const SNAPSHOT: &str = "snapshot";
/// The snapshot file while it is written.
const SNAPSHOT_TMP: &str = "snapshot.tmp";
/// The most snapshot bytes in one frame.
const SNAPSHOT_CHUNK: usize = 16 << 20;

const KIND_ENTRY: u8 = 1;
const KIND_VOTE: u8 = 2;
const KIND_COMMITTED: u8 = 3;
const KIND_TRUNCATE: u8 = 4;
const KIND_PURGE: u8 = 5;

/// A snapshot's metadata, as openraft gives it.
type Meta = SnapshotMeta<NodeId, BasicNode>;

const SNAP_META: u8 = 1;
const SNAP_DATA: u8 = 2;
const SNAP_END: u8 = 3;

/// How a durable node ([`Replica::open`](super::Replica::open)) keeps its
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
        crate::durable::validate_log(self.durability, self.segment_bytes)
    }
}

/// What opening a durable node found in its directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogRecovery {
    /// Nothing was there: a new node (a cluster's first node initializes
    /// it).
    pub fresh: bool,
    /// Log segments read.
    pub segments: u64,
    /// Log records replayed.
    pub records: u64,
    /// Entries the recovered log holds.
    pub entries: u64,
    /// The index of the last entry the node's snapshot covers, if it has
    /// one; its state machine was rebuilt from it.
    pub snapshot_index: Option<u64>,
    /// A torn final record (a crash in the middle of its write), cut off.
    pub torn_tail: Option<Damage>,
}

/// The log state recovered from the segments.
#[derive(Default)]
pub(crate) struct Recovered {
    pub(crate) entries: BTreeMap<u64, Entry<TypeConfig>>,
    pub(crate) vote: Option<Vote<NodeId>>,
    pub(crate) committed: Option<LogId<NodeId>>,
    pub(crate) purged: Option<LogId<NodeId>>,
}

impl Recovered {
    fn truncate(&mut self, index: u64) {
        self.entries.split_off(&index);
    }

    fn purge(&mut self, log_id: LogId<NodeId>) {
        self.entries = self.entries.split_off(&(log_id.index + 1));
        self.purged = Some(log_id);
    }
}

/// The name of log segment `seq`.
fn segment_name(seq: u64) -> String {
    record::numbered_name("raft-", seq, ".log")
}

/// The sequence number in a segment's name.
fn parse_segment(name: &str) -> Option<u64> {
    record::parse_numbered(name, "raft-", ".log")
}

fn payload(kind: u8, value: &impl serde::Serialize) -> Vec<u8> {
    let mut p = vec![kind];
    // Writing to a Vec fails only on a value serde cannot represent, which
    // none of the log's types is.
    bincode::serialize_into(&mut p, value).expect("raft log records serialize");
    p
}

/// Appends `e`'s log record to `out`.
pub(crate) fn frame_entry(out: &mut Vec<u8>, e: &Entry<TypeConfig>) {
    record::frame_into(out, &payload(KIND_ENTRY, e));
}

fn framed(kind: u8, value: &impl serde::Serialize) -> Vec<u8> {
    let mut out = Vec::new();
    record::frame_into(&mut out, &payload(kind, value));
    out
}

/// Decodes one log payload into `state`: `Err` if it does not decode,
/// else the index of the entry it held, if it was one.
fn replay_one(state: &mut Recovered, p: &[u8]) -> Result<Option<u64>, ()> {
    let (&kind, body) = p.split_first().ok_or(())?;
    match kind {
        KIND_ENTRY => {
            let e: Entry<TypeConfig> = bincode::deserialize(body).map_err(|_| ())?;
            let index = e.log_id.index;
            // As the log store does in memory: an entry takes its index;
            // what openraft removes, a truncate or purge record removes.
            if state.purged.is_none_or(|p| index > p.index) {
                state.entries.insert(index, e);
            }
            return Ok(Some(index));
        }
        KIND_VOTE => state.vote = Some(bincode::deserialize(body).map_err(|_| ())?),
        KIND_COMMITTED => state.committed = bincode::deserialize(body).map_err(|_| ())?,
        KIND_TRUNCATE => state.truncate(bincode::deserialize(body).map_err(|_| ())?),
        KIND_PURGE => state.purge(bincode::deserialize(body).map_err(|_| ())?),
        _ => return Err(()),
    }
    Ok(None)
}

/// A segment on disk: its number, path and the newest entry index written
/// to it (a segment is removed once that is purged).
struct Segment {
    seq: u64,
    path: PathBuf,
    max_index: Option<u64>,
}

/// Reads every segment of `dir` in order: the recovered state, the report,
/// and the segments found. A torn final record of the last segment is cut
/// off (and reported); any other damage is [`Error::Corrupt`].
fn recover(fs: &dyn Fs, dir: &Path) -> Result<(Recovered, LogRecovery, Vec<Segment>), Error> {
    let names = fs.list(dir).map_err(|e| io_error("list", dir, &e))?;
    let mut seqs: Vec<u64> = names.iter().filter_map(|n| parse_segment(n)).collect();
    seqs.sort_unstable();
    let mut state = Recovered::default();
    let mut report = LogRecovery::default();
    let mut segments = Vec::new();
    for (i, &seq) in seqs.iter().enumerate() {
        let path = dir.join(segment_name(seq));
        let buf = fs.read(&path).map_err(|e| io_error("read", &path, &e))?;
        let last = i + 1 == seqs.len();
        if buf.len() < FILE_HEADER {
            // A segment's header is synced when it is made, so only a crash
            // while making the last one leaves it short.
            if !last {
                return Err(corrupt(
                    &path,
                    0,
                    "a raft log segment shorter than its header",
                ));
            }
            report.torn_tail = Some(Damage {
                file: path.clone(),
                offset: 0,
                bytes_dropped: buf.len() as u64,
                segments_removed: 0,
            });
            fs.remove(&path)
                .map_err(|e| io_error("remove", &path, &e))?;
            continue;
        }
        if buf[..FILE_HEADER] != record::file_header(LOG_MAGIC, seq) {
            return Err(corrupt(&path, 0, "not a raft log segment (bad header)"));
        }
        let (frames, end) = record::scan(&buf, FILE_HEADER);
        let mut max_index = None;
        for (offset, range) in frames {
            let index = replay_one(&mut state, &buf[range])
                .map_err(|()| corrupt(&path, offset, "a raft log record that does not decode"))?;
            max_index = max_index.max(index);
            report.records += 1;
        }
        match end {
            End::Clean => {}
            End::Torn { offset } if last => {
                fs.truncate(&path, offset)
                    .map_err(|e| io_error("truncate", &path, &e))?;
                report.torn_tail = Some(Damage {
                    file: path.clone(),
                    offset,
                    bytes_dropped: buf.len() as u64 - offset,
                    segments_removed: 0,
                });
            }
            End::Torn { offset } => {
                return Err(corrupt(
                    &path,
                    offset,
                    "a raft log segment before the last one ends inside a record",
                ))
            }
            End::Corrupt { offset, reason } => return Err(corrupt(&path, offset, reason)),
        }
        report.segments += 1;
        segments.push(Segment {
            seq,
            path,
            max_index,
        });
    }
    report.entries = state.entries.len() as u64;
    report.fresh = state.vote.is_none() && state.entries.is_empty() && state.purged.is_none();
    Ok((state, report, segments))
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

/// The open files of a durable node: the directory lock and the log
/// writer.
pub(crate) struct Disk {
    pub(crate) writer: Arc<Writer>,
    pub(crate) dir: PathBuf,
    fs: Arc<dyn Fs>,
    _lock: Box<dyn FsLock>,
}

/// Opens (or creates) a node's directory: locks it, recovers the log and
/// starts a new segment. Returns the recovered log and what was found.
pub(crate) fn open(
    dir: &Path,
    options: LogOptions,
) -> Result<(Disk, Recovered, LogRecovery), Error> {
    options.validate()?;
    let fs: Arc<dyn Fs> = Arc::new(StdFs);
    fs.create_dir_all(dir)
        .map_err(|e| io_error("create", dir, &e))?;
    let lock_path = dir.join("LOCK");
    let lock = fs
        .lock(&lock_path)
        .map_err(|e| io_error("lock", &lock_path, &e))?
        .ok_or(Error::DirectoryLocked {
            path: dir.to_path_buf(),
        })?;
    let (state, mut report, mut segments) = recover(&*fs, dir)?;
    if fs.list(dir).is_ok_and(|n| n.iter().any(|n| n == SNAPSHOT)) {
        report.fresh = false;
    }
    let mut head = BTreeMap::new();
    if let Some(v) = &state.vote {
        head.insert(KIND_VOTE, framed(KIND_VOTE, v));
    }
    head.insert(KIND_COMMITTED, framed(KIND_COMMITTED, &state.committed));
    if let Some(p) = &state.purged {
        head.insert(KIND_PURGE, framed(KIND_PURGE, p));
    }
    let seq = segments.last().map_or(1, |s| s.seq + 1);
    let (file, path, len) = new_segment(&*fs, dir, seq, &head)?;
    segments.push(Segment {
        seq,
        path,
        max_index: None,
    });
    let out = Out {
        fs: fs.clone(),
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
    Ok((
        Disk {
            writer,
            dir: dir.to_path_buf(),
            fs,
            _lock: lock,
        },
        state,
        report,
    ))
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

impl Disk {
    /// Writes `meta` and `data` as the node's snapshot: to `snapshot.tmp`,
    /// synced, then renamed over `snapshot` and the directory synced, so a
    /// crash leaves the old snapshot or the new one, whole.
    pub(crate) fn save_snapshot(&self, meta: &Meta, data: &[u8]) -> Result<(), Error> {
        let tmp = self.dir.join(SNAPSHOT_TMP);
        let path = self.dir.join(SNAPSHOT);
        let mut buf = record::file_header(SNAPSHOT_MAGIC, 0).to_vec();
        record::frame_into(&mut buf, &payload(SNAP_META, meta));
        let mut chunks = 0u64;
        for c in data.chunks(SNAPSHOT_CHUNK) {
            let mut p = Vec::with_capacity(c.len() + 1);
            p.push(SNAP_DATA);
            p.extend_from_slice(c);
            record::frame_into(&mut buf, &p);
            chunks += 1;
        }
        record::frame_into(&mut buf, &payload(SNAP_END, &(chunks, data.len() as u64)));
        let mut f = self
            .fs
            .create(&tmp)
            .map_err(|e| io_error("create", &tmp, &e))?;
        f.append(&buf).map_err(|e| io_error("write", &tmp, &e))?;
        f.sync().map_err(|e| io_error("sync", &tmp, &e))?;
        drop(f);
        self.fs
            .rename(&tmp, &path)
            .map_err(|e| io_error("rename", &tmp, &e))?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| io_error("sync", &self.dir, &e))
    }

    /// The node's snapshot, if it has one.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if the file is damaged (it is only ever renamed
    /// into place whole, so any damage is corruption).
    pub(crate) fn load_snapshot(&self) -> Result<Option<(Meta, Vec<u8>)>, Error> {
        let path = self.dir.join(SNAPSHOT);
        let buf = match self.fs.read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", &path, &e)),
        };
        if buf.len() < FILE_HEADER || buf[..FILE_HEADER] != record::file_header(SNAPSHOT_MAGIC, 0) {
            return Err(corrupt(&path, 0, "not a replica snapshot (bad header)"));
        }
        let (frames, end) = record::scan(&buf, FILE_HEADER);
        match end {
            End::Clean => {}
            End::Torn { offset } => {
                return Err(corrupt(&path, offset, "the snapshot ends inside a record"))
            }
            End::Corrupt { offset, reason } => return Err(corrupt(&path, offset, reason)),
        }
        let bad = |offset| corrupt(&path, offset, "a snapshot record that does not decode");
        let mut frames = frames.into_iter();
        let (o, r) = frames.next().ok_or_else(|| bad(FILE_HEADER as u64))?;
        let meta = match buf[r.clone()].split_first() {
            Some((&SNAP_META, b)) => bincode::deserialize(b).map_err(|_| bad(o))?,
            _ => return Err(bad(o)),
        };
        let mut data = Vec::new();
        let mut chunks = 0u64;
        for (o, r) in frames {
            match buf[r].split_first() {
                Some((&SNAP_DATA, b)) => {
                    data.extend_from_slice(b);
                    chunks += 1;
                }
                Some((&SNAP_END, b)) => {
                    let (n, len): (u64, u64) = bincode::deserialize(b).map_err(|_| bad(o))?;
                    if n != chunks || len != data.len() as u64 {
                        return Err(corrupt(
                            &path,
                            o,
                            "the snapshot's end record does not match its data",
                        ));
                    }
                    return Ok(Some((meta, data)));
                }
                _ => return Err(bad(o)),
            }
        }
        Err(corrupt(
            &path,
            buf.len() as u64,
            "the snapshot has no end record",
        ))
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.writer.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("raft-disk-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }

        /// Writes segment `seq` holding `frames`.
        fn segment(&self, seq: u64, frames: &[Vec<u8>]) -> PathBuf {
            let mut buf = record::file_header(LOG_MAGIC, seq).to_vec();
            frames.iter().for_each(|f| buf.extend_from_slice(f));
            let path = self.0.join(segment_name(seq));
            std::fs::write(&path, buf).unwrap();
            path
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn e(term: u64, index: u64) -> Vec<u8> {
        framed(KIND_ENTRY, &entry(term, index))
    }

    /// The recovered entries as (term, index).
    fn ids(r: &Recovered) -> Vec<(u64, u64)> {
        r.entries
            .values()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    #[test]
    fn replay_follows_truncates_purges_and_votes_across_segments() {
        let d = Dir::new("replay");
        let vote = Vote::new(3, 2);
        d.segment(
            1,
            &[
                e(1, 1),
                e(1, 2),
                e(1, 3),
                e(1, 4),
                framed(KIND_TRUNCATE, &3u64),
            ],
        );
        d.segment(
            2,
            &[
                framed(KIND_VOTE, &vote),
                e(2, 3),
                e(2, 4),
                framed(
                    KIND_PURGE,
                    &LogId::<NodeId>::new(CommittedLeaderId::new(1, 1), 1),
                ),
                e(2, 5),
            ],
        );
        let (r, report, segs) = recover(&StdFs, &d.0).unwrap();
        assert_eq!(ids(&r), [(1, 2), (2, 3), (2, 4), (2, 5)]);
        assert_eq!(r.vote, Some(vote));
        assert_eq!(r.purged.map(|p| p.index), Some(1));
        assert_eq!(
            (report.segments, report.records, report.entries),
            (2, 10, 4)
        );
        assert!(!report.fresh && report.torn_tail.is_none());
        let max: Vec<_> = segs.iter().map(|s| s.max_index).collect();
        assert_eq!(max, [Some(4), Some(5)]);
    }

    #[test]
    fn only_the_last_segment_may_end_torn_and_other_damage_is_corrupt() {
        // A torn tail in the last segment is cut off and reported.
        let d = Dir::new("torn");
        d.segment(1, &[e(1, 1)]);
        let mut torn = e(1, 2);
        torn.truncate(torn.len() - 3);
        let last = d.segment(2, &[torn.clone()]);
        let (r, report, _) = recover(&StdFs, &d.0).unwrap();
        assert_eq!(ids(&r), [(1, 1)]);
        let t = report.torn_tail.unwrap();
        assert_eq!(
            (t.file, t.offset, t.bytes_dropped),
            (last.clone(), 16, torn.len() as u64)
        );
        assert_eq!(
            std::fs::metadata(&last).unwrap().len(),
            16,
            "cut at the tear"
        );

        // The same tear in a segment with one after it is corruption.
        let d = Dir::new("torn-inside");
        let first = d.segment(1, &[e(1, 1), torn]);
        d.segment(2, &[e(1, 2)]);
        match recover(&StdFs, &d.0) {
            Err(Error::Corrupt { file, offset, .. }) => {
                assert_eq!((file, offset), (first, 16 + e(1, 1).len() as u64))
            }
            other => panic!("expected Corrupt, got {:?}", other.err()),
        }

        // A flipped bit, and a record that checks but does not decode.
        let d = Dir::new("flipped");
        let path = d.segment(1, &[e(1, 1), e(1, 2)]);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 2;
        bytes[at] ^= 4;
        std::fs::write(&path, bytes).unwrap();
        assert!(matches!(
            recover(&StdFs, &d.0),
            Err(Error::Corrupt {
                reason: "payload checksum mismatch",
                ..
            })
        ));
        let d = Dir::new("undecodable");
        let mut bad = Vec::new();
        record::frame_into(&mut bad, &[KIND_ENTRY, 1, 2, 3]);
        d.segment(1, &[e(1, 1), bad]);
        assert!(matches!(
            recover(&StdFs, &d.0),
            Err(Error::Corrupt {
                reason: "a raft log record that does not decode",
                ..
            })
        ));
    }
}
