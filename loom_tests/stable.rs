//! Model 7 — the stable timestamp versus a commit claim (invariant 8, read
//! at a timestamp is repeatable; handshake 2 in `lockfree/stable.rs`).
//!
//! `k1 = k2 = old` at 5 and stable is 5. A writer commits `k1 = k2 = new` at
//! 10 while a timekeeper raises stable to 10 and a fast-path reader
//! (`read_at_stable`) reads both keys. Either the writer is refused
//! (`CommitTimestampNotAfterStable`) or the timekeeper waits for its commit
//! to finish before publishing stable 10. So what a reader at a stable
//! timestamp sees is fixed: at 5 the old values; at 10 both new values
//! exactly when the commit succeeded, never half of the commit. A reader
//! that saw stable 10 before the commit landed would read `old` (or half) at
//! 10 while a later reader at 10 reads `new`: the read at 10 would not be
//! repeatable. (Two sessions besides set-up, so the timekeeper's scans stay
//! short: the model is the suite's largest.)

use super::common::{check, commit, engine, stable, ts};
use crate::sync::mutant;
use crate::{CommitOptions, Error, TimestampKind, TxnOptions};
use loom::thread;

fn model() {
    let e = engine(2);
    commit(&e, &[(b"k1", b"old"), (b"k2", b"old")], 5);
    e.set_timestamps(stable(5)).unwrap();
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"k1", b"new").unwrap();
            t.put(b"k2", b"new").unwrap();
            // A local, not the block's tail: the `CommitError` temporary
            // borrows the session, which drops at the end of the block.
            let committed = match t.try_commit(CommitOptions::at(10)) {
                Ok(()) => true,
                Err(e) => match *e.error() {
                    Error::CommitTimestampNotAfterStable { commit, stable } => {
                        assert_eq!((commit, stable), (ts(10), ts(10)));
                        // Refused for a timestamp: handed back, still open.
                        e.into_txn().expect("still open").rollback();
                        false
                    }
                    ref other => panic!("unexpected error {other:?}"),
                },
            };
            committed
        })
    };
    let timekeeper = {
        let e = e.clone();
        thread::spawn(move || e.set_timestamps(stable(10)).unwrap())
    };
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let opts = TxnOptions {
                read_at_stable: true,
                ..TxnOptions::default()
            };
            let mut t = s.begin(&opts).unwrap();
            let at = t.read_timestamp().get();
            let k1 = t.get(b"k1").unwrap().unwrap();
            let k2 = t.get(b"k2").unwrap().unwrap();
            (at, k1, k2)
        })
    };
    let committed = writer.join().unwrap();
    timekeeper.join().unwrap();
    let (at, k1, k2) = reader.join().unwrap();
    assert!(at == 5 || at == 10, "read at stable {at}");
    let want: &[u8] = if at == 10 && committed {
        b"new"
    } else {
        b"old"
    };
    assert!(
        k1 == want && k2 == want,
        "a read at stable {at} is not repeatable: read k1={k1:?} k2={k2:?} (commit at 10 succeeded: {committed})"
    );
}

#[test]
fn stable_versus_commit_claim() {
    check("stable", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "is not repeatable")]
fn mutant_stable_before_wait() {
    check(
        "stable/STABLE_BEFORE_WAIT",
        mutant::STABLE_BEFORE_WAIT,
        model,
    );
}

/// The same race seen by a *snapshot* reader at read timestamp =
/// stable, which decides by its snapshot (the descriptor), not by status
/// words as the fast path does. `k = old` at 5, stable 5; a writer commits
/// `k = new` at 10 while the timekeeper raises stable to 10. A reader that
/// sees stable 10 begins with read timestamp 10 and reads `k`; afterwards a
/// second reader at 10 reads `k` again. The two must agree. If the commit
/// released its claim before installing its descriptor, the setter could
/// publish stable 10 while the first reader's snapshot still treats the
/// writer as running: it reads `old`, the second reads `new`.
fn model_snapshot() {
    let e = engine(2);
    commit(&e, &[(b"k", b"old")], 5);
    e.set_timestamps(stable(5)).unwrap();
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"k", b"new").unwrap();
            if let Err(e) = t.try_commit(CommitOptions::at(10)) {
                // Refused for a timestamp: handed back open; roll it back.
                e.into_txn().expect("still open").rollback();
            };
        })
    };
    let timekeeper = {
        let e = e.clone();
        thread::spawn(move || e.set_timestamps(stable(10)).unwrap())
    };
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let st = e.query_timestamp(TimestampKind::Stable);
            if st != Some(ts(10)) {
                return None;
            }
            let mut s = e.session().unwrap();
            let opts = TxnOptions {
                read_timestamp: Some(ts(10)),
                ..TxnOptions::default()
            };
            let mut t = s.begin(&opts).unwrap();
            Some(t.get(b"k").unwrap().unwrap())
        })
    };
    writer.join().unwrap();
    timekeeper.join().unwrap();
    if let Some(first) = reader.join().unwrap() {
        let mut s = e.session().unwrap();
        let opts = TxnOptions {
            read_timestamp: Some(ts(10)),
            ..TxnOptions::default()
        };
        let again = s.begin(&opts).unwrap().get(b"k").unwrap().unwrap();
        assert!(
            first == again,
            "a snapshot read at stable 10 is not repeatable: first {first:?}, later {again:?}"
        );
    }
}

#[test]
fn stable_versus_commit_claim_snapshot_reader() {
    check("stable/snapshot", mutant::NONE, model_snapshot);
}

#[test]
#[should_panic(expected = "is not repeatable")]
fn mutant_claim_released_before_install() {
    check(
        "stable/snapshot/CLAIM_RELEASED_BEFORE_INSTALL",
        mutant::CLAIM_RELEASED_BEFORE_INSTALL,
        model_snapshot,
    );
}
