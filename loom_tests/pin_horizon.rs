//! Model 1 — a reader publishing its snapshot pin versus a horizon advance
//! and pruning (invariants 1 GC safety and 2 publish window; handshake 1 in
//! `lockfree/pin_horizon.rs`).
//!
//! `k = v1` is committed before the model. A writer commits `k = v2` and then
//! runs the collector (advance the horizon, prune every chain) while a reader
//! begins and reads `k`. The reader's snapshot sees v2 or it does not; either
//! way the version it needs must still be linked: it reads `v1` or `v2`,
//! never nothing. If the advancer's scan misses the reader's pin while the
//! reader misses the advancer's new floor, the horizon passes the reader's
//! snapshot, the collector cuts v1 below v2, and the reader finds nothing.

use super::common::{check, commit, engine};
use crate::sync::mutant;
use crate::TxnOptions;
use loom::thread;

fn model() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v1")], 0);
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            commit(&e, &[(b"k", b"v2")], 0);
            e.collect();
        })
    };
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.get(b"k").unwrap()
        })
    };
    writer.join().unwrap();
    let got = reader.join().unwrap();
    assert!(
        matches!(got.as_deref(), Some(b"v1") | Some(b"v2")),
        "GC safety violated: the reader's version was pruned (got {got:?})"
    );
}

/// The same race with two advances (two `collect()`s) against the
/// one pin. The first advance can move the horizon past the reader's
/// snapshot before the reader stores its pin; the second then sees that
/// pin, stored but not yet validated (the reader will fail validation and
/// retake its snapshot). The horizon must not move back to it (invariant 4)
/// and the advancer must not panic; `advance_horizon` used to
/// `debug_assert!` that every pin it saw was at or above the previous
/// horizon, which this interleaving breaks.
fn model_two_advances() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v1")], 0);
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            commit(&e, &[(b"k", b"v2")], 0);
            e.collect();
            e.collect();
        })
    };
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.get(b"k").unwrap()
        })
    };
    writer.join().unwrap();
    let got = reader.join().unwrap();
    assert!(
        matches!(got.as_deref(), Some(b"v1") | Some(b"v2")),
        "GC safety violated: the reader's version was pruned (got {got:?})"
    );
}

/// The same race for a reader that begins with a read timestamp,
/// so its lazy snapshot and both pins are taken in one handshake
/// (`begin_at_read_ts`). Oldest is unset, so the timestamp horizon stays at
/// 0 and untimestamped versions are pruned by id alone: only the xmin pin,
/// published in that handshake, protects `v1`.
fn model_at_read_ts() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v1")], 0);
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            commit(&e, &[(b"k", b"v2")], 0);
            e.collect();
        })
    };
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::at(5)).unwrap();
            t.get(b"k").unwrap()
        })
    };
    writer.join().unwrap();
    let got = reader.join().unwrap();
    assert!(
        matches!(got.as_deref(), Some(b"v1") | Some(b"v2")),
        "GC safety violated: the reader's version was pruned (got {got:?})"
    );
}

#[test]
fn reader_at_read_ts_pin_versus_horizon_advance() {
    check("pin_horizon/at_read_ts", mutant::NONE, model_at_read_ts);
}

#[test]
#[should_panic(expected = "GC safety violated")]
fn mutant_at_read_ts_lazy_pins_after_check() {
    check(
        "pin_horizon/at_read_ts/LAZY_PINS_AFTER_CHECK",
        mutant::LAZY_PINS_AFTER_CHECK,
        model_at_read_ts,
    );
}

#[test]
fn reader_pin_versus_two_horizon_advances() {
    check("pin_horizon/two_advances", mutant::NONE, model_two_advances);
}

#[test]
#[should_panic(expected = "GC safety violated")]
fn mutant_two_advances_pin_without_fence() {
    check(
        "pin_horizon/two_advances/PIN_WITHOUT_FENCE",
        mutant::PIN_WITHOUT_FENCE,
        model_two_advances,
    );
}

#[test]
fn reader_pin_versus_horizon_advance() {
    check("pin_horizon", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "GC safety violated")]
fn mutant_pin_without_fence() {
    check(
        "pin_horizon/PIN_WITHOUT_FENCE",
        mutant::PIN_WITHOUT_FENCE,
        model,
    );
}

#[test]
#[should_panic(expected = "GC safety violated")]
fn mutant_scan_without_fence() {
    check(
        "pin_horizon/SCAN_WITHOUT_FENCE",
        mutant::SCAN_WITHOUT_FENCE,
        model,
    );
}
