//! Model 9 — a prepare versus raising stable past its prepare timestamp,
//! seen by a read-at-stable reader (invariant 8 for prepared transactions;
//! the commit claim `Transaction::prepare` holds while it flips).
//!
//! `k1 = k2 = old` at 5 and stable is 5. A writer puts `k1 = k2 = new`,
//! prepares at 10 and commits at 10 (durable 20) while the main thread
//! raises stable to 15 and then reads both keys at stable. The reader has
//! no snapshot: it sees what is committed at or below 15. Either the
//! prepare is refused (stable or the reader's pin got there first), or
//! raising stable waits for
//! the prepare's status flips, and the reader then meets the prepared
//! update (a prepare conflict) or the commit: it never reads one key still
//! in progress (old) and the other committed at 10 (new). Found by
//! `examples/own_storage/tests.rs` before the claim existed.

use super::common::{check, commit, engine, stable, ts};
use crate::sync::mutant;
use crate::{CommitOptions, Error, TxnOptions};
use loom::thread;

fn model() {
    let e = engine(2);
    commit(&e, &[(b"k1", b"old"), (b"k2", b"old")], 5);
    e.set_timestamps(stable(5)).unwrap();
    // The timekeeper and reader run on the spawned thread and the writer on
    // this one, so the race needs two preemptions, not three (this thread
    // keeps running after the spawn).
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            e.set_timestamps(stable(15)).unwrap();
            let mut s = e.session().unwrap();
            let opts = TxnOptions {
                read_at_stable: true,
                ..TxnOptions::default()
            };
            let mut t = s.begin(&opts).unwrap();
            assert_eq!(t.read_timestamp(), ts(15));
            match (t.get(b"k1"), t.get(b"k2")) {
                (Ok(a), Ok(b)) => assert!(a == b, "torn read at stable: k1={a:?} k2={b:?}"),
                (Err(Error::PrepareConflict { .. }), _)
                | (_, Err(Error::PrepareConflict { .. })) => {}
                other => panic!("unexpected reads {other:?}"),
            }
        })
    };
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k1", b"new").unwrap();
    t.put(b"k2", b"new").unwrap();
    match t.prepare(ts(10)) {
        Ok(_) => {
            let opts = CommitOptions {
                commit_ts: Some(ts(10)),
                durable_ts: Some(ts(20)),
            };
            t.commit(opts).unwrap();
        }
        // Stable got there first, or the reader's pin at 15 did.
        Err(Error::PrepareTimestampNotAfterStable { .. })
        | Err(Error::PrepareTimestampBeforeActiveRead { .. }) => t.rollback(),
        Err(other) => panic!("unexpected error {other:?}"),
    }
    drop(s);
    reader.join().unwrap();
}

#[test]
fn prepare_versus_stable_reader() {
    check("prepare_stable", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "torn read at stable")]
fn mutant_prepare_without_claim() {
    check(
        "prepare_stable/PREPARE_WITHOUT_CLAIM",
        mutant::PREPARE_WITHOUT_CLAIM,
        model,
    );
}
