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

#[test]
fn a_read_at_a_raised_stable_examines_one_version() {
    on_every_machinery!(raised_stable_on);
}

/// Versions piled on every key above stable, then stable raised past half
/// of them with no commit after: the stable setter moved every key's
/// finger to its version at the new stable before publishing it, so a
/// read there examines that version alone (no climb from a finger left at
/// the stable of the key's last commit).
fn raised_stable_on<M: Machinery>() {
    let e = Engine::<M>::with_machinery(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
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
    // Stable at the last commit of round `mid`: every key's version of
    // that round is the one visible there.
    let mid = VERSIONS / 2;
    let stable = 1 + (mid + 1) * KEYS;
    e.set_timestamps(set(None, Some(stable), None)).unwrap();
    let want = format!("v{mid}");
    for opts in [
        read_at(stable),
        TxnOptions {
            read_at_stable: true,
            ..TxnOptions::default()
        },
    ] {
        let before = e.stats();
        for k in 0..KEYS {
            let mut t = s.begin(&opts).unwrap();
            assert_eq!(t.get(key(k)).unwrap().as_deref(), Some(want.as_bytes()));
        }
        let after = e.stats();
        let (reads, examined) = (
            after.reads - before.reads,
            after.versions_read - before.versions_read,
        );
        assert_eq!(reads, KEYS);
        assert_eq!(
            examined, reads,
            "reads at the raised stable should examine only the finger's version"
        );
    }
}

/// A named table's keys queued for the stable sweep, one table dropped
/// before stable passes them: the sweep moves the live table's fingers
/// (one version a read at the new stable) and passes the dropped table's
/// keys over.
#[test]
fn the_stable_sweep_passes_a_dropped_tables_keys_over() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let (live, gone) = (
        e.create_table("live", TableOptions::default()).unwrap(),
        e.create_table("gone", TableOptions::default()).unwrap(),
    );
    e.set_timestamps(set(Some(1), Some(1), None)).unwrap();
    let mut s = e.session().unwrap();
    let mut next = 2;
    for round in 0..VERSIONS {
        for k in 0..KEYS {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let v = format!("v{round}");
            t.table(&live).unwrap().put(key(k), v.as_bytes()).unwrap();
            t.table(&gone).unwrap().put(key(k), v.as_bytes()).unwrap();
            t.commit(CommitOptions::at(next)).unwrap();
            next += 1;
        }
    }
    e.drop_table("gone").unwrap();
    let mid = VERSIONS / 2;
    let stable = 1 + (mid + 1) * KEYS;
    e.set_timestamps(set(None, Some(stable), None)).unwrap();
    let want = format!("v{mid}");
    let before = e.stats();
    for k in 0..KEYS {
        let mut t = s.begin(&read_at(stable)).unwrap();
        let got = t.table(&live).unwrap().get(key(k)).unwrap();
        assert_eq!(got.as_deref(), Some(want.as_bytes()));
        assert!(matches!(
            t.table(&gone).map(|_| ()),
            Err(Error::TableDropped { .. })
        ));
    }
    let after = e.stats();
    assert_eq!(
        after.versions_read - before.versions_read,
        KEYS,
        "reads at the raised stable should examine only the finger's version"
    );
    // The rest of the queue, past the dropped table's keys too.
    e.set_timestamps(set(None, Some(next), None)).unwrap();
}
