//! Unit tests of the slab, each on a slab of its own (a small region where
//! it matters) with caches driven by hand, except the last, which goes
//! through the process's slab as versions do.

use super::{granules, Cache, Shared, BATCH, GRANULE, MAX_GRANULES, SPAN_BYTES};
use std::collections::HashSet;
use std::ptr::NonNull;

/// A slab of `spans` spans of the default size.
fn slab(spans: usize) -> Shared {
    Shared::new(spans * SPAN_BYTES, SPAN_BYTES, MAX_GRANULES)
}

fn addr(p: NonNull<u8>) -> usize {
    p.as_ptr().addr()
}

#[test]
fn classes_round_to_granules() {
    assert_eq!(granules(0), 1);
    assert_eq!(granules(1), 1);
    assert_eq!(granules(8), 1);
    assert_eq!(granules(9), 2);
    // Blocks of 148 and 198 bytes: 19 and 25 granules.
    assert_eq!(granules(148) * GRANULE, 152);
    assert_eq!(granules(198) * GRANULE, 200);
    let s = slab(4);
    let mut c = Cache::new(&s);
    let a = c.alloc(&s, 148);
    let b = c.alloc(&s, 148);
    let d = c.alloc(&s, 198);
    assert_eq!(addr(b) - addr(a), 152, "a 148-byte block takes 19 granules");
    assert_eq!(addr(d) - addr(b), 152, "carved right behind it");
    assert_eq!(s.stats().live_bytes, 152 + 152 + 200);
    // SAFETY: each block came from `alloc` with these sizes, freed once.
    unsafe {
        c.free(&s, a, 148);
        c.free(&s, b, 148);
        c.free(&s, d, 198);
    }
    assert_eq!(s.stats().live_bytes, 0);
    c.release(&s);
}

#[test]
fn a_freed_block_is_reused_by_its_class_only() {
    let s = slab(4);
    let mut c = Cache::new(&s);
    let a = c.alloc(&s, 152);
    // SAFETY: `a` came from `alloc(152)`, freed once.
    unsafe { c.free(&s, a, 152) };
    let other = c.alloc(&s, 200);
    assert_ne!(addr(other), addr(a), "another class does not take it");
    let again = c.alloc(&s, 150);
    assert_eq!(addr(again), addr(a), "the same class takes it back");
    // SAFETY: as above.
    unsafe {
        c.free(&s, other, 200);
        c.free(&s, again, 150);
    }
    c.release(&s);
}

#[test]
fn freed_batches_reach_a_thread_that_allocates() {
    let s = slab(64);
    let n = 3 * BATCH as usize;
    let freed: HashSet<usize> = std::thread::scope(|t| {
        t.spawn(|| {
            let mut c = Cache::new(&s);
            let ps: Vec<_> = (0..n).map(|_| c.alloc(&s, 152)).collect();
            for &p in &ps {
                // SAFETY: from `alloc(152)`, freed once.
                unsafe { c.free(&s, p, 152) };
            }
            // The cache keeps two batches at most; the third went on.
            c.release(&s);
            ps.iter().map(|&p| addr(p)).collect()
        })
        .join()
        .unwrap()
    });
    let carved = s.carved_granules();
    std::thread::scope(|t| {
        t.spawn(|| {
            let mut c = Cache::new(&s);
            let ps: Vec<_> = (0..n).map(|_| c.alloc(&s, 152)).collect();
            for &p in &ps {
                assert!(freed.contains(&addr(p)), "a block another thread freed");
            }
            assert_eq!(
                ps.iter().map(|&p| addr(p)).collect::<HashSet<_>>().len(),
                n,
                "each handed out once"
            );
            assert_eq!(s.carved_granules(), carved, "no span taken");
            for &p in &ps {
                // SAFETY: as above.
                unsafe { c.free(&s, p, 152) };
            }
            c.release(&s);
        });
    });
}

#[test]
fn a_full_batch_moves_to_the_depot_while_the_thread_runs() {
    let s = slab(64);
    let mut a = Cache::new(&s);
    let mut b = Cache::new(&s);
    let ps: Vec<_> = (0..3 * BATCH).map(|_| a.alloc(&s, 152)).collect();
    for &p in &ps {
        // SAFETY: from `alloc(152)`, freed once.
        unsafe { a.free(&s, p, 152) };
    }
    let q = b.alloc(&s, 152);
    assert!(
        ps.contains(&q),
        "the third full batch is in the depot for another cache"
    );
    // SAFETY: as above.
    unsafe { b.free(&s, q, 152) };
    a.release(&s);
    b.release(&s);
}

#[test]
fn an_exhausted_region_falls_back_without_panicking() {
    // Two spans of 64 KiB hold 431 blocks of 152 bytes each (19 granules;
    // 8,192 / 19 = 431 a span, the 3 granules left become a free block).
    let s = slab(2);
    let mut c = Cache::new(&s);
    let ps: Vec<_> = (0..1000).map(|_| c.alloc(&s, 152)).collect();
    assert_eq!(s.fallbacks(), 1000 - 2 * 431);
    for (i, &p) in ps.iter().enumerate() {
        // SAFETY: a live block of 152 bytes, ours.
        unsafe { p.as_ptr().write_bytes(i as u8, 152) };
    }
    for (i, &p) in ps.iter().enumerate() {
        // SAFETY: as above; no block overlaps another.
        assert_eq!(unsafe { p.as_ptr().add(151).read() }, i as u8);
    }
    assert_eq!(s.stats().live_bytes, 2 * 431 * 152);
    for &p in &ps {
        // SAFETY: from `alloc(152)`, freed once.
        unsafe { c.free(&s, p, 152) };
    }
    assert_eq!(s.stats().live_bytes, 0);
    c.release(&s);
}

#[test]
fn blocks_past_the_largest_class_come_from_the_global_allocator() {
    let s = slab(2);
    let mut c = Cache::new(&s);
    let p = c.alloc(&s, MAX_GRANULES * GRANULE + 1);
    assert_eq!(s.carved_granules(), 0, "no span for a large block");
    assert_eq!(s.fallbacks(), 0, "not a fallback");
    // SAFETY: from `alloc` with this size, freed once.
    unsafe { c.free(&s, p, MAX_GRANULES * GRANULE + 1) };
    c.release(&s);
}

#[test]
fn an_ended_cache_leaves_its_span_to_the_next() {
    let s = slab(2);
    let mut a = Cache::new(&s);
    let p = a.alloc(&s, 152);
    a.release(&s);
    let mut b = Cache::new(&s);
    let q = b.alloc(&s, 152);
    assert_eq!(addr(q), addr(p) + 152, "carved from the rest of a's span");
    assert_eq!(s.carved_granules(), (SPAN_BYTES / GRANULE) as u64);
    // SAFETY: from `alloc(152)`, freed once each.
    unsafe {
        b.free(&s, p, 152);
        b.free(&s, q, 152);
    }
    b.release(&s);
}

#[test]
fn versions_freed_on_another_thread_are_reused() {
    // Through the process's slab: a thread allocates, another frees (as
    // the collector's deferred destructors do), and that one's next
    // allocations of the class take the blocks back.
    let ps: Vec<usize> = std::thread::spawn(|| (0..8).map(|_| addr(super::alloc(160))).collect())
        .join()
        .unwrap();
    std::thread::spawn(move || {
        for &p in &ps {
            // SAFETY: from `alloc(160)` on the other thread, freed once.
            unsafe { super::free(NonNull::new(p as *mut u8).unwrap(), 160) };
        }
        let again: HashSet<usize> = (0..8).map(|_| addr(super::alloc(160))).collect();
        assert_eq!(again, ps.iter().copied().collect::<HashSet<_>>());
        for p in again {
            // SAFETY: as above.
            unsafe { super::free(NonNull::new(p as *mut u8).unwrap(), 160) };
        }
    })
    .join()
    .unwrap();
    assert!(super::stats().reserved_bytes > 0, "the region was reserved");
}

#[test]
fn the_region_is_chunk_aligned_and_committed_a_chunk_at_a_time() {
    use super::region::{Region, CHUNK};
    let r = Region::reserve(3 * CHUNK).expect("a region of three chunks");
    assert_eq!(r.addr(0).addr() % CHUNK, 0, "the base is chunk-aligned");
    assert!(r.commit(0, 8));
    assert_eq!(r.committed_bytes(), CHUNK, "a span commits its whole chunk");
    // The chunk's last granule is writable with no commit of its own.
    let last = (CHUNK / GRANULE - 1) as u32;
    r.set_link(last, 7);
    assert_eq!(r.link(last), 7);
    assert!(r.commit(last + 1, 8));
    assert_eq!(
        r.committed_bytes(),
        2 * CHUNK,
        "the next span, the next chunk"
    );
    assert!(r.commit(8, 8), "a span inside a committed chunk");
    assert_eq!(r.committed_bytes(), 2 * CHUNK);
}

#[test]
fn a_span_is_carved_to_its_last_granule() {
    // 64-byte blocks (8 granules) fill a 64 KiB span exactly: 1,024 a span.
    let s = slab(2);
    let mut c = Cache::new(&s);
    let per_span = SPAN_BYTES / 64;
    let ps: Vec<_> = (0..2 * per_span).map(|_| c.alloc(&s, 64)).collect();
    assert_eq!(s.fallbacks(), 0, "both spans hold 2,048 blocks of 64 bytes");
    for w in ps[..per_span].windows(2) {
        assert_eq!(
            addr(w[1]),
            addr(w[0]) + 64,
            "the first span carved in order"
        );
    }
    assert_eq!(s.carved_granules(), 2 * (SPAN_BYTES / GRANULE) as u64);
    let more = c.alloc(&s, 64);
    assert_eq!(s.fallbacks(), 1, "the region is full");
    // SAFETY: each from `alloc(64)`, freed once.
    unsafe {
        c.free(&s, more, 64);
        for &p in &ps {
            c.free(&s, p, 64);
        }
    }
    assert_eq!(s.stats().live_bytes, 0);
    c.release(&s);
}

#[test]
fn the_largest_class_is_carved_from_the_region_and_reused() {
    let big = MAX_GRANULES * GRANULE;
    let s = slab(1);
    let mut c = Cache::new(&s);
    let p = c.alloc(&s, big);
    assert_eq!(s.fallbacks(), 0, "a class size, served by the region");
    assert_eq!(s.carved_granules(), (SPAN_BYTES / GRANULE) as u64);
    assert_eq!(s.stats().live_bytes, big as u64);
    // SAFETY: from `alloc(big)`, freed once.
    unsafe { c.free(&s, p, big) };
    assert_eq!(s.stats().live_bytes, 0, "freed into the region's lists");
    let q = c.alloc(&s, big);
    assert_eq!(addr(q), addr(p), "and taken back by its class");
    // A span holds 32 blocks of 2 KiB; the 33rd falls back, counted.
    let mut rest: Vec<_> = (1..=SPAN_BYTES / big).map(|_| c.alloc(&s, big)).collect();
    assert_eq!(s.fallbacks(), 1, "a class-size block past the region");
    rest.push(q);
    for p in rest {
        // SAFETY: as above.
        unsafe { c.free(&s, p, big) };
    }
    c.release(&s);
}

#[test]
fn the_region_owns_exactly_its_granules() {
    use super::region::{Region, CHUNK};
    let r = Region::reserve(CHUNK).expect("a region of one chunk");
    let base = r.addr(0);
    assert_eq!(r.index_of(base), Some(0));
    assert_eq!(
        r.index_of(base.wrapping_add(CHUNK - GRANULE)),
        Some((CHUNK / GRANULE - 1) as u32),
        "the last granule"
    );
    assert_eq!(
        r.index_of(base.wrapping_add(CHUNK)),
        None,
        "one past the end"
    );
    assert_eq!(
        r.index_of(base.wrapping_sub(GRANULE)),
        None,
        "below the base"
    );
}

/// A reader thread pins and reads a block; this thread retires the block
/// through the epoch collector (as `free_version`'s callers do), then
/// allocates `rounds` blocks of its class, flushing its garbage before
/// each, and checks that none of them is the retired block while the
/// reader's guard is held; the reader checks the block still holds what it
/// read.
fn retire_under_a_reader_guard(rounds: usize) {
    use crate::machinery::epoch::Collector;
    use std::sync::mpsc::channel;
    const BYTES: usize = 160;
    const MARK: u64 = 0x5eed_b10c;
    let collector = Collector::new();
    let p = super::alloc(BYTES);
    // SAFETY: a fresh block of 160 bytes, ours.
    unsafe { p.as_ptr().cast::<u64>().write(MARK) };
    let at = addr(p);
    let (pinned_tx, pinned_rx) = channel::<()>();
    let (done_tx, done_rx) = channel::<()>();
    std::thread::scope(|t| {
        // Owned here, so a panic below drops it and ends the reader's wait.
        let done_tx = done_tx;
        let collector = &collector;
        t.spawn(move || {
            let guard = collector.pin();
            // SAFETY: the block is retired only after this guard is pinned
            // (the message below), so it stays allocated while it is held.
            let read = || unsafe { (at as *const u64).read() };
            assert_eq!(read(), MARK);
            pinned_tx.send(()).unwrap();
            // An `Err`: the retiring side panicked; nothing more to check.
            if done_rx.recv().is_ok() {
                assert_eq!(read(), MARK, "the block changed under the guard");
            }
            drop(guard);
        });
        pinned_rx.recv().expect("the reader pinned");
        let g = collector.pin();
        let sp = at;
        collector.defer(&g, move || {
            // SAFETY: retired once; every guard that could reach it has
            // dropped when the collector runs this.
            unsafe { super::free(NonNull::new(sp as *mut u8).unwrap(), BYTES) };
        });
        drop(g);
        let mut got = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let g = collector.pin();
            collector.flush(&g);
            drop(g);
            let q = super::alloc(BYTES);
            assert_ne!(
                addr(q),
                at,
                "a block retired under a reader's guard came back while the guard is held"
            );
            // SAFETY: a fresh block of 160 bytes, ours (not the reader's:
            // checked above).
            unsafe { q.as_ptr().cast::<u64>().write(!MARK) };
            got.push(q);
        }
        done_tx.send(()).unwrap();
        for q in got {
            // SAFETY: from `alloc(160)`, freed once.
            unsafe { super::free(q, BYTES) };
        }
    });
}

#[test]
fn a_retired_block_is_not_reused_while_a_guard_that_reached_it_is_held() {
    // Three batches' worth of allocations, each after a flush that would
    // free the block (into this thread's list, which the next allocation
    // of the class takes from) if the reader's pin allowed it.
    retire_under_a_reader_guard(3 * BATCH as usize);
}

/// Turns this thread's mutant off again, also when the twin unwinds.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        crate::sync::mutant::set_for_thread(crate::sync::mutant::NONE);
    }
}

#[test]
#[should_panic(
    expected = "a block retired under a reader's guard came back while the guard is held"
)]
fn mutant_free_skips_epoch() {
    let _reset = Reset;
    crate::sync::mutant::set_for_thread(crate::sync::mutant::FREE_SKIPS_EPOCH);
    retire_under_a_reader_guard(3 * BATCH as usize);
}

#[test]
fn reading_the_figures_reserves_no_region() {
    let s = slab(4);
    assert_eq!(
        s.stats(),
        super::SlabStats::default(),
        "a slab that handed out no block: nothing reserved, carved or live"
    );
    assert!(s.region.get().is_none(), "the figures reserved the region");
    let mut c = Cache::new(&s);
    let p = c.alloc(&s, 152);
    assert!(s.region.get().is_some(), "the first span reserves it");
    let st = s.stats();
    assert_eq!(st.reserved_bytes, (4 * SPAN_BYTES) as u64);
    assert_eq!(st.carved_bytes, SPAN_BYTES as u64);
    assert_eq!(st.live_bytes, 152);
    // SAFETY: from `alloc(152)`, freed once.
    unsafe { c.free(&s, p, 152) };
    c.release(&s);
}
