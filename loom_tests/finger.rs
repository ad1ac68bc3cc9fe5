//! Model 13 — the finger read path against a concurrent commit
//! flip, a prepare and a prune (invariants 3 safe point, 10 prepared state,
//! 11 reclamation, 13 chain order and the finger).
//!
//! Chain level, with no machinery (the store's finger is the component
//! under test; hand-placed statuses reach states such as a prepared head over
//! the finger without a transaction's atomics): snapshots are fixed
//! ([`snapshot_below`]) and readers use the read-at-stable view, so the
//! only shared state is the key's chain (head, finger, floor, `newer` and
//! `stop` links, status words). Each model has a reader that takes the
//! finger path (the head it meets is committed above its timestamp) while
//! another thread changes what the path depends on:
//!
//! * **flip**: a committer links `v10 -> v20` and flips `v20` (written
//!   before the threads start); a second
//!   writer that sees `v20` committed writes on top and commits `v30`; a reader that has seen `v30` reads at 25
//!   and must get `v20`. Linking after the flip (`LINK_AFTER_FLIP`) lets it climb from
//!   the finger `v10` before `v10 -> v20` exists and answer `v10`.
//! * **prepare**: a writer prepares `v20` at 20 over the finger `v10` and
//!   raises a flag; a reader at 30 that saw the flag must get a prepare
//!   conflict. Starting at the finger without examining the head
//!   (`READ_SKIPS_HEAD`) answers `v10`.
//! * **prune**: a committer commits `v30`, then prunes to a horizon at 25
//!   (safe point `v20`) and moves the finger off `v10` before `v10` is
//!   retired; a reader at 25 must get `v20`, and the finger must end linked.
//!   Climbing past the safe point (`PRUNE_PAST_SAFE_POINT`) loses `v20`.
//!   A finger left below the floor would point at a retired version; the
//!   stand-in collector frees nothing before it drops, so no read shows it,
//!   and the model checks the finger's position at the end instead (the
//!   next prune's climb repairs it, so no mutant of it is observable here).
//!
//! Two more cover the key's head summary (invariant 16): a
//! reader whose timestamp is below the summary skips the head and starts at
//! the finger, so the summary must never claim a committed head while an
//! unfinished one is on top. Both put a prepared version at 12 over `v20`
//! (committed at 20, summary 20) and read at 15: `v20` is too new, so the
//! summary would send the reader to the finger `v10` past the prepared
//! head it must conflict with.
//!
//! * **summary/prepare**: `v20` committed before the threads start; a
//!   writer prepends and prepares at 12 and raises a flag; a reader at 15
//!   that saw the flag must get a prepare conflict. A prepend that does
//!   not clear the summary (`PREPEND_KEEPS_SUMMARY`) answers `v10`.
//! * **summary/handoff**: one thread commits `v20` while a second tries
//!   once to write on top (it can only once it sees `v20` committed) and
//!   prepares at 12, then raises the flag; the same reader. Storing the
//!   summary after the flip (`SUMMARY_AFTER_FLIP`) lets the committer's
//!   late store overwrite the second writer's clearing one.
//! * **summary/publish**: one thread commits `v20` (written before the
//!   threads start) then `v30` (summary 30); a reader at 25 whose read
//!   examined one version (the head `v20` committed, or the summary 30
//!   rejected the head and the finger answered) must answer `v20`: the
//!   summary 30 was stored after `v10 -> v20` was linked. A Relaxed summary
//!   store (`RELAXED_SUMMARY_STORE`) lets it see 30 but not `v10`'s `stop`,
//!   and the climb stops at `v10`.

use super::api::{snapshot_below, state, Chain, Read};
use super::common::check;
use crate::sync::mutant;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Every writer's id is below this; every committed version is visible to
/// the fixed snapshots and covered by the horizon's xmin.
const ALL: u64 = 100;

fn val(v: &[u8]) -> Read {
    Read::Value(v.to_vec())
}

/// Writes and commits `value` at `cts` as transaction `id` (no conflict
/// expected).
fn commit(k: &Chain, id: u64, value: &[u8], cts: u64) {
    let v = k
        .put(id, &snapshot_below(ALL), value)
        .expect("no conflicting writer");
    // SAFETY: our own unfinished version.
    unsafe { k.commit(v, cts) };
}

/// `v10` committed at 10, the finger moved onto it (stable 15).
fn setup() -> Arc<Chain> {
    let k = Arc::new(Chain::new());
    commit(&k, 1, b"v10", 10);
    k.prune((ALL, 5), 15);
    k
}

fn flip_model() {
    let k = setup();
    let v20 = k
        .put(2, &snapshot_below(ALL), b"v20")
        .expect("no conflicting writer");
    let a = {
        let k = k.clone();
        // SAFETY: v20 is this model's unfinished version, committed once.
        thread::spawn(move || unsafe { k.commit(v20, 20) })
    };
    let b = {
        let k = k.clone();
        thread::spawn(move || {
            // This write lands only on top of a committed v20 (else it
            // gives up). The writer looks first: its fixed snapshot treats
            // writer 2 as completed from the start, and a write check skips
            // an in-progress version of a completed writer as rolled back
            //; a real snapshot sees a writer completed only
            // after its flips (invariant 9).
            if k.read_stable(100, ALL) == val(b"v20") {
                if let Some(v) = k.put(3, &snapshot_below(ALL), b"v30") {
                    // SAFETY: our own unfinished version.
                    unsafe { k.commit(v, 30) };
                }
            }
        })
    };
    let c = {
        let k = k.clone();
        thread::spawn(move || {
            // Only a reader that has seen v30 committed is checked.
            (k.read_stable(100, ALL) == val(b"v30")).then(|| k.read_stable(25, ALL))
        })
    };
    a.join().unwrap();
    b.join().unwrap();
    if let Some(got) = c.join().unwrap() {
        assert_eq!(
            got,
            val(b"v20"),
            "climb links violated: a reader at 25 after v30 committed missed v20"
        );
    }
}

fn prepare_model() {
    let k = setup();
    let flag = Arc::new(AtomicBool::new(false));
    let p = {
        let (k, flag) = (k.clone(), flag.clone());
        thread::spawn(move || {
            let v = k
                .put(2, &snapshot_below(ALL), b"v20")
                .expect("no conflicting writer");
            // SAFETY: our own unfinished version.
            unsafe { k.set_status(v, state::PREPARED, 20) };
            // Release: pairs with the reader's Acquire load (the model's
            // "prepare returned before the reader began").
            flag.store(true, Ordering::Release);
        })
    };
    let r = {
        let (k, flag) = (k.clone(), flag.clone());
        thread::spawn(move || {
            let after = flag.load(Ordering::Acquire);
            (after, k.read_stable(30, ALL))
        })
    };
    p.join().unwrap();
    let (after, got) = r.join().unwrap();
    if after {
        assert_eq!(
            got,
            Read::PrepareConflict,
            "prepared state violated: a reader after prepare missed the conflict"
        );
    } else {
        assert!(
            got == Read::PrepareConflict || got == val(b"v10"),
            "prepared state violated: read {got:?}"
        );
    }
}

fn prune_model() {
    let k = setup();
    commit(&k, 2, b"v20", 20);
    let w = {
        let k = k.clone();
        thread::spawn(move || {
            commit(&k, 3, b"v30", 30);
            // As a committing session does: prune the key it wrote. The
            // horizon is at 25: v20 is the safe point, v10 goes.
            k.prune((ALL, 25), 25);
        })
    };
    let r = {
        let k = k.clone();
        thread::spawn(move || k.read_stable(25, ALL))
    };
    w.join().unwrap();
    let got = r.join().unwrap();
    assert_eq!(
        got,
        val(b"v20"),
        "safe point violated: a reader at 25 lost v20"
    );
    assert!(
        k.finger_linked(),
        "finger violated: the finger was left below the floor, on a retired version"
    );
    assert_eq!(
        k.len(),
        2,
        "safe point violated: the chain should be v30, v20"
    );
}

/// `setup()` plus `v20` committed at 20 (head summary 20).
fn setup_with_v20() -> Arc<Chain> {
    let k = setup();
    commit(&k, 2, b"v20", 20);
    k
}

/// Transaction 3 writes on top of `k` (once; `false` on a conflict) and
/// prepares at 12.
fn prepare_on_top(k: &Chain) -> bool {
    let Some(v) = k.put(3, &snapshot_below(ALL), b"p12") else {
        return false;
    };
    // SAFETY: our own unfinished version.
    unsafe { k.set_status(v, state::PREPARED, 12) };
    true
}

/// The reader of both summary models: at 15 (below the summary 20), and
/// whether it began after the prepare returned.
fn summary_reader(k: Arc<Chain>, flag: Arc<AtomicBool>) -> thread::JoinHandle<(bool, Read)> {
    thread::spawn(move || {
        // Acquire: pairs with the writer's Release flag store.
        let after = flag.load(Ordering::Acquire);
        (after, k.read_stable(15, ALL))
    })
}

fn check_summary_read(after: bool, got: Read) {
    if after {
        assert_eq!(
            got,
            Read::PrepareConflict,
            "head summary violated: a reader after prepare skipped the prepared head"
        );
    } else {
        assert!(
            got == Read::PrepareConflict || got == val(b"v10"),
            "head summary violated: read {got:?}"
        );
    }
}

fn summary_prepare_model() {
    let k = setup_with_v20();
    let flag = Arc::new(AtomicBool::new(false));
    let p = {
        let (k, flag) = (k.clone(), flag.clone());
        thread::spawn(move || {
            assert!(prepare_on_top(&k), "v20 is committed: no conflict");
            // Release: pairs with the reader's Acquire load.
            flag.store(true, Ordering::Release);
        })
    };
    let r = summary_reader(k.clone(), flag.clone());
    p.join().unwrap();
    let (after, got) = r.join().unwrap();
    check_summary_read(after, got);
}

fn summary_handoff_model() {
    let k = setup();
    let v20 = k
        .put(2, &snapshot_below(ALL), b"v20")
        .expect("no conflicting writer");
    let flag = Arc::new(AtomicBool::new(false));
    let a = {
        let k = k.clone();
        // SAFETY: v20 is this model's unfinished version, committed once.
        thread::spawn(move || unsafe { k.commit(v20, 20) })
    };
    let b = {
        let (k, flag) = (k.clone(), flag.clone());
        thread::spawn(move || {
            // As in the flip model: the writer looks for v20 committed
            // first, because its fixed snapshot treats writer 2 as completed
            // from the start and a write check skips an in-progress version
            // of a completed writer as rolled back; a real
            // snapshot sees a writer completed only after its flips
            // (invariant 9).
            if k.read_stable(100, ALL) == val(b"v20") && prepare_on_top(&k) {
                // Release: pairs with the reader's Acquire load.
                flag.store(true, Ordering::Release);
            }
        })
    };
    let r = summary_reader(k.clone(), flag.clone());
    a.join().unwrap();
    b.join().unwrap();
    let (after, got) = r.join().unwrap();
    check_summary_read(after, got);
}

fn summary_publish_model() {
    let k = setup();
    // In progress before the reader starts, so a read from the head
    // examines one version only if it finds `v20` committed there.
    let v20 = k
        .put(2, &snapshot_below(ALL), b"v20")
        .expect("no conflicting writer");
    let w = {
        let k = k.clone();
        thread::spawn(move || {
            // SAFETY: v20 is this model's unfinished version, committed once.
            unsafe { k.commit(v20, 20) };
            commit(&k, 3, b"v30", 30);
        })
    };
    let r = {
        let k = k.clone();
        thread::spawn(move || k.read_stable_counted(25, ALL))
    };
    w.join().unwrap();
    let (got, examined) = r.join().unwrap();
    // One version examined: either the head was `v20` committed, or the
    // summary (30, the only one above 25) rejected the head and the finger
    // `v10` answered without a climb, which is right only if `v10 -> v20`
    // were not linked yet, and it was linked before the summary 30.
    if examined == 1 {
        assert_eq!(
            got,
            val(b"v20"),
            "head summary violated: a reader that skipped the head on summary 30 missed v20"
        );
    } else {
        assert!(
            got == val(b"v10") || got == val(b"v20"),
            "head summary violated: read {got:?}"
        );
    }
}

#[test]
fn summary_read_vs_publish() {
    check("summary/publish", mutant::NONE, summary_publish_model);
}

#[test]
#[should_panic(expected = "head summary violated")]
fn mutant_relaxed_summary_store() {
    check(
        "summary/publish/RELAXED_SUMMARY_STORE",
        mutant::RELAXED_SUMMARY_STORE,
        summary_publish_model,
    );
}

#[test]
fn summary_read_vs_prepare() {
    check("summary/prepare", mutant::NONE, summary_prepare_model);
}

#[test]
#[should_panic(expected = "head summary violated")]
fn mutant_prepend_keeps_summary() {
    check(
        "summary/prepare/PREPEND_KEEPS_SUMMARY",
        mutant::PREPEND_KEEPS_SUMMARY,
        summary_prepare_model,
    );
}

#[test]
fn summary_read_vs_commit_handoff() {
    check("summary/handoff", mutant::NONE, summary_handoff_model);
}

#[test]
#[should_panic(expected = "head summary violated")]
fn mutant_summary_after_flip() {
    check(
        "summary/handoff/SUMMARY_AFTER_FLIP",
        mutant::SUMMARY_AFTER_FLIP,
        summary_handoff_model,
    );
}

#[test]
fn finger_read_vs_commit_flip() {
    check("finger/flip", mutant::NONE, flip_model);
}

#[test]
#[should_panic(expected = "climb links violated")]
fn mutant_link_after_flip() {
    check(
        "finger/flip/LINK_AFTER_FLIP",
        mutant::LINK_AFTER_FLIP,
        flip_model,
    );
}

#[test]
fn finger_read_vs_prepare() {
    check("finger/prepare", mutant::NONE, prepare_model);
}

#[test]
#[should_panic(expected = "prepared state violated")]
fn mutant_read_skips_head() {
    check(
        "finger/prepare/READ_SKIPS_HEAD",
        mutant::READ_SKIPS_HEAD,
        prepare_model,
    );
}

#[test]
fn finger_read_vs_prune() {
    check("finger/prune", mutant::NONE, prune_model);
}

#[test]
#[should_panic(expected = "safe point violated")]
fn mutant_prune_past_safe_point_on_the_finger_path() {
    check(
        "finger/prune/PRUNE_PAST_SAFE_POINT",
        mutant::PRUNE_PAST_SAFE_POINT,
        prune_model,
    );
}
