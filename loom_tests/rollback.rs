//! Model 10 — a rolled-back version never stays in its chain
//! (invariant 3's count: what a long reader keeps is what it can see).
//!
//! `k = old` at 5 and no oldest timestamp, so pruning keeps every
//! timestamped version and the chain shows exactly what rollback left. A
//! writer A writes `k` and rolls back; a writer B writes `k` and commits at
//! 20 (either may meet the other's in-progress update as a write conflict). After both,
//! `k`'s chain holds `old` plus B's version if B committed: A's aborted
//! version is always unlinked. The mutant twin restores the old order (flip
//! to aborted, then unlink): B can write on top of the aborted version in
//! between, A's unlink fails, and the chain holds three versions.

use super::common::{check, commit, engine};
use crate::sync::mutant;
use crate::{CommitOptions, Error, TxnOptions};
use loom::thread;

fn model() {
    let e = engine(3);
    commit(&e, &[(b"k", b"old")], 5);
    let a = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            match t.put(b"k", b"a") {
                // B's update was in progress: nothing of A's is linked.
                Ok(()) | Err(Error::WriteConflict { .. }) => {}
                Err(err) => panic!("writer A: {err}"),
            }
            t.rollback();
        })
    };
    let b = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            match t.put(b"k", b"b") {
                Ok(()) => {
                    t.commit(CommitOptions::at(20)).unwrap();
                    true
                }
                // A's update was in progress: B rolls back on drop.
                Err(Error::WriteConflict { .. }) => false,
                Err(err) => panic!("writer B: {err}"),
            }
        })
    };
    a.join().unwrap();
    let b_committed = b.join().unwrap();
    let want = 1 + b_committed as usize;
    assert_eq!(
        e.chain_len(b"k"),
        want,
        "rolled-back version left in the chain (B committed: {b_committed})"
    );
}

#[test]
fn a_rolled_back_version_never_stays_in_its_chain() {
    check("rollback", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "rolled-back version left in the chain")]
fn mutant_rollback_flips_before_unlink() {
    check(
        "rollback/ROLLBACK_FLIPS_BEFORE_UNLINK",
        mutant::ROLLBACK_FLIPS_BEFORE_UNLINK,
        model,
    );
}
