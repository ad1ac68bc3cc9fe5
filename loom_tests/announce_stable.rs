//! Model 9 (issue 9) — a prepared transaction announcing its durable
//! timestamp versus the stable setter (invariant 10; handshake 3 in
//! `lockfree.rs`).
//!
//! Stable is 5. Session A prepares at 6 and announces durable timestamp 10
//! while a timekeeper raises stable to 10. Either the announcement is
//! refused (`DurableTimestampNotAfterStable`) or the setter is
//! (`StablePastPreparedDurable`), or A's prepare came too late (stable was
//! already 10); never do both the announcement and the stable move succeed,
//! which would leave stable at an unresolved prepared transaction's durable
//! timestamp. Runs below the engine (`loom_api::Machine`) so nothing but the
//! handshake orders the two threads, and the prepared transaction stays
//! unresolved to the end.

use crate::common::check;
use loom::sync::Arc;
use loom::thread;
use snapshot_engine::loom_api::Machine;
use snapshot_engine::{mutant, Error, Timestamp};

fn model() {
    let m = Arc::new(Machine::new(1));
    m.set_stable(5).unwrap();
    let a = m.open_session().unwrap();
    let preparer = {
        let m = m.clone();
        thread::spawn(move || match m.claim_prepare(a, 6) {
            Ok(p) => {
                assert_eq!(p, 6);
                match m.announce(a, 10, true) {
                    Ok(()) => Some(true),
                    Err(Error::DurableTimestampNotAfterStable { durable, stable }) => {
                        assert_eq!((durable, stable), (Timestamp::new(10), Timestamp::new(10)));
                        Some(false)
                    }
                    Err(other) => panic!("unexpected error {other:?}"),
                }
            }
            Err(Error::PrepareTimestampNotAfterStable { .. }) => None,
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    let timekeeper = {
        let m = m.clone();
        thread::spawn(move || match m.set_stable(10) {
            Ok(()) => true,
            Err(Error::StablePastPreparedDurable { stable, durable }) => {
                assert_eq!((stable, durable), (Timestamp::new(10), Timestamp::new(10)));
                false
            }
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    let announced = preparer.join().unwrap();
    let moved = timekeeper.join().unwrap();
    assert!(
        !(announced == Some(true) && moved),
        "stable passed an announced prepared durable timestamp: both the announcement of 10 and stable = 10 succeeded"
    );
    m.close_session(a);
}

#[test]
fn announce_versus_stable() {
    check("announce_stable", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "stable passed an announced prepared durable timestamp")]
fn mutant_announce_without_fence() {
    check(
        "announce_stable/ANNOUNCE_WITHOUT_FENCE",
        mutant::ANNOUNCE_WITHOUT_FENCE,
        model,
    );
}
