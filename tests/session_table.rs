//! The session table: a full table is a typed error; a freed slot is reused.

use snapshot_engine::*;

#[test]
fn a_full_session_table_errors_and_a_freed_slot_is_reused() {
    let e = Engine::new(EngineConfig {
        max_sessions: 2,
        ..Default::default()
    });
    let a = e.session().unwrap();
    let b = e.session().unwrap();
    assert_eq!(
        e.session().err(),
        Some(Error::SessionTableFull { max_sessions: 2 })
    );
    assert_eq!(e.stats().sessions_open, 2);
    let freed = a.slot();
    drop(a);
    let mut c = e.session().unwrap();
    assert_eq!(c.slot(), freed);
    // The engine is fully usable after the refusal.
    let mut t = c.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    drop(b);
    assert_eq!(e.stats().sessions_open, 1);
}

#[test]
fn a_released_slot_pins_nothing() {
    let e = Engine::new(EngineConfig::default());
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.set_read_timestamp(Timestamp::new(5)).unwrap();
        assert_eq!(
            e.query_timestamp(TimestampKind::OldestReader),
            Some(Timestamp::new(5))
        );
        // Session and transaction dropped without commit.
    }
    assert_eq!(e.query_timestamp(TimestampKind::OldestReader), None);
    assert!(e.pins().is_empty());
}

#[test]
fn sessions_move_between_threads() {
    let e = Engine::new(EngineConfig::default());
    let mut s = e.session().unwrap();
    std::thread::scope(|sc| {
        sc.spawn(move || {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"k", b"v").unwrap();
            t.commit(CommitOptions::default()).unwrap();
        });
    });
    assert_eq!(e.stats().sessions_open, 0);
}
