//! Model 6 — claiming and releasing session slots (invariant 12, slot
//! lifecycle).
//!
//! Runs below the engine (`api::Machine`): the engine's `Session` ends
//! any transaction still open (even one leaked with `mem::forget`, see
//! `tests/transactions/leaked_transaction.rs`) before it releases its slot, which would
//! hide a slot table that forgets to clear pins. Here the slot table itself
//! is checked: a table of one slot and two threads. Thread A claims the slot,
//! begins (publishing an xmin pin), sets read timestamp 5, and releases the
//! slot without ending the transaction. Thread B claims at the same time.
//! Exactly one of them holds the slot at a time (the other gets
//! `SessionTableFull`); whoever gets the slot finds it clean; after both
//! release it the slot is free exactly once and nothing is pinned.

use super::api::{Machine, Snapshot};
use super::common::check;
use crate::sync::mutant;
use crate::Error;
use loom::sync::Arc;
use loom::thread;

fn model() {
    let m = Arc::new(Machine::new(1));
    let a = {
        let m = m.clone();
        thread::spawn(move || match m.open_session() {
            Ok(slot) => {
                let mut snap = Snapshot::default();
                m.begin(slot, &mut snap);
                m.set_read_timestamp(slot, &mut snap, 5, false).unwrap();
                // Released with its pins still published.
                m.close_session(slot);
                true
            }
            Err(Error::SessionTableFull { max_sessions: 1 }) => false,
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    let b = {
        let m = m.clone();
        thread::spawn(move || match m.open_session() {
            Ok(slot) => {
                let pins = m.pins();
                assert_eq!(pins.len(), 1);
                assert_eq!(
                    pins[0],
                    (slot, 0, 0),
                    "slot lifecycle violated: a new session inherited pins"
                );
                m.close_session(slot);
                true
            }
            Err(Error::SessionTableFull { max_sessions: 1 }) => false,
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    let got_a = a.join().unwrap();
    let got_b = b.join().unwrap();
    assert!(got_a || got_b, "neither session got the only slot");
    assert!(
        m.pins().is_empty(),
        "a released slot is still counted as open"
    );
    let s1 = m.open_session().unwrap();
    assert_eq!(
        m.pins(),
        vec![(s1, 0, 0)],
        "slot lifecycle violated: a released slot still pins"
    );
    assert!(matches!(
        m.open_session(),
        Err(Error::SessionTableFull { max_sessions: 1 })
    ));
    m.close_session(s1);
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
