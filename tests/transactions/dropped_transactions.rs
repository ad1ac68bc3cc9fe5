//! A machinery `Transaction` dropped without `rollback` (so with no
//! completion to flip its statuses) is rolled back all the same: later
//! readers see the pre-image, later writers may write the key, and pruning
//! drops its versions. Prepared (the statuses stay `Prepared` in the word,
//! and the manager knows the transaction is gone) and unprepared (the
//! statuses stay `InProgress`, and the writer has left the running set).

use snapshot_engine::machinery::{
    Transaction, TxnManager, TxnSession, VersionState, VersionStatus, Visibility, WriteCheck,
};
use snapshot_engine::{CommitOptions, Error, Timestamp, TimestampUpdate, TxnOptions};
use std::sync::Mutex;

/// One key's versions, newest first.
struct Version {
    status: VersionStatus,
    value: u64,
}

type Key = Mutex<Vec<Version>>;

fn at(ts: u64) -> TxnOptions {
    TxnOptions {
        read_timestamp: Some(Timestamp::new(ts)),
        ..TxnOptions::default()
    }
}

/// What a transaction with `opts` reads, or the prepare conflict.
fn read(s: &mut TxnSession<'_>, key: &Key, opts: &TxnOptions) -> Result<Option<u64>, Visibility> {
    let mut t = s.begin(opts).unwrap();
    let view = t.read_view().unwrap();
    for v in key.lock().unwrap().iter() {
        match view.visibility(&v.status) {
            Visibility::Visible => return Ok(Some(v.value)),
            Visibility::PrepareConflict => return Err(Visibility::PrepareConflict),
            Visibility::Skip => {}
        }
    }
    Ok(None)
}

/// Writes `value` (first updater wins) and commits at `ts`.
fn write(s: &mut TxnSession<'_>, key: &Key, value: u64, ts: u64) -> Result<(), Error> {
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let (status, view) = t.new_version()?;
    let mut list = key.lock().unwrap();
    let first = list
        .iter()
        .map(|v| view.write_check(&v.status))
        .find(|c| *c != WriteCheck::Skip);
    if first == Some(WriteCheck::Conflict) {
        drop(list);
        t.mark_write_conflict();
        return Err(Error::WriteConflict { key: b"k".to_vec() });
    }
    list.insert(0, Version { status, value });
    drop(list);
    t.commit(CommitOptions::at(ts), |done| {
        for v in key.lock().unwrap().iter() {
            done.flip(&v.status);
        }
    })
}

fn setup() -> (TxnManager, Key) {
    let mgr = TxnManager::new(4).unwrap();
    let key = Mutex::new(Vec::new());
    {
        let mut s = mgr.session().unwrap();
        write(&mut s, &key, 10, 10).unwrap();
    }
    (mgr, key)
}

/// Starts a transaction that writes 20 under the key and, with `prepare`,
/// prepares it at 30; then drops it without rollback.
fn drop_a_writer(mgr: &TxnManager, key: &Key, prepare: bool) {
    let mut s = mgr.session().unwrap();
    let mut t = write_twenty(&mut s, key);
    if prepare {
        prepare_at_30(&mut t, key);
        assert_eq!(
            key.lock().unwrap()[0].status.state(),
            VersionState::Prepared(Timestamp::new(30))
        );
    }
    drop(t);
}

/// Begins a transaction on `s` that writes 20 under the key.
fn write_twenty<'s, 'm>(s: &'s mut TxnSession<'m>, key: &Key) -> Transaction<'s, 'm> {
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let (status, _) = t.new_version().unwrap();
    key.lock().unwrap().insert(0, Version { status, value: 20 });
    t
}

/// Prepares `t` at 30, flipping every version under the key.
fn prepare_at_30(t: &mut Transaction<'_, '_>, key: &Key) {
    t.prepare(Timestamp::new(30), |done| {
        for v in key.lock().unwrap().iter() {
            done.flip(&v.status);
        }
    })
    .unwrap();
}

#[test]
fn a_dropped_prepared_transaction_reads_as_rolled_back() {
    let (mgr, key) = setup();
    let mut s = mgr.session().unwrap();
    // While it is prepared, a reader at or above 30 meets a conflict.
    {
        let mut w = mgr.session().unwrap();
        let mut t = write_twenty(&mut w, &key);
        prepare_at_30(&mut t, &key);
        assert_eq!(
            read(&mut s, &key, &at(35)),
            Err(Visibility::PrepareConflict)
        );
        // Stable may not pass a prepared transaction's durable timestamp...
        t.set_durable_timestamp(Timestamp::new(40)).unwrap();
        let past = TimestampUpdate {
            stable: Some(Timestamp::new(50)),
            ..TimestampUpdate::default()
        };
        assert!(matches!(
            mgr.set_timestamps(past),
            Err(Error::StablePastPreparedDurable { .. })
        ));
        drop(t);
        // ...and once it is dropped, its claim is gone.
        mgr.set_timestamps(past).unwrap();
    }
    // The pre-image, for every kind of reader.
    assert_eq!(read(&mut s, &key, &at(35)), Ok(Some(10)));
    assert_eq!(read(&mut s, &key, &TxnOptions::default()), Ok(Some(10)));
    let stable = TxnOptions {
        read_at_stable: true,
        ..TxnOptions::default()
    };
    assert_eq!(read(&mut s, &key, &stable), Ok(Some(10)));
    // The reader marked it aborted on the way.
    assert_eq!(key.lock().unwrap()[0].status.state(), VersionState::Aborted);
    // A later writer may write the key, and it reads back.
    write(&mut s, &key, 30, 60).unwrap();
    assert_eq!(read(&mut s, &key, &at(70)), Ok(Some(30)));
}

#[test]
fn a_later_writer_is_not_blocked_by_a_dropped_prepared_transaction() {
    let (mgr, key) = setup();
    drop_a_writer(&mgr, &key, true);
    // No reader met it first: the writer's own check settles it.
    let mut s = mgr.session().unwrap();
    write(&mut s, &key, 30, 60).unwrap();
    assert_eq!(read(&mut s, &key, &at(70)), Ok(Some(30)));
    assert_eq!(key.lock().unwrap()[1].status.state(), VersionState::Aborted);
}

#[test]
fn a_later_writer_is_not_blocked_by_a_dropped_unprepared_transaction() {
    let (mgr, key) = setup();
    drop_a_writer(&mgr, &key, false);
    let mut s = mgr.session().unwrap();
    assert_eq!(read(&mut s, &key, &TxnOptions::default()), Ok(Some(10)));
    write(&mut s, &key, 30, 60).unwrap();
    assert_eq!(read(&mut s, &key, &at(70)), Ok(Some(30)));
}

#[test]
fn the_manager_reports_dropped_writers_versions_aborted_for_pruning() {
    for prepare in [false, true] {
        let (mgr, key) = setup();
        drop_a_writer(&mgr, &key, prepare);
        let list = key.lock().unwrap();
        // The word alone still says what the writer left behind...
        let raw = list[0].status.state();
        assert_eq!(raw == VersionState::InProgress, !prepare);
        // ...the manager knows the writer is gone.
        assert_eq!(mgr.version_state(&list[0].status), VersionState::Aborted);
        assert_eq!(
            mgr.version_state(&list[1].status),
            VersionState::Committed(Timestamp::new(10))
        );
        // Never a safe point; the committed version below it is one.
        let ten = Some(Timestamp::new(10));
        mgr.set_timestamps(TimestampUpdate {
            oldest: ten,
            stable: ten,
            durable: None,
        })
        .unwrap();
        mgr.advance_horizon();
        assert!(!mgr.horizon().covers(&list[0].status));
        assert!(mgr.horizon().covers(&list[1].status));
    }
}

#[test]
fn a_live_prepared_transaction_is_still_a_conflict_for_readers_and_writers() {
    let (mgr, key) = setup();
    let mut w = mgr.session().unwrap();
    let mut t = write_twenty(&mut w, &key);
    prepare_at_30(&mut t, &key);
    let mut s = mgr.session().unwrap();
    assert_eq!(
        read(&mut s, &key, &at(35)),
        Err(Visibility::PrepareConflict)
    );
    assert!(matches!(
        write(&mut s, &key, 30, 60),
        Err(Error::WriteConflict { .. })
    ));
    assert_eq!(
        mgr.version_state(&key.lock().unwrap()[0].status),
        VersionState::Prepared(Timestamp::new(30))
    );
    t.commit(CommitOptions::at(30), |done| {
        for v in key.lock().unwrap().iter() {
            done.flip(&v.status);
        }
    })
    .unwrap();
    assert_eq!(read(&mut s, &key, &at(35)), Ok(Some(20)));
}

#[test]
fn a_transaction_that_wrote_nothing_rolls_back_without_flip_and_unpins() {
    let m = TxnManager::new(4).unwrap();
    let mut s = m.session().unwrap();
    let ts = |oldest| TimestampUpdate {
        oldest: Some(Timestamp::new(oldest)),
        ..TimestampUpdate::default()
    };
    m.set_timestamps(ts(10)).unwrap();
    let mut t = s.begin(&at(10)).unwrap();
    t.read_view().unwrap();
    m.set_timestamps(ts(20)).unwrap();
    m.advance_horizon();
    assert_eq!(
        m.horizon().timestamp(),
        Timestamp::new(10),
        "the reader pins 10"
    );
    let mut flipped = false;
    t.rollback(|_| flipped = true).unwrap();
    assert!(!flipped, "no id, nothing announced: nothing to flip");
    assert_eq!(t.rollback(|_| {}), Err(Error::TransactionFinished));
    drop(t);
    m.advance_horizon();
    assert_eq!(
        m.horizon().timestamp(),
        Timestamp::new(20),
        "its pin is gone"
    );
    let st = m.stats();
    assert_eq!((st.rollbacks, st.read_only_txns), (1, 1));
    // One that wrote is flipped.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.new_version().unwrap();
    t.rollback(|_| flipped = true).unwrap();
    assert!(flipped);
}
