//! Model 8 — a reader meeting an update while it is prepared and
//! resolved (invariants 9 no aborted writes and 10 prepared state; prepare
//! is an exit from the running set, invariant 5).
//!
//! `k1 = k2 = old` at 5. A writer writes `k1 = k2 = new`, prepares at 10,
//! raises a flag, and then commits at 15 (or rolls back). A reader with no
//! read timestamp opens a session, loads the flag, begins and reads `k2` and
//! then `k1` (the reverse of the writer's order). Every read returns the old
//! value, `PrepareConflict`, or the committed new value, never a torn pair
//! of old and new, never the value of a rolled-back transaction. A reader
//! that began after prepare returned never reads the old value of a commit
//! (its snapshot treats the prepared writer as finished, so it must meet the
//! update), and one that saw the resolution on `k2` also sees it on `k1`
//! (the writer resolved `k1` first).

use super::common::{check, commit, engine, ts};
use crate::sync::mutant;
use crate::{CommitOptions, Error, TxnOptions};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Saw {
    Old,
    New,
    Conflict,
}

fn saw(r: crate::Result<Option<Vec<u8>>>) -> Saw {
    match r {
        Ok(Some(v)) if v == b"old" => Saw::Old,
        Ok(Some(v)) if v == b"new" => Saw::New,
        Err(Error::PrepareConflict { .. }) => Saw::Conflict,
        other => panic!("prepared state violated: read {other:?}"),
    }
}

fn model(resolve_by_commit: bool) {
    let e = engine(2);
    commit(&e, &[(b"k1", b"old"), (b"k2", b"old")], 5);
    let prepared = Arc::new(AtomicBool::new(false));
    let writer = {
        let (e, prepared) = (e.clone(), prepared.clone());
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"k1", b"new").unwrap();
            t.put(b"k2", b"new").unwrap();
            assert_eq!(t.prepare(ts(10)).unwrap(), ts(10));
            // Release: pairs with the reader's Acquire; prepare returned.
            prepared.store(true, Ordering::Release);
            if resolve_by_commit {
                t.commit(CommitOptions {
                    commit_ts: Some(ts(15)),
                    durable_ts: Some(ts(15)),
                })
                .unwrap();
            } else {
                t.rollback();
            }
        })
    };
    let reader = {
        let (e, prepared) = (e.clone(), prepared.clone());
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let after_prepare = prepared.load(Ordering::Acquire);
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let k2 = saw(t.get(b"k2"));
            let k1 = saw(t.get(b"k1"));
            (after_prepare, k1, k2)
        })
    };
    writer.join().unwrap();
    let (after_prepare, k1, k2) = reader.join().unwrap();
    let pair = [k1, k2];
    assert!(
        !(pair.contains(&Saw::Old) && pair.contains(&Saw::New)),
        "prepared state violated: torn read k1={k1:?} k2={k2:?}"
    );
    if resolve_by_commit {
        if after_prepare {
            assert!(
                !pair.contains(&Saw::Old),
                "prepared state violated: began after prepare, read the old value (k1={k1:?} k2={k2:?})"
            );
        }
        if k2 == Saw::New {
            assert_eq!(
                k1,
                Saw::New,
                "prepared state violated: resolution seen on k2 but not on k1"
            );
        }
    } else {
        assert!(
            !pair.contains(&Saw::New),
            "aborted write seen: k1={k1:?} k2={k2:?}"
        );
    }
}

#[test]
fn reader_meets_prepared_then_committed_update() {
    check("prepared/commit", mutant::NONE, || model(true));
}

#[test]
fn reader_meets_prepared_then_rolled_back_update() {
    check("prepared/rollback", mutant::NONE, || model(false));
}

#[test]
#[should_panic(expected = "began after prepare, read the old value")]
fn mutant_prepare_skips_exit() {
    check(
        "prepared/PREPARE_SKIPS_EXIT",
        mutant::PREPARE_SKIPS_EXIT,
        || model(true),
    );
}

#[test]
#[should_panic(expected = "resolution seen on k2 but not on k1")]
fn mutant_relaxed_status_store() {
    check(
        "prepared/RELAXED_STATUS_STORE",
        mutant::RELAXED_STATUS_STORE,
        || model(true),
    );
}
