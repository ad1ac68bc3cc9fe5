//! First updater wins: the second writer of a key gets `WriteConflict` at
//! the write and must roll back.

use snapshot_engine::*;

#[test]
fn the_second_updater_of_a_key_gets_write_conflict_and_must_roll_back() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    t1.put(b"k", b"one").unwrap();
    assert_eq!(
        t2.put(b"k", b"two"),
        Err(Error::WriteConflict { key: b"k".to_vec() })
    );
    // Doomed: reads, writes and commit refuse; commit rolls back.
    assert_eq!(t2.get(b"x"), Err(Error::MustRollBack));
    assert_eq!(t2.put(b"other", b"v"), Err(Error::MustRollBack));
    assert_eq!(
        t2.try_commit(CommitOptions::default()).map_err(|e| {
            let err = e.error().clone();
            assert!(e.into_txn().is_none(), "a doomed commit rolls back");
            err
        }),
        Err(Error::MustRollBack)
    );
    t1.commit(CommitOptions::default()).unwrap();
    assert_eq!(e.stats().write_conflicts, 1);
}

#[test]
fn a_commit_after_the_writers_snapshot_is_a_conflict_even_once_finished() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut late = s2.begin(&TxnOptions::default()).unwrap();
    // Fix `late`'s snapshot now (it is otherwise taken at its first read or
    // write).
    late.take_snapshot().unwrap();
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    t1.put(b"k", b"one").unwrap();
    t1.commit(CommitOptions::default()).unwrap();
    // `late`'s snapshot predates t1's commit: snapshot isolation forbids
    // overwriting a version it cannot see.
    assert!(matches!(
        late.put(b"k", b"two"),
        Err(Error::WriteConflict { .. })
    ));
    late.rollback();
    // A transaction that began after the commit may write.
    let mut t = s2.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"two").unwrap();
    t.commit(CommitOptions::default()).unwrap();
}

#[test]
fn a_version_newer_than_the_read_timestamp_is_a_conflict() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v").unwrap();
    t.commit(CommitOptions::at(20)).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.set_read_timestamp(Timestamp::new(10)).unwrap();
    assert!(matches!(
        t.put(b"k", b"w"),
        Err(Error::WriteConflict { .. })
    ));
}

#[test]
fn a_rolled_back_writer_does_not_block_the_next_one() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    t1.put(b"k", b"one").unwrap();
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    t1.rollback();
    t2.put(b"k", b"two").unwrap();
    t2.commit(CommitOptions::default()).unwrap();
}
