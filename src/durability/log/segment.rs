//! The commit log's segment files: their names, the header and `roll`
//! records that chain them, and reading one back ([`scan_segment`]).
//!
//! # Roll-over
//!
//! Segment `n` ends, once segment `n+1` exists, with a `roll` record
//! naming it and the lsn it starts at; segment `n+1` starts with a
//! `segment` record repeating its number and that lsn. The steps: sync
//! segment `n`; create `n+1` with its header, sync it and the directory;
//! append the `roll` record to `n` and sync it; only then write records
//! into `n+1`. So every segment followed by another that holds a record
//! names it, and every record below the lsn `n+1` starts at is synced in
//! `n` before `n+1` exists. A crash inside a roll-over leaves `n` without
//! its `roll` record and `n+1` with nothing but its header (a leftover
//! that recovery drops). An open continues the log the same way: the last
//! segment recovery kept is synced, the new segment created, and the
//! `roll` record appended to the old one ([`Fs::append_to`]).

use super::io_error;
use crate::durability::fs::{Fs, FsFile};
use crate::durability::record::{
    self, End, Record, ANCHOR_PAYLOAD, FILE_HEADER, FRAME_HEADER, KIND_ROLL, KIND_SEGMENT,
    KIND_SYNCED, SEGMENT_MAGIC, SEGMENT_MAGIC_STEM, SEGMENT_MAGIC_V2, SEGMENT_VERSION,
};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Bytes before a segment's first record: the file header and the
/// framed `segment` record.
pub(crate) const SEGMENT_HEADER: usize = FILE_HEADER + FRAME_HEADER + ANCHOR_PAYLOAD;

/// A segment's file name: `log-` and the sequence number in 16 hex digits.
pub(crate) fn segment_name(seq: u64) -> String {
    record::numbered_name("log-", seq, ".seg")
}

/// The sequence number in a segment's file name.
pub(crate) fn parse_segment(name: &str) -> Option<u64> {
    record::parse_numbered(name, "log-", ".seg")
}

/// Segment `seq`'s header: the file header and the `segment` record
/// saying its first record gets `first_lsn`.
pub(super) fn segment_header(seq: u64, first_lsn: u64) -> Vec<u8> {
    let mut h = record::file_header(SEGMENT_MAGIC, seq).to_vec();
    record::frame_into(&mut h, &record::anchor(KIND_SEGMENT, seq, first_lsn));
    debug_assert_eq!(h.len(), SEGMENT_HEADER);
    h
}

/// The framed `roll` record that ends a segment: the next is `next_seq`,
/// whose first record gets `next_lsn`.
pub(super) fn roll_record(next_seq: u64, next_lsn: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity(FRAME_HEADER + ANCHOR_PAYLOAD);
    record::frame_into(&mut r, &record::anchor(KIND_ROLL, next_seq, next_lsn));
    r
}

/// A segment's `roll` record: the next segment and the lsn it starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Roll {
    /// Where the record starts in the file.
    pub(crate) offset: u64,
    pub(crate) next_seq: u64,
    pub(crate) next_lsn: u64,
}

/// A segment file as read back ([`scan_segment`]).
#[derive(Debug)]
pub(crate) struct Segment {
    /// The lsn its first record gets, from its `segment` record; `None`:
    /// the header is torn (the file ends, or is zeros, before the header
    /// is whole), as a crash while the segment was being created leaves
    /// it. No record can follow a torn header.
    pub(crate) first_lsn: Option<u64>,
    /// Its records (commits, creates, drops) with their offsets, up to
    /// the first damage.
    pub(crate) records: Vec<(u64, Record)>,
    /// Its `roll` record, if it ends with a whole one.
    pub(crate) roll: Option<Roll>,
    /// The largest offset a whole `synced` record names ([`SEGMENT_HEADER`]
    /// if none): every byte below it was synced.
    pub(crate) synced_through: u64,
    /// How the scan ended: `Torn { offset: 0 }` for a torn header.
    pub(crate) end: End,
    /// The file's length.
    pub(crate) len: u64,
}

/// Reads segment `seq` from `buf` (the file `path`), of format version 3
/// or 2 (`record.rs`): its header, its records, its `roll` record. A
/// damaged header is `End::Corrupt` at its offset; a record after the
/// `roll` record, or one that does not decode (a table record in a
/// version-2 segment among them), is `End::Corrupt` there.
///
/// # Errors
/// [`Error::UnsupportedFormat`] for a segment of format version 1 or one
/// above this build's.
pub(crate) fn scan_segment(buf: &[u8], path: &Path, seq: u64) -> Result<Segment> {
    let mut seg = Segment {
        first_lsn: None,
        records: Vec::new(),
        roll: None,
        synced_through: SEGMENT_HEADER as u64,
        end: End::Torn { offset: 0 },
        len: buf.len() as u64,
    };
    if buf.iter().all(|&b| b == 0) {
        return Ok(seg);
    }
    let head = &buf[..FILE_HEADER.min(buf.len())];
    if buf.len() >= FILE_HEADER {
        match record::magic_version(&buf[..8], SEGMENT_MAGIC_STEM) {
            Some(v) if v == 1 || v > SEGMENT_VERSION => {
                return Err(Error::UnsupportedFormat {
                    file: path.to_path_buf(),
                    version: v,
                    supported: SEGMENT_VERSION,
                });
            }
            _ => {}
        }
    }
    let want = record::file_header(SEGMENT_MAGIC, seq);
    let want_v2 = record::file_header(SEGMENT_MAGIC_V2, seq);
    // Version 3 has tables; a header torn inside its magic counts as one.
    let tables = head == &want[..head.len()];
    if !tables && head != &want_v2[..head.len()] {
        seg.end = End::Corrupt {
            offset: 0,
            reason: "not a log segment of this number (bad file header)",
        };
        return Ok(seg);
    }
    if buf.len() < FILE_HEADER {
        return Ok(seg);
    }
    let (frames, end) = record::scan(buf, FILE_HEADER);
    let mut frames = frames.into_iter();
    let Some((offset, range)) = frames.next() else {
        // No whole `segment` record: torn (from 0: nothing before it
        // counts) or corrupt where the scan stopped.
        if let End::Corrupt { offset, reason } = end {
            seg.end = End::Corrupt { offset, reason };
        }
        return Ok(seg);
    };
    match record::decode_anchor(KIND_SEGMENT, &buf[range]) {
        Some((s, first_lsn)) if s == seq => seg.first_lsn = Some(first_lsn),
        _ => {
            seg.end = End::Corrupt {
                offset,
                reason: "bad segment header record",
            };
            return Ok(seg);
        }
    }
    seg.end = end;
    for (offset, range) in frames {
        let payload = &buf[range];
        if let Some(r) = seg.roll.take() {
            // Reported at the roll-over record, which goes with it: a cut
            // there leaves a segment that names no successor.
            seg.end = End::Corrupt {
                offset: r.offset,
                reason: "record after the segment's roll-over record",
            };
            break;
        }
        if payload.first() == Some(&KIND_SYNCED) {
            match record::decode_synced(payload) {
                Some(t) if (SEGMENT_HEADER as u64..=offset).contains(&t) => {
                    seg.synced_through = seg.synced_through.max(t);
                    continue;
                }
                _ => {
                    seg.end = End::Corrupt {
                        offset,
                        reason: "malformed synced-through record",
                    };
                    break;
                }
            }
        }
        if let Some((next_seq, next_lsn)) = record::decode_anchor(KIND_ROLL, payload) {
            seg.roll = Some(Roll {
                offset,
                next_seq,
                next_lsn,
            });
            continue;
        }
        match record::decode_record(payload, tables) {
            Ok(r) => seg.records.push((offset, r)),
            Err(reason) => {
                seg.end = End::Corrupt { offset, reason };
                break;
            }
        }
    }
    if seg.roll.is_some() && seg.end != End::Clean {
        // A roll-over record is the segment's last write: anything after
        // it, even torn, is damage (reported as above).
        let offset = seg.roll.take().map_or(0, |r| r.offset);
        seg.end = End::Corrupt {
            offset,
            reason: "bytes after the segment's roll-over record",
        };
    }
    Ok(seg)
}

/// Creates the file `path` in `dir` holding `first`, and syncs it and the
/// directory, so that a record synced in it later is found after a crash
/// (a new segment of the commit log or of a replica's raft log).
pub(crate) fn create_synced(
    fs: &dyn Fs,
    dir: &Path,
    path: &Path,
    first: &[u8],
) -> Result<Box<dyn FsFile>> {
    let mut f = fs.create(path).map_err(|e| io_error("create", path, &e))?;
    f.append(first).map_err(|e| io_error("write", path, &e))?;
    f.sync().map_err(|e| io_error("sync", path, &e))?;
    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))?;
    Ok(f)
}

/// Creates segment `seq`, whose first record gets `first_lsn`, with its
/// header ([`create_synced`]).
pub(super) fn new_segment(
    fs: &dyn Fs,
    dir: &Path,
    seq: u64,
    first_lsn: u64,
) -> Result<(Box<dyn FsFile>, PathBuf)> {
    let path = dir.join(segment_name(seq));
    let f = create_synced(fs, dir, &path, &segment_header(seq, first_lsn))?;
    Ok((f, path))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn commit_payload(lsn: u64) -> Vec<u8> {
        let mut p = Vec::new();
        record::begin_commit(&mut p, 0, 0, false, 1);
        record::push_write(&mut p, 0, b"k", Some(b"v"));
        p[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
        p
    }

    fn scan(buf: &[u8]) -> Result<Segment> {
        scan_segment(buf, Path::new("/d/log"), 3)
    }

    #[test]
    fn a_segment_scans_back_with_its_anchors() {
        let mut b = segment_header(3, 10);
        record::frame_into(&mut b, &commit_payload(10));
        let through = b.len() as u64;
        record::frame_synced(&mut b, through);
        record::frame_into(&mut b, &commit_payload(11));
        let roll_at = b.len() as u64;
        b.extend_from_slice(&roll_record(4, 12));
        let seg = scan(&b).unwrap();
        assert_eq!(seg.first_lsn, Some(10));
        assert_eq!(seg.end, End::Clean);
        let lsns: Vec<u64> = seg.records.iter().map(|(_, c)| c.lsn()).collect();
        assert_eq!(lsns, [10, 11]);
        assert_eq!(seg.synced_through, through);
        let want = Roll {
            offset: roll_at,
            next_seq: 4,
            next_lsn: 12,
        };
        assert_eq!(seg.roll, Some(want));
        // Every cut inside the header is a torn header, never a panic.
        for cut in 0..SEGMENT_HEADER {
            let s = scan(&b[..cut]).unwrap();
            assert_eq!(
                (s.first_lsn, s.end),
                (None, End::Torn { offset: 0 }),
                "{cut}"
            );
        }
        // Anything after the roll-over record is damage.
        let mut after = b.clone();
        record::frame_into(&mut after, &commit_payload(12));
        let s = scan(&after).unwrap();
        assert!(matches!(s.end, End::Corrupt { offset, .. } if offset == roll_at));
        assert_eq!(s.roll, None);
        after.truncate(b.len() + 3);
        assert!(matches!(scan(&after).unwrap().end, End::Corrupt { .. }));
    }

    #[test]
    fn bad_anchors_are_corrupt_and_an_old_format_is_refused() {
        // A header naming another segment, a mark past its own offset.
        let other = segment_header(4, 10);
        assert!(matches!(scan(&other).unwrap().end, End::Corrupt { .. }));
        let mut b = segment_header(3, 10);
        let past = b.len() as u64 + 1;
        record::frame_synced(&mut b, past);
        assert!(matches!(
            scan(&b).unwrap().end,
            End::Corrupt { offset, .. } if offset == SEGMENT_HEADER as u64
        ));
        for v in [1, 4, 9] {
            let mut old = format!("SNAPLOG{v}").into_bytes();
            old.extend_from_slice(&3u64.to_le_bytes());
            assert!(matches!(
                scan(&old),
                Err(Error::UnsupportedFormat {
                    version,
                    supported: 3,
                    ..
                }) if version == v
            ));
        }
        assert_eq!(scan(&[0; 40]).unwrap().first_lsn, None);
    }
}
