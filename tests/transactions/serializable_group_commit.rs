//! Serializable commits on a `Sync` durable engine: they wait for the log
//! outside the commit gate, so they share a sync with the commits behind
//! them; a later serializable commit that read what one in its log wait
//! wrote is refused, and commits complete in gate order.
//!
//! The log's syncs go through [`HeldFs`], whose next sync, once armed,
//! blocks until the test lets it go: the test sees who framed a record
//! meanwhile (`Engine::log_stats().records`) and counts the syncs, with
//! no timing in any assertion. A wait that can only end if the engine
//! behaves is bounded by [`BOUND`] (against hangs), then fails.

use snapshot_engine::durability::{Fs, FsFile, FsLock, MemFs};
use snapshot_engine::*;
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a wait for the engine may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Hold {
    /// The next sync blocks until `armed` is cleared.
    armed: bool,
    /// A sync is blocked now.
    blocked: bool,
    /// Syncs of log files that returned.
    syncs: u64,
}

/// A [`MemFs`] whose next file sync can be held.
#[derive(Clone, Default)]
struct HeldFs {
    mem: MemFs,
    hold: Arc<(Mutex<Hold>, Condvar)>,
}

impl HeldFs {
    fn arm(&self) {
        self.hold.0.lock().unwrap().armed = true;
    }

    /// Waits until a sync is blocked on the armed hold.
    fn wait_blocked(&self) {
        self.wait_until(|h| h.blocked, "a sync to block");
    }

    fn release(&self) {
        let mut h = self.hold.0.lock().unwrap();
        h.armed = false;
        self.hold.1.notify_all();
    }

    fn syncs(&self) -> u64 {
        self.hold.0.lock().unwrap().syncs
    }

    fn wait_until(&self, f: impl Fn(&Hold) -> bool, what: &str) {
        let start = Instant::now();
        let mut h = self.hold.0.lock().unwrap();
        while !f(&h) {
            assert!(start.elapsed() < BOUND, "waited {BOUND:?} for {what}");
            h = self
                .hold
                .1
                .wait_timeout(h, Duration::from_millis(10))
                .unwrap()
                .0;
        }
    }
}

/// Lets a held sync go when dropped, so a failing test unwinds instead of
/// leaving a thread blocked in its sync.
struct Release<'a>(&'a HeldFs);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

struct HeldFile {
    inner: Box<dyn FsFile>,
    hold: Arc<(Mutex<Hold>, Condvar)>,
}

impl FsFile for HeldFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.append(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        {
            let (m, cv) = &*self.hold;
            let mut h = m.lock().unwrap();
            if h.armed {
                h.blocked = true;
                cv.notify_all();
                while h.armed {
                    h = cv.wait(h).unwrap();
                }
                h.blocked = false;
            }
        }
        self.inner.sync()?;
        self.hold.0.lock().unwrap().syncs += 1;
        Ok(())
    }
}

impl Fs for HeldFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.mem.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.mem.list(dir)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.mem.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(HeldFile {
            inner: self.mem.create(path)?,
            hold: self.hold.clone(),
        }))
    }
    fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(HeldFile {
            inner: self.mem.append_to(path)?,
            hold: self.hold.clone(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.mem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.mem.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.mem.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.mem.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn FsLock>>> {
        self.mem.lock(path)
    }
}

fn ser() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::Serializable,
        ..TxnOptions::default()
    }
}

fn open(fs: &HeldFs) -> Engine {
    let o = DurabilityOptions {
        fs: Arc::new(fs.clone()),
        durability: Durability::Sync,
        ..DurabilityOptions::default()
    };
    Engine::open("/db", EngineConfig::default(), o).unwrap()
}

fn records(e: &Engine) -> u64 {
    e.log_stats().expect("a durable engine").records
}

/// Waits until the log has framed `n` records.
fn wait_records(e: &Engine, n: u64, what: &str) {
    let start = Instant::now();
    while records(e) < n {
        assert!(
            start.elapsed() < BOUND,
            "waited {BOUND:?} for {what}: {} of {n} records framed",
            records(e)
        );
        std::thread::yield_now();
    }
}

/// A serializable transaction that reads `read` and writes `write`.
fn rmw(e: &Engine, read: &str, write: &str) -> Result<()> {
    let mut s = e.session()?;
    let mut t = s.begin(&ser())?;
    t.get(read)?;
    t.put(write, "1")?;
    t.commit(CommitOptions::default())
}

#[test]
fn durable_serializable_commits_share_a_sync() {
    let fs = HeldFs::default();
    let e = open(&fs);
    rmw(&e, "x", "a").unwrap();
    let (base_records, base_syncs) = (records(&e), fs.syncs());
    fs.arm();
    std::thread::scope(|sc| {
        let release = Release(&fs);
        // A snapshot-isolation commit leads a batch whose sync is held.
        let lead = sc.spawn(|| {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put("lead", "1").unwrap();
            t.commit(CommitOptions::default())
        });
        fs.wait_blocked();
        // Two serializable commits on disjoint keys frame their records
        // while that sync is held: the second through the gate while the
        // first waits for the log.
        let s1 = sc.spawn(|| rmw(&e, "p", "b"));
        wait_records(&e, base_records + 2, "the first serializable record");
        let s2 = sc.spawn(|| rmw(&e, "q", "c"));
        wait_records(
            &e,
            base_records + 3,
            "the second serializable record while the first waits for the log",
        );
        drop(release);
        lead.join().unwrap().unwrap();
        s1.join().unwrap().unwrap();
        s2.join().unwrap().unwrap();
    });
    // The held batch's sync, then one sync for both serializable records.
    assert_eq!(fs.syncs() - base_syncs, 2, "syncs for three commits");
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for k in ["lead", "b", "c"] {
        assert_eq!(t.get(k).unwrap().as_deref(), Some(&b"1"[..]), "{k}");
    }
}

#[test]
fn a_commit_that_read_what_one_in_its_log_wait_wrote_is_refused() {
    use std::sync::mpsc::channel;
    let fs = HeldFs::default();
    let e = open(&fs);
    rmw(&e, "x", "a").unwrap();
    let base_records = records(&e);
    let (ready_tx, ready) = channel();
    let (go, go_rx) = channel();
    let (done_tx, done) = channel();
    std::thread::scope(|sc| {
        // The second transaction reads `a` before the first overwrites it,
        // and commits when told to.
        let (e, ready_tx, done_tx) = (&e, ready_tx, done_tx);
        sc.spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&ser()).unwrap();
            assert_eq!(t.get("a").unwrap().as_deref(), Some(&b"1"[..]));
            t.put("z", "1").unwrap();
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            done_tx.send(t.commit(CommitOptions::default())).unwrap();
        });
        ready.recv().unwrap();
        fs.arm();
        let release = Release(&fs);
        // The first writes `a` and waits in its held sync.
        let first = sc.spawn(|| rmw(e, "y", "a"));
        fs.wait_blocked();
        wait_records(e, base_records + 1, "the first record");
        // Its version of `a` is still in progress, but it precedes the
        // second in the serial order: the second read a stale `a`.
        go.send(()).unwrap();
        // Its answer comes while the first's sync is held (the gate is
        // free); bounded, then the sync goes and the answer is awaited.
        let early = done.recv_timeout(BOUND).ok();
        drop(release);
        let answered_while_held = early.is_some();
        let second = early.unwrap_or_else(|| done.recv().unwrap());
        assert_eq!(
            second,
            Err(Error::SerializationConflict { key: b"a".to_vec() })
        );
        assert!(
            answered_while_held,
            "the second commit waited for the first one's sync"
        );
        first.join().unwrap().unwrap();
    });
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        t.get("z").unwrap(),
        None,
        "the refused commit is not applied"
    );
    assert_eq!(t.get("a").unwrap().as_deref(), Some(&b"1"[..]));
}
