//! Model 6 — claiming and releasing session slots (invariant 12, slot
//! lifecycle).
//!
//! A table of one slot and two threads. Thread A opens a session, begins a
//! transaction with a read timestamp and leaks it with `mem::forget` (safe
//! Rust: the transaction's own end never runs), then closes the session.
//! Thread B opens a session at the same time. Exactly one of them holds the
//! slot at a time (the other gets `SessionTableFull`); a session that gets
//! the slot finds it clean; after both close the slot is free exactly once
//! (one new session fits, a second does not) and nothing is pinned.

use crate::common::{check, engine, ts};
use loom::thread;
use snapshot_engine::{mutant, Error, TimestampKind, TxnOptions};

fn model() {
    let e = engine(1);
    let a = {
        let e = e.clone();
        thread::spawn(move || match e.session() {
            Ok(mut s) => {
                let opts = TxnOptions {
                    read_timestamp: Some(ts(5)),
                    ..TxnOptions::default()
                };
                let t = s.begin(&opts).unwrap();
                std::mem::forget(t);
                drop(s);
                true
            }
            Err(Error::SessionTableFull { max_sessions: 1 }) => false,
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    let b = {
        let e = e.clone();
        thread::spawn(move || match e.session() {
            Ok(s) => {
                let pins = e.pins();
                assert_eq!(pins.len(), 1);
                assert_eq!(pins[0].slot, s.slot());
                assert_eq!(
                    (pins[0].snapshot_xmin, pins[0].read_ts),
                    (None, None),
                    "slot lifecycle violated: a new session inherited pins"
                );
                true
            }
            Err(Error::SessionTableFull { max_sessions: 1 }) => false,
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    let got_a = a.join().unwrap();
    let got_b = b.join().unwrap();
    assert!(got_a || got_b, "neither session got the only slot");
    assert_eq!(e.stats().sessions_open, 0);
    assert_eq!(
        e.query_timestamp(TimestampKind::OldestReader),
        None,
        "slot lifecycle violated: a released slot still pins a read timestamp"
    );
    let s1 = e.session().unwrap();
    assert!(matches!(
        e.session(),
        Err(Error::SessionTableFull { max_sessions: 1 })
    ));
    drop(s1);
}

#[test]
fn slot_claim_and_release() {
    check("slots", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "slot lifecycle violated")]
fn mutant_slot_keeps_pins() {
    check("slots/SLOT_KEEPS_PINS", mutant::SLOT_KEEPS_PINS, model);
}
