//! What recovery, a checkpoint and the log report: [`RecoveryReport`],
//! [`Damage`], [`CheckpointReport`], [`LogStats`].

use crate::ts::Timestamp;
use std::path::PathBuf;

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
    /// anywhere, is [`Error::Corrupt`](crate::Error::Corrupt) (or [`RecoveryReport::truncated`]).
    pub torn_tail: Option<Damage>,
    /// A corrupt record the log was truncated at
    /// ([`DurabilityOptions::truncate_corrupt`](super::DurabilityOptions::truncate_corrupt)).
    pub truncated: Option<Damage>,
    /// Commits dropped by [`DurabilityOptions::rollback_to_stable`](super::DurabilityOptions::rollback_to_stable).
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

/// What the background checkpointer
/// ([`DurabilityOptions::checkpoint_interval`](super::DurabilityOptions::checkpoint_interval))
/// has done since open. A failed background checkpoint leaves the previous
/// one in force and the engine committing (unless the failure was the log's
/// own cut, which stops the log as a failed commit does); nothing else
/// reports it, so an application that runs one should look here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointerStatus {
    /// Background checkpoints that succeeded.
    pub completed: u64,
    /// Background checkpoints that failed.
    pub failed: u64,
    /// The error of the latest background checkpoint, if it failed (`None`
    /// once a later one succeeds).
    pub last_error: Option<crate::error::Error>,
    /// The latest successful background checkpoint.
    pub last: Option<CheckpointReport>,
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
