//! The log's unit tests: the `synced` marks batches carry, and group
//! commit's hand-off between a leader and the committers waiting for it.

use super::*;
use crate::durability::fs::MemFs;
use crate::durability::record::{End, FILE_HEADER, FRAME_HEADER, KIND_SYNCED};

fn commit_payload(lsn: u64) -> Vec<u8> {
    let mut p = Vec::new();
    record::begin_commit(&mut p, 0, 0, false, 1);
    record::push_write(&mut p, 0, b"k", Some(b"v"));
    p[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
    p
}

/// A batch written after a sync ends with a mark of what that sync
/// covered; one written with nothing synced since the last mark has
/// none.
#[test]
fn batches_after_a_sync_mark_what_it_covered() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let dir = Path::new("/d");
    let log = Log::create(fs.clone(), dir, 1, 1, 1 << 20, None).unwrap();
    let path = dir.join(segment_name(1));
    let mut p = commit_payload(0);
    let a = log.append(&mut p, true);
    log.flush(a, true).unwrap();
    let first_sync = fs.read(&path).unwrap().len() as u64;
    let b = log.append(&mut p, false);
    log.flush(b, false).unwrap();
    let c = log.append(&mut p, false);
    log.flush(c, false).unwrap();
    let seg = scan_segment(&fs.read(&path).unwrap(), &path, 1).unwrap();
    assert_eq!(seg.end, End::Clean);
    assert_eq!(seg.records.len(), 3);
    assert_eq!(seg.synced_through, first_sync);
    let marks = record::scan(&fs.read(&path).unwrap(), FILE_HEADER)
        .0
        .iter()
        .filter(|(o, _)| fs.read(&path).unwrap()[*o as usize + FRAME_HEADER] == KIND_SYNCED)
        .count();
    assert_eq!(marks, 1);
}

/// Group commit, with committers ordered by waiting until each sleeps
/// (read from `/proc`, so Linux only).
#[cfg(target_os = "linux")]
mod group {
    use super::*;
    use crate::durability::fs::FsLock;
    use std::io;
    use std::sync::mpsc;
    use std::time::Instant;

    /// How long a test waits for a step of another thread before it fails
    /// (a bound against hangs, never reached when the log is right).
    const PATIENCE: Duration = Duration::from_secs(30);

    /// Holds the next file sync, once armed, until released.
    #[derive(Default)]
    struct Gate {
        st: Mutex<GateState>,
        cv: Condvar,
    }

    #[derive(Default)]
    struct GateState {
        /// The next sync is to be held.
        armed: bool,
        /// A sync is held now.
        held: bool,
    }

    impl Gate {
        fn arm(&self) {
            self.st.lock().armed = true;
        }

        /// Waits until a sync is held.
        fn wait_held(&self) {
            let deadline = Instant::now() + PATIENCE;
            let mut g = self.st.lock();
            while !g.held {
                assert!(
                    !self.cv.wait_until(&mut g, deadline).timed_out(),
                    "no sync was held"
                );
            }
        }

        /// Lets the held sync go on, arming the gate again if `rearm`.
        fn release(&self, rearm: bool) {
            let mut g = self.st.lock();
            g.held = false;
            g.armed = rearm;
            self.cv.notify_all();
        }

        fn pass(&self) {
            let mut g = self.st.lock();
            if g.armed {
                g.armed = false;
                g.held = true;
                self.cv.notify_all();
                while g.held {
                    self.cv.wait(&mut g);
                }
            }
        }
    }

    /// [`MemFs`] whose file syncs pass through a [`Gate`].
    struct GateFs {
        mem: MemFs,
        gate: Arc<Gate>,
    }

    struct GateFile {
        inner: Box<dyn FsFile>,
        gate: Arc<Gate>,
    }

    impl FsFile for GateFile {
        fn append(&mut self, buf: &[u8]) -> io::Result<()> {
            self.inner.append(buf)
        }

        fn sync(&mut self) -> io::Result<()> {
            self.gate.pass();
            self.inner.sync()
        }
    }

    impl Fs for GateFs {
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
            let inner = self.mem.create(path)?;
            Ok(Box::new(GateFile {
                inner,
                gate: self.gate.clone(),
            }))
        }
        fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
            let inner = self.mem.append_to(path)?;
            Ok(Box::new(GateFile {
                inner,
                gate: self.gate.clone(),
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

    /// This thread's id as `/proc` names it.
    fn tid() -> String {
        let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
        link.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// Waits until thread `tid` of this process sleeps (state `S`): the
    /// committers here block only on the log's locks and condition
    /// variables once they have reported their id.
    fn wait_blocked(tid: &str) {
        let path = format!("/proc/self/task/{tid}/stat");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let stat = std::fs::read_to_string(&path).expect("the thread's stat");
            let state = stat.rsplit(')').next().unwrap().trim_start().chars().next();
            if state == Some('S') {
                return;
            }
            assert!(Instant::now() < deadline, "thread {tid} never blocked");
            std::thread::yield_now();
        }
    }

    /// Calls `flush(lsn, true)` on a new thread once it has reported its
    /// id; the result comes back on the channel.
    fn flush_on_thread(
        log: &Arc<Log>,
        lsn: u64,
    ) -> (String, mpsc::Receiver<Result<()>>, JoinHandle<()>) {
        let (id_tx, id_rx) = mpsc::channel();
        let (tx, rx) = mpsc::channel();
        let log = log.clone();
        let h = std::thread::spawn(move || {
            id_tx.send(tid()).unwrap();
            let _ = tx.send(log.flush(lsn, true));
        });
        (id_rx.recv().unwrap(), rx, h)
    }

    /// A committer whose record a finished sync covered returns at once,
    /// even when a committer whose record came later queued before it and
    /// now leads the next sync, which is held: committers never wait for a
    /// sync that does not cover them, so all of those waiting when a sync
    /// began can frame their next records while the next one runs.
    #[test]
    fn a_covered_committer_does_not_wait_for_the_next_sync() {
        let gate = Arc::new(Gate::default());
        let fs: Arc<dyn Fs> = Arc::new(GateFs {
            mem: MemFs::new(),
            gate: gate.clone(),
        });
        let log = Log::create(fs, Path::new("/d"), 1, 1, 1 << 20, None).unwrap();
        let mut p = commit_payload(0);
        // Four committers frame their records; a fifth leads the batch
        // that holds all five, and its sync is held.
        let covered: Vec<u64> = (0..4).map(|_| log.append(&mut p, true)).collect();
        gate.arm();
        let lead = log.append(&mut p, true);
        let (_, lead_rx, lead_h) = flush_on_thread(&log, lead);
        gate.wait_held();
        let syncs = log.counters.syncs.load(Ordering::Relaxed);
        // A later record's committer waits first, then the four.
        let late = log.append(&mut p, true);
        let (late_tid, late_rx, late_h) = flush_on_thread(&log, late);
        wait_blocked(&late_tid);
        let mut waiting = Vec::new();
        for &lsn in &covered {
            let (t, rx, h) = flush_on_thread(&log, lsn);
            wait_blocked(&t);
            waiting.push((rx, h));
        }
        // The first sync ends; the late committer leads the next, held.
        gate.release(true);
        gate.wait_held();
        lead_rx.recv().unwrap().unwrap();
        for (rx, _) in &waiting {
            let r = rx.recv_timeout(PATIENCE);
            assert!(
                matches!(r, Ok(Ok(()))),
                "a committer covered by a finished sync waited for the next: {r:?}"
            );
        }
        assert_eq!(log.counters.syncs.load(Ordering::Relaxed), syncs + 1);
        gate.release(false);
        late_rx.recv().unwrap().unwrap();
        assert_eq!(log.counters.syncs.load(Ordering::Relaxed), syncs + 2);
        for h in [lead_h, late_h]
            .into_iter()
            .chain(waiting.into_iter().map(|(_, h)| h))
        {
            h.join().unwrap();
        }
    }
}
