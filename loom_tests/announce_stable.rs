//! Model 9 — a prepared transaction announcing its durable
//! timestamp versus the stable setter (invariant 10; handshake 3 in
//! `lockfree/stable.rs`), on the public machinery layer.
//!
//! Stable is 5. A transaction prepares at 6 and announces durable timestamp
//! 10 (`Transaction::set_durable_timestamp`) while a timekeeper raises
//! stable to 10 (`TxnManager::set_timestamps`). Either the announcement is
//! refused (`DurableTimestampNotAfterStable`) or the setter is
//! (`StablePastPreparedDurable`), or the prepare came too late (stable was
//! already 10); never do both the announcement and the stable move succeed,
//! which would leave stable at an unresolved prepared transaction's durable
//! timestamp. The manager has no index (unlike the engine's loom stand-in,
//! see `descriptors.rs`), so nothing but the handshake orders the two
//! threads, and the prepared transaction stays unresolved until both are
//! done.

use super::common::{check, stable, ts};
use crate::machinery::TxnManager;
use crate::sync::mutant;
use crate::{Error, TxnOptions};
use loom::sync::Arc;
use loom::thread;

fn model() {
    let mgr = Arc::new(TxnManager::new(1).unwrap());
    mgr.set_timestamps(stable(5)).unwrap();
    let timekeeper = {
        let mgr = mgr.clone();
        thread::spawn(move || match mgr.set_timestamps(stable(10)) {
            Ok(()) => true,
            Err(Error::StablePastPreparedDurable { stable, durable }) => {
                assert_eq!((stable, durable), (ts(10), ts(10)));
                false
            }
            Err(other) => panic!("unexpected error {other:?}"),
        })
    };
    // The preparer runs on this thread, so its transaction stays prepared
    // (and its announcement published) until the timekeeper is done.
    let mut s = mgr.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let announced = match t.prepare(ts(6), |_| {}) {
        Ok(p) => {
            assert_eq!(p, ts(6));
            match t.set_durable_timestamp(ts(10)) {
                Ok(()) => Some(true),
                Err(Error::DurableTimestampNotAfterStable { durable, stable }) => {
                    assert_eq!((durable, stable), (ts(10), ts(10)));
                    Some(false)
                }
                Err(other) => panic!("unexpected error {other:?}"),
            }
        }
        Err(Error::PrepareTimestampNotAfterStable { .. }) => None,
        Err(other) => panic!("unexpected error {other:?}"),
    };
    let moved = timekeeper.join().unwrap();
    assert!(
        !(announced == Some(true) && moved),
        "stable passed an announced prepared durable timestamp: both the announcement of 10 and stable = 10 succeeded"
    );
    drop(t);
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
