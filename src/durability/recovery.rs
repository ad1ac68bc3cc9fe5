//! Recovery: the segment scan, the damage a crash may leave, and the
//! files read back (and cut, and rolled back to stable) at open.
//! [`Recovery`] hands what it read to the KV layer, which applies it, and
//! then becomes the engine's [`CommitLog`].

use super::catalog::Catalog;
use super::checkpoint::{self, State};
use super::checkpointer::Opened;
use super::commit::CommitLog;
use super::fs::{Fs, FsLock};
use super::log::{
    self, io_error, parse_segment, scan_segment, segment_name, Log, Segment, SEGMENT_HEADER,
};
use super::options::{Durability, DurabilityOptions};
use super::record::{self, End, Record, FILE_HEADER, FRAME_HEADER, MAX_PAYLOAD};
use super::report::{CheckpointerStatus, Damage, RecoveryReport};
use crate::error::{Error, Result};
use crate::sync::AtomicU64;
use crate::ts::Timestamp;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
pub(super) fn segments_in(fs: &dyn Fs, dir: &Path) -> Result<Vec<u64>> {
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
pub(super) fn newest_checkpoint(fs: &dyn Fs, dir: &Path) -> Result<Option<(u64, PathBuf)>> {
    Ok(fs
        .list(dir)
        .map_err(|e| io_error("list", dir, &e))?
        .iter()
        .filter_map(|n| checkpoint::parse_checkpoint(n).map(|s| (s, dir.join(n))))
        .max())
}

/// Appends a segment's records to `out`, checking that their lsns run on
/// from `expect` without a gap (invariant D4): a lost or doubled record is
/// `Corrupt` at its offset, never replayed. Each passes through `catalog`
/// (the tables as of the record before it, `Catalog::admit`): a write to
/// a dropped table is taken out of its commit, and a record its rules
/// call corruption is `Corrupt` at its offset.
fn push_in_order(
    recs: Vec<(u64, Record)>,
    expect: &mut u64,
    path: &Path,
    out: &mut Vec<Record>,
    catalog: &mut Catalog,
) -> Result<()> {
    for (offset, mut r) in recs {
        let corrupt = |reason| Error::Corrupt {
            file: path.to_path_buf(),
            offset,
            reason,
        };
        if r.lsn() != *expect {
            return Err(corrupt("log sequence gap"));
        }
        catalog.admit(&mut r).map_err(corrupt)?;
        *expect += 1;
        out.push(r);
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
/// Anything else is `Corrupt` where it is wrong. Its records pass through
/// `catalog` ([`push_in_order`]).
pub(super) fn fold_whole_segment(
    seg: Segment,
    seq: u64,
    expect: &mut u64,
    path: &Path,
    out: &mut Vec<Record>,
    catalog: &mut Catalog,
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
    push_in_order(seg.records, expect, path, out, catalog)?;
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
    tail: Vec<Record>,
    /// The catalog after the tail.
    catalog: Catalog,
    next_seq: u64,
    next_lsn: u64,
    report: RecoveryReport,
}

/// Removes leftover temporary files and loads the newest checkpoint (an
/// empty state without one), noting it in `report`.
fn load_checkpoint(fs: &dyn Fs, dir: &Path, report: &mut RecoveryReport) -> Result<State> {
    let names = fs.list(dir).map_err(|e| io_error("list", dir, &e))?;
    for n in names.iter().filter(|n| n.ends_with(".tmp")) {
        let p = dir.join(n);
        fs.remove(&p).map_err(|e| io_error("remove", &p, &e))?;
    }
    Ok(match newest_checkpoint(fs, dir)? {
        Some((_, path)) => {
            let st = checkpoint::load(fs, &path)?;
            report.checkpoint = Some(path);
            report.checkpoint_stable = st.stable.to_option();
            report.checkpoint_keys = st.base_keys();
            st
        }
        None => State::empty(),
    })
}

/// `Corrupt`: segment `seq` of the log in `dir` is not there.
fn missing_segment(dir: &Path, seq: u64) -> Error {
    Error::Corrupt {
        file: dir.join(segment_name(seq)),
        offset: 0,
        reason: "missing log segment",
    }
}

/// The segments the log runs on after the checkpoint (`state`): removes
/// those it covers that a crash kept, and checks that the rest start at
/// its cut (at 1 without a checkpoint) and run on without a gap (D4).
fn segment_run(fs: &dyn Fs, dir: &Path, state: &State, has_ckpt: bool) -> Result<Vec<u64>> {
    let mut seqs = segments_in(fs, dir)?;
    // Segments a checkpoint covers but a crash kept from being removed.
    for &s in seqs.iter().filter(|&&s| s < state.first_seq) {
        let p = dir.join(segment_name(s));
        fs.remove(&p).map_err(|e| io_error("remove", &p, &e))?;
    }
    seqs.retain(|&s| s >= state.first_seq);
    let missing = |seq: u64| missing_segment(dir, seq);
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
    Ok(seqs)
}

fn recover_files(fs: &dyn Fs, dir: &Path, truncate_corrupt: bool) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let state = load_checkpoint(fs, dir, &mut report)?;
    let has_ckpt = report.checkpoint.is_some();
    let seqs = segment_run(fs, dir, &state, has_ckpt)?;
    let missing = |seq: u64| missing_segment(dir, seq);
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
            .map(|(_, c)| c.lsn() + 1)
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
    let mut catalog = state.catalog.clone();
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
        push_in_order(records, &mut expect, &path, &mut tail, &mut catalog)?;
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
        catalog,
        next_seq,
        next_lsn: expect,
        report,
    })
}

/// Rollback to stable at open: folds the covered commits (and every
/// `create` and `drop`) into the state, drops the rest, and writes the
/// result as a checkpoint whose first segment is the log's, `rec.next_seq`
/// (which the caller has created and synced, with its directory entry),
/// then removes the older
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
    let carried_dropped = st.carried.iter().filter(|c| !c.covered_by(stable.get()));
    let tail_dropped = rec.tail.iter().filter(|r| !r.covered_by(stable.get()));
    let dropped = (carried_dropped.count() + tail_dropped.count()) as u64;
    if dropped == 0 {
        return Ok(0);
    }
    let seq = rec.next_seq;
    let carried = std::mem::take(&mut st.carried);
    let mut keep: Vec<Record> = carried.into_iter().map(Record::Commit).collect();
    keep.append(&mut rec.tail);
    keep.retain(|r| r.covered_by(stable.get()));
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

/// A directory opened for a durable engine: locked, recovered (the newest
/// checkpoint and the log records after it read, checked, cut where a crash
/// left damage, and rolled back to stable when asked) and its log started
/// after the last record. The KV layer applies what it read
/// ([`Recovery::checkpoint`], [`Recovery::records`]) to a new engine that
/// is not logging yet, then [`Recovery::start`] makes the log the engine's.
///
/// The KV layer replays, in this order: the checkpoint's catalog (its
/// tables, created empty), its base (per table, each key's newest covered
/// version; a key whose entry is a deletion has none), then its carried
/// commits and the records after it in lsn order, creating and dropping
/// tables as the records say. Every write in them is to the default table
/// or to a table live at that point of the order (writes that raced a drop
/// are gone, `catalog.rs`), and is skipped when the base holds its key
/// with a higher lsn ([`State::base_entry`]).
pub(crate) struct Recovery {
    /// The checkpoint's contents: its stable timestamp, its catalog, its
    /// base (each key's newest version it covers) and the commits it
    /// carries whole.
    pub(crate) checkpoint: State,
    /// The log records after the checkpoint, in lsn order.
    pub(crate) records: Vec<Record>,
    /// One above the highest table id ever created, after every record:
    /// the KV layer gives new tables ids from here on.
    next_table_id: u64,
    report: RecoveryReport,
    log: Arc<Log>,
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    durability: Durability,
    checkpoint_interval: Option<Duration>,
    // Last: a recovery dropped before it starts (a replay that failed)
    // releases the lock only after its log has closed.
    lock: Box<dyn FsLock>,
}

impl Recovery {
    /// Creates `dir` if missing, locks it, recovers it and starts its log
    /// (`options` checked already).
    ///
    /// # Errors
    /// [`Error::DirectoryLocked`] when another open engine holds `dir`;
    /// [`Error::IncompleteBackup`] for an unfinished backup (nothing changed);
    /// [`Error::Corrupt`] for a damaged checkpoint, a missing segment, a
    /// missing checkpoint or damage in the log that no crash leaves (unless
    /// `truncate_corrupt`); [`Error::UnsupportedFormat`]; [`Error::Io`].
    pub(crate) fn open(dir: &Path, options: &DurabilityOptions) -> Result<Recovery> {
        let dir = dir.to_path_buf();
        let fs = options.fs.clone();
        fs.create_dir_all(&dir)
            .map_err(|e| io_error("create", &dir, &e))?;
        let lock_path = dir.join("LOCK");
        let lock = fs
            .lock(&lock_path)
            .map_err(|e| io_error("lock", &lock_path, &e))?
            .ok_or(Error::DirectoryLocked { path: dir.clone() })?;
        super::backup::refuse_incomplete(&*fs, &dir)?;
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
        if options.rollback_to_stable && !rec.state.stable.is_none() {
            rec.report.rolled_back = rollback_to_stable_files(&*fs, &dir, &mut rec)?;
        }
        Ok(Recovery {
            checkpoint: rec.state,
            records: rec.tail,
            next_table_id: rec.catalog.next_id(),
            report: rec.report,
            log,
            fs,
            dir,
            durability: options.durability,
            checkpoint_interval: options.checkpoint_interval,
            lock,
        })
    }

    /// The checkpoint's stable timestamp ([`Timestamp::NONE`]: none), where
    /// the engine's stable and oldest start.
    pub(crate) fn stable(&self) -> Timestamp {
        self.checkpoint.stable
    }

    /// One above the highest table id ever created (1 with none), after
    /// every record: ids below it are never given to a new table.
    pub(crate) fn next_table_id(&self) -> u64 {
        self.next_table_id
    }

    /// The engine's durability, once the KV layer has replayed
    /// `records_replayed` records and set its timestamps: the log takes
    /// commits from here on, and the background checkpointer starts if one
    /// was asked for.
    ///
    /// # Errors
    /// [`Error::Io`] when the checkpointer thread cannot be spawned.
    pub(crate) fn start(self, records_replayed: u64) -> Result<Opened> {
        let stable = self.stable();
        let mut report = self.report;
        report.records_replayed = records_replayed;
        let durable = CommitLog {
            log: self.log,
            mode: self.durability,
            fs: self.fs,
            dir: self.dir,
            report,
            recovery_ts: stable,
            stable: AtomicU64::new(stable.get()),
            ckpt: Mutex::new(Some(self.checkpoint)),
            background: Mutex::new(CheckpointerStatus::default()),
            _lock: self.lock,
        };
        Opened::start(durable, self.checkpoint_interval)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
