//! Model 17 — the key's second hint against a concurrent commit and a
//! prune (invariant 17, the second hint; 11 reclamation; 13 chain order).
//!
//! Chain level, with no machinery, as the finger models (`finger.rs`):
//! fixed snapshots, readers with the read-at-stable view. `v10` is
//! committed and the finger (stable 15), `v20` committed over it (hint:
//! `v10`, gap 10).
//!
//! * **second/read**: a committer commits `v30` (hint: `v20`, gap 10); a
//!   reader that has seen `v30` committed reads at 25: the summary (30)
//!   rejects the head, the hint's gap puts `v20` at or below 25, and the
//!   read must answer `v20` examining one version. A hint stored after the
//!   flip (`SECOND_AFTER_FLIP`) leaves that reader the old hint `v10`,
//!   from which it climbs: two versions.
//! * **second/prune**: a committer commits `v30` while a pruner prunes to
//!   a horizon at 35 (once `v30` is committed it is the safe point, and
//!   `v20`, the version its hint names, goes with the tail). At the end
//!   the hint must be null or linked. A pruner that does not clear the
//!   hint (`PRUNE_KEEPS_SECOND`) leaves it on retired `v20`; so does a
//!   commit that stores its hint after its flip (`SECOND_AFTER_FLIP`),
//!   when the pruner cuts between the two. The stand-in collector frees
//!   nothing before it drops, so no read shows the retired version; the
//!   model checks where the hint points instead, as `finger/prune` does
//!   for the finger.

use super::api::{snapshot_below, Chain, Read};
use super::common::check;
use crate::sync::mutant;
use loom::sync::Arc;
use loom::thread;

/// Every writer's id is below this (see `finger.rs`).
const ALL: u64 = 100;

fn val(v: &[u8]) -> Read {
    Read::Value(v.to_vec())
}

fn commit(k: &Chain, id: u64, value: &[u8], cts: u64) {
    let v = k
        .put(id, &snapshot_below(ALL), value)
        .expect("no conflicting writer");
    // SAFETY: our own unfinished version.
    unsafe { k.commit(v, cts) };
}

/// `v10` (the finger, stable 15) and `v20` committed.
fn setup() -> Arc<Chain> {
    let k = Arc::new(Chain::new());
    commit(&k, 1, b"v10", 10);
    k.prune((ALL, 5), 15);
    commit(&k, 2, b"v20", 20);
    k
}

fn read_model() {
    let k = setup();
    let w = {
        let k = k.clone();
        thread::spawn(move || commit(&k, 3, b"v30", 30))
    };
    let r = {
        let k = k.clone();
        thread::spawn(move || {
            // Only a reader that has seen v30 committed is checked.
            (k.read_stable(100, ALL) == val(b"v30")).then(|| k.read_stable_counted(25, ALL))
        })
    };
    w.join().unwrap();
    if let Some((got, examined)) = r.join().unwrap() {
        assert_eq!(
            (got, examined),
            (val(b"v20"), 1),
            "second hint violated: a reader at 25 after v30 committed did not go straight to v20"
        );
    }
}

fn prune_model() {
    let k = setup();
    let w = {
        let k = k.clone();
        thread::spawn(move || commit(&k, 3, b"v30", 30))
    };
    let p = {
        let k = k.clone();
        thread::spawn(move || {
            k.prune((ALL, 35), 35);
        })
    };
    w.join().unwrap();
    p.join().unwrap();
    assert!(
        k.second_linked(),
        "second hint violated: the hint names a version a cut retired"
    );
    assert!(k.finger_linked(), "finger violated: left below the floor");
}

#[test]
fn second_read_vs_commit() {
    check("second/read", mutant::NONE, read_model);
}

#[test]
#[should_panic(expected = "second hint violated")]
fn mutant_second_after_flip_on_read() {
    check(
        "second/read/SECOND_AFTER_FLIP",
        mutant::SECOND_AFTER_FLIP,
        read_model,
    );
}

#[test]
fn second_prune_vs_commit() {
    check("second/prune", mutant::NONE, prune_model);
}

#[test]
#[should_panic(expected = "second hint violated")]
fn mutant_prune_keeps_second() {
    check(
        "second/prune/PRUNE_KEEPS_SECOND",
        mutant::PRUNE_KEEPS_SECOND,
        prune_model,
    );
}

#[test]
#[should_panic(expected = "second hint violated")]
fn mutant_second_after_flip_on_prune() {
    check(
        "second/prune/SECOND_AFTER_FLIP",
        mutant::SECOND_AFTER_FLIP,
        prune_model,
    );
}
