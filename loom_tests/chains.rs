//! Model 5 — one version chain prepended, read and pruned at once
//! (invariants 3 safe point, 1 GC safety, 11 reclamation).
//!
//! Runs below the engine (see `descriptors.rs` for why). `k` has versions
//! at 5 and 10, and oldest is 15. A writer prepends and commits
//! `k = v20` at 20, then advances the horizon and prunes the chain (as a
//! committing session does); a reader begins, sets read timestamp 15 and
//! reads `k`. The version at 10 is
//! the safe point for the reader at 15 (the newest at or below the horizon):
//! it must stay linked, so the reader reads `v10`, and the chain is never
//! cut below `v20` while a reader at 15 can run; the version at 5 is pruned
//! and retired. With the real collector
//! (tier 2) the pruned tail is freed inside the model, and loom checks that
//! no free races with a reader's load of the freed version's link.

use crate::common::{check, reclaim_now};
use loom::sync::Arc;
use loom::thread;
use snapshot_engine::loom_api::{Chain, Machine, Read, Snapshot};
use snapshot_engine::mutant;

struct World {
    m: Machine,
    k: Chain,
}

fn commit_one(w: &World, value: &[u8], cts: u64) {
    let m = &w.m;
    let slot = m.open_session().unwrap();
    let mut snap = Snapshot::default();
    m.begin(slot, &mut snap);
    let id = m.allocate_id(slot);
    let v = w.k.put(id, &snap, value).expect("no conflicting writer");
    // SAFETY: our own unfinished version; nothing prunes it before we finish.
    unsafe { w.k.commit(v, cts) };
    m.complete(slot, id);
    m.end(slot);
    m.close_session(slot);
}

pub(crate) fn model() {
    let w = Arc::new(World {
        m: Machine::new(3),
        k: Chain::new(),
    });
    commit_one(&w, b"v5", 5);
    commit_one(&w, b"v10", 10);
    w.m.set_oldest(15).unwrap();
    let writer = {
        let w = w.clone();
        thread::spawn(move || {
            commit_one(&w, b"v20", 20);
            // As a committing session does (txn.rs `prune_written`): refresh
            // the horizon and prune the chain it wrote.
            w.m.advance_horizon();
            w.k.prune(w.m.horizon(), 0);
            reclaim_now();
        })
    };
    let reader = {
        let w = w.clone();
        thread::spawn(move || {
            let m = &w.m;
            let slot = m.open_session().unwrap();
            let mut snap = Snapshot::default();
            m.begin(slot, &mut snap);
            m.set_read_timestamp(slot, &mut snap, 15, false).unwrap();
            let got = w.k.read(0, &snap, 15, false);
            m.end(slot);
            m.close_session(slot);
            got
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
