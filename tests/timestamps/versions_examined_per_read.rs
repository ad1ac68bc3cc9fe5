//! Reads at a read timestamp far behind the newest commit examine a constant
//! number of versions: the read-ts shape with stable stuck at the load
//! while writers pile versions on every key. Counts come from `Stats`
//! (`versions_read / reads`, `commit_versions_examined / commits`): counts of
//! work, not timings.

use crate::support::*;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::*;

const KEYS: u64 = 50;
const VERSIONS: u64 = 20;

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

#[test]
fn an_old_read_timestamp_examines_at_most_two_versions() {
    on_every_machinery!(old_reads_on);
}

fn old_reads_on<M: Machinery>() {
    let e = Engine::<M>::with_machinery(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    // Load every key at 1; stable and oldest stay there (read-ts: stable lags
    // the newest commit by far more than a run writes).
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for k in 0..KEYS {
        t.put(key(k), b"load").unwrap();
    }
    t.commit(CommitOptions::at(1)).unwrap();
    e.set_timestamps(set(Some(1), Some(1), None)).unwrap();
    let mut next = 2;
    for round in 0..VERSIONS {
        for k in 0..KEYS {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(key(k), format!("v{round}").as_bytes()).unwrap();
            t.commit(CommitOptions::at(next)).unwrap();
            next += 1;
        }
    }
    let before = e.stats();
    for k in 0..KEYS {
        let mut t = s.begin(&read_at(1)).unwrap();
        assert_eq!(t.get(key(k)).unwrap().as_deref(), Some(&b"load"[..]));
    }
    let old = e.stats();
    let (reads, examined) = (
        old.reads - before.reads,
        old.versions_read - before.versions_read,
    );
    assert_eq!(reads, KEYS);
    assert!(
        examined <= 2 * reads,
        "reads at the load timestamp examined {examined} versions for {reads} reads"
    );
    // With the head summary (invariant 16) the head, committed far above
    // the read timestamp, is rejected without being loaded: the finger
    // alone answers.
    assert_eq!(
        examined, reads,
        "reads at the load timestamp should examine only the finger"
    );
    // The newest version: the head alone.
    for k in 0..KEYS {
        let mut t = s.begin(&read_at(next)).unwrap();
        let want = format!("v{}", VERSIONS - 1);
        assert_eq!(t.get(key(k)).unwrap().as_deref(), Some(want.as_bytes()));
    }
    let new = e.stats();
    assert_eq!(new.versions_read - old.versions_read, KEYS);
    // Every version is still there (nothing is below the horizon), yet no
    // commit walked its chain: linking plus the floor and finger climbs.
    let commits = KEYS * (VERSIONS + 1);
    let per_commit = new.commit_versions_examined as f64 / commits as f64;
    assert!(
        per_commit <= 5.0,
        "commits examined {per_commit:.2} versions each"
    );
}
