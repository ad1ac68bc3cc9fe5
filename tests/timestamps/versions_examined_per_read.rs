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

/// A fresh engine (`stable_sweep` as given) with every key loaded at 1 and
/// stable and oldest left there (read-ts: stable lags the newest commit by
/// far more than a run writes).
fn loaded<M: Machinery>(stable_sweep: bool) -> Engine<M> {
    let e = Engine::<M>::with_machinery(EngineConfig {
        stable_sweep,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for k in 0..KEYS {
        t.put(key(k), b"load").unwrap();
    }
    t.commit(CommitOptions::at(1)).unwrap();
    drop(s);
    e.set_timestamps(set(Some(1), Some(1), None)).unwrap();
    e
}

fn old_reads_on<M: Machinery>() {
    let e = loaded::<M>(false);
    let mut s = e.session().unwrap();
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

#[test]
fn a_read_at_a_stable_that_passed_a_key_s_commits_examines_one_version() {
    on_every_machinery!(stable_passed_on);
}

/// Versions `f` examined through `e`'s counters, and the reads it made.
fn examined_by<M: Machinery>(e: &Engine<M>, f: impl FnOnce()) -> (u64, u64) {
    let before = e.stats();
    f();
    let after = e.stats();
    (
        after.versions_read - before.versions_read,
        after.reads - before.reads,
    )
}

fn stable_passed_on<M: Machinery>() {
    // With the sweep off (the default) the same reads climb.
    let (examined, reads) = stable_passed_reads::<M>(false);
    assert!(
        examined > reads,
        "without the stable sweep, {examined} versions for {reads} reads"
    );
    let (examined, reads) = stable_passed_reads::<M>(true);
    assert_eq!(
        examined, reads,
        "reads at a stable that passed every key's commits since its finger \
         should examine one version each"
    );
}

/// Versions examined and reads made by a read of every key at a stable
/// that passed half of their commits, with `stable_sweep` on or off.
fn stable_passed_reads<M: Machinery>(stable_sweep: bool) -> (u64, u64) {
    let e = loaded::<M>(stable_sweep);
    let mut s = e.session().unwrap();
    // Every key written at 2 + round * KEYS + k, stable left at the load:
    // each commit prunes with stable 1, so each finger stays at the load.
    let at = |round: u64, k: u64| 2 + round * KEYS + k;
    for round in 0..VERSIONS {
        for k in 0..KEYS {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(key(k), format!("v{round}").as_bytes()).unwrap();
            t.commit(CommitOptions::at(at(round, k))).unwrap();
        }
    }
    // Stable moves to the middle of the writes; none of those keys is
    // written again. The session's later commits (of another key) prune
    // again the keys stable has passed, oldest first, two a write, so a
    // read at stable finds each key's version there at its finger, not by
    // a climb from the load's.
    let mid = VERSIONS / 2;
    let stable = at(mid, KEYS - 1);
    e.set_timestamps(set(None, Some(stable), None)).unwrap();
    let ticks = KEYS * (mid + 1) / 2;
    for i in 0..ticks {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"tick", b"t").unwrap();
        t.commit(CommitOptions::at(at(VERSIONS, i))).unwrap();
    }
    let (examined, reads) = examined_by(&e, || {
        for k in 0..KEYS {
            let mut t = s.begin(&read_at(stable)).unwrap();
            let want = format!("v{mid}");
            assert_eq!(t.get(key(k)).unwrap().as_deref(), Some(want.as_bytes()));
        }
    });
    assert_eq!(reads, KEYS);
    (examined, reads)
}
