//! Model — a reader that skips a prepared update, against its commit and
//! a prune that makes it the safe point (invariants 3 safe point, 10
//! prepared state, 11 reclamation).
//!
//! `k = v10` at 10; `v20` is written on top and prepared at 20 before the
//! threads start. A reader that ignores prepared updates reads `k` at 30
//! while another thread commits `v20` at 25 and prunes `k` at a horizon of
//! 30 (allowed: the reader's read timestamp holds the horizon at 30). The
//! reader may load `v20`'s status while it is still prepared and skip it;
//! the commit then makes `v20` covered, so it becomes the safe point and
//! the cut nulls its link to `v10`; the reader, which decided to skip
//! `v20`, follows that link. It must answer `v10` (the version under the
//! skipped update) or `v20` (the update, resolved), never nothing: `k`
//! exists at every timestamp from 10 on. The read path judges the version
//! again when the link below it is gone; the cut's Release swap of the
//! link makes that second judgement see the commit the cutter saw.
//!
//! * **chain** and **chain/stable**: chain level (no machinery, a fixed
//!   snapshot and a hand-placed horizon, as in `finger.rs`), with a
//!   snapshot reader at read timestamp 30 and with the read-only fast
//!   path's view at stable 30, both ignoring prepared updates. Mutant
//!   `SKIPPED_NOT_REJUDGED` (the second judgement left out) answers nothing.
//! * **engine**: the same race through the public API: the writer
//!   prepares, commits at 25, moves oldest to 30 and runs `collect()`; the
//!   reader's read-timestamp pin is what holds the horizon at 30.
//!   `SKIPPED_NOT_REJUDGED` fails it the same way.

use super::api::{snapshot_below, state, Chain, Read};
use super::common::{check, commit, engine, ts};
use crate::sync::mutant;
use crate::{CommitOptions, PrepareConflicts, TimestampUpdate, TxnOptions};
use loom::sync::Arc;
use loom::thread;

/// Every writer's id is below this.
const ALL: u64 = 100;

fn val(v: &[u8]) -> Read {
    Read::Value(v.to_vec())
}

fn chain_model(fast_path: bool) {
    let k = Arc::new(Chain::new());
    let v10 = k
        .put(1, &snapshot_below(ALL), b"v10")
        .expect("no conflicting writer");
    // SAFETY: our own unfinished version, committed once.
    unsafe { k.commit(v10, 10) };
    let v20 = k
        .put(2, &snapshot_below(ALL), b"v20")
        .expect("v10 is committed: no conflict");
    // SAFETY: our own unfinished version.
    unsafe { k.set_status(v20, state::PREPARED, 20) };
    let w = {
        let k = k.clone();
        thread::spawn(move || {
            // SAFETY: our own prepared version, committed once.
            unsafe { k.commit(v20, 25) };
            // Covered at 30: v20 is the safe point, the link to v10 is cut.
            k.prune((ALL, 30), 30);
        })
    };
    let r = {
        let k = k.clone();
        thread::spawn(move || {
            if fast_path {
                k.read_stable_ignoring(30, ALL)
            } else {
                k.read(0, &snapshot_below(ALL), 30, true)
            }
        })
    };
    w.join().unwrap();
    let got = r.join().unwrap();
    assert!(
        got == val(b"v10") || got == val(b"v20"),
        "skipped prepared update violated: an ignoring reader at 30 read {got:?}, \
         not v10 or v20 (k exists at every timestamp from 10)"
    );
    assert_eq!(k.len(), 1, "safe point violated: the chain should be v20");
}

fn engine_model() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v10")], 10);
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v20").unwrap();
    assert_eq!(t.prepare(ts(20)).unwrap(), ts(20));
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let opts = TxnOptions {
                read_timestamp: Some(ts(30)),
                prepare_conflicts: PrepareConflicts::Ignore,
                ..TxnOptions::default()
            };
            let mut t = s.begin(&opts).unwrap();
            t.get(b"k")
        })
    };
    t.commit(CommitOptions {
        commit_ts: Some(ts(25)),
        durable_ts: Some(ts(25)),
    })
    .unwrap();
    drop(s);
    // No stable timestamp is set, so oldest may move on its own.
    e.set_timestamps(TimestampUpdate {
        oldest: Some(ts(30)),
        ..TimestampUpdate::default()
    })
    .unwrap();
    // The horizon: min(oldest 30, the reader's read timestamp 30, if it
    // has published it); v20 is covered, so the cut takes v10.
    e.collect();
    let got = reader.join().unwrap();
    assert!(
        matches!(&got, Ok(Some(v)) if v == b"v10" || v == b"v20"),
        "skipped prepared update violated: an ignoring reader at 30 read {got:?}, \
         not v10 or v20 (k exists at every timestamp from 10)"
    );
}

#[test]
fn ignoring_reader_vs_commit_and_prune() {
    check("skipped_prepared/chain", mutant::NONE, || {
        chain_model(false)
    });
}

#[test]
#[should_panic(expected = "skipped prepared update violated")]
fn mutant_skipped_not_rejudged() {
    check(
        "skipped_prepared/chain/SKIPPED_NOT_REJUDGED",
        mutant::SKIPPED_NOT_REJUDGED,
        || chain_model(false),
    );
}

#[test]
fn ignoring_fast_path_reader_vs_commit_and_prune() {
    check("skipped_prepared/chain/stable", mutant::NONE, || {
        chain_model(true)
    });
}

#[test]
#[should_panic(expected = "skipped prepared update violated")]
fn mutant_skipped_not_rejudged_fast_path() {
    check(
        "skipped_prepared/chain/stable/SKIPPED_NOT_REJUDGED",
        mutant::SKIPPED_NOT_REJUDGED,
        || chain_model(true),
    );
}

#[test]
fn ignoring_reader_vs_commit_and_collect() {
    check("skipped_prepared/engine", mutant::NONE, engine_model);
}

#[test]
#[should_panic(expected = "skipped prepared update violated")]
fn mutant_skipped_not_rejudged_engine() {
    check(
        "skipped_prepared/engine/SKIPPED_NOT_REJUDGED",
        mutant::SKIPPED_NOT_REJUDGED,
        engine_model,
    );
}
