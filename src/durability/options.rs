//! The durability settings: [`Durability`] and [`DurabilityOptions`], and
//! the bounds they are checked against.

use super::fs::{Fs, StdFs};
use crate::error::{Error, Result};
use std::fmt;
use std::sync::Arc;
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
/// [`CommitHandle`]: super::CommitHandle
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
    /// [`RecoveryReport::torn_tail`](super::RecoveryReport::torn_tail).
    Periodic(Duration),
    /// The commit returns once its record is written to the OS, which
    /// writes it back when it will. A process crash loses nothing; a power
    /// cut may lose any commit not yet written back: recovery keeps the
    /// commits before the first record the disk lost and reports the cut
    /// in [`RecoveryReport::torn_tail`](super::RecoveryReport::torn_tail).
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
    /// other than the lost write-back [`RecoveryReport::torn_tail`](super::RecoveryReport::torn_tail)
    /// describes), truncate the log there (and drop the segments after it),
    /// reporting it in [`RecoveryReport::truncated`](super::RecoveryReport::truncated), instead of failing
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
    /// there or all gone. The count is in [`RecoveryReport::rolled_back`](super::RecoveryReport::rolled_back).
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
