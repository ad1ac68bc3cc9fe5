//! Model 14 — a pruner racing a key's commits, in another
//! thread (invariants 3 safe point, 11 reclamation, 13 chain order).
//!
//! Chain level, like `finger.rs`. `k` is empty. A committer commits `v10`
//! at 10 (the key's first committed version: it stores the floor) and then
//! `v20` at 20 (it links `v10.newer = v20`); a pruner, as `collect()` does
//! for every key, prunes `k` at the horizon (all ids, 25) at the same time.
//! The pruner reaches versions through the floor and `newer` links alone,
//! never through the head, so those two Release stores and their Acquire
//! loads are all that order its reads of a version after the version's
//! writer. Loom counts the creation of a version's atomics as a write that
//! every later load must happen-after, so a pruner that loads a status word
//! it has no edge to fails the model with "Causality violation". In the other
//! models the pruner is the committer itself, so no such race exists there
//! and they cannot check the `newer` and floor orderings.
//! The end state must be a chain that still reads `v20` at 25 with the
//! finger linked. Twin: the `newer` link stored Relaxed
//! (RELAXED_NEWER_STORE).

use super::api::{snapshot_below, Chain, Read};
use super::common::check;
use crate::sync::mutant;
use loom::sync::Arc;
use loom::thread;

/// Every writer's id is below this.
const ALL: u64 = 100;

fn commit(k: &Chain, id: u64, value: &[u8], cts: u64) {
    let v = k
        .put(id, &snapshot_below(ALL), value)
        .expect("no conflicting writer");
    // SAFETY: our own unfinished version; the horizon covers only
    // committed versions, so the pruner never cuts it.
    unsafe { k.commit(v, cts) };
}

fn model() {
    let k = Arc::new(Chain::new());
    let committer = {
        let k = k.clone();
        thread::spawn(move || {
            commit(&k, 1, b"v10", 10);
            commit(&k, 2, b"v20", 20);
        })
    };
    let pruner = {
        let k = k.clone();
        thread::spawn(move || {
            k.prune((ALL, 25), 25);
        })
    };
    committer.join().unwrap();
    pruner.join().unwrap();
    let got = k.read_stable(25, ALL);
    assert_eq!(
        got,
        Read::Value(b"v20".to_vec()),
        "safe point violated: a read at 25 after a racing prune got {got:?}"
    );
    assert!(
        k.finger_linked(),
        "finger violated: the finger was left below the floor"
    );
    let len = k.len();
    assert!(
        (1..=2).contains(&len),
        "safe point violated: {len} versions left"
    );
}

#[test]
fn prune_versus_commits() {
    check("prune_race", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn mutant_relaxed_newer_store() {
    check(
        "prune_race/RELAXED_NEWER_STORE",
        mutant::RELAXED_NEWER_STORE,
        model,
    );
}
