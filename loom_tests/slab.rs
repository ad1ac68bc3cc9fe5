//! Model — the version slab's free blocks handed between threads
//! (`store/raw/slab.rs`): a block has one holder at a time, and a thread
//! that takes a block another freed sees what the freer wrote (the free
//! list's links).
//!
//! Slab level, with no chains: the slab's region under loom is a vector
//! of loom-checked cells, one a granule (`slab/region_loom.rs`), so every
//! link read and write, and every write a model makes into a block it
//! holds, is checked against the other threads' accesses.
//!
//! * **handoff**: four one-granule blocks are carved before the threads
//!   start. A freer thread frees them (with a batch of 2 under loom, two
//!   full batches: the second frees the first to the depot) and ends its
//!   cache (the other batch follows). Two takers each take a block (from
//!   the depot, or carved from the region when it is empty), write their
//!   id into it and read it back. A taker that pops a batch the freer
//!   handed on reads the links the freer wrote: the depot's mutex orders
//!   them. The takers' blocks differ. The mutant twin
//!   (`DEPOT_TAKE_SPLIT`) reads the top batch in one hold of the depot's
//!   lock and removes one in another, so both takers can take the same
//!   batch and its first block.
//! * **reuse** (run with the real collector in tier 2, `epoch.rs`): a
//!   block is published through a link word before the threads start. A
//!   reader pins, loads the link and reads the block it reaches. A freer
//!   unlinks it, retires it through the collector (its deferred free hands
//!   the index to the freer, which frees it into its cache as
//!   `slab::free` does), then flushes and allocates blocks of the class a
//!   few times, writing into each. A block the reader reached comes back
//!   only after its guard dropped: else the freer's writes race the
//!   reader's read ("Causality violation"). Some executions do get the
//!   block back (`REUSED`), so the model is not vacuous. Under the
//!   stand-in collector nothing is freed before it drops, so tier 1 runs
//!   only the twin, `FREE_SKIPS_EPOCH`, which runs the deferred free at
//!   once.

use super::common::check;
use crate::machinery::epoch::Collector;
use crate::store::raw::slab::{Cache, Shared, BATCH, GRANULE};
use crate::sync::mutant;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Takes a block of class 1, writes `id` into it, reads it back.
fn take(s: &Shared, id: u32) -> u32 {
    let mut c = Cache::new(s);
    let i = c.alloc_index(s, 1).expect("the region has spans left");
    s.model_write(i, id);
    assert_eq!(s.model_read(i), id, "a held block is its holder's alone");
    c.release(s);
    i
}

fn handoff() {
    // Four spans of eight one-granule blocks, one class.
    let s = Arc::new(Shared::new(32 * GRANULE, 8 * GRANULE, 1));
    let mut a = Cache::new(&s);
    let blocks: Vec<u32> = (0..2 * BATCH)
        .map(|_| a.alloc_index(&s, 1).expect("a fresh region"))
        .collect();
    let freer = {
        let s = s.clone();
        thread::spawn(move || {
            for i in blocks {
                a.free_index(&s, 1, i);
            }
            a.release(&s);
        })
    };
    let takers: Vec<_> = [1u32, 2]
        .into_iter()
        .map(|id| {
            let s = s.clone();
            thread::spawn(move || take(&s, id))
        })
        .collect();
    freer.join().unwrap();
    let got: Vec<u32> = takers.into_iter().map(|t| t.join().unwrap()).collect();
    assert_ne!(got[0], got[1], "two takers never hold one block");
    assert_eq!(s.model_read(got[0]), 1, "taker 1's block holds its write");
    assert_eq!(s.model_read(got[1]), 2, "taker 2's block holds its write");
}

/// No block: the unlinked link word.
const UNLINKED: u32 = u32::MAX;
/// The freer's rounds of flush-then-allocate: two flushes can advance the
/// epoch past the retirement, the third gives the reader time to finish.
const ROUNDS: usize = 3;

/// Executions of [`reuse`] in which the freer got the retired block back.
pub(super) static REUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(super) fn reuse() {
    // Four spans of eight one-granule blocks, one class.
    let s = Arc::new(Shared::new(32 * GRANULE, 8 * GRANULE, 1));
    let mut a = Cache::new(&s);
    let i = a.alloc_index(&s, 1).expect("a fresh region");
    s.model_write(i, 7);
    let link = Arc::new(AtomicU32::new(i));
    let collector = Arc::new(Collector::new());
    // What the deferred free hands on: plain memory, so a free the
    // collector runs after the model's threads end touches nothing loom
    // tracks.
    let freed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let (s, link, collector) = (s.clone(), link.clone(), collector.clone());
        thread::spawn(move || {
            let g = collector.pin();
            // Relaxed: the block was written before the threads started;
            // what keeps it from reuse is the epoch (the pins' fences).
            let j = link.load(Ordering::Relaxed);
            if j != UNLINKED {
                assert_eq!(s.model_read(j), 7, "a reached block holds what was written");
            }
            drop(g);
        })
    };
    let freer = {
        let s = s.clone();
        thread::spawn(move || {
            // Relaxed: as the reader's load.
            link.store(UNLINKED, Ordering::Relaxed);
            let g = collector.pin();
            let f = freed.clone();
            collector.defer(&g, move || f.lock().unwrap().push(i));
            drop(g);
            let mut c = Cache::new(&s);
            for _ in 0..ROUNDS {
                let g = collector.pin();
                collector.flush(&g);
                drop(g);
                let back = std::mem::take(&mut *freed.lock().unwrap());
                for j in back {
                    c.free_index(&s, 1, j);
                }
                let k = c.alloc_index(&s, 1).expect("the region has spans left");
                s.model_write(k, 2);
                if k == i {
                    REUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            c.release(&s);
        })
    };
    reader.join().unwrap();
    freer.join().unwrap();
}

#[test]
fn freed_blocks_handed_between_threads() {
    check("slab/handoff", mutant::NONE, handoff);
}

#[test]
#[should_panic(expected = "two takers never hold one block")]
fn mutant_depot_take_split() {
    check(
        "slab/handoff/DEPOT_TAKE_SPLIT",
        mutant::DEPOT_TAKE_SPLIT,
        handoff,
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn mutant_free_skips_epoch() {
    check(
        "slab/reuse/FREE_SKIPS_EPOCH",
        mutant::FREE_SKIPS_EPOCH,
        reuse,
    );
}
