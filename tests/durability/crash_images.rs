//! Crash images of every instant: `MemFs::stop_at` freezes the files at
//! each mutating operation of an open, a checkpoint or a log that rolls
//! over, and every image a power cut may leave then (`MemFs::power_cut`:
//! torn tails, pages written back in any order, directory entries that
//! persist one by one) must open, holding every acknowledged commit.

use snapshot_engine::durability::{Fs, MemFs, Stop, WriteBack};
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, Error, TimestampUpdate,
    TxnOptions,
};
use std::path::Path;
use std::time::Duration;

use super::{opts, DIR};

/// Power-cut images taken of each frozen instant.
const SEEDS: u64 = 24;

fn options(fs: &MemFs, durability: Durability) -> DurabilityOptions {
    DurabilityOptions {
        segment_bytes: 4096,
        ..opts(fs, durability)
    }
}

fn open_with(o: DurabilityOptions) -> snapshot_engine::Result<Engine> {
    Engine::open(DIR, EngineConfig::default(), o)
}

fn open(fs: &MemFs) -> snapshot_engine::Result<Engine> {
    open_with(options(fs, Durability::Sync))
}

fn open_rolling_back(fs: &MemFs) -> snapshot_engine::Result<Engine> {
    open_with(DurabilityOptions {
        rollback_to_stable: true,
        ..options(fs, Durability::Sync)
    })
}

/// One commit putting `key` (a value long enough to fill segments) at `ts`
/// (0: untimestamped).
fn put(e: &Engine, key: &str, ts: u64) {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(key, format!("{key}-{:-<60}", ts)).unwrap();
    let at = if ts == 0 {
        CommitOptions::default()
    } else {
        CommitOptions::at(ts)
    };
    t.commit(at).unwrap();
}

fn has(e: &Engine, key: &str) -> bool {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.get(key).unwrap().is_some()
}

/// The images of the files as they are now: a killed process's, the synced
/// one, and `SEEDS` power cuts with pages written back in any order.
fn images(fs: &MemFs) -> Vec<(String, MemFs)> {
    let mut v = vec![
        ("kill".to_string(), fs.fork()),
        ("synced".into(), fs.crash()),
    ];
    for seed in 0..SEEDS {
        v.push((
            format!("power cut {seed}"),
            fs.power_cut(seed, WriteBack::AnyPages),
        ));
    }
    v
}

/// A closed directory whose checkpoint stands at stable 30: covered commits
/// (timestamped at or below 30, or untimestamped) and uncovered ones (above
/// 30, some carried by the checkpoint, most in segments after it).
/// Returns (files, covered keys, uncovered keys).
fn rollback_directory() -> (MemFs, Vec<String>, Vec<String>) {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    let (mut covered, mut uncovered) = (Vec::new(), Vec::new());
    let mut commit = |key: String, ts: u64| {
        put(&e, &key, ts);
        if ts == 0 || ts <= 30 {
            covered.push(key);
        } else {
            uncovered.push(key);
        }
    };
    for i in 0..20 {
        commit(format!("a{i:02}"), 10 + i);
        commit(format!("u{i:02}"), 0);
    }
    for i in 0..10 {
        commit(format!("b{i:02}"), 31 + i);
    }
    e.set_timestamps(TimestampUpdate::stable(30)).unwrap();
    e.checkpoint().unwrap();
    for i in 0..30 {
        commit(format!("c{i:02}"), 41 + i);
        commit(format!("v{i:02}"), 0);
    }
    drop(e);
    (fs, covered, uncovered)
}

/// How many of `uncovered` an engine holds, checking that it holds every
/// one of `covered` and all or none of `uncovered` (a rollback is one
/// checkpoint: in force or not).
fn check_rollback_image(e: &Engine, covered: &[String], uncovered: &[String], what: &str) -> usize {
    for k in covered {
        assert!(has(e, k), "{what}: covered commit {k} lost");
    }
    let n = uncovered.iter().filter(|k| has(e, k)).count();
    assert!(
        n == 0 || n == uncovered.len(),
        "{what}: {n} of {} uncovered commits",
        uncovered.len()
    );
    n
}

/// A crash at every mutating file operation of an open with rollback to
/// stable: every image opens, plainly (with every covered commit, and the
/// uncovered ones all there or all rolled back) and with rollback (every
/// uncovered one gone, for good).
#[test]
fn an_open_with_rollback_to_stable_can_crash_at_every_file_operation() {
    let (base, covered, uncovered) = rollback_directory();
    let ops = {
        let f = base.fork();
        let e = open_rolling_back(&f).unwrap();
        assert_eq!(
            e.recovery_report().unwrap().rolled_back,
            uncovered.len() as u64
        );
        let n = f.mutations();
        drop(e);
        n
    };
    assert!(ops > 5, "{ops} mutating operations in an open");
    for k in 1..=ops {
        let f = base.fork();
        f.stop_at(k, Stop::Freeze);
        assert!(open_rolling_back(&f).is_err(), "operation {k} of {ops}");
        for (name, image) in images(&f) {
            let what = format!("crash at operation {k} of {ops}, {name}");
            let plain = image.fork();
            let e = open(&plain).unwrap_or_else(|err| panic!("{what}: plain open: {err}"));
            let present = check_rollback_image(&e, &covered, &uncovered, &what);
            drop(e);
            let e = open_rolling_back(&image)
                .unwrap_or_else(|err| panic!("{what}: open with rollback: {err}"));
            assert_eq!(check_rollback_image(&e, &covered, &uncovered, &what), 0);
            assert_eq!(
                e.recovery_report().unwrap().rolled_back,
                present as u64,
                "{what}"
            );
            drop(e);
            let e = open(&image).unwrap_or_else(|err| panic!("{what}: reopen: {err}"));
            assert_eq!(check_rollback_image(&e, &covered, &uncovered, &what), 0);
        }
    }
}

/// With nothing to roll back, an open with rollback to stable is a plain
/// open: it writes no checkpoint and removes no file.
#[test]
fn an_open_with_nothing_to_roll_back_rewrites_nothing() {
    let (fs, covered, uncovered) = rollback_directory();
    drop(open_rolling_back(&fs).unwrap());
    let dir = Path::new(DIR);
    let before = fs.list(dir).unwrap();
    let ckpts = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|n| n.starts_with("ckpt-"))
            .cloned()
            .collect()
    };
    let e = open_rolling_back(&fs).unwrap();
    assert_eq!(e.recovery_report().unwrap().rolled_back, 0);
    check_rollback_image(&e, &covered, &uncovered, "second rollback");
    let after = fs.list(dir).unwrap();
    assert_eq!(ckpts(&after), ckpts(&before));
    for n in &before {
        assert!(
            after.contains(n),
            "{n} removed by an open with nothing to roll back"
        );
    }
}

/// `n` commits putting `k000`, `k001`, ... on `e`.
fn put_keys(e: &Engine, from: usize, to: usize) {
    for i in from..to {
        put(e, &format!("k{i:03}"), 0);
    }
}

/// How many of the `k` keys an engine holds, checking they are a prefix.
fn prefix(e: &Engine, of: usize, what: &str) -> usize {
    let present: Vec<bool> = (0..of).map(|i| has(e, &format!("k{i:03}"))).collect();
    let n = present.iter().take_while(|&&p| p).count();
    assert!(
        present[n..].iter().all(|&p| !p),
        "{what}: not a prefix: {present:?}"
    );
    n
}

/// A power cut under `None` or `Periodic` may write back any part of the
/// unsynced tail, pages in any order: every image opens without
/// `truncate_corrupt`, holding a prefix of the commits that includes every
/// synced one, and damage it cut off is reported. (Segments roll over
/// meanwhile: a segment not synced before the next one starts would leave
/// a torn segment inside the log.)
#[test]
fn power_cuts_in_none_and_periodic_keep_a_prefix_and_open() {
    for mode in [
        Durability::None,
        Durability::Periodic(Duration::from_secs(3600)),
    ] {
        let fs = MemFs::new();
        let e = open_with(options(&fs, mode)).unwrap();
        put_keys(&e, 0, 150);
        e.checkpoint().unwrap();
        put_keys(&e, 150, 300);
        let synced = prefix(&open(&fs.crash()).unwrap(), 300, "synced image");
        assert!(synced >= 150, "{mode:?}: {synced} synced");
        let mut reported = 0;
        for wb in [WriteBack::TornTail, WriteBack::AnyPages] {
            for seed in 0..64 {
                let what = format!("{mode:?}, {wb:?} {seed}");
                let img = fs.power_cut(seed, wb);
                let r = open(&img).unwrap_or_else(|err| panic!("{what}: {err}"));
                let n = prefix(&r, 300, &what);
                assert!(n >= synced, "{what}: {n} commits, {synced} synced");
                let rep = r.recovery_report().unwrap();
                assert_eq!(rep.truncated, None, "{what}");
                reported += usize::from(rep.torn_tail.is_some());
            }
        }
        assert!(reported > 0, "{mode:?}: no image had damage to report");
        drop(e);
    }
}

/// One segment: commits on `fs` under `None`, so nothing past the header
/// is synced; returns the segment's path and bytes.
fn unsynced_segment(fs: &MemFs, commits: usize) -> (std::path::PathBuf, Vec<u8>) {
    let e = open_with(DurabilityOptions {
        segment_bytes: 1 << 20,
        ..options(fs, Durability::None)
    })
    .unwrap();
    put_keys(&e, 0, commits);
    let dir = Path::new(DIR);
    let seg = fs
        .list(dir)
        .unwrap()
        .into_iter()
        .find(|n| n.starts_with("log-"))
        .map(|n| dir.join(n))
        .unwrap();
    let bytes = fs.contents(&seg).unwrap();
    std::mem::forget(e);
    (seg, bytes)
}

/// The power cut of the issue: the last segment's second 512-byte page
/// lost (zeros) and its third written back. It opens, cut before the
/// damaged record and reporting it; the same zeroed page in a segment that
/// is not the last, or non-zero garbage in the last, is damage no power
/// cut makes: `Corrupt`.
#[test]
fn a_lost_page_of_the_last_segment_is_a_reported_torn_tail() {
    let fs = MemFs::new();
    let (seg, bytes) = unsynced_segment(&fs, 40);
    assert!(bytes.len() > 4 * MemFs::PAGE, "{} bytes", bytes.len());
    let page = MemFs::PAGE..2 * MemFs::PAGE;
    let whole = open(&fs.fork()).map(|e| prefix(&e, 40, "whole")).unwrap();
    assert_eq!(whole, 40);
    let mut lost = bytes.clone();
    lost[page.clone()].fill(0);
    let img = MemFs::new();
    img.put_file(&seg, &lost);
    let e = open(&img).unwrap_or_else(|err| panic!("a lost page: {err}"));
    let n = prefix(&e, 40, "lost page");
    let torn = e
        .recovery_report()
        .unwrap()
        .torn_tail
        .clone()
        .expect("reported");
    assert_eq!(torn.file, seg);
    assert!(
        torn.offset <= page.start as u64 && torn.offset > 16,
        "{torn:?}"
    );
    assert_eq!(torn.bytes_dropped, bytes.len() as u64 - torn.offset);
    assert!(n > 0 && n < 40, "{n}");
    drop(e);
    // Garbage instead of zeros: corruption, not a power cut.
    let mut garbage = bytes.clone();
    garbage[page.clone()].fill(0x5A);
    let img = MemFs::new();
    img.put_file(&seg, &garbage);
    match open(&img) {
        Err(Error::Corrupt { file, .. }) => assert_eq!(file, seg),
        other => panic!("garbage in the last segment: {:?}", other.map(|_| "opened")),
    }
    // The zeroed page in a segment with a later one after it.
    let img = MemFs::new();
    img.put_file(&seg, &lost);
    let dir = Path::new(DIR);
    let next = dir.join(
        seg.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .replace("0001.seg", "0002.seg"),
    );
    let mut header = b"SNAPLOG3".to_vec();
    header.extend_from_slice(&2u64.to_le_bytes());
    img.put_file(&next, &header);
    match open(&img) {
        Err(Error::Corrupt { file, .. }) => assert_eq!(file, seg),
        other => panic!(
            "a lost page in a closed segment: {:?}",
            other.map(|_| "opened")
        ),
    }
}

/// A killed process's log, recovered, is synced before the log grows: a
/// power cut after more commits keeps every commit the reopen replayed,
/// and the segment it replayed, no longer the last, is whole.
#[test]
fn a_log_recovered_from_a_killed_process_is_synced_before_it_grows() {
    let fs = MemFs::new();
    let e = open_with(options(&fs, Durability::None)).unwrap();
    put_keys(&e, 0, 100);
    let killed = fs.fork();
    drop(e);
    let e = open_with(options(&killed, Durability::None)).unwrap();
    assert_eq!(prefix(&e, 100, "reopened"), 100);
    put_keys(&e, 100, 200);
    for seed in 0..64 {
        let what = format!("power cut {seed}");
        let r = open(&killed.power_cut(seed, WriteBack::AnyPages))
            .unwrap_or_else(|err| panic!("{what}: {err}"));
        assert!(prefix(&r, 200, &what) >= 100, "{what}");
    }
    drop(e);
}

/// An open that truncates the log at a corrupt record can crash at every
/// file operation: each image opens (with `truncate_corrupt`) with exactly
/// the commits before that record. (Cutting the damaged segment before
/// the later segments are durably gone would leave a gap in the lsns.)
#[test]
fn an_open_truncating_at_corruption_can_crash_at_every_file_operation() {
    let base = MemFs::new();
    let e = open(&base).unwrap();
    put_keys(&e, 0, 200);
    drop(e);
    let dir = Path::new(DIR);
    let mut segs: Vec<String> = base
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("log-"))
        .collect();
    segs.sort();
    assert!(segs.len() >= 4, "{segs:?}");
    let damaged = dir.join(&segs[1]);
    let mut b = base.contents(&damaged).unwrap();
    let at = b.len() / 2;
    b[at] ^= 0x40;
    base.put_file(&damaged, &b);
    let truncating = |fs: &MemFs| {
        open_with(DurabilityOptions {
            truncate_corrupt: true,
            ..options(fs, Durability::Sync)
        })
    };
    let (ops, kept) = {
        let f = base.fork();
        let e = truncating(&f).unwrap();
        let t = e.recovery_report().unwrap().truncated.clone().unwrap();
        assert_eq!(
            (t.file, t.segments_removed),
            (damaged.clone(), segs.len() as u64 - 2)
        );
        let kept = prefix(&e, 200, "truncated");
        (f.mutations(), kept)
    };
    assert!(kept > 0 && kept < 200, "{kept}");
    for k in 1..=ops {
        let f = base.fork();
        f.stop_at(k, Stop::Freeze);
        assert!(truncating(&f).is_err(), "operation {k} of {ops}");
        for (name, image) in images(&f) {
            let what = format!("crash at operation {k} of {ops}, {name}");
            let e = truncating(&image).unwrap_or_else(|err| panic!("{what}: {err}"));
            assert_eq!(prefix(&e, 200, &what), kept, "{what}");
        }
    }
}

/// A commit putting `key`, its error returned.
fn try_put(e: &Engine, key: &str) -> snapshot_engine::Result<()> {
    let mut s = e.session()?;
    let mut t = s.begin(&TxnOptions::default())?;
    t.put(key, "v")?;
    t.commit(CommitOptions::default())?;
    Ok(())
}

/// A closed directory with a checkpoint and 160 `Sync` commits over
/// several segments, 100 of them after the checkpoint.
fn checkpointed_directory() -> MemFs {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    put_keys(&e, 0, 60);
    e.checkpoint().unwrap();
    put_keys(&e, 60, 160);
    drop(e);
    fs
}

/// Opens `fs` and returns the engine with the count of mutating operations
/// so far.
fn opened(fs: &MemFs) -> (Engine, u64) {
    let e = open(fs).unwrap();
    let m = fs.mutations();
    (e, m)
}

/// A checkpoint can crash at every file operation: each image opens with
/// every acknowledged commit. (Without the directory sync after the
/// checkpoint's rename, the removal of the segments it covers can persist
/// while the rename does not.)
#[test]
fn a_checkpoint_can_crash_at_every_file_operation() {
    let base = checkpointed_directory();
    let ops = {
        let f = base.fork();
        let (e, m) = opened(&f);
        let r = e.checkpoint().unwrap();
        assert!(r.segments_removed > 1, "{r:?}");
        f.mutations() - m
    };
    for k in 1..=ops {
        let f = base.fork();
        let (e, m) = opened(&f);
        f.stop_at(m + k, Stop::Freeze);
        // Failed or not (a failure after the checkpoint is in force stops
        // the log instead), every image holds every commit.
        let _ = e.checkpoint();
        for (name, image) in images(&f) {
            let what = format!("crash at operation {k} of {ops} of a checkpoint, {name}");
            let r = open(&image).unwrap_or_else(|err| panic!("{what}: {err}"));
            assert_eq!(prefix(&r, 160, &what), 160, "{what}");
        }
        drop(e);
    }
}

/// The last operation of a checkpoint, the directory sync after the
/// removal of what it covers, fails: the checkpoint is in force (its
/// rename was synced), but the directory's state is unknown, so the log
/// stops as after any failed sync; a reopen settles it.
#[test]
fn a_failed_directory_sync_after_a_checkpoint_stops_the_log() {
    let base = checkpointed_directory();
    let ops = {
        let f = base.fork();
        let (e, m) = opened(&f);
        e.checkpoint().unwrap();
        f.mutations() - m
    };
    let f = base.fork();
    let (e, m) = opened(&f);
    f.stop_at(m + ops, Stop::Fail);
    let r = e.checkpoint().unwrap();
    match try_put(&e, "after") {
        Err(Error::Io { op, path, .. }) => {
            assert_eq!((op, path.as_path()), ("sync", Path::new(DIR)))
        }
        other => panic!("a commit after a failed directory sync: {other:?}"),
    }
    drop(e);
    let e = open(&f).unwrap();
    assert_eq!(e.recovery_report().unwrap().checkpoint, Some(r.path));
    assert_eq!(prefix(&e, 160, "reopened"), 160);
    assert!(!has(&e, "after"));
    try_put(&e, "after").unwrap();
}
