//! `Engine::backup`: the copy opens holding every commit acknowledged
//! before the backup began and each later one whole or not at all, while
//! writers, readers and checkpoints run; writers and readers are not held
//! during the copy; every instant of a backup leaves the source whole and
//! the copy refused (`IncompleteBackup`) or complete; bad targets and
//! failed file operations are typed errors that leave the engine usable.

use snapshot_engine::durability::{Fs, FsFile, FsLock, MemFs, Stop, WriteBack, BACKUP_INCOMPLETE};
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, Error, TimestampUpdate,
    TxnOptions,
};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::{get, opts, DIR};

const BK: &str = "/bk";

fn open_at(fs: &MemFs, dir: &str) -> snapshot_engine::Result<Engine> {
    Engine::open(dir, EngineConfig::default(), opts(fs, Durability::Sync))
}

/// Every key and value an engine holds.
fn contents(e: &Engine) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.range(Vec::new()..vec![0xff])
        .unwrap()
        .into_iter()
        .collect()
}

fn commit(e: &Engine, puts: &[(&str, Option<&str>)], ts: u64) {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for &(k, v) in puts {
        match v {
            Some(v) => t.put(k, v).unwrap(),
            None => t.delete(k).unwrap(),
        }
    }
    let at = if ts == 0 {
        CommitOptions::default()
    } else {
        CommitOptions::at(ts)
    };
    t.commit(at).unwrap();
}

/// Writer `w`'s state after its commit `n`: `w{w}/a` and `w{w}/b` hold `n`;
/// commit `i` puts `w{w}/k{i % 20}` = `i` and deletes `w{w}/k{(i + 10) % 20}`
/// on every fifth.
fn writer_state(w: u64, n: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in 1..=n {
        m.insert(
            format!("w{w}/k{:02}", i % 20).into_bytes(),
            i.to_string().into_bytes(),
        );
        if i.is_multiple_of(5) {
            m.remove(format!("w{w}/k{:02}", (i + 10) % 20).as_bytes());
        }
    }
    if n > 0 {
        for k in ["a", "b"] {
            m.insert(format!("w{w}/{k}").into_bytes(), n.to_string().into_bytes());
        }
    }
    m
}

fn writer_commit(s: &mut snapshot_engine::Session<'_>, w: u64, i: u64) {
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let v = i.to_string();
    t.put(format!("w{w}/a"), &v).unwrap();
    t.put(format!("w{w}/k{:02}", i % 20), &v).unwrap();
    if i.is_multiple_of(5) {
        t.delete(format!("w{w}/k{:02}", (i + 10) % 20)).unwrap();
    }
    t.put(format!("w{w}/b"), &v).unwrap();
    t.commit(CommitOptions::default()).unwrap();
}

/// The part of `all` under `prefix`.
fn under(all: &BTreeMap<Vec<u8>, Vec<u8>>, prefix: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    all.iter()
        .filter(|(k, _)| k.starts_with(prefix.as_bytes()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Backups taken while three writers, two readers and the background
/// checkpointer run, on segments small enough to roll over during a copy:
/// each opens holding exactly the setup, and for each writer the state
/// after one of its commits, no earlier than its last one acknowledged
/// before the backup began.
#[test]
fn a_backup_under_load_holds_every_acknowledged_commit_and_each_later_one_whole() {
    const WRITERS: u64 = 3;
    const BACKUPS: usize = 6;
    let fs = MemFs::new();
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        DurabilityOptions {
            segment_bytes: 4096,
            checkpoint_interval: Some(Duration::from_millis(2)),
            ..opts(&fs, Durability::Sync)
        },
    )
    .unwrap();
    let mut setup = BTreeMap::new();
    for i in 0..50 {
        let (k, v) = (format!("base/{i:02}"), format!("v{i}"));
        commit(&e, &[(&k, Some(&v))], 0);
        setup.insert(k.into_bytes(), v.into_bytes());
    }
    e.checkpoint().unwrap();
    commit(&e, &[("base/00", None)], 0);
    setup.remove(&b"base/00"[..]);
    let acked: Vec<AtomicU64> = (0..WRITERS).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let taken = std::thread::scope(|sc| {
        for w in 0..WRITERS {
            let (e, acked, done) = (&e, &acked, &done);
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                let mut i = 0;
                while !done.load(Ordering::Relaxed) {
                    i += 1;
                    writer_commit(&mut s, w, i);
                    acked[w as usize].store(i, Ordering::SeqCst);
                }
            });
        }
        for _ in 0..2 {
            let (e, done, reads) = (&e, &done, &reads);
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                while !done.load(Ordering::Relaxed) {
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    for w in 0..WRITERS {
                        let a = t.get(format!("w{w}/a")).unwrap();
                        assert_eq!(a, t.get(format!("w{w}/b")).unwrap(), "a snapshot");
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut taken = Vec::new();
        for n in 0..BACKUPS {
            // Let the writers make some progress between backups.
            let from = acked[0].load(Ordering::SeqCst);
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while acked[0].load(Ordering::SeqCst) < from + 5 {
                assert!(std::time::Instant::now() < deadline, "the writer stopped");
                std::thread::yield_now();
            }
            let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
            let dir = format!("{BK}{n}");
            let report = e.backup(&dir).unwrap();
            assert!(report.files >= 2 && report.bytes > 0, "{report:?}");
            taken.push((dir, before, report));
        }
        done.store(true, Ordering::Relaxed);
        taken
    });
    assert!(reads.load(Ordering::Relaxed) > 0);
    let image = fs.crash();
    for (dir, before, report) in taken {
        // A power cut right after the backup keeps it whole.
        for fs in [fs.clone(), image.clone()] {
            let copy = open_at(&fs, &dir).unwrap_or_else(|err| panic!("{dir}: {err}"));
            let all = contents(&copy);
            assert_eq!(under(&all, "base/"), setup, "{dir}");
            let mut lsns = 50 + 1;
            for w in 0..WRITERS {
                let got = under(&all, &format!("w{w}/"));
                let n = got
                    .get(format!("w{w}/a").as_bytes())
                    .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap());
                assert!(
                    n >= before[w as usize],
                    "{dir}: writer {w} at {n}, acked {before:?}"
                );
                assert_eq!(got, writer_state(w, n), "{dir}: writer {w} at commit {n}");
                lsns += n;
            }
            // The copy holds exactly the commit records up to `last_lsn`.
            assert_eq!(lsns, report.last_lsn, "{dir}: {report:?}");
        }
    }
}

/// An `Fs` that stops the first file created in the backup's directory
/// under a name starting with `stop_at` until the test lets it go: the
/// backup is then inside its copy.
struct GateFs {
    inner: MemFs,
    stop_at: &'static str,
    reached: std::sync::Mutex<Option<mpsc::Sender<()>>>,
    release: std::sync::Mutex<Option<mpsc::Receiver<()>>>,
}

impl Fs for GateFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let name = path.file_name().unwrap().to_str().unwrap();
        if path.starts_with(BK) && name.starts_with(self.stop_at) {
            if let Some(tx) = self.reached.lock().unwrap().take() {
                tx.send(()).unwrap();
                let rx = self.release.lock().unwrap().take().unwrap();
                rx.recv_timeout(Duration::from_secs(60))
                    .expect("the test never released the backup");
            }
        }
        self.inner.create(path)
    }
    fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.inner.append_to(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn FsLock>>> {
        self.inner.lock(path)
    }
}

/// Runs `f` on another thread and waits for it (bounded: a hang fails the
/// test instead of the run).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not finish while a backup was copying"))
}

/// Stopped in the middle of its copy (after its sync, before it reads the
/// checkpoint and the log), a backup holds no writer or reader: a `Sync`
/// commit and a read complete, while a checkpoint waits for the copy to
/// end. The commit made meanwhile, written to the segment the backup then
/// reads, is not in the copy: it came after the backup's sync.
#[test]
fn writers_and_readers_run_while_a_backup_copies_and_a_checkpoint_waits() {
    let mem = MemFs::new();
    let (reached_tx, reached) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let fs = Arc::new(GateFs {
        inner: mem.clone(),
        stop_at: "ckpt-",
        reached: std::sync::Mutex::new(Some(reached_tx)),
        release: std::sync::Mutex::new(Some(release_rx)),
    });
    let o = DurabilityOptions {
        fs: fs.clone(),
        ..DurabilityOptions::default()
    };
    let e = Arc::new(Engine::open(DIR, EngineConfig::default(), o).unwrap());
    commit(&e, &[("a", Some("1"))], 0);
    e.checkpoint().unwrap();
    commit(&e, &[("b", Some("2"))], 0);
    let backup = {
        let e = e.clone();
        std::thread::spawn(move || e.backup(BK))
    };
    reached
        .recv_timeout(Duration::from_secs(60))
        .expect("the backup never reached its copy");
    {
        let e = e.clone();
        within("a commit", move || commit(&e, &[("c", Some("3"))], 0));
    }
    let e2 = e.clone();
    assert_eq!(
        within("a read", move || get(&e2, "c")).as_deref(),
        Some(&b"3"[..])
    );
    let (ckpt_tx, ckpt_rx) = mpsc::channel();
    let checkpointer = {
        let e = e.clone();
        std::thread::spawn(move || {
            let r = e.checkpoint();
            let _ = ckpt_tx.send(());
            r
        })
    };
    // Waiting for it is bounded: it must still be waiting for the copy.
    assert!(
        ckpt_rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "a checkpoint ran while a backup was copying"
    );
    release.send(()).unwrap();
    let report = backup.join().unwrap().unwrap();
    checkpointer.join().unwrap().unwrap();
    assert_eq!((report.files, report.last_lsn), (2, 2), "{report:?}");
    assert!(report.checkpoint.is_some());
    let copy = open_at(&mem, BK).unwrap();
    assert_eq!(get(&copy, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&copy, "b").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(&copy, "c"), None);
}

/// A commit that returned without a sync (`Durability::None`) is in a
/// backup taken after it: the backup syncs what is pending first.
#[test]
fn a_backup_holds_commits_not_yet_synced() {
    let fs = MemFs::new();
    let e = Engine::open(DIR, EngineConfig::default(), opts(&fs, Durability::None)).unwrap();
    commit(&e, &[("a", Some("1"))], 5);
    e.set_timestamps(TimestampUpdate::stable(5)).unwrap();
    commit(&e, &[("b", Some("2"))], 0);
    let report = e.backup(BK).unwrap();
    assert_eq!(report.stable.map(|t| t.get()), Some(5));
    assert_eq!((report.last_lsn, report.checkpoint.clone()), (2, None));
    let copy = open_at(&fs.crash(), BK).unwrap();
    assert_eq!(get(&copy, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&copy, "b").as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_bad_target_or_an_in_memory_engine_is_a_typed_error() {
    let m = Engine::new(EngineConfig::default()).unwrap();
    assert!(matches!(m.backup(BK), Err(Error::NotDurable)));
    let fs = MemFs::new();
    let e = open_at(&fs, DIR).unwrap();
    commit(&e, &[("a", Some("1"))], 0);
    fs.put_file(&Path::new(BK).join("x"), b"mine");
    match e.backup(BK) {
        Err(Error::BackupTargetNotEmpty { path, entry }) => {
            assert_eq!((path, entry.as_str()), (PathBuf::from(BK), "x"));
        }
        other => panic!("want BackupTargetNotEmpty, got {other:?}"),
    }
    assert_eq!(fs.list(Path::new(BK)).unwrap(), ["x"], "nothing written");
    // The source directory itself is not empty either.
    assert!(matches!(
        e.backup(DIR),
        Err(Error::BackupTargetNotEmpty { .. })
    ));
    // The OS's files: a target below a regular file cannot be created.
    let base = std::env::temp_dir().join(format!("snapshot-backup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let d = Engine::open(
        base.join("db"),
        EngineConfig::default(),
        DurabilityOptions::default(),
    )
    .unwrap();
    commit(&d, &[("a", Some("1"))], 0);
    std::fs::write(base.join("file"), b"x").unwrap();
    assert!(matches!(
        d.backup(base.join("file").join("bk")),
        Err(Error::Io { .. })
    ));
    commit(&d, &[("b", Some("2"))], 0);
    d.backup(base.join("bk")).unwrap();
    let copy = Engine::open(
        base.join("bk"),
        EngineConfig::default(),
        DurabilityOptions::default(),
    )
    .unwrap();
    assert_eq!(get(&copy, "b").as_deref(), Some(&b"2"[..]));
    drop((copy, d));
    std::fs::remove_dir_all(&base).unwrap();
    commit(&e, &[("b", Some("2"))], 0);
}

/// A source with a checkpoint and several segments after it; returns it
/// with what it holds.
fn source(fs: &MemFs) -> (Engine, BTreeMap<Vec<u8>, Vec<u8>>) {
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        DurabilityOptions {
            segment_bytes: 4096,
            ..opts(fs, Durability::Sync)
        },
    )
    .unwrap();
    let mut model = BTreeMap::new();
    for i in 0..120 {
        if i == 40 {
            e.checkpoint().unwrap();
        }
        let (k, v) = (format!("k{:02}", i % 30), format!("{i:-<80}"));
        commit(&e, &[(&k, Some(&v))], 0);
        model.insert(k.into_bytes(), v.into_bytes());
    }
    (e, model)
}

/// Each file operation of a backup, failing in turn: the backup returns
/// `Io`, the engine commits on, the target is refused (or was never
/// begun), and a backup into a new directory then succeeds.
#[test]
fn a_failed_file_operation_fails_the_backup_and_leaves_the_engine_usable() {
    let probe = MemFs::new();
    let (e, _) = source(&probe);
    let m0 = probe.mutations();
    e.backup(BK).unwrap();
    let steps = probe.mutations() - m0;
    assert!(steps > 10, "{steps}");
    for k in 1..=steps {
        let fs = MemFs::new();
        let (e, mut model) = source(&fs);
        fs.stop_at(fs.mutations() + k, Stop::Fail);
        let err = e.backup(BK).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "step {k}: {err}");
        let at_backup = model.clone();
        commit(&e, &[("after", Some("x"))], 0);
        model.insert(b"after".to_vec(), b"x".to_vec());
        if fs.list(Path::new(BK)).unwrap().is_empty() {
            assert!(
                k <= 2,
                "step {k}: only the parent's sync and the marker precede it"
            );
        } else {
            match open_at(&fs, BK) {
                Err(Error::IncompleteBackup { .. }) => {}
                // The last step, the directory sync after the marker's
                // removal: the copy is whole.
                Ok(copy) if k == steps => assert_eq!(contents(&copy), at_backup),
                other => panic!("step {k}: {:?}", other.map(|_| ())),
            }
        }
        let r = e.backup("/again").unwrap();
        assert_eq!(contents(&open_at(&fs, "/again").unwrap()), model, "{r:?}");
    }
}

/// Every instant of a backup, frozen and cut by a crash or a power cut:
/// the source opens with every acknowledged commit, and the target is
/// refused as incomplete, empty (the backup had not begun), or complete.
#[test]
fn every_instant_of_a_backup_leaves_the_source_whole_and_the_copy_refused_or_complete() {
    let probe = MemFs::new();
    let (e, _) = source(&probe);
    let m0 = probe.mutations();
    e.backup(BK).unwrap();
    let steps = probe.mutations() - m0;
    let (mut refused, mut complete) = (0, 0);
    for k in 1..=steps + 1 {
        let fs = MemFs::new();
        let (e, model) = source(&fs);
        fs.stop_at(fs.mutations() + k, Stop::Freeze);
        let r = e.backup(BK);
        assert_eq!(r.is_ok(), k > steps, "step {k}");
        let mut images = vec![fs.crash()];
        images.extend((0..8).map(|seed| fs.power_cut(seed, WriteBack::AnyPages)));
        drop(e);
        for (i, image) in images.iter().enumerate() {
            let src = open_at(image, DIR).unwrap_or_else(|err| panic!("step {k} image {i}: {err}"));
            assert_eq!(contents(&src), model, "step {k} image {i}: the source");
            let names = image.list(Path::new(BK)).unwrap();
            if names.is_empty() {
                continue;
            }
            match open_at(image, BK) {
                Err(Error::IncompleteBackup { .. }) => {
                    assert!(names.iter().any(|n| n == BACKUP_INCOMPLETE));
                    refused += 1;
                }
                Ok(copy) => {
                    assert_eq!(contents(&copy), model, "step {k} image {i}: the copy");
                    complete += 1;
                }
                Err(err) => panic!("step {k} image {i}: the copy: {err}"),
            }
        }
    }
    assert!(
        refused > 0 && complete > 0,
        "{refused} refused, {complete} complete"
    );
}
