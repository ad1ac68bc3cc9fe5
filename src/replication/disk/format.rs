//! The log's record format: segment names and magic (its format version),
//! the record kinds, and how a record is framed (the durability layer's
//! frames, `durability/record.rs`).

use std::path::{Path, PathBuf};

use openraft::Entry;

use crate::durability::record;
use crate::replication::codec;
use crate::replication::entry::TypeConfig;
use crate::Error;

/// A log segment's magic bytes: format version 3, records in the
/// replication encoding (`codec.rs`), each write with its table id.
pub(super) const LOG_MAGIC: &[u8; 8] = b"SNAPRFT3";
/// The format version of this build's raft log segments and snapshot.
pub(super) const FORMAT_VERSION: u32 = 3;
/// The magic bytes of older segments, with their versions, refused by
/// name: 1 (records in bincode 1.3), 2 (postcard, writes without a table).
pub(super) const LOG_MAGICS_OLD: &[(&[u8; 8], u32)] = &[(b"SNAPRFT1", 1), (b"SNAPRFT2", 2)];

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

/// A record's payload: its kind byte, then `value` encoded.
pub(super) fn payload(kind: u8, value: &impl serde::Serialize) -> Vec<u8> {
    // The encoding fails only on a value it cannot represent (a sequence of
    // unknown length, a self-describing type), which none of the log's
    // types is.
    codec::encode_after(vec![kind], value).expect("raft log records encode")
}

/// [`Error::UnsupportedFormat`] for `path` if `header` (at least its first
/// 8 bytes) opens with one of the `old` magics, naming its version.
pub(super) fn refuse_old(path: &Path, header: &[u8], old: &[(&[u8; 8], u32)]) -> Result<(), Error> {
    match old.iter().find(|(magic, _)| header.starts_with(&magic[..])) {
        Some(&(_, version)) => Err(Error::UnsupportedFormat {
            file: path.to_path_buf(),
            version,
            supported: FORMAT_VERSION,
        }),
        None => Ok(()),
    }
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
