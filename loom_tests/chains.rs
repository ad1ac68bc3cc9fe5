//! Model 5 — one version chain prepended, read and pruned at once
//! (invariants 3 safe point, 1 GC safety, 11 reclamation).
//!
//! The transactions, the read timestamp, oldest and the horizon come from
//! the public machinery layer (`TxnManager`, `Transaction`); the chain is
//! the bundled store's real `KeyEntry`, driven directly through
//! `api::Chain` (the engine's loom index stand-in would add a mutex,
//! see `descriptors.rs`). `k` has versions at 5 and 10, and oldest is 15. A
//! writer prepends and commits `k = v20` at 20, then advances the horizon
//! and prunes the chain (as a committing session does); a reader begins at
//! read timestamp 15 and reads `k`. The version at 10 is the safe point for
//! the reader at 15 (the newest at or below the horizon): it must stay
//! linked, so the reader reads `v10`, and the chain is never cut below
//! `v20` while a reader at 15 can run; the version at 5 is pruned and
//! retired. With the real collector (tier 2) the pruned tail is freed
//! inside the model, and loom checks that no free races with a reader's
//! load of the freed version's link.

use super::api::{Chain, Read};
use super::common::{check, reclaim_now, ts};
use crate::machinery::TxnManager;
use crate::sync::mutant;
use crate::{CommitOptions, TimestampUpdate, TxnOptions};
use loom::sync::Arc;
use loom::thread;

struct World {
    mgr: TxnManager,
    k: Chain,
}

/// One transaction on a session of its own: `k = value`, committed at
/// `cts`.
fn commit_one(w: &World, value: &[u8], cts: u64) {
    let mut s = w.mgr.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let (status, view) = t.new_version().unwrap();
    let v =
        w.k.put_version(status, &view, value)
            .expect("no conflicting writer");
    t.commit(CommitOptions::at(cts), |done| {
        // SAFETY: our own unfinished version; nothing prunes it before we
        // finish.
        unsafe { w.k.commit_with(v, cts, done) }
    })
    .unwrap();
}

pub(crate) fn model() {
    let w = Arc::new(World {
        mgr: TxnManager::new(3).unwrap(),
        k: Chain::new(),
    });
    commit_one(&w, b"v5", 5);
    commit_one(&w, b"v10", 10);
    w.mgr
        .set_timestamps(TimestampUpdate {
            oldest: Some(ts(15)),
            ..TimestampUpdate::default()
        })
        .unwrap();
    let writer = {
        let w = w.clone();
        thread::spawn(move || {
            commit_one(&w, b"v20", 20);
            // As a committing session does (kv/commit.rs, after commit):
            // refresh the horizon and prune the chain it wrote.
            w.mgr.advance_horizon();
            w.k.prune_to(w.mgr.horizon(), 0);
            reclaim_now();
        })
    };
    let reader = {
        let w = w.clone();
        thread::spawn(move || {
            let mut s = w.mgr.session().unwrap();
            let mut t = s.begin(&TxnOptions::at(15)).unwrap();
            let view = t.read_view().unwrap();
            w.k.read_with(&view)
        })
    };
    writer.join().unwrap();
    let got = reader.join().unwrap();
    assert_eq!(
        got,
        Read::Value(b"v10".to_vec()),
        "safe point violated: the version a reader at 15 needs was pruned"
    );
    assert_eq!(
        w.k.len(),
        2,
        "safe point violated: after pruning the chain should be v20, v10"
    );
}

#[test]
fn chain_prepend_read_prune() {
    check("chains", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "safe point violated")]
fn mutant_prune_past_safe_point() {
    check(
        "chains/PRUNE_PAST_SAFE_POINT",
        mutant::PRUNE_PAST_SAFE_POINT,
        model,
    );
}
