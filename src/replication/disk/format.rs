//! The log's record format: segment names and magic, the record kinds,
//! and how a record is framed (the durability layer's frames,
//! `durability/record.rs`).

use std::path::PathBuf;

use openraft::Entry;

use crate::durability::record;
use crate::replication::entry::TypeConfig;

/// A log segment's magic bytes.
pub(super) const LOG_MAGIC: &[u8; 8] = b"SNAPRFT1";

/// An appended entry (taking its index).
pub(super) const KIND_ENTRY: u8 = 1;
/// The vote.
pub(super) const KIND_VOTE: u8 = 2;
/// The committed point.
pub(super) const KIND_COMMITTED: u8 = 3;
/// Entries at and above this index are gone.
pub(super) const KIND_TRUNCATE: u8 = 4;
/// Entries at and below this log id are gone.
pub(super) const KIND_PURGE: u8 = 5;

/// The name of log segment `seq`.
pub(super) fn segment_name(seq: u64) -> String {
    record::numbered_name("raft-", seq, ".log")
}

/// The sequence number in a segment's name.
pub(super) fn parse_segment(name: &str) -> Option<u64> {
    record::parse_numbered(name, "raft-", ".log")
}

/// A record's payload: its kind byte, then `value` in bincode.
pub(super) fn payload(kind: u8, value: &impl serde::Serialize) -> Vec<u8> {
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

/// One framed record of `kind` holding `value`.
pub(super) fn framed(kind: u8, value: &impl serde::Serialize) -> Vec<u8> {
    let mut out = Vec::new();
    record::frame_into(&mut out, &payload(kind, value));
    out
}

/// A segment on disk: its number, path and the newest entry index written
/// to it (a segment is removed once that is purged).
pub(super) struct Segment {
    pub(super) seq: u64,
    pub(super) path: PathBuf,
    pub(super) max_index: Option<u64>,
}
