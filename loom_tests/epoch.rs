//! Tier 2 (`--cfg crossbeam_loom`, run by `scripts/loom.sh` at preemption
//! bound 1): the chain model (commits that install descriptors, a reader
//! that copies them and reads the chain, a prune that retires a version)
//! again with the real crossbeam-epoch collector instead of the stand-in, so
//! superseded descriptors and pruned versions go through the real collector, and the model's threads flush their
//! garbage and try to advance the epoch (`common::reclaim_now`) while the
//! other threads read. Loom sees crossbeam-epoch's atomics and fences
//! (invariant 11), and flags a free that is not ordered after every load of
//! the freed version's `next` link (`free_chain` reads it with `get_mut`,
//! an unsynchronized access loom checks against every atomic access).
//!
//! No should_panic twins here: when a model panics, crossbeam-epoch's
//! loom-backed thread-local handle is dropped outside the loom execution and
//! the process aborts instead of unwinding. The mutants are shown in tier 1;
//! a failure here still fails the run (the abort is a non-zero exit).
//!
//! Two models only, to keep CI short: the chain model, and `slab/reuse`
//! (`slab.rs`), whose block can only come back through a collector that
//! frees while the model runs. Another can be run with the real
//! collector under the tier-2 flags, e.g. `cargo test --release
//! --no-default-features --lib -- --exact
//! loom_tests::descriptors::completion_real_time_order`.

use super::common::check;
use crate::sync::mutant;

#[test]
fn chains_with_real_collector() {
    check("epoch/chains", mutant::NONE, super::chains::model);
}

/// `slab/reuse` (`slab.rs`): the stand-in collector frees nothing while
/// the model runs, so only the real one can show a block coming back.
#[test]
fn slab_reuse_with_real_collector() {
    use std::sync::atomic::Ordering;
    super::slab::REUSED.store(0, Ordering::Relaxed);
    check("epoch/slab_reuse", mutant::NONE, super::slab::reuse);
    assert!(
        super::slab::REUSED.load(Ordering::Relaxed) > 0,
        "no execution got the retired block back: the model checks nothing"
    );
}
