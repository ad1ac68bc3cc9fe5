//! Serializable commits (`kv/serializable.rs`): a validating committer
//! racing a concurrent writer, through the engine's public API.
//!
//! Write skew: `a` and `b` are both `on`; each of two serializable
//! transactions, on a thread of its own, reads both and, if both are on,
//! turns its own off (T1 `a`, T2 `b`). Its write goes into the chain
//! before it commits (first updater wins), and it validates its reads and
//! completes its commit under the engine's commit gate. Whatever the
//! interleaving, exactly one goes off call: when both read both `on`, the
//! first through the gate passes over the other's version still in
//! progress, and the second finds the first's committed version newer
//! than its snapshot (a `SerializationConflict`). Twins: validation
//! skipped (both commit), and the gate left before the commit instead of
//! after (the second validates while the first's version is still in
//! progress, passes over it, and both commit).
//!
//! Each commit validates its reads against the store before it takes the
//! gate and keeps that pass only if the gate's sequence has not moved
//! since (no commit went through the gate meanwhile); else it validates
//! again under the gate. Twins: the early pass kept although the sequence
//! moved (the second passes over the first's version, in progress when it
//! looked, and both commit), and the sequence raised with a Relaxed store
//! (a committer that loads the raised value need not see the flips before
//! it, takes the first's version for one in progress, and both commit).
//!
//! Phantom write skew (`phantom`): `a`, `c` and `x` exist; T1 counts the
//! keys in `a..=c` with a scan and, if two, sets `x`; T2 reads `x` and, if
//! unset, creates `b` inside T1's range. Serially one sees the other's
//! write; at most one may commit its write. T1's validation checks its
//! range on the entries its scan kept only while the index's count of
//! created keys is what it loaded before the walk; T2's creation moves
//! it, so T1 walks the range again and finds `b`. Twins: the kept entries
//! trusted whatever the count (T1 misses `b`, both commit), and the count
//! raised before the key is in the index (T1 loads the raised count, its
//! walk misses `b`, and its validation finds the count unchanged).
//!
//! Under loom the store's index is the mutex stand-in (`loom_tests/api.rs`);
//! the race modelled is the gate's and the status flips', which the
//! stand-in does not order, and the creation count's order against the
//! key's insertion, which the stand-in keeps as the real index does (its
//! Release store and the scan's Acquire load pair across the real
//! index's lock-free skiplist, which loom does not see).

use super::common::{check, commit, engine};
use crate::sync::mutant;
use crate::{CommitOptions, Error, Isolation, TxnOptions};
use loom::thread;

/// One doctor's transaction: off call if both are on now. `Ok(true)`:
/// went off call; `Ok(false)`: stayed (the other was already off).
fn off_call(e: &crate::Engine, mine: &[u8]) -> Result<bool, Error> {
    let mut s = e.session().unwrap();
    let o = TxnOptions {
        isolation: Isolation::Serializable,
        ..TxnOptions::default()
    };
    let mut t = s.begin(&o).unwrap();
    let on = [&b"a"[..], b"b"]
        .iter()
        .filter(|k| t.get(k).unwrap().as_deref() == Some(&b"on"[..]))
        .count();
    if on < 2 {
        return Ok(false);
    }
    t.put(mine, b"off").unwrap();
    t.commit(CommitOptions::default()).map(|()| true)
}

pub(crate) fn model() {
    let e = engine(3);
    commit(&e, &[(b"a", b"on"), (b"b", b"on")], 0);
    let t1 = {
        let e = e.clone();
        thread::spawn(move || off_call(&e, b"a"))
    };
    let t2 = {
        let e = e.clone();
        thread::spawn(move || off_call(&e, b"b"))
    };
    let (r1, r2) = (t1.join().unwrap(), t2.join().unwrap());
    assert!(
        !(r1 == Ok(true) && r2 == Ok(true)),
        "write skew: both doctors went off call"
    );
    assert!(
        r1 == Ok(true) || r2 == Ok(true),
        "nobody went off call: the first committer must win ({r1:?}, {r2:?})"
    );
    for r in [r1, r2] {
        if let Err(lost) = r {
            assert!(
                matches!(lost, Error::SerializationConflict { .. }),
                "{lost:?}"
            );
        }
    }
}

#[test]
fn serializable_write_skew() {
    check("serializable", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "write skew")]
fn mutant_serializable_skips_validation() {
    check(
        "serializable/SERIALIZABLE_SKIPS_VALIDATION",
        mutant::SERIALIZABLE_SKIPS_VALIDATION,
        model,
    );
}

#[test]
#[should_panic(expected = "write skew")]
fn mutant_serializable_gate_released_before_commit() {
    check(
        "serializable/SERIALIZABLE_GATE_RELEASED_BEFORE_COMMIT",
        mutant::SERIALIZABLE_GATE_RELEASED_BEFORE_COMMIT,
        model,
    );
}

#[test]
#[should_panic(expected = "write skew")]
fn mutant_serializable_early_pass_trusted() {
    check(
        "serializable/SERIALIZABLE_EARLY_PASS_TRUSTED",
        mutant::SERIALIZABLE_EARLY_PASS_TRUSTED,
        model,
    );
}

#[test]
#[should_panic(expected = "write skew")]
fn mutant_relaxed_gate_seq_store() {
    check(
        "serializable/RELAXED_GATE_SEQ_STORE",
        mutant::RELAXED_GATE_SEQ_STORE,
        model,
    );
}

fn ser() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::Serializable,
        ..TxnOptions::default()
    }
}

/// T1: sets `x` if `a..=c` holds two keys. `Ok(true)`: it did.
fn count_then_set(e: &crate::Engine) -> Result<bool, Error> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&ser()).unwrap();
    let mut n = 0;
    t.scan(&b"a"[..]..=&b"c"[..], |_, _| {
        n += 1;
        true
    })
    .unwrap();
    if n != 2 {
        return Ok(false);
    }
    t.put(b"x", b"1").unwrap();
    t.commit(CommitOptions::default()).map(|()| true)
}

/// T2: creates `b` if `x` is unset. `Ok(true)`: it did.
fn read_then_create(e: &crate::Engine) -> Result<bool, Error> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&ser()).unwrap();
    if t.get(b"x").unwrap().as_deref() != Some(&b"0"[..]) {
        return Ok(false);
    }
    t.put(b"b", b"1").unwrap();
    t.commit(CommitOptions::default()).map(|()| true)
}

pub(crate) fn phantom_model() {
    let e = engine(3);
    commit(&e, &[(b"a", b"1"), (b"c", b"1"), (b"x", b"0")], 0);
    let t1 = {
        let e = e.clone();
        thread::spawn(move || count_then_set(&e))
    };
    let t2 = {
        let e = e.clone();
        thread::spawn(move || read_then_create(&e))
    };
    let (r1, r2) = (t1.join().unwrap(), t2.join().unwrap());
    assert!(
        !(r1 == Ok(true) && r2 == Ok(true)),
        "phantom: both committed their writes"
    );
    assert!(
        r1 == Ok(true) || r2 == Ok(true),
        "nobody committed: the first committer must win ({r1:?}, {r2:?})"
    );
    for r in [r1, r2] {
        if let Err(lost) = r {
            assert!(
                matches!(
                    lost,
                    Error::SerializationConflict { .. } | Error::RangeConflict { .. }
                ),
                "{lost:?}"
            );
        }
    }
}

#[test]
fn serializable_phantom() {
    check("serializable/phantom", mutant::NONE, phantom_model);
}

#[test]
#[should_panic(expected = "phantom")]
fn mutant_serializable_scan_kept_trusted() {
    check(
        "serializable/phantom/SERIALIZABLE_SCAN_KEPT_TRUSTED",
        mutant::SERIALIZABLE_SCAN_KEPT_TRUSTED,
        phantom_model,
    );
}

#[test]
#[should_panic(expected = "phantom")]
fn mutant_key_counted_before_insert() {
    check(
        "serializable/phantom/KEY_COUNTED_BEFORE_INSERT",
        mutant::KEY_COUNTED_BEFORE_INSERT,
        phantom_model,
    );
}
