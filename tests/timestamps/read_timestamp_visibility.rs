//! A commit is visible exactly to readers whose read timestamp is at or
//! above its commit timestamp.

use snapshot_engine::*;

fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

#[test]
fn commit_at_10_is_visible_at_15_and_at_10_but_not_at_5() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v10").unwrap();
    t.commit(CommitOptions::at(10)).unwrap();

    for (read, want) in [
        (15, Some(&b"v10"[..])),
        (10, Some(b"v10")),
        (9, None),
        (5, None),
    ] {
        let mut t = s
            .begin(&TxnOptions {
                read_timestamp: Some(ts(read)),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(t.get(b"k").unwrap().as_deref(), want, "read ts {read}");
    }
    // No read timestamp: the newest committed version.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v10"[..]));
}

#[test]
fn each_read_timestamp_sees_the_newest_version_at_or_below_it() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    for (v, c) in [(b"a", 10), (b"b", 20), (b"c", 30)] {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", v).unwrap();
        t.commit(CommitOptions::at(c)).unwrap();
    }
    for (read, want) in [
        (5, None),
        (10, Some(b"a")),
        (25, Some(b"b")),
        (99, Some(b"c")),
    ] {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.set_read_timestamp(ts(read)).unwrap();
        assert_eq!(
            t.get(b"k").unwrap().as_deref(),
            want.map(|w| &w[..]),
            "read ts {read}"
        );
    }
}

#[test]
fn untimestamped_commits_are_visible_at_every_read_timestamp() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"plain").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.set_read_timestamp(ts(1)).unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"plain"[..]));
}

#[test]
fn read_at_stable_sees_commits_at_or_below_stable_only() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    for (k, c) in [(b"a", 10), (b"b", 20)] {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(k, b"v").unwrap();
        t.commit(CommitOptions::at(c)).unwrap();
    }
    e.set_timestamps(TimestampUpdate {
        stable: Some(ts(15)),
        ..Default::default()
    })
    .unwrap();
    let fast = TxnOptions {
        read_at_stable: true,
        ..Default::default()
    };
    let mut t = s.begin(&fast).unwrap();
    assert_eq!(t.read_timestamp(), ts(15));
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(t.get(b"b").unwrap(), None);
    assert_eq!(t.put(b"c", b"v"), Err(Error::ReadOnlyTransaction));
    t.commit(CommitOptions::default()).unwrap();
    e.set_timestamps(TimestampUpdate {
        stable: Some(ts(20)),
        ..Default::default()
    })
    .unwrap();
    let mut t = s.begin(&fast).unwrap();
    assert_eq!(t.get(b"b").unwrap().as_deref(), Some(&b"v"[..]));
}
