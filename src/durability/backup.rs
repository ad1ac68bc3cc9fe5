//! Online backup: [`CommitLog::backup`] copies a running engine's newest
//! checkpoint and the log after it into another directory, which
//! `Engine::open` then opens like the original.
//!
//! # The copy
//!
//! 1. The target must be empty or missing ([`Error::BackupTargetNotEmpty`]).
//!    It is created, and the empty [`BACKUP_INCOMPLETE`] marker is created in it
//!    and synced with the directory before any other file.
//! 2. The checkpoint lock is taken for the rest of the copy: no checkpoint
//!    (on call, in the background, or rollback to stable's) replaces the
//!    checkpoint or removes a segment meanwhile. Readers and writers never
//!    take it.
//! 3. Stable is noted, then the log's sync point ([`Log::sync_point`]):
//!    everything pending is written and synced, and the current segment's
//!    synced length noted. Writers wait only for that one batch.
//! 4. The newest checkpoint file and every segment from the one it names
//!    through the current one are copied byte for byte, the current one
//!    only up to its synced length. Each is written under a `.tmp` name,
//!    synced, renamed into place; then the directory is synced.
//! 5. The marker is removed and the directory synced: the backup is
//!    complete.
//!
//! The copy is what recovery of the source would read had it crashed at
//! the sync point with the writes after it lost: segments that are whole
//! (each ends with its `roll` record, written before the next existed) and
//! a last one cut at a frame boundary without a `roll` record, which
//! recovery takes as the log's clean end. Every record below the sync
//! point's lsn is in it; every commit record in it is whole. Nothing is
//! parsed here: the copy is files and a byte range.
//!
//! # The rule for a partial backup
//!
//! A directory holding [`BACKUP_INCOMPLETE`] is a backup that did not finish (it
//! failed, or its process or machine died), and `Engine::open` refuses it
//! with [`Error::IncompleteBackup`] before changing anything. The marker is
//! durable before any copied file's name, and removed only once every
//! copied file and name is durable, so no crash leaves a directory without
//! it that holds less than the whole copy. A crash before the marker
//! leaves an empty (or no) directory.

use super::checkpoint::checkpoint_name;
use super::commit::CommitLog;
use super::fs::Fs;
use super::log::{io_error, segment_name};
use super::recovery::{newest_checkpoint, segments_in};
use crate::error::{Error, Result};
use crate::sync::Ordering;
use crate::ts::Timestamp;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The file a backup in progress keeps in its target directory; removed
/// last. `Engine::open` refuses a directory holding it.
pub const BACKUP_INCOMPLETE: &str = "BACKUP-INCOMPLETE";

/// What [`Engine::backup`] copied.
///
/// [`Engine::backup`]: crate::Engine::backup
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupReport {
    /// The backup's directory.
    pub dir: PathBuf,
    /// Files copied: the checkpoint (if the engine had one) and the log
    /// segments after it.
    pub files: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// The checkpoint copied, as named in the backup (`None`: the engine
    /// had none yet, and the copy holds the whole log).
    pub checkpoint: Option<PathBuf>,
    /// The engine's stable timestamp when the backup began: every commit at
    /// or below it is in the copy (`None`: no stable was set).
    pub stable: Option<Timestamp>,
    /// The log sequence number of the newest commit record in the copy
    /// (in its checkpoint or its log; 0: none). Commit records are numbered
    /// from 1 in log order; every one up to this is in the copy, and none
    /// after it.
    pub last_lsn: u64,
    /// How long writers were held off: the one write and sync of the
    /// records pending when the backup began.
    pub pause: Duration,
    /// How long the backup took; checkpoints waited this long at most.
    pub elapsed: Duration,
}

/// `Engine::open`'s check: refuses a directory holding an unfinished
/// backup, before anything in it is changed.
///
/// # Errors
/// [`Error::IncompleteBackup`]; [`Error::Io`] when `dir` cannot be listed.
pub(crate) fn refuse_incomplete(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let names = fs.list(dir).map_err(|e| io_error("list", dir, &e))?;
    if names.iter().any(|n| n == BACKUP_INCOMPLETE) {
        return Err(Error::IncompleteBackup {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Checks that `dir` is empty or missing.
fn check_empty(fs: &dyn Fs, dir: &Path) -> Result<()> {
    match fs.list(dir) {
        Ok(names) => match names.into_iter().min() {
            Some(entry) => Err(Error::BackupTargetNotEmpty {
                path: dir.to_path_buf(),
                entry,
            }),
            None => Ok(()),
        },
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("list", dir, &e)),
    }
}

/// Writes `data` as `dir/name`: to `name.tmp`, synced, renamed into place
/// (the directory is synced by the caller).
fn put(fs: &dyn Fs, dir: &Path, name: &str, data: &[u8]) -> Result<PathBuf> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let mut f = fs.create(&tmp).map_err(|e| io_error("create", &tmp, &e))?;
    f.append(data).map_err(|e| io_error("write", &tmp, &e))?;
    f.sync().map_err(|e| io_error("sync", &tmp, &e))?;
    drop(f);
    fs.rename(&tmp, &path)
        .map_err(|e| io_error("rename", &tmp, &e))?;
    Ok(path)
}

/// `Corrupt`: a segment the copy needs is not in the source.
fn missing(dir: &Path, seq: u64) -> Error {
    Error::Corrupt {
        file: dir.join(segment_name(seq)),
        offset: 0,
        reason: "missing log segment",
    }
}

impl CommitLog {
    /// Copies this engine's newest checkpoint and the log after it into
    /// `target` (module docs).
    ///
    /// # Errors
    /// [`Error::BackupTargetNotEmpty`] (nothing written);
    /// [`Error::Io`] for a failed file operation on either directory; the
    /// log's failure, if it has failed or its sync fails (that stops it, as
    /// any failed sync does); [`Error::Corrupt`] for a segment missing from
    /// the source. After a failure past the first check the target holds
    /// [`BACKUP_INCOMPLETE`] (or, when the last directory sync failed, the whole
    /// copy, the marker's removal not known durable): remove it before
    /// backing up there again.
    pub(crate) fn backup(&self, target: &Path) -> Result<BackupReport> {
        let started = Instant::now();
        let fs = &*self.fs;
        check_empty(fs, target)?;
        fs.create_dir_all(target)
            .map_err(|e| io_error("create", target, &e))?;
        // The target's own entry, so that a completed backup stays.
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        fs.sync_dir(parent)
            .map_err(|e| io_error("sync", parent, &e))?;
        // Created under its own name (empty, nothing to tear): a crash
        // leaves the directory with it or with nothing.
        let marker = target.join(BACKUP_INCOMPLETE);
        fs.create(&marker)
            .and_then(|mut f| f.sync())
            .map_err(|e| io_error("create", &marker, &e))?;
        fs.sync_dir(target)
            .map_err(|e| io_error("sync", target, &e))?;

        // Held to the end of the copy: no checkpoint replaces the one
        // copied or removes a segment the copy needs.
        let paused = self.ckpt.lock();
        // Relaxed: as in `CommitLog::checkpoint`, stable is read before
        // the sync point, and every commit at or below it had appended its
        // record before stable was published.
        let stable = Timestamp::new(self.stable.load(Ordering::Relaxed));
        let point = self.log.sync_point()?;
        let ckpt = newest_checkpoint(fs, &self.dir)?;
        let first = ckpt.as_ref().map_or(1, |&(seq, _)| seq);
        let seqs: Vec<u64> = segments_in(fs, &self.dir)?
            .into_iter()
            .filter(|&s| s >= first && s <= point.seq)
            .collect();
        // The checkpoint's first segment through the current one, each
        // there (they run without a gap in the source, D4).
        if let Some(gap) = (first..=point.seq).find(|s| !seqs.contains(s)) {
            return Err(missing(&self.dir, gap));
        }

        let (mut files, mut bytes) = (0u64, 0u64);
        let mut checkpoint = None;
        if let Some((seq, src)) = &ckpt {
            let data = fs.read(src).map_err(|e| io_error("read", src, &e))?;
            checkpoint = Some(put(fs, target, &checkpoint_name(*seq), &data)?);
            files += 1;
            bytes += data.len() as u64;
        }
        for seq in seqs {
            let src = self.dir.join(segment_name(seq));
            let mut data = fs.read(&src).map_err(|e| io_error("read", &src, &e))?;
            if seq == point.seq {
                // Bytes past the synced length are the next batches (or a
                // `roll` record) written since: not in the copy.
                if (data.len() as u64) < point.len {
                    return Err(Error::Corrupt {
                        file: src,
                        offset: data.len() as u64,
                        reason: "segment shorter than its synced length",
                    });
                }
                data.truncate(point.len as usize);
            }
            put(fs, target, &segment_name(seq), &data)?;
            files += 1;
            bytes += data.len() as u64;
        }
        drop(paused);
        fs.sync_dir(target)
            .map_err(|e| io_error("sync", target, &e))?;
        fs.remove(&marker)
            .map_err(|e| io_error("remove", &marker, &e))?;
        fs.sync_dir(target)
            .map_err(|e| io_error("sync", target, &e))?;
        Ok(BackupReport {
            dir: target.to_path_buf(),
            files,
            bytes,
            checkpoint,
            stable: stable.to_option(),
            last_lsn: point.next_lsn - 1,
            pause: point.held,
            elapsed: started.elapsed(),
        })
    }
}
