//! An acknowledgment of durability is never ahead of the disk: a crash
//! image taken the instant a `CommitHandle` reports durable, or the
//! instant a `Sync` commit returns, holds the record. Several committers
//! and slow syncs, so that most learn it from another committer's sync.

use super::{segments, DIR};
use snapshot_engine::durability::MemFs;
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, TxnOptions,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const THREADS: usize = 5;
const EACH: usize = 24;

/// Counts one up when dropped, a panic included, so that no thread waits
/// forever on one that failed.
struct Done<'a>(&'a AtomicUsize);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether the crash image `fs.crash()` holds `key`'s record.
fn synced(fs: &MemFs, key: &str) -> bool {
    let image = fs.crash();
    segments(&image).iter().any(|p| {
        image
            .contents(p)
            .unwrap()
            .windows(key.len())
            .any(|w| w == key.as_bytes())
    })
}

/// A `Sync` commit of `key`, checked against a crash image the instant it
/// returns.
fn sync_commit(e: &Engine, fs: &MemFs, key: &str) {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(key, [0u8; 64]).unwrap();
    t.set_durability(Durability::Sync);
    t.commit(CommitOptions::default()).unwrap();
    assert!(
        synced(fs, key),
        "{key}: a Sync commit returned before its sync"
    );
}

#[test]
fn a_crash_image_at_an_acknowledgment_holds_the_record() {
    for mode in [
        Durability::Sync,
        Durability::None,
        Durability::Periodic(Duration::from_millis(1)),
    ] {
        let fs = MemFs::new();
        fs.set_sync_latency(Duration::from_millis(1));
        let e = Engine::open(
            DIR,
            EngineConfig::default(),
            DurabilityOptions {
                fs: Arc::new(fs.clone()),
                durability: mode,
                // Roll-overs too: their syncs acknowledge records as well.
                segment_bytes: 4096,
                ..DurabilityOptions::default()
            },
        )
        .unwrap();
        let finished = AtomicUsize::new(0);
        let syncer_gone = AtomicUsize::new(0);
        std::thread::scope(|sc| {
            // Syncs until every committer is done, so that a committer
            // polling its handle always gets there.
            sc.spawn(|| {
                let _done = Done(&syncer_gone);
                let mut i = 0;
                while finished.load(Ordering::SeqCst) < THREADS {
                    sync_commit(&e, &fs, &format!("{mode:?}-syncer-{i:05}"));
                    i += 1;
                }
            });
            for th in 0..THREADS {
                let (e, fs, finished, syncer_gone) = (&e, &fs, &finished, &syncer_gone);
                sc.spawn(move || {
                    let _done = Done(finished);
                    for i in 0..EACH {
                        let key = format!("{mode:?}-t{th}-c{i:03}");
                        if i % 2 == 0 {
                            sync_commit(e, fs, &key);
                            continue;
                        }
                        let mut s = e.session().unwrap();
                        let mut t = s.begin(&TxnOptions::default()).unwrap();
                        t.put(&key, [0u8; 64]).unwrap();
                        let h = t.commit_async(CommitOptions::default()).unwrap();
                        if i % 3 == 0 {
                            h.wait().unwrap();
                        }
                        // Polled, not waited for: another committer's sync
                        // makes it durable.
                        while !h.is_durable() {
                            if syncer_gone.load(Ordering::SeqCst) > 0 {
                                h.wait().unwrap();
                            }
                            std::thread::yield_now();
                        }
                        assert!(synced(fs, &key), "{key}: reported durable before its sync");
                    }
                });
            }
        });
    }
}
