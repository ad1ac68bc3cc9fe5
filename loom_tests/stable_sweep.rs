//! Model 19 — the stable sweep (`store/raw/stable_queue.rs`): committers
//! queue their keys, the stable setter takes the queue and moves each
//! key's finger under the key's pruning lock (invariants 13, 18).
//!
//! Chain level, as the finger models (`finger.rs`): fixed snapshots,
//! readers with the read-at-stable view, the setter's claim wait stood in
//! for by flags. Each key has `v10` committed and its finger (stable 15);
//! the queue was armed by a sweep to 15. A read at 25 of a key whose head
//! is committed at 30 skips the head (summary 30) and starts at the
//! finger: one version examined if the sweep moved the finger to `v20`,
//! two (the climb from `v10`) if not. The answer is `v20` either way: the
//! models check that the sweep's work is not lost.
//!
//! * **stable_sweep/push**: two committers, each on its own key, commit
//!   `v20` and `v30`, queue both, and raise a flag; the setter waits for
//!   both flags, sweeps to 25 and reads both keys at 25: one version each.
//!   A push by plain store instead of compare-and-swap
//!   (`SWEEP_PUSH_LOSES_BATCH`) can drop one committer's batch.
//! * **stable_sweep/busy**: `v20`, `v22` and `v30` committed and queued
//!   before the threads start; a committer prunes the key at the stable it
//!   loaded (15) and raises a flag, while the setter sweeps to 25, waits
//!   for the flag and sweeps to 26, then reads at 25: `v22`, one version.
//!   The committer's prune may hold the key's pruning lock during the
//!   first sweep, which then skips the key; dropping the entry then
//!   (`SWEEP_SKIPS_BUSY_KEY`) instead of keeping it for the next sweep
//!   leaves the finger at `v10` and the hint at `v20` (gap 10): the read
//!   starts at `v20` and climbs. The finger and hint end linked.
//!
//! Two pruners of one key (the sweep's cut and a committer's) are the
//! pruning lock's case, as in `hint/prune`: the second skips.

use super::api::{snapshot_below, Chain, Read};
use super::common::check;
use crate::store::raw::stable_queue::StableQueue;
use crate::sync::mutant;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Every writer's id is below this (see `finger.rs`).
const ALL: u64 = 100;
/// A horizon that covers nothing these models commit: no cut.
const NO_CUT: (u64, u64) = (ALL, 5);

fn val(v: &[u8]) -> Read {
    Read::Value(v.to_vec())
}

/// Writes and commits `value` at `cts` as transaction `id`.
fn commit(k: &Chain, id: u64, value: &[u8], cts: u64) {
    let v = k
        .put(id, &snapshot_below(ALL), value)
        .expect("no conflicting writer");
    // SAFETY: our own unfinished version.
    unsafe { k.commit(v, cts) };
}

/// A key with `v10` committed at 10 and its finger (stable 15).
fn key(id: u64) -> Arc<Chain> {
    let k = Arc::new(Chain::new());
    commit(&k, id, b"v10", 10);
    k.prune(NO_CUT, 15);
    k
}

/// Commits each `(value, cts)` of `versions` on `k` (ids from `id`),
/// queuing each.
fn commit_queued(k: &Chain, q: &StableQueue, id: u64, versions: &[(&[u8], u64)]) {
    for (i, &(value, cts)) in versions.iter().enumerate() {
        commit(k, id + i as u64, value, cts);
        assert!(k.push_pending(q, cts), "the queue is armed and not full");
    }
}

/// A read at 25 must answer `want` examining one version.
fn check_read(k: &Chain, want: &[u8]) {
    let (got, examined) = k.read_stable_counted(25, ALL);
    assert_eq!(
        got,
        val(want),
        "finger violated: a read at 25 missed {want:?}"
    );
    assert_eq!(
        examined, 1,
        "stable sweep lost: a read at 25 climbed from a finger the sweep did not move"
    );
}

/// Spins (yielding) until `flag` is set.
fn wait(flag: &AtomicBool) {
    // Acquire: pairs with the committer's Release store (the stand-in for
    // the setter's Acquire wait on the commit claim).
    while !flag.load(Ordering::Acquire) {
        thread::yield_now();
    }
}

fn push_model() {
    let (k1, k2) = (key(1), key(11));
    let q = Arc::new(StableQueue::new());
    k1.sweep(&q, 15, NO_CUT);
    let (f1, f2) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let committer = |k: Arc<Chain>, id: u64, f: Arc<AtomicBool>, q: Arc<StableQueue>| {
        thread::spawn(move || {
            commit_queued(&k, &q, id, &[(b"v20", 20), (b"v30", 30)]);
            // Release: pairs with the setter's Acquire wait.
            f.store(true, Ordering::Release);
        })
    };
    let a = committer(k1.clone(), 2, f1.clone(), q.clone());
    let b = committer(k2.clone(), 12, f2.clone(), q.clone());
    let s = {
        let (k1, k2, q) = (k1.clone(), k2.clone(), q.clone());
        thread::spawn(move || {
            wait(&f1);
            wait(&f2);
            k1.sweep(&q, 25, NO_CUT);
            check_read(&k1, b"v20");
            check_read(&k2, b"v20");
        })
    };
    a.join().unwrap();
    b.join().unwrap();
    s.join().unwrap();
}

fn busy_model() {
    let k = key(1);
    let q = Arc::new(StableQueue::new());
    k.sweep(&q, 15, NO_CUT);
    commit_queued(&k, &q, 2, &[(b"v20", 20), (b"v22", 22), (b"v30", 30)]);
    let done = Arc::new(AtomicBool::new(false));
    let w = {
        let (k, done) = (k.clone(), done.clone());
        thread::spawn(move || {
            // A committing session's prune, at the stable it loaded.
            k.prune(NO_CUT, 15);
            // Release: pairs with the setter's Acquire wait.
            done.store(true, Ordering::Release);
        })
    };
    let s = {
        let (k, q) = (k.clone(), q.clone());
        thread::spawn(move || {
            k.sweep(&q, 25, NO_CUT);
            wait(&done);
            k.sweep(&q, 26, NO_CUT);
            check_read(&k, b"v22");
        })
    };
    w.join().unwrap();
    s.join().unwrap();
    assert_eq!(q.held(), 1, "the sweeps passed v20 and v22 and kept v30");
    assert!(
        k.finger_linked() && k.hint_linked(),
        "finger violated: finger or hint left off the chain"
    );
}

#[test]
fn stable_sweep_push() {
    check("stable_sweep/push", mutant::NONE, push_model);
}

#[test]
#[should_panic(expected = "stable sweep lost")]
fn stable_sweep_push_mutant() {
    check(
        "stable_sweep/push (push loses a batch)",
        mutant::SWEEP_PUSH_LOSES_BATCH,
        push_model,
    );
}

#[test]
fn stable_sweep_busy() {
    check("stable_sweep/busy", mutant::NONE, busy_model);
}

#[test]
#[should_panic(expected = "stable sweep lost")]
fn stable_sweep_busy_mutant() {
    check(
        "stable_sweep/busy (busy key dropped)",
        mutant::SWEEP_SKIPS_BUSY_KEY,
        busy_model,
    );
}
