//! The session table: a full table is a typed error; a freed slot is reused.

use snapshot_engine::with_machinery::{Engine, LockFree, Machinery};
#[cfg(feature = "baseline")]
use snapshot_engine::with_machinery::{RwLockBaseline, RwLockBaselinePatched};
use snapshot_engine::*;

#[test]
fn a_full_session_table_errors_and_a_freed_slot_is_reused() {
    let e = Engine::new(EngineConfig {
        max_sessions: 2,
        ..Default::default()
    })
    .unwrap();
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
    let e = Engine::new(EngineConfig::default()).unwrap();
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
    let e = Engine::new(EngineConfig::default()).unwrap();
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

type Pin = (Option<u64>, Option<Timestamp>);
const NO_PIN: Pin = (None, None);

/// What session `slot` pins now: its snapshot xmin and read timestamp.
fn pin<M: Machinery>(e: &Engine<M>, slot: usize) -> Pin {
    let p = e
        .pins()
        .into_iter()
        .find(|p| p.slot == slot)
        .expect("an open session is listed");
    (p.snapshot_xmin, p.read_ts)
}

/// The lazy snapshot's pin bookkeeping, path by path: a transaction pins
/// nothing until it takes its view, and every refusal and fallback leaves
/// no pin it does not need (the fuzz replay compares pins too; this names
/// each path).
fn lazy_paths_leave_no_stray_pin<M: Machinery>() {
    let ts = Timestamp::new;
    let e = Engine::<M>::with_machinery(EngineConfig {
        max_sessions: 4,
        ..Default::default()
    })
    .unwrap();
    let mut s = e.session().unwrap();
    let slot = s.slot();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v").unwrap();
    t.commit(CommitOptions::at(5)).unwrap();
    let oldest = |o| TimestampUpdate {
        oldest: Some(ts(o)),
        ..TimestampUpdate::default()
    };
    e.set_timestamps(oldest(10)).unwrap();
    let at = |r| TxnOptions {
        read_timestamp: Some(ts(r)),
        ..TxnOptions::default()
    };
    let at_stable = TxnOptions {
        read_at_stable: true,
        ..TxnOptions::default()
    };

    // No read, no pin, before or after commit.
    let t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(pin(&e, slot), NO_PIN, "a transaction before its first read");
    t.commit(CommitOptions::default()).unwrap();
    assert_eq!(pin(&e, slot), NO_PIN, "after a read-only commit");

    // Begin refused before anything is published.
    for (what, opts) in [
        ("a read timestamp below oldest at begin", at(5)),
        ("read timestamp 0 at begin", at(0)),
        (
            "read_at_stable with a read timestamp",
            TxnOptions {
                read_at_stable: true,
                ..at(12)
            },
        ),
    ] {
        assert!(s.begin(&opts).is_err(), "{what}: refused");
        assert_eq!(pin(&e, slot), NO_PIN, "{what}: refused, and no pin left");
    }

    // A refused lazy read timestamp (the snapshot would come with it)
    // leaves neither pin; the transaction stays usable.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert!(t.set_read_timestamp(ts(5)).is_err());
    assert_eq!(pin(&e, slot), NO_PIN, "a refused lazy read timestamp");
    assert_eq!(t.set_read_timestamp(ts(12)).unwrap(), ts(12));
    let (xmin, read_ts) = pin(&e, slot);
    assert!(
        xmin.is_some(),
        "a valid lazy read timestamp pins its snapshot"
    );
    assert_eq!(read_ts, Some(ts(12)));
    assert!(t.set_read_timestamp(ts(13)).is_err(), "set once");
    assert_eq!(
        pin(&e, slot),
        (xmin, Some(ts(12))),
        "a second read timestamp changes no pin"
    );
    t.rollback();
    assert_eq!(pin(&e, slot), NO_PIN, "after rollback");

    // Refused after the snapshot: the snapshot's pin stays, no read
    // timestamp pin.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.get(b"k").unwrap();
    let (xmin, _) = pin(&e, slot);
    assert!(xmin.is_some(), "the first read pins the snapshot");
    assert!(t.set_read_timestamp(ts(5)).is_err());
    assert_eq!(
        pin(&e, slot),
        (xmin, None),
        "a refused read timestamp after the snapshot"
    );
    drop(t);
    assert_eq!(pin(&e, slot), NO_PIN, "after drop");

    // Rounded up: the pin is the timestamp in force.
    let t = s
        .begin(&TxnOptions {
            roundup_read: true,
            ..at(5)
        })
        .unwrap();
    assert_eq!(t.read_timestamp(), ts(10));
    assert_eq!(pin(&e, slot).1, Some(ts(10)), "a rounded-up read timestamp");
    drop(t);
    assert_eq!(pin(&e, slot), NO_PIN, "after drop");

    // read_at_stable with no stable set falls back to a lazy snapshot: its
    // stable-view pins go at begin, the snapshot pins at the first read.
    let mut t = s.begin(&at_stable).unwrap();
    assert_eq!(
        pin(&e, slot),
        NO_PIN,
        "read_at_stable with no stable, before its first read"
    );
    t.get(b"k").unwrap();
    let (xmin, read_ts) = pin(&e, slot);
    assert!(
        xmin.is_some() && read_ts.is_none(),
        "its snapshot's pin only"
    );
    t.commit(CommitOptions::default()).unwrap();
    assert_eq!(pin(&e, slot), NO_PIN, "after its commit");

    // With stable set, the stable view pins at begin, until it ends.
    e.set_timestamps(TimestampUpdate {
        stable: Some(ts(20)),
        ..TimestampUpdate::default()
    })
    .unwrap();
    let t = s.begin(&at_stable).unwrap();
    let (xmin, read_ts) = pin(&e, slot);
    assert!(xmin.is_some(), "the stable view pins its xmin floor");
    assert_eq!(read_ts, Some(ts(20)), "the stable view pins stable");
    drop(t);
    assert_eq!(pin(&e, slot), NO_PIN, "after the stable view ends");

    // A leaked transaction's pins go at the session's next begin.
    let mut t = s.begin(&at(12)).unwrap();
    t.get(b"k").unwrap();
    std::mem::forget(t);
    assert_eq!(
        pin(&e, slot).1,
        Some(ts(12)),
        "a leaked transaction still pins"
    );
    let t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        pin(&e, slot),
        NO_PIN,
        "the next begin recovers the leaked one"
    );
    drop(t);
}

#[test]
fn lazy_snapshot_paths_leave_no_stray_pin() {
    lazy_paths_leave_no_stray_pin::<LockFree>();
    #[cfg(feature = "baseline")]
    lazy_paths_leave_no_stray_pin::<RwLockBaseline>();
    #[cfg(feature = "baseline")]
    lazy_paths_leave_no_stray_pin::<RwLockBaselinePatched>();
}
