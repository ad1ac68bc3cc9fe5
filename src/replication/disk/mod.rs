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
//!   format (`durability/record.rs`: a 16-byte file header, then frames of
//!   length, payload checksum and header checksum), magic `SNAPRFT3`.
//! * `snapshot`: the newest snapshot, magic `SNAPRSS3`, written whole as
//!   `snapshot.tmp`, synced and renamed over it.
//!
//! The magics name format version 3: records in the replication encoding
//! (`codec.rs`, postcard), each write with its table id, and snapshots
//! with their tables. A directory of version 1 (`SNAPRFT1` segments, a
//! `SNAPRSS1` snapshot: bincode 1.3) or version 2 (`SNAPRFT2`, `SNAPRSS2`:
//! postcard, no tables) is refused with [`Error::UnsupportedFormat`]
//! naming its version (supported 3) before any file in it changes; every
//! directory a node has opened holds a segment (the current one is never
//! removed), so its segments tell its version.
//!
//! A log payload is a kind byte, then the encoded value:
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
//! what is queued with one `write`, syncs it (as `LogOptions::durability`
//! says), and only then completes the callers, so an append is reported
//! flushed, and a vote returns, only once its record is on disk.
//!
//! Files here: `format.rs` (record kinds and framing), `recover.rs`
//! (replaying the segments at open), `writer.rs` (the writer thread) and
//! `snapshot.rs` (the snapshot file).

mod format;
mod recover;
mod snapshot;
mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::durability::{io_error, Fs, FsLock, StdFs};
use crate::Error;
use format::{framed, KIND_COMMITTED, KIND_PURGE, KIND_VOTE};
use snapshot::Meta;

pub(crate) use format::frame_entry;
pub use recover::LogRecovery;
pub(crate) use recover::Recovered;
pub use writer::LogOptions;
pub(crate) use writer::Writer;

/// The open files of a durable node: the directory lock and the log
/// writer.
pub(crate) struct Disk {
    pub(crate) writer: Arc<Writer>,
    dir: PathBuf,
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
    let (state, mut report, segments) = recover::recover(&*fs, dir)?;
    if fs
        .list(dir)
        .is_ok_and(|n| n.iter().any(|n| n == snapshot::SNAPSHOT))
    {
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
    let writer = writer::start(fs.clone(), dir, options, segments, head)?;
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

impl Disk {
    /// Writes `meta` and `data` as the node's snapshot: to `snapshot.tmp`,
    /// synced, then renamed over `snapshot` and the directory synced, so a
    /// crash leaves the old snapshot or the new one, whole.
    pub(crate) fn save_snapshot(&self, meta: &Meta, data: &[u8]) -> Result<(), Error> {
        snapshot::save(&*self.fs, &self.dir, meta, data)
    }

    /// The node's snapshot, if it has one.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if the file is damaged (it is only ever renamed
    /// into place whole, so any damage is corruption);
    /// [`Error::UnsupportedFormat`] for a version-1 snapshot.
    pub(crate) fn load_snapshot(&self) -> Result<Option<(Meta, Vec<u8>)>, Error> {
        snapshot::load(&*self.fs, &self.dir)
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.writer.stop();
    }
}
