//! Durability: [`Engine::open`] on a directory, a commit log with group
//! commit, checkpoints at the stable timestamp, and recovery.
//!
//! [`Engine::new`] stays the in-memory engine; an engine from
//! [`Engine::open`] writes one log record per committing write transaction
//! (before its versions become visible) and recovers from its directory on
//! the next open. Readers never touch the log.
//!
//! [`Engine::new`]: crate::Engine::new
//! [`Engine::open`]: crate::Engine::open
//!
//! Files in the directory: `LOCK` (held while the engine is open),
//! `log-<seq>.seg` (the commit log's segments, see `record.rs` for the
//! format) and `ckpt-<seq>.ckpt` (the newest checkpoint, named by the first
//! segment it does not cover).
//!
//! A prepared transaction is logged only when it commits: one still
//! prepared at a crash is gone after recovery, as in WiredTiger, and its
//! coordinator re-drives two-phase commit.

mod checkpoint;
mod fs;
mod log;
pub(crate) mod record;

pub use fs::{FaultOp, Fs, FsFile, FsLock, MemFs, StdFs, Stop, WriteBack};

use crate::config::{EngineConfig, TimestampUpdate, TxnOptions};
use crate::error::{Error, Result};
use crate::kv::Engine;
use crate::machinery::with_machinery::LockFree;
use crate::sync::{AtomicU64, Ordering};
use crate::ts::Timestamp;
use crate::CommitOptions;
use checkpoint::State;
#[cfg(feature = "replication")]
pub(crate) use log::create_synced;
pub(crate) use log::io_error;
use log::{parse_segment, scan_segment, segment_name, Log, Segment, SEGMENT_HEADER};
use parking_lot::{Condvar, Mutex};
use record::{Commit, End, FILE_HEADER, FRAME_HEADER, MAX_PAYLOAD};
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

/// When a commit's log record must be on disk.
///
/// # A commit's outcome
///
/// What a durable engine's commit returns is what recovery finds, in every
/// mode:
/// * `Ok` (from [`Txn::commit`], or [`Txn::commit_async`]'s handle
///   created): the record is in the log, written whole; a restart after a
///   process crash replays it. With `Sync` it is synced too, so a power
///   cut keeps it; with `Periodic` and `None` a power cut may lose it (and
///   every commit after it), as each mode says.
/// * [`Error::Io`]: the commit is not applied, now or after any recovery.
///   Its record was never written (the log had failed before, or the
///   roll-over to a new segment that had to come first failed), or the
///   write or sync that carried it failed and the segment was cut back
///   before the error was returned. The log is stopped: every later commit
///   with writes gets the same error until the engine is reopened, and a
///   retry after reopening applies the commit once.
/// * The one exception: a file system that also refuses that cut. The
///   error is then an [`Error::Io`] with `op: "truncate"` (its message
///   names the first failure), and the commit, though not applied now, may
///   be replayed at recovery.
///
/// A commit's records are written in batches (group commit); a batch
/// succeeds or fails whole for every commit in it, and one holding a
/// record whose commit waits for a sync is synced whoever writes it. A
/// [`CommitHandle`] that reports an error after [`Txn::commit_async`]
/// returned `Ok` leaves the commit applied and written, but not known to
/// be synced: a power cut may lose it.
///
/// [`Txn::commit`]: crate::Txn::commit
/// [`Txn::commit_async`]: crate::Txn::commit_async
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The commit returns once its record is synced (group commit: one
    /// `fdatasync` covers every record written before it began).
    Sync,
    /// The commit returns once its record is written to the OS; a
    /// background flusher syncs every `interval`. A process crash loses
    /// nothing; a power cut loses at most about one interval: recovery
    /// keeps the commits before the first record the disk lost (pages
    /// reach it in any order) and reports the cut in
    /// [`RecoveryReport::torn_tail`].
    Periodic(Duration),
    /// The commit returns once its record is written to the OS, which
    /// writes it back when it will. A process crash loses nothing; a power
    /// cut may lose any commit not yet written back: recovery keeps the
    /// commits before the first record the disk lost and reports the cut
    /// in [`RecoveryReport::torn_tail`].
    None,
}

/// Options for [`Engine::open`], checked by [`DurabilityOptions::validate`].
///
/// [`Engine::open`]: crate::Engine::open
#[derive(Clone)]
pub struct DurabilityOptions {
    /// The default [`Durability`] of a commit ([`Txn::set_durability`]
    /// changes it for one commit). Default: [`Durability::Sync`].
    ///
    /// [`Txn::set_durability`]: crate::Txn::set_durability
    pub durability: Durability,
    /// A segment is closed (synced) and the next one started once it holds
    /// this many bytes. Default 64 MiB; bounds `4096..=2^40`.
    pub segment_bytes: u64,
    /// On damage in the log that no crash leaves (a checksum mismatch
    /// other than the lost write-back [`RecoveryReport::torn_tail`]
    /// describes), truncate the log there (and drop the segments after it),
    /// reporting it in [`RecoveryReport::truncated`], instead of failing
    /// with [`Error::Corrupt`]. Default `false`.
    pub truncate_corrupt: bool,
    /// Roll back to stable at open, as WiredTiger's `rollback_to_stable`
    /// after a crash: drop every logged commit not covered by the recovered
    /// checkpoint's stable timestamp (timestamped above it, or prepared and
    /// durable above it), for good: the state at that stable is written as
    /// a new checkpoint before the engine opens (with nothing to drop,
    /// nothing is written). A replicated host uses it to come back to a
    /// point every replica agrees on. Without a checkpoint at a stable
    /// timestamp nothing is dropped. A crash at any instant of such an
    /// open leaves a directory that opens, with the dropped commits all
    /// there or all gone. The count is in [`RecoveryReport::rolled_back`].
    /// Default `false`.
    pub rollback_to_stable: bool,
    /// Take a checkpoint in the background this often (`None`: only when
    /// [`Engine::checkpoint`] is called). Default `None`; at least 1 ms.
    ///
    /// [`Engine::checkpoint`]: crate::Engine::checkpoint
    pub checkpoint_interval: Option<Duration>,
    /// The file layer. Default [`StdFs`].
    pub fs: Arc<dyn Fs>,
}

impl Default for DurabilityOptions {
    fn default() -> Self {
        DurabilityOptions {
            durability: Durability::Sync,
            segment_bytes: 64 << 20,
            truncate_corrupt: false,
            rollback_to_stable: false,
            checkpoint_interval: None,
            fs: Arc::new(StdFs),
        }
    }
}

impl fmt::Debug for DurabilityOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DurabilityOptions")
            .field("durability", &self.durability)
            .field("segment_bytes", &self.segment_bytes)
            .field("truncate_corrupt", &self.truncate_corrupt)
            .field("rollback_to_stable", &self.rollback_to_stable)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .finish_non_exhaustive()
    }
}

impl DurabilityOptions {
    /// Checks every option against its bound.
    ///
    /// # Errors
    /// [`Error::InvalidDurabilityOption`] naming the first option out of
    /// bounds, its value and the bound.
    pub fn validate(&self) -> Result<()> {
        validate_log(self.durability, self.segment_bytes)?;
        if let Some(d) = self.checkpoint_interval {
            if d < Duration::from_millis(1) {
                return Err(bad_option(
                    "checkpoint_interval",
                    format!("{d:?}"),
                    "at least 1 ms",
                ));
            }
        }
        Ok(())
    }
}

/// The bounds every log's settings keep (the commit log's and a durable
/// replica's raft log): a segment of 4096 bytes to 2^40, a periodic sync of
/// at least 1 ms.
pub(crate) fn validate_log(durability: Durability, segment_bytes: u64) -> Result<()> {
    if !(4096..=1 << 40).contains(&segment_bytes) {
        return Err(bad_option(
            "segment_bytes",
            segment_bytes.to_string(),
            "4096..=2^40",
        ));
    }
    if let Durability::Periodic(d) = durability {
        if d < Duration::from_millis(1) {
            return Err(bad_option(
                "durability",
                format!("Periodic({d:?})"),
                "an interval of at least 1 ms",
            ));
        }
    }
    Ok(())
}

/// The error for `option` set to `value`, outside `bound`.
fn bad_option(option: &'static str, value: String, bound: &'static str) -> Error {
    Error::InvalidDurabilityOption {
        option,
        value,
        bound,
    }
}

/// Damage recovery found and cut off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The segment.
    pub file: PathBuf,
    /// Where the first dropped byte was.
    pub offset: u64,
    /// How many bytes were dropped from that file.
    pub bytes_dropped: u64,
    /// Later segments removed with it (a truncation at a corrupt record).
    pub segments_removed: u64,
}

/// What [`Engine::open`] found and did.
///
/// [`Engine::open`]: crate::Engine::open
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The checkpoint recovery started from.
    pub checkpoint: Option<PathBuf>,
    /// Its stable timestamp ([`TimestampKind::Recovery`]).
    ///
    /// [`TimestampKind::Recovery`]: crate::TimestampKind::Recovery
    pub checkpoint_stable: Option<Timestamp>,
    /// Keys loaded from the checkpoint.
    pub checkpoint_keys: u64,
    /// Log records replayed (records the checkpoint carried, then the
    /// segments after it).
    pub records_replayed: u64,
    /// Segments read.
    pub segments: u64,
    /// The end of the last segment a crash left incomplete, dropped from
    /// the first record it damaged on: a final record cut short (a crash
    /// in the middle of its write, or a zero-filled rest), or a record
    /// failing its checksum over a zeroed 512-byte sector (a write-back the
    /// disk lost: a power cut writes unsynced pages back in any order, so
    /// records after the loss may be there, and are dropped with it). Only
    /// the last segment can hold such damage: every other one was synced
    /// before the next began, so damage there, and non-zero garbage
    /// anywhere, is [`Error::Corrupt`] (or [`RecoveryReport::truncated`]).
    pub torn_tail: Option<Damage>,
    /// A corrupt record the log was truncated at
    /// ([`DurabilityOptions::truncate_corrupt`]).
    pub truncated: Option<Damage>,
    /// Commits dropped by [`DurabilityOptions::rollback_to_stable`].
    pub rolled_back: u64,
}

/// What [`Engine::checkpoint`] wrote.
///
/// [`Engine::checkpoint`]: crate::Engine::checkpoint
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// The stable timestamp it holds the state at, never below the previous
    /// checkpoint's. With no stable set it holds everything committed before
    /// it began, and this is the newest durable timestamp among that (`None`:
    /// nothing in it is timestamped).
    pub stable: Option<Timestamp>,
    /// The file.
    pub path: PathBuf,
    /// Keys in it.
    pub keys: u64,
    /// Log records above stable it carries whole.
    pub carried: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Log records it folded in from the segments it covers.
    pub records_folded: u64,
    /// Segments removed.
    pub segments_removed: u64,
}

/// Counters of the commit log's work since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogStats {
    /// Records appended.
    pub records: u64,
    /// Bytes written to segments (frames).
    pub bytes: u64,
    /// `write` calls.
    pub writes: u64,
    /// `fdatasync` calls on segments.
    pub syncs: u64,
}

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

struct Stopper {
    stop: Mutex<bool>,
    cv: Condvar,
}

/// An open engine's durability: the log, the checkpoint state, the lock.
pub(crate) struct CommitLog {
    pub(crate) log: Arc<Log>,
    mode: Durability,
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    report: RecoveryReport,
    recovery_ts: Timestamp,
    /// The stable timestamp as of the last successful `set_timestamps`.
    stable: AtomicU64,
    /// The last checkpoint's state (`None` after a failed checkpoint: the
    /// next one reloads it from the file).
    ckpt: Mutex<Option<State>>,
    // Last: the lock is released only after the log has closed.
    _lock: Box<dyn FsLock>,
}

impl Drop for CommitLog {
    fn drop(&mut self) {
        // Closed here, not when the last `CommitHandle` lets it go: every
        // record is synced and the flusher has ended before the lock is
        // released.
        self.log.close();
    }
}

/// What an engine from [`Engine::open`] holds: its [`CommitLog`] state and
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

    /// Takes a checkpoint at the noted stable timestamp (see
    /// `checkpoint.rs`). Holds no lock a reader or writer takes, except the
    /// log's writer lock for the one sync and segment switch of the cut.
    pub(crate) fn checkpoint(&self) -> Result<CheckpointReport> {
        let stable = self.stable.load(Ordering::Relaxed);
        self.fold_checkpoint(stable, false).map(|(r, _)| r)
    }

    /// Rollback to stable's log half: a checkpoint at `stable` (the
    /// engine's, which cannot move: the caller holds the engine
    /// exclusively) that drops every record not covered at `stable`
    /// instead of carrying it, and covers every segment written so far, so
    /// that no later recovery replays a dropped record. Returns the
    /// checkpoint and the number of records dropped.
    pub(crate) fn rollback_to_stable(&self, stable: Timestamp) -> Result<(CheckpointReport, u64)> {
        self.fold_checkpoint(stable.get(), true)
    }

    /// A checkpoint at `stable`; with `drop_uncovered`, the records it would
    /// carry are dropped instead (returns how many).
    fn fold_checkpoint(
        &self,
        stable: u64,
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
            let checkpoint = Timestamp::new(st.stable);
            *guard = Some(st);
            return Err(Error::RollbackBelowCheckpoint {
                stable: Timestamp::new(stable),
                checkpoint,
            });
        }
        // Stable first (the caller's load), then the cut: every commit at or
        // below this stable finished (and so appended its record) before
        // stable was published.
        let (cut_seq, cut_lsn) = self.log.cut()?;
        let seqs = segments_in(&*self.fs, &self.dir)?;
        let mut records = Vec::new();
        let mut expect = st.next_lsn;
        for &seq in seqs.iter().filter(|&&s| s >= st.first_seq && s < cut_seq) {
            let path = self.dir.join(segment_name(seq));
            let buf = self
                .fs
                .read(&path)
                .map_err(|e| io_error("read", &path, &e))?;
            let seg = scan_segment(&buf, &path, seq)?;
            fold_whole_segment(seg, seq, &mut expect, &path, &mut records)?;
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
            st.carried.retain(|c| c.covered_by(stable));
            records.retain(|c| c.covered_by(stable));
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
            stable: Timestamp::new(st.stable).to_option(),
            path,
            keys: st.base.values().filter(|e| e.value.is_some()).count() as u64,
            carried: st.carried.len() as u64,
            bytes,
            records_folded: folded,
            segments_removed: removed,
        };
        *guard = Some(st);
        Ok((report, dropped))
    }
}

impl End {
    fn bad(self) -> Option<(u64, &'static str)> {
        match self {
            End::Clean => None,
            End::Torn { offset } => Some((offset, "torn record inside the log")),
            End::Corrupt { offset, reason } => Some((offset, reason)),
        }
    }
}

/// The segment numbers in `dir`, ascending.
fn segments_in(fs: &dyn Fs, dir: &Path) -> Result<Vec<u64>> {
    let mut v: Vec<u64> = fs
        .list(dir)
        .map_err(|e| io_error("list", dir, &e))?
        .iter()
        .filter_map(|n| parse_segment(n))
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// The newest checkpoint in `dir`: (first segment, path).
fn newest_checkpoint(fs: &dyn Fs, dir: &Path) -> Result<Option<(u64, PathBuf)>> {
    Ok(fs
        .list(dir)
        .map_err(|e| io_error("list", dir, &e))?
        .iter()
        .filter_map(|n| checkpoint::parse_checkpoint(n).map(|s| (s, dir.join(n))))
        .max())
}

/// Appends a segment's records to `out`, checking that their lsns run on
/// from `expect` without a gap (invariant D4): a lost or doubled record is
/// `Corrupt` at its offset, never replayed.
fn push_in_order(
    recs: Vec<(u64, Commit)>,
    expect: &mut u64,
    path: &Path,
    out: &mut Vec<Commit>,
) -> Result<()> {
    for (offset, c) in recs {
        if c.lsn != *expect {
            return Err(Error::Corrupt {
                file: path.to_path_buf(),
                offset,
                reason: "log sequence gap",
            });
        }
        *expect += 1;
        out.push(c);
    }
    Ok(())
}

/// The unit a file system writes back: a disk sector ([`MemFs::PAGE`]).
/// A write-back a power cut loses leaves whole sectors of zeros, cut only
/// by the file's synced length and its end.
const SECTOR: usize = 512;

/// Whether the damage at `offset` of the last segment `buf` is what a power
/// cut can leave of an unsynced tail: the segment header, or a frame that
/// fails its checksum, overlapping a zeroed sector (its part from `offset`
/// to the end of the file all zeros). A frame that checks, a bad length in
/// a checked header, or non-zero garbage is damage no power cut makes.
fn unwritten(buf: &[u8], offset: u64) -> bool {
    let zeroed = |from: usize, to: usize| {
        let mut sector = from / SECTOR * SECTOR;
        while sector < to {
            let part = &buf[sector.max(from)..(sector + SECTOR).min(buf.len())];
            if !part.is_empty() && part.iter().all(|&b| b == 0) {
                return true;
            }
            sector += SECTOR;
        }
        false
    };
    let at = offset as usize;
    if at == 0 {
        // The segment header, written and synced before any frame.
        return zeroed(0, FILE_HEADER.min(buf.len()));
    }
    let rest = &buf[at..];
    if rest.len() < FRAME_HEADER {
        return false;
    }
    let word = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().expect("4 bytes"));
    let end = if crc32c::crc32c(&rest[..8]) == word(8) {
        let len = word(0) as usize;
        if len > MAX_PAYLOAD || rest.len() - FRAME_HEADER < len {
            return false;
        }
        let payload = &rest[FRAME_HEADER..FRAME_HEADER + len];
        if crc32c::crc32c(payload) == word(4) {
            return false;
        }
        at + FRAME_HEADER + len
    } else {
        at + FRAME_HEADER
    };
    zeroed(at, end)
}

/// Appends the records of segment `seq` (`seg`, read from `path`), which
/// a later segment follows, to `out`: its header must start at `expect`,
/// its records run on from there (moving `expect` past them), and it must
/// end with a whole `roll` record naming segment `seq + 1` at `expect`.
/// Anything else is `Corrupt` where it is wrong.
fn fold_whole_segment(
    seg: Segment,
    seq: u64,
    expect: &mut u64,
    path: &Path,
    out: &mut Vec<Commit>,
) -> Result<()> {
    let bad = |offset: u64, reason: &'static str| Error::Corrupt {
        file: path.to_path_buf(),
        offset,
        reason,
    };
    if let Some((offset, reason)) = seg.end.bad() {
        return Err(bad(offset, reason));
    }
    if seg.first_lsn != Some(*expect) {
        return Err(bad(
            record::FILE_HEADER as u64,
            "segment does not start where the log before it ends",
        ));
    }
    push_in_order(seg.records, expect, path, out)?;
    match seg.roll {
        Some(r) if r.next_seq == seq + 1 && r.next_lsn == *expect => Ok(()),
        Some(r) => Err(bad(
            r.offset,
            "roll-over record names the wrong segment or lsn",
        )),
        None => Err(bad(seg.len, "segment ends without its roll-over record")),
    }
}

/// What recovery read: the checkpoint and the log records after it.
struct Recovered {
    state: State,
    tail: Vec<Commit>,
    next_seq: u64,
    next_lsn: u64,
    report: RecoveryReport,
}

fn recover_files(fs: &dyn Fs, dir: &Path, truncate_corrupt: bool) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let names = fs.list(dir).map_err(|e| io_error("list", dir, &e))?;
    for n in names.iter().filter(|n| n.ends_with(".tmp")) {
        let p = dir.join(n);
        fs.remove(&p).map_err(|e| io_error("remove", &p, &e))?;
    }
    let state = match newest_checkpoint(fs, dir)? {
        Some((_, path)) => {
            let st = checkpoint::load(fs, &path)?;
            report.checkpoint = Some(path);
            report.checkpoint_stable = Timestamp::new(st.stable).to_option();
            report.checkpoint_keys = st.base.values().filter(|e| e.value.is_some()).count() as u64;
            st
        }
        None => State::empty(),
    };
    let has_ckpt = report.checkpoint.is_some();
    let mut seqs = segments_in(fs, dir)?;
    // Segments a checkpoint covers but a crash kept from being removed.
    for &s in seqs.iter().filter(|&&s| s < state.first_seq) {
        let p = dir.join(segment_name(s));
        fs.remove(&p).map_err(|e| io_error("remove", &p, &e))?;
    }
    seqs.retain(|&s| s >= state.first_seq);
    let missing = |seq: u64| Error::Corrupt {
        file: dir.join(segment_name(seq)),
        offset: 0,
        reason: "missing log segment",
    };
    if has_ckpt && seqs.first() != Some(&state.first_seq) {
        return Err(missing(state.first_seq));
    }
    // Only a checkpoint removes segments: without one the log starts at 1.
    if let Some(&first) = seqs.first().filter(|&&s| !has_ckpt && s != 1) {
        return Err(Error::Corrupt {
            file: dir.join(segment_name(first)),
            offset: 0,
            reason: "the log starts past segment 1 with no checkpoint: a checkpoint is missing",
        });
    }
    for w in seqs.windows(2) {
        if w[1] != w[0] + 1 {
            return Err(missing(w[0] + 1));
        }
    }
    let mut segs = Vec::with_capacity(seqs.len());
    for &seq in &seqs {
        let path = dir.join(segment_name(seq));
        let buf = fs.read(&path).map_err(|e| io_error("read", &path, &e))?;
        let seg = scan_segment(&buf, &path, seq)?;
        segs.push((seq, path.clone(), seg, buf));
    }
    let mut next_seq = seqs.last().map_or(state.first_seq.max(1), |s| s + 1);
    // A crash inside a roll-over (log.rs, "Roll-over") leaves the last
    // segment holding nothing but its header (whole or torn), starting
    // where the one before it ends, and that one without its roll-over
    // record: the roll-over did not happen. Its number is reused (the new
    // log re-creates the file).
    let mut synced_last = false;
    if let [.., (_, _, prev, _), (seq, _, last, _)] = &segs[..] {
        let prev_end = prev
            .records
            .last()
            .map(|(_, c)| c.lsn + 1)
            .or(prev.first_lsn);
        let leftover = prev.roll.is_none()
            && last.records.is_empty()
            && last.roll.is_none()
            && !matches!(last.end, End::Corrupt { .. })
            && last.first_lsn.is_none_or(|f| Some(f) == prev_end);
        if leftover {
            next_seq = *seq;
            segs.pop();
            // The segment before it was synced whole before this one was
            // created: it holds no unsynced tail (D8).
            synced_last = true;
        }
    }
    let mut tail = Vec::new();
    let mut expect = state.next_lsn;
    // The previous segment's path and roll-over record, if it has one.
    let mut prev_roll: Option<(PathBuf, log::Roll)> = None;
    let n = segs.len();
    for (i, (seq, path, seg, buf)) in segs.into_iter().enumerate() {
        let last = i + 1 == n;
        report.segments += 1;
        let mut end = seg.end;
        // Every segment but the last was synced whole before the next one
        // was created: only the last can hold an unsynced tail, and only
        // there is damage a power cut can leave (D8).
        if let End::Corrupt { offset, .. } = end {
            if last && !synced_last && unwritten(&buf, offset) {
                end = End::Torn { offset };
            }
        }
        let scanned_end = end;
        match seg.first_lsn {
            None if prev_roll.is_some() => {
                end = End::Corrupt {
                    offset: 0,
                    reason: "segment header torn, though the segment before names it",
                };
            }
            Some(first) if first != expect => {
                let reason = match (i, has_ckpt) {
                    (0, false) => {
                        "the log does not start at lsn 1: a checkpoint before it is missing"
                    }
                    (0, true) => "the first segment does not start where the checkpoint ends",
                    _ => "segment does not start where the log before it ends",
                };
                if i == 0 || !truncate_corrupt {
                    return Err(Error::Corrupt {
                        file: path,
                        offset: record::FILE_HEADER as u64,
                        reason,
                    });
                }
                end = End::Corrupt { offset: 0, reason };
            }
            _ => {}
        }
        let records = if end == scanned_end {
            seg.records
        } else {
            Vec::new()
        };
        push_in_order(records, &mut expect, &path, &mut tail)?;
        if end == scanned_end {
            match seg.roll {
                Some(r) if r.next_seq != seq + 1 || r.next_lsn != expect => {
                    end = End::Corrupt {
                        offset: r.offset,
                        reason: "roll-over record names the wrong segment or lsn",
                    };
                }
                // The segment it names was created (and the directory
                // synced) before this record was written: gone since.
                Some(_) if last => return Err(missing(seq + 1)),
                None if !last && end == End::Clean => {
                    end = End::Corrupt {
                        offset: seg.len,
                        reason: "segment ends without its roll-over record, though a later one holds records",
                    };
                }
                _ => {}
            }
        }
        let cut_at = match end {
            // Synced below (a log recovered from a killed process's files
            // may hold bytes the disk does not have yet).
            End::Clean if last => seg.len,
            End::Clean => {
                prev_roll = seg.roll.map(|r| (path, r));
                continue;
            }
            End::Torn { offset } if last => {
                report.torn_tail = Some(Damage {
                    file: path.clone(),
                    offset,
                    bytes_dropped: seg.len - offset,
                    segments_removed: 0,
                });
                offset
            }
            End::Torn { offset } | End::Corrupt { offset, .. } if truncate_corrupt => {
                // The later segments go first, newest first, each removal
                // durable before the next: at every instant the segments
                // left run on without a gap, and this one is cut only
                // once nothing follows it (a cut segment followed by them
                // would be a gap in the lsns).
                let later = &seqs[i + 1..];
                for &s in later.iter().rev() {
                    let p = dir.join(segment_name(s));
                    fs.remove(&p).map_err(|e| io_error("remove", &p, &e))?;
                    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))?;
                }
                report.truncated = Some(Damage {
                    file: path.clone(),
                    offset,
                    bytes_dropped: seg.len - offset,
                    segments_removed: later.len() as u64,
                });
                next_seq = seq + 1;
                offset
            }
            other => {
                let (offset, reason) = other.bad().expect("not clean");
                return Err(Error::Corrupt {
                    file: path,
                    offset,
                    reason,
                });
            }
        };
        if cut_at < SEGMENT_HEADER as u64 {
            // A segment whose header never reached the disk: no record can
            // be in it. Emptied, not removed, so that a checkpoint naming
            // it as its first segment still finds it; its number is reused,
            // and the segment before (cut at its roll-over record, if it
            // has one naming this one) gets a new roll-over record when the
            // log re-creates it.
            fs.truncate(&path, 0)
                .map_err(|e| io_error("truncate", &path, &e))?;
            if let Some((p, r)) = prev_roll.take() {
                fs.truncate(&p, r.offset)
                    .map_err(|e| io_error("truncate", &p, &e))?;
            }
            next_seq = seq;
        } else {
            // Cut at the last whole record and synced: what recovery
            // replays is on the disk before the log writes anything new.
            fs.truncate(&path, cut_at)
                .map_err(|e| io_error("truncate", &path, &e))?;
        }
        if report.truncated.is_some() {
            break;
        }
    }
    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))?;
    Ok(Recovered {
        state,
        tail,
        next_seq,
        next_lsn: expect,
        report,
    })
}

/// Rollback to stable at open: folds the covered commits into the state,
/// drops the rest, and writes the result as a checkpoint whose first
/// segment is the log's, `rec.next_seq` (which the caller has created and
/// synced, with its directory entry), then removes the older
/// segments and checkpoints, so that no later recovery brings a dropped
/// commit back. With nothing to drop it writes and removes nothing.
/// Returns how many it dropped.
///
/// Every instant leaves a directory that opens: before the rename, the old
/// checkpoint and its segments; after it, the new checkpoint and its first
/// segment (the rename is synced before anything is removed).
fn rollback_to_stable_files(fs: &dyn Fs, dir: &Path, rec: &mut Recovered) -> Result<u64> {
    let st = &mut rec.state;
    let stable = st.stable;
    let dropped = st
        .carried
        .iter()
        .chain(&rec.tail)
        .filter(|c| !c.covered_by(stable))
        .count() as u64;
    if dropped == 0 {
        return Ok(0);
    }
    let seq = rec.next_seq;
    let mut keep = std::mem::take(&mut st.carried);
    keep.append(&mut rec.tail);
    keep.retain(|c| c.covered_by(stable));
    st.fold(keep, stable, seq, rec.next_lsn);
    checkpoint::write(fs, dir, st)?;
    for name in fs.list(dir).map_err(|e| io_error("list", dir, &e))? {
        let old_seg = parse_segment(&name).is_some_and(|s| s < seq);
        let old_ckpt = checkpoint::parse_checkpoint(&name).is_some_and(|s| s < seq);
        if old_seg || old_ckpt {
            let p = dir.join(&name);
            fs.remove(&p).map_err(|e| io_error("remove", &p, &e))?;
        }
    }
    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))?;
    Ok(dropped)
}

/// Rebuilds the store from a checkpoint's base and the records after it,
/// through ordinary transactions on an engine that is not logging yet.
fn replay(engine: &Engine, st: &State, tail: &[Commit]) -> Result<u64> {
    let mut s = engine.session()?;
    let at = |ts: u64| CommitOptions {
        commit_ts: Timestamp::new(ts).to_option(),
        durable_ts: None,
    };
    let mut base: Vec<_> = st
        .base
        .iter()
        .filter_map(|(k, e)| Some((e.commit_ts, k, e.value.as_deref()?)))
        .collect();
    base.sort_unstable_by_key(|&(ts, ..)| ts);
    for group in base.chunk_by(|a, b| a.0 == b.0) {
        for chunk in group.chunks(1024) {
            let mut t = s.begin(&TxnOptions::default())?;
            for &(_, k, v) in chunk {
                t.put(k, v)?;
            }
            t.commit(at(chunk[0].0))?;
        }
    }
    let mut n = 0;
    for r in st.carried.iter().chain(tail) {
        let mut t = s.begin(&TxnOptions::default())?;
        // Replayed as an ordinary commit: note a prepared one's durable
        // timestamp for `rollback_to_stable`, as its commit did.
        let prepared = r.prepared.then_some((r.commit_ts, r.durable_ts));
        for w in &r.writes {
            if st.base.get(&w.key).is_some_and(|e| e.lsn > r.lsn) {
                continue;
            }
            match &w.value {
                Some(v) => t.put(&w.key, v)?,
                None => t.delete(&w.key)?,
            }
        }
        let id = t.id();
        t.commit(at(r.commit_ts))?;
        if let Some((c, d)) = prepared {
            engine.prepared_durable.note(id, c, d, 0);
        }
        n += 1;
    }
    Ok(n)
}

impl Engine<LockFree> {
    /// Opens (creating it if missing) a durable engine on directory `dir`:
    /// recovers the newest checkpoint and replays the log after it, then
    /// logs every committing write transaction there. Stable and oldest
    /// start at the checkpoint's stable timestamp
    /// ([`TimestampKind::Recovery`](crate::TimestampKind::Recovery)).
    /// What recovery found (a torn final record it dropped, a truncation)
    /// is in [`Engine::recovery_report`].
    ///
    /// A transaction that was prepared but not committed at the crash is
    /// gone: prepare is not logged; the coordinator re-drives two-phase
    /// commit.
    ///
    /// # Errors
    /// [`Error::InvalidDurabilityOption`]; [`Error::DirectoryLocked`] when
    /// another open engine (in this or another process) holds `dir`;
    /// [`Error::Corrupt`] for a damaged checkpoint, a missing segment (the
    /// newest too: the segment before it names it), a missing checkpoint,
    /// a segment cut short that a later one shows held more, or a checksum
    /// mismatch before the end of the log that no crash leaves (see
    /// [`RecoveryReport::torn_tail`]; unless `truncate_corrupt`);
    /// [`Error::UnsupportedFormat`] for a log of an older format (nothing is
    /// changed); [`Error::Io`]; an error replaying a record (a key or value
    /// over this `config`'s limits).
    pub fn open(
        dir: impl AsRef<Path>,
        config: EngineConfig,
        options: DurabilityOptions,
    ) -> Result<Engine> {
        // The config first: a bad one touches no file.
        config.validate()?;
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let fs = options.fs.clone();
        fs.create_dir_all(&dir)
            .map_err(|e| io_error("create", &dir, &e))?;
        let lock_path = dir.join("LOCK");
        let lock = fs
            .lock(&lock_path)
            .map_err(|e| io_error("lock", &lock_path, &e))?
            .ok_or(Error::DirectoryLocked { path: dir.clone() })?;
        let mut rec = recover_files(&*fs, &dir, options.truncate_corrupt)?;
        let interval = match options.durability {
            Durability::Periodic(d) => Some(d),
            _ => None,
        };
        // The log's first segment exists (synced, with its directory entry)
        // before a rollback's checkpoint names it.
        let log = Log::create(
            fs.clone(),
            &dir,
            rec.next_seq,
            rec.next_lsn,
            options.segment_bytes,
            interval,
        )?;
        if options.rollback_to_stable && rec.state.stable != 0 {
            rec.report.rolled_back = rollback_to_stable_files(&*fs, &dir, &mut rec)?;
        }
        let mut engine = Engine::with_machinery(config)?;
        let replayed = replay(&engine, &rec.state, &rec.tail)?;
        let stable = Timestamp::new(rec.state.stable);
        if !stable.is_none() {
            engine.set_timestamps(TimestampUpdate {
                oldest: Some(stable),
                stable: Some(stable),
                ..TimestampUpdate::default()
            })?;
        }
        let mut report = rec.report;
        report.records_replayed = replayed;
        let durable = Arc::new(CommitLog {
            log,
            mode: options.durability,
            fs,
            dir,
            report,
            recovery_ts: stable,
            stable: AtomicU64::new(stable.get()),
            ckpt: Mutex::new(Some(rec.state)),
            _lock: lock,
        });
        let mut opened = Opened {
            durable,
            checkpointer: None,
        };
        if let Some(every) = options.checkpoint_interval {
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
        engine.durable = Some(opened);
        Ok(engine)
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
        // every later commit with that error.
        let _ = d.checkpoint();
        // Dropped before the next wait: `Opened::drop` waits for this
        // thread, never for this reference.
        drop(d);
    }
}

/// An asynchronous commit's durability ([`Txn::commit_async`]): the commit
/// is visible already; this resolves once its log record is synced. Wait
/// for it with [`CommitHandle::wait`] (blocking) or `.await` it (a
/// [`Future`] on any runtime: the engine's log flusher wakes it).
///
/// [`Txn::commit_async`]: crate::Txn::commit_async
pub struct CommitHandle {
    /// `None`: nothing to wait for (an in-memory engine, or a commit that
    /// wrote nothing).
    log: Option<Arc<Log>>,
    lsn: u64,
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
    /// [`Error::Io`]: the log failed before the record was synced; the
    /// commit may be lost at a crash.
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
