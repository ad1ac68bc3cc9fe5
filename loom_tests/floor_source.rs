//! Model 13 — the xmin floor the read-only fast path
//! decides untimestamped versions by, and where the horizon advancer takes
//! it from (invariants 7 and 11; `DescriptorCell::xmin`, `advance_horizon`,
//! `begin_at_stable`).
//!
//! Below the public machinery layer by design: the expected
//! value depends on the fast path's `complete_below`, which no public API
//! reports, and the race is the bare handshake with nothing else in between
//! (a `read_at_stable` `Transaction` needs a stable timestamp set, and the
//! setter's claims and fences would add edges).
//!
//! `k = old` is committed untimestamped by transaction 1 and the floor is 2.
//! Three threads, nothing else between them: a writer allocates id 2,
//! prepends `k = new`, flips it committed and completes (descriptor CAS);
//! an advancer runs `advance_horizon`, which publishes the current
//! descriptor's xmin as the floor; a fast-path reader begins at stable and
//! reads `k` twice. With `complete_below` 2 both reads must give `old`;
//! with 3 (the writer is below the floor) both must give `new`. The floor
//! only carries the writer's status flip to the reader if the advancer
//! acquired the descriptor pointer: with a Relaxed load, a reader that
//! acquires the floor between the advancer's floor store and its SeqCst
//! fence has no edge to the flip and may read the version as in progress
//! (`old`) below `complete_below`, then `new` on the second read.
//!
//! The advancer's Relaxed load is also a data race: it reads the
//! descriptor's plain `xmin` with no edge to the completer that wrote it.
//! Loom sees that through the descriptor's causality witness
//! (`sync::Witness`, checked in `DescriptorCell::xmin` at the read, before
//! any fence): the twin `mutant_relaxed_floor_source` (RELAXED_FLOOR_SOURCE)
//! fails with loom's "Causality violation". The stale-status half
//! alone loom 0.7 would not show: its acquire fence (`fence_acq`, loom-0.7.3/src/rt/atomic.rs:177-192)
//! synchronizes with every store that `FirstSeen::is_seen_by_current`
//! (:878-888) reports, i.e. any store read by *any* thread in the fencing
//! thread's causality, so the reader's SeqCst fence in `begin_at_stable`
//! picks up the writer's flip through the advancer's Relaxed read, an edge
//! C++ does not give ([atomics.fences]). See `DescriptorCell::xmin` and
//! DESIGN.md, "How the invariants are checked". What the model itself asserts, on
//! the real code: a fast-path read decides the untimestamped version by
//! `complete_below` exactly, and repeatably. Its other twin takes a writer
//! *at* `complete_below` as completed (FAST_PATH_BELOW_INCLUSIVE): with the
//! floor 2 and writer 2's flip visible, the reader reads `new` where `old`
//! is due.

use super::api::{state, Chain, Machine, Read};
use super::common::check;
use crate::sync::mutant;
use loom::sync::Arc;
use loom::thread;

fn model() {
    let m = Arc::new(Machine::new(2));
    let chain = Arc::new(Chain::new());
    let (w, r) = (m.open_session().unwrap(), m.open_session().unwrap());
    // k = old by transaction 1, completed; floor 2.
    let id1 = m.allocate_id(w);
    let snap = m.descriptor();
    let v = chain.put(id1, &snap, b"old").unwrap();
    // SAFETY: `v` was just written by transaction 1, which has not finished.
    unsafe { chain.set_status(v, state::COMMITTED, 0) };
    m.complete(w, id1);
    m.advance_horizon();
    let snap = m.descriptor();
    let writer = {
        let (m, chain) = (m.clone(), chain.clone());
        thread::spawn(move || {
            let id = m.allocate_id(w);
            let v = chain.put(id, &snap, b"new").expect("no write conflict");
            // SAFETY: `v` was just written by transaction `id`, which has
            // not finished; nothing prunes in this model.
            unsafe { chain.set_status(v, state::COMMITTED, 0) };
            m.complete(w, id);
            id
        })
    };
    let advancer = {
        let m = m.clone();
        thread::spawn(move || m.advance_horizon())
    };
    let reader = {
        let (m, chain) = (m.clone(), chain.clone());
        thread::spawn(move || {
            let (stable, below) = m.begin_at_stable(r);
            let first = chain.read_stable(stable, below);
            let second = chain.read_stable(stable, below);
            m.end(r);
            (below, first, second)
        })
    };
    let id = writer.join().unwrap();
    advancer.join().unwrap();
    let (below, first, second) = reader.join().unwrap();
    let want: &[u8] = if id < below { b"new" } else { b"old" };
    let want = Read::Value(want.to_vec());
    assert!(
        first == want && second == want,
        "a fast-path read with complete_below {below} saw writer {id}'s status stale or \
         misjudged it: read {first:?}, then {second:?}, want {want:?}"
    );
    m.close_session(w);
    m.close_session(r);
}

#[test]
fn floor_source_versus_fast_path() {
    check("floor_source", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "saw writer 2's status stale or misjudged it")]
fn mutant_fast_path_below_inclusive() {
    check(
        "floor_source/FAST_PATH_BELOW_INCLUSIVE",
        mutant::FAST_PATH_BELOW_INCLUSIVE,
        model,
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn mutant_relaxed_floor_source() {
    check(
        "floor_source/RELAXED_FLOOR_SOURCE",
        mutant::RELAXED_FLOOR_SOURCE,
        model,
    );
}
