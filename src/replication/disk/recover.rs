//! Recovery: replaying a node's log segments in order into the state the
//! node had when its last record reached the disk (invariant R6), and
//! [`LogRecovery`], the report of what was found.

use std::collections::BTreeMap;
use std::path::Path;

use openraft::{Entry, LogId, Vote};

use super::format::{
    parse_segment, refuse_old, segment_name, Segment, KIND_COMMITTED, KIND_ENTRY, KIND_PURGE,
    KIND_TRUNCATE, KIND_VOTE, LOG_MAGIC, LOG_MAGICS_OLD,
};
use crate::durability::record::{self, corrupt, End, FILE_HEADER};
use crate::durability::{io_error, Damage, Fs};
use crate::replication::codec;
use crate::replication::entry::{NodeId, TypeConfig};
use crate::Error;

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

/// Decodes one log payload into `state`: `Err` if it does not decode,
/// else the index of the entry it held, if it was one.
fn replay_one(state: &mut Recovered, p: &[u8]) -> Result<Option<u64>, ()> {
    fn de<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, ()> {
        codec::decode(b).map_err(|_| ())
    }
    let (&kind, body) = p.split_first().ok_or(())?;
    match kind {
        KIND_ENTRY => {
            let e: Entry<TypeConfig> = de(body)?;
            let index = e.log_id.index;
            // As the log store does in memory: an entry takes its index;
            // what openraft removes, a truncate or purge record removes.
            if state.purged.is_none_or(|p| index > p.index) {
                state.entries.insert(index, e);
            }
            return Ok(Some(index));
        }
        KIND_VOTE => state.vote = Some(de(body)?),
        KIND_COMMITTED => state.committed = de(body)?,
        KIND_TRUNCATE => state.truncate(de(body)?),
        KIND_PURGE => state.purge(de(body)?),
        _ => return Err(()),
    }
    Ok(None)
}

/// Reads every segment of `dir` in order: the recovered state, the report,
/// and the segments found. A torn final record of the last segment is cut
/// off (and reported); any other damage is [`Error::Corrupt`]; a
/// version-1 segment is [`Error::UnsupportedFormat`], found before any
/// file is changed.
pub(super) fn recover(
    fs: &dyn Fs,
    dir: &Path,
) -> Result<(Recovered, LogRecovery, Vec<Segment>), Error> {
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
        // Before anything here changes a file: a directory of an older
        // version is left as it was.
        refuse_old(&path, &buf, LOG_MAGICS_OLD)?;
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

#[cfg(test)]
mod tests {
    use super::super::format::framed;
    use super::*;
    use crate::durability::StdFs;
    use openraft::{CommittedLeaderId, EntryPayload};
    use std::path::PathBuf;

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

    /// A segment of format version 1 as that version wrote it: magic
    /// `SNAPRFT1`, then records whose values are in bincode 1.3's default
    /// layout (fixed-width little-endian integers, a u32 variant index),
    /// laid out by hand: the vote of term 3 for node 2, and the entry at
    /// index 1 of term 3 holding the watermark 40.
    fn v1_segment(seq: u64) -> Vec<u8> {
        let mut vote = vec![KIND_VOTE];
        vote.extend_from_slice(&3u64.to_le_bytes()); // leader_id.term
        vote.extend_from_slice(&2u64.to_le_bytes()); // leader_id.node_id
        vote.push(0); // committed: false
        let mut entry = vec![KIND_ENTRY];
        entry.extend_from_slice(&3u64.to_le_bytes()); // log_id.leader_id.term
        entry.extend_from_slice(&2u64.to_le_bytes()); // log_id.leader_id.node_id
        entry.extend_from_slice(&1u64.to_le_bytes()); // log_id.index
        entry.extend_from_slice(&1u32.to_le_bytes()); // EntryPayload::Normal
        entry.extend_from_slice(&1u32.to_le_bytes()); // Command::Watermark
        entry.extend_from_slice(&40u64.to_le_bytes()); // ts
        let mut buf = record::file_header(b"SNAPRFT1", seq).to_vec();
        record::frame_into(&mut buf, &vote);
        record::frame_into(&mut buf, &entry);
        buf
    }

    /// Every file of `dir` with its bytes.
    fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                (e.file_name().into_string().unwrap(), bytes)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_directory_of_format_version_2_is_refused_by_name_and_left_unchanged() {
        let d = Dir::new("v2");
        let first = d.0.join(segment_name(1));
        // Version 2's header; its records are never read.
        let mut v2 = record::file_header(b"SNAPRFT2", 1).to_vec();
        v2.extend_from_slice(&v1_segment(1)[FILE_HEADER..]);
        std::fs::write(&first, &v2).unwrap();
        let before = contents(&d.0);
        match super::super::open(&d.0, super::super::LogOptions::default()) {
            Err(Error::UnsupportedFormat {
                file,
                version,
                supported,
            }) => assert_eq!((file, version, supported), (first, 2, 3)),
            Err(e) => panic!("expected UnsupportedFormat, got {e}"),
            Ok(_) => panic!("a version-2 raft log opened"),
        }
        let mut after = contents(&d.0);
        after.retain(|(n, _)| n != "LOCK");
        assert_eq!(after, before);
    }

    #[test]
    fn a_directory_of_format_version_1_is_refused_by_name_and_left_unchanged() {
        for torn_last in [false, true] {
            let d = Dir::new(&format!("v1-{torn_last}"));
            let first = d.0.join(segment_name(1));
            std::fs::write(&first, v1_segment(1)).unwrap();
            let mut last = v1_segment(2);
            if torn_last {
                // A torn tail in the last segment: this format would cut it.
                last.truncate(last.len() - 3);
            }
            std::fs::write(d.0.join(segment_name(2)), last).unwrap();
            let before = contents(&d.0);
            match super::super::open(&d.0, super::super::LogOptions::default()) {
                Err(Error::UnsupportedFormat {
                    file,
                    version,
                    supported,
                }) => {
                    assert_eq!(
                        (file, version, supported),
                        (first.clone(), 1, super::super::format::FORMAT_VERSION)
                    );
                }
                Err(e) => panic!("expected UnsupportedFormat, got {e}"),
                Ok(_) => panic!("a version-1 raft log opened"),
            }
            let mut after = contents(&d.0);
            // The directory lock is made by the attempt; nothing else is.
            after.retain(|(n, _)| n != "LOCK");
            assert_eq!(after, before, "torn last segment: {torn_last}");
        }
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
