//! Damage no crash makes is reported, never opened as a shorter log: a
//! missing newest segment, a segment cut short (at a frame boundary too)
//! when a later file shows more existed, a missing checkpoint, a torn or
//! corrupt segment header or roll-over record, a segment of a format too
//! old or too new (one from before tables opens). What stays undetectable is pinned too: the newest segment cut
//! at a frame boundary looks like a crash before those records were
//! written.

use super::{frame_boundaries, get, opts, segments, DIR};
use snapshot_engine::durability::{Fs, MemFs};
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, Error, TxnOptions,
};
use std::path::{Path, PathBuf};

fn options(fs: &MemFs, truncate_corrupt: bool) -> DurabilityOptions {
    DurabilityOptions {
        segment_bytes: 4096,
        truncate_corrupt,
        ..opts(fs, Durability::Sync)
    }
}

fn open(fs: &MemFs) -> snapshot_engine::Result<Engine> {
    Engine::open(DIR, EngineConfig::default(), options(fs, false))
}

fn key(i: usize) -> String {
    format!("k{i:03}")
}

/// Commits keys `from..to` (200-byte values) on a fresh open of `fs`.
fn commit_range(fs: &MemFs, from: usize, to: usize) {
    let e = open(fs).unwrap();
    let mut s = e.session().unwrap();
    for i in from..to {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(key(i), vec![i as u8; 200]).unwrap();
        t.commit(CommitOptions::default()).unwrap();
    }
}

/// How many of keys `0..n` `e` holds, asserting they are a prefix.
fn prefix(e: &Engine, n: usize) -> usize {
    let present: Vec<bool> = (0..n).map(|i| get(e, &key(i)).is_some()).collect();
    let k = present.iter().take_while(|&&p| p).count();
    assert!(
        present[k..].iter().all(|&p| !p),
        "not a prefix: {present:?}"
    );
    k
}

/// Where the last commit record of a segment starts.
fn last_commit(segment: &[u8]) -> usize {
    let cuts = frame_boundaries(segment);
    cuts.into_iter()
        .rfind(|&c| c < segment.len() && segment[c + 12] == 1)
        .expect("the segment holds a commit")
}

fn copy(fs: &MemFs) -> MemFs {
    let c = MemFs::new();
    for n in fs.list(Path::new(DIR)).unwrap() {
        let p = Path::new(DIR).join(n);
        c.put_file(&p, &fs.contents(&p).unwrap());
    }
    c
}

fn remove(fs: &MemFs, p: &Path) {
    fs.remove(p).unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
}

fn expect_corrupt(r: snapshot_engine::Result<Engine>, what: &str) -> (PathBuf, &'static str) {
    match r {
        Err(Error::Corrupt { file, reason, .. }) => (file, reason),
        Err(other) => panic!("{what}: {other}"),
        Ok(e) => panic!(
            "{what}: opened with {} of the commits, nothing reported",
            prefix(&e, 200)
        ),
    }
}

/// A log over several segments, the newest started by an open (commits
/// 0..40), then a roll-over (40..60), then a reopen with nothing written:
/// so the newest segments are one holding records, then an empty one.
fn several_segments() -> MemFs {
    let fs = MemFs::new();
    commit_range(&fs, 0, 30);
    commit_range(&fs, 30, 60);
    drop(open(&fs).unwrap());
    assert!(segments(&fs).len() >= 5, "{:?}", segments(&fs));
    fs
}

#[test]
fn a_deleted_newest_segment_is_reported() {
    let base = several_segments();
    let segs = segments(&base);
    // The newest one, then each run of newest ones.
    for k in 1..segs.len() {
        let fs = copy(&base);
        for p in &segs[segs.len() - k..] {
            remove(&fs, p);
        }
        let (file, reason) = expect_corrupt(open(&fs), &format!("{k} newest removed"));
        assert_eq!(file, segs[segs.len() - k], "{k} newest removed: {reason}");
        assert_eq!(reason, "missing log segment");
    }
    // The newest one holding records, created at an open: the segment
    // before it names it too.
    let fs = MemFs::new();
    commit_range(&fs, 0, 3);
    commit_range(&fs, 3, 6);
    let segs = segments(&fs);
    assert_eq!(segs.len(), 2);
    remove(&fs, &segs[1]);
    let (file, _) = expect_corrupt(open(&fs), "segment of the second open removed");
    assert_eq!(file, segs[1]);
}

/// Any segment but the newest, cut at any frame boundary, never opens with
/// a commit missing: either it is reported, or only records that are no
/// commits went (its roll-over record, a synced-through mark) and the
/// segment after it holds nothing (then nothing is lost).
#[test]
fn a_segment_cut_at_a_frame_boundary_is_reported_unless_it_is_the_newest() {
    let base = several_segments();
    let segs = segments(&base);
    let mut reported = 0;
    for (k, seg) in segs.iter().enumerate().take(segs.len() - 1) {
        let bytes = base.contents(seg).unwrap();
        let cuts = frame_boundaries(&bytes);
        for &cut in &cuts[..cuts.len() - 1] {
            let fs = copy(&base);
            fs.put_file(seg, &bytes[..cut]);
            match open(&fs) {
                Err(Error::Corrupt { .. }) => reported += 1,
                Err(other) => panic!("segment {k} cut at {cut}: {other}"),
                Ok(e) => {
                    assert_eq!(
                        prefix(&e, 60),
                        60,
                        "segment {k} cut at {cut}: a commit lost"
                    );
                }
            }
        }
    }
    assert!(reported > 10, "{reported}");
    // The newest segment, holding records: a cut at a frame boundary is
    // what a crash before those records were written leaves, and opens as
    // such (no file after it proves more existed).
    let fs = MemFs::new();
    commit_range(&fs, 0, 30);
    commit_range(&fs, 30, 60);
    let newest = segments(&fs).pop().unwrap();
    let bytes = fs.contents(&newest).unwrap();
    fs.put_file(&newest, &bytes[..last_commit(&bytes)]);
    let e = open(&fs).unwrap();
    assert_eq!(prefix(&e, 60), 59);
    assert_eq!(e.recovery_report().unwrap().torn_tail, None);
    // With an empty segment after it (an open that wrote nothing), the
    // same cut is reported: that segment's header says where it ended.
    let base = several_segments();
    let segs = segments(&base);
    let newest = &segs[segs.len() - 2];
    let bytes = base.contents(newest).unwrap();
    base.put_file(newest, &bytes[..last_commit(&bytes)]);
    expect_corrupt(open(&base), "the last segment holding records, cut");
}

/// The checkpoint deleted: with nothing logged after it (the database
/// would open empty), and with records after it.
#[test]
fn a_deleted_checkpoint_is_reported() {
    for after in [0, 5] {
        let fs = MemFs::new();
        {
            let e = open(&fs).unwrap();
            let mut s = e.session().unwrap();
            for i in 0..10 + after {
                if i == 10 {
                    e.checkpoint().unwrap();
                }
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(key(i), "v").unwrap();
                t.commit(CommitOptions::default()).unwrap();
            }
            if after == 0 {
                e.checkpoint().unwrap();
            }
        }
        let ckpt: Vec<String> = fs
            .list(Path::new(DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".ckpt"))
            .collect();
        assert_eq!(ckpt.len(), 1);
        remove(&fs, &Path::new(DIR).join(&ckpt[0]));
        let (file, reason) = expect_corrupt(open(&fs), &format!("{after} after"));
        assert_eq!(file, segments(&fs)[0], "{reason}");
    }
}

/// Every bit of every segment's header and roll-over record flipped: a
/// typed error (or, asked to, a reported truncation to a prefix), never a
/// panic and never a silent loss.
#[test]
fn a_damaged_segment_header_or_roll_over_record_is_corrupt() {
    let base = MemFs::new();
    commit_range(&base, 0, 30);
    commit_range(&base, 30, 40);
    let segs = segments(&base);
    assert!(segs.len() >= 3);
    for seg in &segs {
        let bytes = base.contents(seg).unwrap();
        let cuts = frame_boundaries(&bytes);
        let header = 0..cuts[0];
        let roll = cuts[cuts.len() - 2]..bytes.len();
        let newest = seg == segs.last().unwrap();
        for at in header.chain(if newest { 0..0 } else { roll }) {
            for bit in [0, 3, 7] {
                let mut b = bytes.clone();
                b[at] ^= 1 << bit;
                let fs = copy(&base);
                fs.put_file(seg, &b);
                let what = format!("{} byte {at} bit {bit}", seg.display());
                if b[..8] == *b"SNAPLOG2" {
                    // Version 3's magic turned into version 2's: the same
                    // records read back (version 2 is version 3 without
                    // tables; a table record in it is corrupt).
                    assert_eq!(prefix(&open(&fs).unwrap(), 40), 40, "{what}");
                    continue;
                }
                let (file, _) = expect_corrupt(open(&fs), &what);
                assert_eq!(&file, seg, "{what}");
                let e = Engine::open(DIR, EngineConfig::default(), options(&fs, true))
                    .unwrap_or_else(|err| panic!("{what}, truncating: {err}"));
                let report = e.recovery_report().unwrap().clone();
                assert!(report.truncated.is_some(), "{what}: {report:?}");
                let n = prefix(&e, 40);
                drop(e);
                // What the truncation left opens cleanly, as it said.
                let again = open(&fs).unwrap_or_else(|err| panic!("{what}, again: {err}"));
                assert_eq!(prefix(&again, 40), n, "{what}");
                assert_eq!(again.recovery_report().unwrap().truncated, None);
            }
        }
    }
}

/// A directory of segment format version 1 is refused by name and left as
/// it was.
#[test]
fn a_log_of_an_older_format_is_refused_with_its_version() {
    let fs = MemFs::new();
    let seg = Path::new(DIR).join("log-0000000000000001.seg");
    let mut v1 = b"SNAPLOG1".to_vec();
    v1.extend_from_slice(&1u64.to_le_bytes());
    fs.put_file(&seg, &v1);
    match open(&fs) {
        Err(Error::UnsupportedFormat {
            file,
            version,
            supported,
        }) => {
            assert_eq!((file, version, supported), (seg.clone(), 1, 3));
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert_eq!(fs.contents(&seg).unwrap(), v1);
    let names = fs.list(Path::new(DIR)).unwrap();
    assert!(
        names.iter().all(|n| n == "LOCK" || n.ends_with(".seg")),
        "{names:?}"
    );
    assert_eq!(segments(&fs), vec![seg]);
}

/// A log of segment format version 2 (before tables: its records are
/// those of version 3 in the default table) opens with every key; the log
/// goes on in a version-3 segment, and the directory, of both versions
/// now, opens again. A version above this build's is refused by name.
#[test]
fn a_log_from_before_tables_opens_and_a_newer_one_is_refused() {
    let fs = MemFs::new();
    commit_range(&fs, 0, 40);
    let old = segments(&fs);
    assert!(old.len() > 1, "{old:?}");
    for seg in &old {
        let mut b = fs.contents(seg).unwrap();
        assert_eq!(&b[..8], b"SNAPLOG3");
        b[7] = b'2';
        fs.put_file(seg, &b);
    }
    let e = open(&fs).unwrap();
    assert_eq!(prefix(&e, 60), 40);
    drop(e);
    commit_range(&fs, 40, 50);
    let all = segments(&fs);
    let newest = fs.contents(all.last().unwrap()).unwrap();
    assert_eq!(&newest[..8], b"SNAPLOG3");
    assert_eq!(&fs.contents(&old[0]).unwrap()[..8], b"SNAPLOG2");
    let e = open(&fs).unwrap();
    assert_eq!(prefix(&e, 60), 50);
    drop(e);
    let seg = all.last().unwrap();
    let mut b = fs.contents(seg).unwrap();
    b[7] = b'4';
    fs.put_file(seg, &b);
    match open(&fs) {
        Err(Error::UnsupportedFormat {
            file,
            version,
            supported,
        }) => assert_eq!((&file, version, supported), (seg, 4, 3)),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert_eq!(fs.contents(seg).unwrap(), b);
}
