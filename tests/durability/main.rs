//! The durable engine on the in-memory file layer: a log cut at every byte
//! recovers to its last whole record, any flipped bit is reported as
//! corruption, a failed write or sync fails its commit and stops the log,
//! group commit shares syncs without acknowledging early, checkpoints taken
//! under concurrent writers recover to the writers' state. Beside them, by
//! concern: acknowledgements, online backups, checkpoint failures, close, crash images,
//! damaged files, fault outcomes, named tables and `rollback_to_stable`. A process killed
//! mid-transfer is `tests/durability_kill.rs`, a binary of its own.

use snapshot_engine::durability::{FaultOp, Fs, MemFs};
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, Error, Timestamp,
    TimestampKind, TimestampUpdate, TxnOptions,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const DIR: &str = "/db";

fn opts(fs: &MemFs, durability: Durability) -> DurabilityOptions {
    DurabilityOptions {
        fs: Arc::new(fs.clone()),
        durability,
        ..DurabilityOptions::default()
    }
}

fn open(fs: &MemFs) -> snapshot_engine::Result<Engine> {
    Engine::open(DIR, EngineConfig::default(), opts(fs, Durability::Sync))
}

fn get(e: &Engine, key: &str) -> Option<Vec<u8>> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.get(key).unwrap()
}

fn segments(fs: &MemFs) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("log-"))
        .map(|n| Path::new(DIR).join(n))
        .collect();
    v.sort();
    v
}

/// A closed log of four commits: commit `i` puts `k{i}` and sets `n` to
/// `i`, with values of different sizes; returns (segment path, bytes).
fn four_commits() -> (PathBuf, Vec<u8>) {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    let mut s = e.session().unwrap();
    for i in 0..4u8 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(format!("k{i}"), vec![i; 1 + 7 * i as usize]).unwrap();
        t.put("n", [i]).unwrap();
        if i == 2 {
            t.delete("k0").unwrap();
        }
        t.commit(CommitOptions::default()).unwrap();
    }
    drop(s);
    drop(e);
    let seg = segments(&fs).remove(0);
    let bytes = fs.contents(&seg).unwrap();
    (seg, bytes)
}

/// The length of a segment's header: the 16-byte file header and the
/// frame of its `segment` record (12 bytes and the length it declares).
fn segment_header_len(segment: &[u8]) -> usize {
    16 + 12 + u32::from_le_bytes(segment[16..20].try_into().unwrap()) as usize
}

/// The offsets in a segment where its header and each frame after it end.
fn frame_boundaries(segment: &[u8]) -> Vec<usize> {
    let mut at = segment_header_len(segment);
    let mut out = vec![at];
    while at < segment.len() {
        at += 12 + u32::from_le_bytes(segment[at..at + 4].try_into().unwrap()) as usize;
        out.push(at);
    }
    assert_eq!(at, segment.len());
    out
}

/// How many commit records (kind 1) the whole frames of a segment hold.
fn commit_frames(segment: &[u8]) -> usize {
    let ends = frame_boundaries(segment);
    ends.windows(2).filter(|w| segment[w[0] + 12] == 1).count()
}

/// How many of the four commits an engine holds, checking it holds exactly
/// a prefix of them.
fn commits_present(e: &Engine) -> usize {
    let n = get(e, "n").map_or(0, |v| v[0] as usize + 1);
    for i in 0..4u8 {
        let want = (usize::from(i) < n).then(|| vec![i; 1 + 7 * i as usize]);
        let want = if i == 0 && n >= 3 { None } else { want };
        assert_eq!(get(e, &format!("k{i}")), want, "k{i} with {n} commits");
    }
    n
}

#[test]
fn a_log_cut_at_every_byte_recovers_to_its_last_whole_record() {
    let (seg, bytes) = four_commits();
    // The header's end and every frame's: commits and the marks of what
    // was synced before them.
    let boundaries = frame_boundaries(&bytes);
    let mut last = 0;
    let mut increments = 0;
    for cut in 0..=bytes.len() {
        let fs = MemFs::new();
        fs.put_file(&seg, &bytes[..cut]);
        let e = open(&fs).unwrap_or_else(|err| panic!("cut at {cut}: {err}"));
        let n = commits_present(&e);
        assert!(n >= last, "cut at {cut}: {n} commits after {last}");
        let report = e.recovery_report().unwrap().clone();
        increments += usize::from(n > last);
        if boundaries.contains(&cut) {
            // A cut at a record boundary (or right after the header) is
            // a clean log.
            assert_eq!(report.torn_tail, None, "cut at {cut}");
        } else {
            let torn = report
                .torn_tail
                .unwrap_or_else(|| panic!("cut at {cut}: no torn tail"));
            assert_eq!(torn.file, seg);
            assert!(
                torn.offset <= cut as u64
                    && torn.bytes_dropped == cut as u64 - torn.offset.min(cut as u64)
            );
        }
        last = n;
        drop(e);
        // What recovery cut off is gone from the file: a second open is clean.
        let again = open(&fs).unwrap();
        assert_eq!(commits_present(&again), n);
        assert_eq!(
            again.recovery_report().unwrap().torn_tail,
            None,
            "cut at {cut}, reopened"
        );
    }
    assert_eq!(last, 4);
    assert_eq!(increments, 4);
}

#[test]
fn a_flipped_bit_in_any_record_is_corrupt_never_replayed() {
    let (seg, bytes) = four_commits();
    let boundaries = frame_boundaries(&bytes);
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 1 << (at % 8);
        let fs = MemFs::new();
        fs.put_file(&seg, &b);
        match open(&fs) {
            Err(Error::Corrupt { file, offset, .. }) => {
                assert_eq!(file, seg);
                assert!(offset <= at as u64, "byte {at}: reported at {offset}");
            }
            Err(other) => panic!("byte {at}: {other}"),
            Ok(_) => panic!("byte {at}: a flipped bit was not reported"),
        }
        // Asked to, recovery truncates there instead, and says so.
        let e = Engine::open(
            DIR,
            EngineConfig::default(),
            DurabilityOptions {
                truncate_corrupt: true,
                ..opts(&fs, Durability::Sync)
            },
        )
        .unwrap();
        let n = commits_present(&e);
        let t = e
            .recovery_report()
            .unwrap()
            .truncated
            .clone()
            .expect("a truncation");
        assert!(t.offset <= at as u64);
        // Only the commits in frames wholly before the damaged one.
        let frame = boundaries.iter().rev().find(|&&b| b <= at).copied();
        let before = frame.map_or(0, |f| commit_frames(&bytes[..f]));
        assert!(n <= before, "byte {at}: the damaged record was replayed");
    }
}

#[test]
fn a_second_open_of_a_live_directory_is_refused() {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    assert!(matches!(open(&fs), Err(Error::DirectoryLocked { .. })));
    drop(e);
    open(&fs).unwrap();
    // The OS's files: an advisory file lock, refused within one process too.
    let dir = std::env::temp_dir().join(format!("snapshot-lock-{}", std::process::id()));
    let a = Engine::open(&dir, EngineConfig::default(), DurabilityOptions::default()).unwrap();
    let b = Engine::open(&dir, EngineConfig::default(), DurabilityOptions::default());
    assert!(matches!(b, Err(Error::DirectoryLocked { .. })));
    drop(a);
    drop(Engine::open(&dir, EngineConfig::default(), DurabilityOptions::default()).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn options_out_of_bounds_are_typed_errors() {
    let fs = MemFs::new();
    let bad = DurabilityOptions {
        segment_bytes: 100,
        ..opts(&fs, Durability::Sync)
    };
    assert!(matches!(
        Engine::open(DIR, EngineConfig::default(), bad),
        Err(Error::InvalidDurabilityOption {
            option: "segment_bytes",
            ..
        })
    ));
    let bad = opts(&fs, Durability::Periodic(std::time::Duration::ZERO));
    assert!(matches!(
        bad.validate(),
        Err(Error::InvalidDurabilityOption {
            option: "durability",
            ..
        })
    ));
}

fn put(e: &Engine, key: &str, value: &str) -> snapshot_engine::Result<()> {
    let mut s = e.session()?;
    let mut t = s.begin(&TxnOptions::default())?;
    t.put(key, value)?;
    t.commit(CommitOptions::default())?;
    Ok(())
}

#[test]
fn a_failed_write_or_sync_fails_its_commit_and_stops_the_log() {
    for op in [FaultOp::Append, FaultOp::Sync] {
        let fs = MemFs::new();
        let e = open(&fs).unwrap();
        put(&e, "a", "1").unwrap();
        fs.fail_after(op, 0);
        let err = put(&e, "b", "2").unwrap_err();
        let Error::Io { op: what, .. } = &err else {
            panic!("{op:?}: {err}")
        };
        assert_eq!(
            *what,
            if op == FaultOp::Append {
                "write"
            } else {
                "sync"
            }
        );
        // Nothing of it is visible; committed data stays readable.
        assert_eq!(get(&e, "b"), None);
        assert_eq!(get(&e, "a").as_deref(), Some(&b"1"[..]));
        // Every later commit gets the same error; the key is writable again
        // (the failed commit's version is gone), reads and read-only
        // commits go on.
        assert_eq!(put(&e, "c", "3").unwrap_err(), err);
        assert_eq!(put(&e, "b", "4").unwrap_err(), err);
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        assert_eq!(t.get("a").unwrap().as_deref(), Some(&b"1"[..]));
        t.commit(CommitOptions::default()).unwrap();
        drop(s);
        drop(e);
        // Reopened (as the files are, and as a crash leaves them): the
        // failed commit is not there, the one before it is.
        for fs in [fs.crash(), fs] {
            let e = open(&fs).unwrap();
            assert_eq!(get(&e, "b"), None, "{op:?}");
            assert_eq!(get(&e, "a").as_deref(), Some(&b"1"[..]), "{op:?}");
            put(&e, "c", "5").unwrap();
        }
    }
}

#[test]
fn sync_commits_share_syncs_and_each_is_synced_when_it_returns() {
    let fs = MemFs::new();
    fs.set_sync_latency(std::time::Duration::from_millis(2));
    let e = open(&fs).unwrap();
    let syncs_before = e.log_stats().unwrap().syncs;
    const THREADS: usize = 8;
    const EACH: usize = 20;
    std::thread::scope(|sc| {
        for th in 0..THREADS {
            let (e, fs) = (&e, &fs);
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                for i in 0..EACH {
                    let key = format!("thread{th}-commit{i:03}");
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(&key, "v").unwrap();
                    t.commit(CommitOptions::default()).unwrap();
                    // Acknowledged: a crash now keeps it.
                    let image = fs.crash();
                    let synced: Vec<u8> = segments(&image)
                        .iter()
                        .flat_map(|p| image.contents(p).unwrap())
                        .collect();
                    assert!(
                        synced.windows(key.len()).any(|w| w == key.as_bytes()),
                        "{key} acknowledged before it was synced"
                    );
                }
            });
        }
    });
    let syncs = e.log_stats().unwrap().syncs - syncs_before;
    assert!(
        syncs < (THREADS * EACH) as u64,
        "{syncs} syncs for {} concurrent commits: none shared",
        THREADS * EACH
    );
    let image = fs.crash();
    drop(e);
    let r = open(&image).unwrap();
    for th in 0..THREADS {
        for i in 0..EACH {
            assert!(get(&r, &format!("thread{th}-commit{i:03}")).is_some());
        }
    }
}

#[test]
fn none_and_periodic_lose_only_unsynced_commits_at_a_crash() {
    for mode in [
        Durability::None,
        Durability::Periodic(std::time::Duration::from_millis(1)),
    ] {
        let fs = MemFs::new();
        let e = Engine::open(DIR, EngineConfig::default(), opts(&fs, mode)).unwrap();
        for i in 0..50 {
            put(&e, &format!("k{i:02}"), "v").unwrap();
        }
        // A process crash (the files as the OS holds them) keeps every one.
        let e2 = {
            let copy = MemFs::new();
            for p in segments(&fs) {
                copy.put_file(&p, &fs.contents(&p).unwrap());
            }
            open(&copy).unwrap()
        };
        for i in 0..50 {
            assert!(get(&e2, &format!("k{i:02}")).is_some(), "{mode:?} k{i}");
        }
        // A power cut keeps a prefix: commit k is there only if all before it are.
        let cut = open(&fs.crash()).unwrap();
        let present: Vec<bool> = (0..50)
            .map(|i| get(&cut, &format!("k{i:02}")).is_some())
            .collect();
        assert!(
            present.windows(2).all(|w| w[0] || !w[1]),
            "{mode:?}: {present:?}"
        );
        if let Durability::Periodic(_) = mode {
            // The flusher syncs what is pending every interval, so a power
            // cut soon keeps the last record too. (Waiting for the sync
            // count to move instead could wait forever: once the flusher
            // has caught up, it has nothing more to sync.) The deadline only
            // turns a flusher that never syncs into a failure, not a hang.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while get(&open(&fs.crash()).unwrap(), "k49").is_none() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "Periodic(1 ms): k49 not synced within 30 s"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Writers on their own keys with increasing commit timestamps, a thread
/// moving stable, checkpoints taken meanwhile; then a crash. Recovery must
/// equal the writers' model at every read timestamp at or above the last
/// checkpoint's stable (where oldest starts).
#[test]
fn recovery_after_checkpoints_under_writers_equals_the_model() {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    let ts = AtomicU64::new(10);
    const WRITERS: usize = 3;
    const COMMITS: usize = 300;
    let done = std::sync::atomic::AtomicBool::new(false);
    // Per writer: (key, commit ts, value) in commit order.
    let model: Vec<Vec<(String, u64, Option<u32>)>> = std::thread::scope(|sc| {
        let stabler = sc.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let s = ts.load(Ordering::SeqCst).saturating_sub(5);
                let _ = e.set_timestamps(TimestampUpdate {
                    stable: Some(Timestamp::new(s)),
                    ..Default::default()
                });
                std::thread::yield_now();
            }
        });
        // At least one checkpoint, however the threads are scheduled.
        let checkpointer = sc.spawn(|| {
            let mut n = 0;
            loop {
                e.checkpoint().unwrap();
                n += 1;
                if done.load(Ordering::Relaxed) {
                    break n;
                }
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (e, ts) = (&e, &ts);
                sc.spawn(move || {
                    let mut s = e.session().unwrap();
                    let mut log = Vec::new();
                    for i in 0..COMMITS {
                        let key = format!("w{w}-{}", i % 17);
                        let value = (i % 5 != 4).then_some(i as u32);
                        loop {
                            let at = ts.fetch_add(1, Ordering::SeqCst);
                            let mut t = s.begin(&TxnOptions::default()).unwrap();
                            match value {
                                Some(v) => t.put(&key, v.to_le_bytes()).unwrap(),
                                None => t.delete(&key).unwrap(),
                            }
                            if i % 7 == 0 {
                                // Some untimestamped commits too.
                                t.commit(CommitOptions::default()).unwrap();
                                log.push((key.clone(), 0, value));
                                break;
                            }
                            // Stable may have passed `at`: take a later one.
                            if t.commit(CommitOptions::at(at)).is_ok() {
                                log.push((key.clone(), at, value));
                                break;
                            }
                        }
                    }
                    log
                })
            })
            .collect();
        let model = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        stabler.join().unwrap();
        assert!(checkpointer.join().unwrap() > 0);
        model
    });
    let image = fs.crash();
    drop(e);
    let r = open(&image).unwrap();
    let stable = r.query_timestamp(TimestampKind::Recovery);
    let report = r.recovery_report().unwrap();
    assert!(report.checkpoint.is_some());
    assert_eq!(r.query_timestamp(TimestampKind::Stable), stable);
    assert_eq!(r.query_timestamp(TimestampKind::Oldest), stable);
    let top = ts.load(Ordering::SeqCst);
    let lo = stable.map_or(1, Timestamp::get);
    let mut s = r.session().unwrap();
    for read in [lo, lo + 1, (lo + top) / 2, top + 1] {
        for log in &model {
            let mut keys: Vec<&String> = log.iter().map(|(k, ..)| k).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                // Newest in commit order visible at `read` (untimestamped
                // is visible at every timestamp).
                let want = log
                    .iter()
                    .rev()
                    .find(|(k, at, _)| k == key && *at <= read)
                    .and_then(|(_, _, v)| *v);
                let mut t = s
                    .begin(&TxnOptions {
                        read_timestamp: Some(Timestamp::new(read)),
                        ..Default::default()
                    })
                    .unwrap();
                let got = t
                    .get(key)
                    .unwrap()
                    .map(|b| u32::from_le_bytes(b[..].try_into().unwrap()));
                assert_eq!(got, want, "{key} at {read} (recovered stable {stable:?})");
            }
        }
    }
}

#[test]
fn a_prepared_commit_durable_above_stable_is_carried_not_checkpointed() {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("p", "prepared").unwrap();
    t.prepare(Timestamp::new(10)).unwrap();
    t.commit(CommitOptions {
        commit_ts: Some(Timestamp::new(12)),
        durable_ts: Some(Timestamp::new(30)),
    })
    .unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("q", "plain").unwrap();
    t.commit(CommitOptions::at(15)).unwrap();
    // A prepared transaction still open at the crash: gone after recovery.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("open", "x").unwrap();
    t.prepare(Timestamp::new(40)).unwrap();
    std::mem::forget(t);
    e.set_timestamps(TimestampUpdate {
        stable: Some(Timestamp::new(20)),
        ..Default::default()
    })
    .unwrap();
    let c = e.checkpoint().unwrap();
    assert_eq!(c.stable, Some(Timestamp::new(20)));
    assert_eq!((c.keys, c.carried), (1, 1));
    let image = fs.crash();
    drop(s);
    drop(e);
    let r = open(&image).unwrap();
    assert_eq!(
        r.query_timestamp(TimestampKind::Recovery),
        Some(Timestamp::new(20))
    );
    assert_eq!(get(&r, "p").as_deref(), Some(&b"prepared"[..]));
    assert_eq!(get(&r, "q").as_deref(), Some(&b"plain"[..]));
    assert_eq!(get(&r, "open"), None);
    drop(r);
    // Rolled back to stable 20: the prepared commit durable at 30 goes, for
    // good (a later plain open does not bring it back).
    let rolled = DurabilityOptions {
        rollback_to_stable: true,
        ..opts(&image, Durability::Sync)
    };
    let r = Engine::open(DIR, EngineConfig::default(), rolled).unwrap();
    assert_eq!(r.recovery_report().unwrap().rolled_back, 1);
    assert_eq!(get(&r, "p"), None);
    assert_eq!(get(&r, "q").as_deref(), Some(&b"plain"[..]));
    put(&r, "after", "x").unwrap();
    drop(r);
    let r = open(&image).unwrap();
    assert_eq!(r.recovery_report().unwrap().rolled_back, 0);
    assert_eq!(get(&r, "p"), None);
    assert_eq!(get(&r, "q").as_deref(), Some(&b"plain"[..]));
    assert_eq!(get(&r, "after").as_deref(), Some(&b"x"[..]));
}

#[test]
fn an_async_commit_is_visible_at_once_and_resolves_when_synced() {
    let fs = MemFs::new();
    fs.set_sync_latency(std::time::Duration::from_millis(1));
    let e = open(&fs).unwrap();
    let mut s = e.session().unwrap();
    let mut handles = Vec::new();
    for i in 0..20 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(format!("a{i}"), "v").unwrap();
        handles.push(t.commit_async(CommitOptions::default()).unwrap());
        assert!(get(&e, &format!("a{i}")).is_some());
    }
    // Half waited on by blocking, half as futures on a minimal executor.
    for (i, h) in handles.into_iter().enumerate() {
        if i % 2 == 0 {
            h.wait().unwrap();
        } else {
            block_on(h).unwrap();
        }
    }
    let image = fs.crash();
    let r = open(&image).unwrap();
    for i in 0..20 {
        assert!(get(&r, &format!("a{i}")).is_some());
    }
    // In memory: ready at once.
    let m = Engine::new(EngineConfig::default()).unwrap();
    let mut s = m.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("k", "v").unwrap();
    let h = t.commit_async(CommitOptions::default()).unwrap();
    assert!(h.is_durable());
    block_on(h).unwrap();
}

/// Polls `f` to completion on this thread, parking between polls.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn the_in_memory_engine_has_no_checkpoint_and_no_recovery_timestamp() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    assert!(matches!(e.checkpoint(), Err(Error::NotDurable)));
    assert_eq!(e.query_timestamp(TimestampKind::Recovery), None);
    assert!(e.recovery_report().is_none());
}

#[test]
fn checkpoints_remove_covered_segments_and_recovery_starts_from_them() {
    let fs = MemFs::new();
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        DurabilityOptions {
            segment_bytes: 4096,
            ..opts(&fs, Durability::Sync)
        },
    )
    .unwrap();
    for i in 0..400 {
        put(&e, &format!("k{:03}", i % 100), &format!("v{i}")).unwrap();
    }
    assert!(segments(&fs).len() > 3);
    let c = e.checkpoint().unwrap();
    assert_eq!(c.keys, 100);
    assert_eq!(c.records_folded, 400);
    assert_eq!(segments(&fs).len(), 1);
    for i in 400..450 {
        put(&e, &format!("k{:03}", i % 100), &format!("v{i}")).unwrap();
    }
    drop(e);
    let r = open(&fs).unwrap();
    let rep = r.recovery_report().unwrap();
    assert_eq!(rep.checkpoint_keys, 100);
    assert_eq!(rep.records_replayed, 50);
    for i in 350..450 {
        assert_eq!(
            get(&r, &format!("k{:03}", i % 100)),
            Some(format!("v{i}").into_bytes())
        );
    }
}

/// A checkpoint taken with no stable set holds everything committed, so it
/// stands at its newest commit timestamp: a later checkpoint at a lower
/// stable keeps that, recovery starts there, and every read from there up
/// sees the newest writes, never a hole where the folded history was.
#[test]
fn a_checkpoint_without_stable_is_never_undercut_by_a_lower_stable() {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    let commit = |key: &str, v: Option<&str>, at: u64| {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        match v {
            Some(v) => t.put(key, v).unwrap(),
            None => t.delete(key).unwrap(),
        }
        t.commit(CommitOptions::at(at)).unwrap();
    };
    commit("k", Some("old"), 10);
    commit("k", None, 40);
    commit("j", Some("j20"), 20);
    // No stable: everything, up to 40, goes into the base.
    let first = e.checkpoint().unwrap();
    assert_eq!(first.stable, Some(Timestamp::new(40)), "{first:?}");
    e.set_timestamps(TimestampUpdate::stable(30)).unwrap();
    commit("j", Some("j35"), 35);
    let second = e.checkpoint().unwrap();
    assert_eq!(second.stable, Some(Timestamp::new(40)), "{second:?}");
    drop(e);
    let r = open(&fs.crash()).unwrap();
    let at = r.query_timestamp(TimestampKind::Recovery);
    assert_eq!(at, Some(Timestamp::new(40)));
    assert_eq!(r.query_timestamp(TimestampKind::Oldest), at);
    let mut s = r.session().unwrap();
    for read in [40, 41] {
        let mut t = s
            .begin(&TxnOptions {
                read_timestamp: Some(Timestamp::new(read)),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(t.get("k").unwrap(), None, "k at {read}");
        assert_eq!(t.get("j").unwrap(), Some(b"j35".to_vec()), "j at {read}");
    }
}

/// Rolling back below what a checkpoint already holds is refused with both
/// timestamps, and nothing changes.
#[test]
fn rollback_below_a_checkpoint_is_refused() {
    let fs = MemFs::new();
    let mut e = open(&fs).unwrap();
    put(&e, "a", "1").unwrap();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put("k", "v").unwrap();
        t.commit(CommitOptions::at(40)).unwrap();
    }
    e.checkpoint().unwrap();
    e.set_timestamps(TimestampUpdate::stable(30)).unwrap();
    match e.rollback_to_stable() {
        Err(Error::RollbackBelowCheckpoint { stable, checkpoint }) => {
            assert_eq!((stable.get(), checkpoint.get()), (30, 40));
        }
        other => panic!("want RollbackBelowCheckpoint, got {other:?}"),
    }
    assert_eq!(get(&e, "k"), Some(b"v".to_vec()));
    assert_eq!(get(&e, "a"), Some(b"1".to_vec()));
}

mod acks;
mod backup;
mod checkpoint_failure;
mod close;
mod crash_images;
mod damage;
mod faulty;
mod outcomes;
mod rollback_to_stable;
mod tables;

#[test]
fn a_record_holds_the_writes_a_savepoint_kept_and_the_announced_durable_timestamp() {
    let fs = MemFs::new();
    let e = open(&fs).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("a", "1").unwrap();
    let sp = t.savepoint().unwrap();
    t.put("b", "2").unwrap();
    t.delete("a").unwrap();
    t.rollback_to(&sp).unwrap();
    t.put("c", "3").unwrap();
    t.commit(CommitOptions::at(5)).unwrap();
    // Durable at 30, announced before the commit, which gives none.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("p", "prepared").unwrap();
    t.prepare(Timestamp::new(10)).unwrap();
    t.set_durable_timestamp(Timestamp::new(30)).unwrap();
    t.commit(CommitOptions::at(12)).unwrap();
    e.set_timestamps(TimestampUpdate {
        stable: Some(Timestamp::new(20)),
        ..Default::default()
    })
    .unwrap();
    let c = e.checkpoint().unwrap();
    assert_eq!((c.keys, c.carried), (2, 1), "a and c folded, p carried");
    let image = fs.crash();
    drop(s);
    drop(e);
    let r = open(&image).unwrap();
    assert_eq!(get(&r, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&r, "b"), None);
    assert_eq!(get(&r, "c").as_deref(), Some(&b"3"[..]));
    assert_eq!(get(&r, "p").as_deref(), Some(&b"prepared"[..]));
    drop(r);
    let rolled = DurabilityOptions {
        rollback_to_stable: true,
        ..opts(&image, Durability::Sync)
    };
    let r = Engine::open(DIR, EngineConfig::default(), rolled).unwrap();
    assert_eq!(r.recovery_report().unwrap().rolled_back, 1);
    assert_eq!(get(&r, "p"), None);
    assert_eq!(get(&r, "c").as_deref(), Some(&b"3"[..]));
}
