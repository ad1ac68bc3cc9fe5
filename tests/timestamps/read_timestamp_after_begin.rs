//! Setting the read timestamp after begin: a fresh snapshot, validation
//! against oldest, round-up, and recovery after a rejection.

use snapshot_engine::*;

fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

#[test]
fn a_commit_that_lands_between_begin_and_set_read_timestamp_is_seen() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut reader = e.session().unwrap();
    let mut writer = e.session().unwrap();

    let mut r = reader.begin(&TxnOptions::default()).unwrap();
    let mut w = writer.begin(&TxnOptions::default()).unwrap();
    w.put(b"k", b"landed").unwrap();
    w.commit(CommitOptions::at(20)).unwrap();

    assert_eq!(r.set_read_timestamp(ts(25)).unwrap(), ts(25));
    assert_eq!(r.get(b"k").unwrap().as_deref(), Some(&b"landed"[..]));
}

#[test]
fn a_commit_between_begin_and_set_read_timestamp_above_it_is_not_seen() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut reader = e.session().unwrap();
    let mut writer = e.session().unwrap();
    let mut r = reader.begin(&TxnOptions::default()).unwrap();
    let mut w = writer.begin(&TxnOptions::default()).unwrap();
    w.put(b"k", b"later").unwrap();
    w.commit(CommitOptions::at(30)).unwrap();
    r.set_read_timestamp(ts(25)).unwrap();
    assert_eq!(r.get(b"k").unwrap(), None);
}

#[test]
fn a_read_timestamp_below_oldest_is_rejected_then_rounded_up_then_a_valid_one_is_accepted() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v").unwrap();
    t.commit(CommitOptions::at(50)).unwrap();
    e.set_timestamps(TimestampUpdate {
        oldest: Some(ts(40)),
        stable: Some(ts(60)),
        ..Default::default()
    })
    .unwrap();

    // Rejected, with the bound it broke; the transaction stays usable.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        t.set_read_timestamp(ts(30)),
        Err(Error::ReadTimestampTooOld {
            read: ts(30),
            oldest: ts(40)
        })
    );
    assert_eq!(t.read_timestamp(), Timestamp::NONE);
    // A valid one after the rejection.
    assert_eq!(t.set_read_timestamp(ts(55)).unwrap(), ts(55));
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    // Only once.
    assert_eq!(
        t.set_read_timestamp(ts(56)),
        Err(Error::ReadTimestampAlreadySet { current: ts(55) })
    );
    drop(t);

    // Rounded up when asked.
    let mut t = s
        .begin(&TxnOptions {
            roundup_read: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(t.set_read_timestamp(ts(30)).unwrap(), ts(40));
    assert_eq!(t.read_timestamp(), ts(40));
    assert_eq!(t.get(b"k").unwrap(), None);
    drop(t);

    // At begin through the options: same rules.
    assert_eq!(
        s.begin(&TxnOptions {
            read_timestamp: Some(ts(39)),
            ..Default::default()
        })
        .err(),
        Some(Error::ReadTimestampTooOld {
            read: ts(39),
            oldest: ts(40)
        })
    );
    // The engine is still fully usable.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k2", b"v2").unwrap();
    t.commit(CommitOptions::at(61)).unwrap();
}
