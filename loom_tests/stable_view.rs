//! Model 11 — the read-only fast path publishing its pins versus
//! oldest moving and a collect (invariants 1 GC safety and 2 publish window;
//! handshake 1 in `begin_at_stable`).
//!
//! `k` has versions at 10 and 20; stable is 15. A timekeeper raises oldest
//! and stable to 20 (which advances the horizon) and runs the collector,
//! while a fast-path reader (`read_at_stable`) begins and reads `k`. A
//! reader at stable 15 must read the version at 10, one at 20 the version
//! at 20. If the reader checked the floors before storing its pins, the
//! advancer could miss its read-timestamp pin while the reader missed the
//! new floor: the horizon moves to 20, the collector cuts the version at
//! 10, and the reader at 15 finds nothing. Sequentially `floor_ts <= oldest
//! <= stable`, so only an interleaving shows it (the fuzzer cannot).

use super::common::{check, commit, engine, ts};
use crate::sync::mutant;
use crate::{TimestampUpdate, TxnOptions};
use loom::thread;

fn model() {
    let e = engine(1);
    commit(&e, &[(b"k", b"v10")], 10);
    commit(&e, &[(b"k", b"v20")], 20);
    e.set_timestamps(TimestampUpdate {
        stable: Some(ts(15)),
        ..TimestampUpdate::default()
    })
    .unwrap();
    let timekeeper = {
        let e = e.clone();
        thread::spawn(move || {
            e.set_timestamps(TimestampUpdate {
                oldest: Some(ts(20)),
                stable: Some(ts(20)),
                ..TimestampUpdate::default()
            })
            .unwrap();
            e.collect();
        })
    };
    let mut s = e.session().unwrap();
    let opts = TxnOptions {
        read_at_stable: true,
        ..TxnOptions::default()
    };
    let mut t = s.begin(&opts).unwrap();
    let at = t.read_timestamp().get();
    let got = t.get(b"k").unwrap();
    drop(t);
    drop(s);
    timekeeper.join().unwrap();
    let want: &[u8] = match at {
        15 => b"v10",
        20 => b"v20",
        other => panic!("read at stable {other}"),
    };
    assert_eq!(
        got.as_deref(),
        Some(want),
        "GC safety violated: a fast-path read at stable {at} lost its version"
    );
}

/// The same race for the fast path's xmin pin, which protects the
/// untimestamped versions it decides by `complete_below`. `k = v1` is
/// committed untimestamped and collected (floor 2), stable is 5. A writer
/// commits `k = v2` untimestamped and collects while a fast-path reader
/// begins and reads `k`: with `complete_below` 2 it must read `v1` (v2's
/// writer is not below 2), with 3 `v2`. If the advance missed the reader's
/// xmin pin while the reader missed the new floor, the horizon would cover
/// v2 and the collector would cut v1.
fn model_untimestamped() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v1")], 0);
    e.collect();
    e.set_timestamps(TimestampUpdate {
        stable: Some(ts(5)),
        ..TimestampUpdate::default()
    })
    .unwrap();
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            commit(&e, &[(b"k", b"v2")], 0);
            e.collect();
        })
    };
    let mut s = e.session().unwrap();
    let opts = TxnOptions {
        read_at_stable: true,
        ..TxnOptions::default()
    };
    let got = s.begin(&opts).unwrap().get(b"k").unwrap();
    drop(s);
    writer.join().unwrap();
    assert!(
        matches!(got.as_deref(), Some(b"v1") | Some(b"v2")),
        "GC safety violated: a fast-path read lost its untimestamped version (got {got:?})"
    );
}

#[test]
fn stable_view_untimestamped_versus_collect() {
    check(
        "stable_view/untimestamped",
        mutant::NONE,
        model_untimestamped,
    );
}

#[test]
#[should_panic(expected = "GC safety violated")]
fn mutant_stable_view_checks_before_pins_untimestamped() {
    check(
        "stable_view/untimestamped/STABLE_VIEW_CHECKS_BEFORE_PINS",
        mutant::STABLE_VIEW_CHECKS_BEFORE_PINS,
        model_untimestamped,
    );
}

#[test]
fn stable_view_versus_oldest_and_collect() {
    check("stable_view", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "GC safety violated")]
fn mutant_stable_view_checks_before_pins() {
    check(
        "stable_view/STABLE_VIEW_CHECKS_BEFORE_PINS",
        mutant::STABLE_VIEW_CHECKS_BEFORE_PINS,
        model,
    );
}
