//! Model 17 — the key's hint against a concurrent commit and prune
//! (invariant 18, the hint; 11 reclamation; 13 chain order).
//!
//! Chain level, with no machinery, as the finger models (`finger.rs`):
//! fixed snapshots, readers with the read-at-stable view. `v10` is
//! committed and the finger (stable 15), `v20` committed over it and
//! pruned: the hint names `v20`, with no usable gap (it is the head).
//!
//! * **hint/read**: a committer commits `v30` and prunes at stable 15 (the
//!   finger stays on `v10`; the hint names `v20`, gap 10) and raises a
//!   flag; a reader that saw the flag reads at 25: the summary (30) rejects
//!   the head, the gap puts `v20` at or below 25, and the read must answer
//!   `v20` examining one version. A prune that refreshes the hint only
//!   when it cuts (`HINT_REFRESHED_ONLY_ON_CUT`) leaves it without a gap,
//!   and the reader climbs from the finger: two versions.
//! * **hint/prune**: a committer commits `v30` then prunes to a horizon at
//!   35, while a second pruner prunes to the same horizon: whichever cuts
//!   below `v30` (once it is committed) retires `v20` and `v10`. At the end
//!   the hint must be null or linked. A cut that does not refresh it
//!   (`PRUNE_KEEPS_HINT`) leaves it on retired `v20`. The stand-in
//!   collector frees nothing before it drops, so no read shows the retired
//!   version; the model checks where the hint points instead, as
//!   `finger/prune` does for the finger.
//! * **hint/flag**: a committer commits `v15` (below `v20`: the key becomes
//!   unordered) while a pruner refreshes the hint; the flag must survive.
//!   A pruner that stores the hint word plainly instead of by
//!   compare-and-swap (`HINT_STORE_LOSES_FLAG`) can overwrite it, and
//!   readers would then climb an unordered key.

use super::api::{snapshot_below, Chain, Read};
use super::common::check;
use crate::sync::mutant;
use loom::sync::atomic::{AtomicBool, Ordering};
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

/// `v10` (the finger, stable 15) and `v20` committed and pruned: the
/// hint names `v20` (gap 0: it is the head).
fn setup() -> Arc<Chain> {
    let k = Arc::new(Chain::new());
    commit(&k, 1, b"v10", 10);
    k.prune((ALL, 5), 15);
    commit(&k, 2, b"v20", 20);
    k.prune((ALL, 5), 15);
    k
}

fn read_model() {
    let k = setup();
    let flag = Arc::new(AtomicBool::new(false));
    let w = {
        let (k, flag) = (k.clone(), flag.clone());
        thread::spawn(move || {
            commit(&k, 3, b"v30", 30);
            k.prune((ALL, 5), 15);
            // Release: pairs with the reader's Acquire load.
            flag.store(true, Ordering::Release);
        })
    };
    let r = {
        let (k, flag) = (k.clone(), flag.clone());
        thread::spawn(move || {
            // Acquire: pairs with the writer's Release flag store.
            flag.load(Ordering::Acquire)
                .then(|| k.read_stable_counted(25, ALL))
        })
    };
    w.join().unwrap();
    if let Some(got) = r.join().unwrap() {
        assert_eq!(
            got,
            (val(b"v20"), 1),
            "hint violated: a reader at 25 after the prune did not go straight to v20"
        );
    }
}

fn prune_model() {
    let k = setup();
    let w = {
        let k = k.clone();
        thread::spawn(move || {
            commit(&k, 3, b"v30", 30);
            k.prune((ALL, 35), 35);
        })
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
        k.hint_linked(),
        "hint violated: the hint names a version a cut retired"
    );
    assert!(k.finger_linked(), "finger violated: left below the floor");
}

fn flag_model() {
    let k = setup();
    let w = {
        let k = k.clone();
        thread::spawn(move || commit(&k, 3, b"v15", 15))
    };
    let p = {
        let k = k.clone();
        thread::spawn(move || {
            k.prune((ALL, 5), 15);
        })
    };
    w.join().unwrap();
    p.join().unwrap();
    assert!(
        k.is_unordered(),
        "hint violated: a prune overwrote the unordered flag"
    );
    assert!(k.hint_linked(), "hint violated: the hint is not linked");
}

#[test]
fn hint_read_vs_prune() {
    check("hint/read", mutant::NONE, read_model);
}

#[test]
#[should_panic(expected = "hint violated")]
fn mutant_hint_refreshed_only_on_cut() {
    check(
        "hint/read/HINT_REFRESHED_ONLY_ON_CUT",
        mutant::HINT_REFRESHED_ONLY_ON_CUT,
        read_model,
    );
}

#[test]
fn hint_prune_vs_commit() {
    check("hint/prune", mutant::NONE, prune_model);
}

#[test]
#[should_panic(expected = "hint violated")]
fn mutant_prune_keeps_hint() {
    check(
        "hint/prune/PRUNE_KEEPS_HINT",
        mutant::PRUNE_KEEPS_HINT,
        prune_model,
    );
}

#[test]
fn hint_flag_vs_prune() {
    check("hint/flag", mutant::NONE, flag_model);
}

#[test]
#[should_panic(expected = "hint violated")]
fn mutant_hint_store_loses_flag() {
    check(
        "hint/flag/HINT_STORE_LOSES_FLAG",
        mutant::HINT_STORE_LOSES_FLAG,
        flag_model,
    );
}
