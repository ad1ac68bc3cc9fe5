//! The version slab: blocks in 8-byte granules carved from one reserved
//! virtual region, so a block is named by its granule index and its
//! address is `base + 8 * index` (DESIGN.md, "Version chains and the
//! index").
//!
//! * **Classes.** A block of `g` granules (1 to [`MAX_GRANULES`], 2 KiB)
//!   belongs to class `g`: one class per granule count, so a block wastes
//!   at most 7 bytes to rounding. Larger blocks are single allocations of
//!   the global allocator ([`Cache::alloc`]).
//! * **Region.** `region.rs` reserves [`REGION_BYTES`] of address space
//!   with no access when the first span is taken (reading the figures
//!   before then reserves nothing) and commits it a 2 MiB chunk at a time
//!   as spans reach it, advised for transparent huge pages; pages are
//!   backed as they are first touched. An exhausted (or unreservable)
//!   region is not an error: the block comes from the global allocator
//!   instead, and [`Shared`] counts it as a fallback.
//! * **Carving.** Each thread's [`Cache`] carves fresh blocks of any class
//!   by a bump within its current span ([`SPAN_BYTES`]), taken from the
//!   region with one `fetch_add`. A span's tail too short for the next
//!   block becomes a free block of its own class.
//! * **Freeing.** Retired versions reach [`Cache::free`] through the epoch
//!   collector (after every guard that could reach them dropped, invariant
//!   11; loom `slab/reuse` on crossbeam-epoch), on whichever thread runs
//!   the deferred destructor. A class's free blocks form lists linked
//!   through each free block's first word (a granule index). A cache
//!   keeps at most two lists a class (the one it allocates from and one
//!   full batch of [`BATCH`]); a third full batch goes to the shared
//!   **depot**, where a thread that allocates more than it frees takes it.
//!   A cache that ends (its thread exits) hands every list and its span's
//!   rest to [`Shared`].
//!
//! # Orderings
//!
//! * A block moves between threads only through the depot's mutex (a
//!   batch, or a span's rest), so everything the freeing thread wrote to
//!   it (the links) happens-before the taking thread's reads (loom model
//!   `slab/handoff`). The per-class batch counts read without the lock
//!   are Relaxed hints: a stale zero carves a fresh block instead, a
//!   stale count takes the lock and finds the depot empty.
//! * The region is reserved once, in a `OnceLock`, by the first thread
//!   to take a span. Every other thread that names a block of it got the
//!   block through a chain of happens-before edges from a thread that had
//!   reserved it or seen it reserved, so its `get` sees the region too.
//! * The region's bump (`next`) is Relaxed: it only hands out disjoint
//!   spans; the span's pages are made accessible by the taking thread's
//!   own `mprotect`.
//! * The fallback count and the live-byte counters are Relaxed
//!   statistics.

#[cfg(not(loom))]
mod global;
/// Under loom: versions come from the global allocator.
#[cfg(loom)]
#[path = "slab/global_loom.rs"]
mod global;
#[cfg(not(loom))]
mod region;
/// Under loom: a loom-visible stand-in region of link cells.
#[cfg(loom)]
#[path = "slab/region_loom.rs"]
mod region;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(not(loom))]
#[cfg_attr(not(any(test, feature = "bench-hooks")), allow(unused_imports))]
pub(crate) use global::stats;
#[cfg(not(loom))]
#[cfg_attr(not(feature = "bench-hooks"), allow(unused_imports))]
pub use global::SlabStats;
pub(crate) use global::{alloc, free};
#[cfg(not(loom))]
pub(crate) use global::{block_name, names, Names};

/// Under loom versions come from the global allocator: no block has a
/// name, so the index's hint slots stay empty.
#[cfg(loom)]
pub(crate) fn block_name(_p: *const u8) -> u32 {
    0
}

/// Under loom: no name points anywhere.
#[cfg(loom)]
#[derive(Clone, Copy)]
pub(crate) struct Names;

/// Under loom: see [`Names`].
#[cfg(loom)]
pub(crate) fn names() -> Names {
    Names
}

#[cfg(loom)]
impl Names {
    /// Under loom: null.
    pub(crate) fn addr(self, _n: u32) -> *const u8 {
        std::ptr::null()
    }
}
use region::{LazyRegion, Region};

use crate::sync::mutant::{self as m, mutant_on};
use crate::sync::{AtomicU64, Mutex, Ordering};

/// Bytes of a granule: every block is a whole number of them, 8-aligned.
pub(crate) const GRANULE: usize = 8;
/// Granules of the largest class (2 KiB blocks).
pub(crate) const MAX_GRANULES: usize = 256;
/// Address space the process's slab reserves: 2^31 granules (16 GiB, ten
/// million keys' versions several times over), so a granule index fits in
/// 31 bits. Reserving it costs address space only (`region.rs`).
pub(crate) const REGION_BYTES: usize = 1 << 34;
/// Bytes a cache takes from the region at once.
pub(crate) const SPAN_BYTES: usize = 64 * 1024;
/// Blocks in a batch handed to the depot (2 under loom, so a model frees
/// few blocks to make one).
pub(crate) const BATCH: u32 = if cfg!(loom) { 2 } else { 64 };
/// No block (the end of a list).
const NONE: u32 = u32::MAX;

const _: () = assert!(
    REGION_BYTES / GRANULE < NONE as usize,
    "granule indices fit in a u32"
);
const _: () = assert!(SPAN_BYTES.is_multiple_of(GRANULE) && SPAN_BYTES >= MAX_GRANULES * GRANULE);

/// The class of a block of `bytes` bytes: its granule count (at least 1).
#[inline]
pub(crate) fn granules(bytes: usize) -> usize {
    bytes.div_ceil(GRANULE).max(1)
}

/// The global allocator's layout of a block of `g` granules (a fallback,
/// a block larger than every class, or every block under loom).
#[inline]
fn global_layout(g: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(g * GRANULE, GRANULE)
        .expect("a block's size is bounded by the config")
}

/// A block of `g` granules from the global allocator (also the index's
/// nodes too large for its chunks).
pub(super) fn global_alloc(g: usize) -> std::ptr::NonNull<u8> {
    let l = global_layout(g);
    // SAFETY: `l` has a non-zero size (at least one granule).
    let p = unsafe { std::alloc::alloc(l) };
    std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(l))
}

/// Frees a block from [`global_alloc`].
///
/// # Safety
/// `p` came from `global_alloc(g)` with the same `g` and is freed once.
pub(super) unsafe fn global_free(p: std::ptr::NonNull<u8>, g: usize) {
    // SAFETY: the caller's contract: allocated with this layout.
    unsafe { std::alloc::dealloc(p.as_ptr(), global_layout(g)) };
}

/// A list of free blocks of one class, linked through their first words.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    len: u32,
}

const EMPTY: List = List { head: NONE, len: 0 };

/// One class's lists in a cache: `free` (allocated from) and `spare` (a
/// full batch, or empty).
#[derive(Clone, Copy)]
struct ClassLists {
    free: List,
    spare: List,
}

/// What the threads share: the region, its bump, the depot and the counts.
pub(crate) struct Shared {
    /// Reserved when the first span is taken; `None` then: no region could
    /// be reserved (every block falls back).
    region: LazyRegion,
    /// Granules of the region.
    granules: u64,
    /// Granules of a span.
    span: u32,
    /// Classes served (blocks of more granules fall back).
    classes: usize,
    /// The next granule no span has been taken from (may pass `granules`).
    next: AtomicU64,
    /// Per class: full batches handed on by caches.
    depot: Vec<Mutex<Vec<List>>>,
    /// Per class: batches in the depot (a hint read without the lock).
    available: Vec<AtomicU64>,
    /// The rests of the spans of caches that ended: `(cur, end)`.
    rests: Mutex<Vec<(u32, u32)>>,
    /// Blocks of a class size that came from the global allocator.
    fallbacks: AtomicU64,
    /// Live-byte counters of the caches, and those of ended ones.
    #[cfg(not(loom))]
    counters: Mutex<global::Registry>,
}

impl Shared {
    /// A slab over a fresh region of `region_bytes` (rounded down to whole
    /// spans of `span_bytes`), serving classes up to `classes` granules.
    pub(crate) fn new(region_bytes: usize, span_bytes: usize, classes: usize) -> Shared {
        assert!(classes <= MAX_GRANULES && span_bytes >= classes * GRANULE);
        let span = (span_bytes / GRANULE) as u32;
        let spans = region_bytes / span_bytes;
        let granules = (spans * span as usize) as u64;
        Shared {
            region: LazyRegion::new(granules as usize * GRANULE),
            granules,
            span,
            classes,
            next: AtomicU64::new(0),
            depot: (0..=classes).map(|_| Mutex::new(Vec::new())).collect(),
            available: (0..=classes).map(|_| AtomicU64::new(0)).collect(),
            rests: Mutex::new(Vec::new()),
            fallbacks: AtomicU64::new(0),
            #[cfg(not(loom))]
            counters: Mutex::new(global::Registry::default()),
        }
    }

    /// The region (the caller took a block from it, so it exists).
    #[inline]
    fn region(&self) -> &Region {
        self.region
            .get()
            .expect("a block index comes from the region")
    }

    /// A fresh span `(start, end)` in granules, or `None` when the region
    /// is exhausted (or absent, or its pages could not be committed).
    fn take_span(&self) -> Option<(u32, u32)> {
        let region = self.region.get_or_reserve()?;
        if let Some(r) = self.rests.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(r);
        }
        // Relaxed: the bump only hands out disjoint spans (module docs).
        // Equivalent with `>`: at `next == granules` the check after the
        // bump refuses the span too; this one only spares the RMW.
        if self.next.load(Ordering::Relaxed) >= self.granules {
            return None;
        }
        // Relaxed: as above; the RMW makes each span distinct.
        let start = self.next.fetch_add(self.span as u64, Ordering::Relaxed);
        if start + self.span as u64 > self.granules {
            return None;
        }
        let start = start as u32;
        region
            .commit(start, self.span)
            .then_some((start, start + self.span))
    }

    /// Takes a batch of class `g` from the depot.
    fn depot_take(&self, g: usize) -> Option<List> {
        // Relaxed: a hint (module docs); the lock below orders the batch.
        if self.available[g].load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut d = self.depot[g].lock().unwrap_or_else(|e| e.into_inner());
        if mutant_on(m::DEPOT_TAKE_SPLIT) {
            // The broken twin: reads the top batch under one hold of the
            // lock and removes one under another, so two takers can both
            // get the same batch.
            let b = d.last().copied();
            drop(d);
            crate::sync::spin_hint();
            let mut d = self.depot[g].lock().unwrap_or_else(|e| e.into_inner());
            d.pop();
            self.available[g].store(d.len() as u64, Ordering::Relaxed);
            return b;
        }
        let b = d.pop();
        // Relaxed: a hint, written under the lock.
        self.available[g].store(d.len() as u64, Ordering::Relaxed);
        b
    }

    /// Hands a list of class `g` to the depot.
    fn depot_put(&self, g: usize, l: List) {
        if l.len == 0 {
            return;
        }
        let mut d = self.depot[g].lock().unwrap_or_else(|e| e.into_inner());
        d.push(l);
        // Relaxed: a hint, written under the lock.
        self.available[g].store(d.len() as u64, Ordering::Relaxed);
    }

    /// Blocks of a class size that came from the global allocator.
    #[cfg_attr(not(any(test, feature = "bench-hooks")), allow(dead_code))]
    pub(crate) fn fallbacks(&self) -> u64 {
        // Relaxed: a statistic.
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Granules of the region that spans have been taken from.
    #[cfg_attr(not(any(test, feature = "bench-hooks")), allow(dead_code))]
    pub(crate) fn carved_granules(&self) -> u64 {
        // Relaxed: a statistic.
        self.next.load(Ordering::Relaxed).min(self.granules)
    }

    /// Frees block `i` of class `g` with no cache (its thread's cache has
    /// ended): a batch of one block in the depot.
    fn free_uncached(&self, g: usize, i: u32) {
        self.region().set_link(i, NONE);
        self.depot_put(g, List { head: i, len: 1 });
    }
}

#[cfg(loom)]
impl Shared {
    /// Writes block `i`'s first word: a model's stand-in for writing a
    /// version into a block it holds.
    pub(crate) fn model_write(&self, i: u32, v: u32) {
        self.region().set_link(i, v)
    }

    /// Reads block `i`'s first word.
    pub(crate) fn model_read(&self, i: u32) -> u32 {
        self.region().link(i)
    }
}

/// One thread's free lists and span.
pub(crate) struct Cache {
    /// Per class (index = granules; 0 unused).
    lists: Vec<ClassLists>,
    /// The span being carved: the next granule and the end.
    cur: u32,
    end: u32,
    #[cfg(not(loom))]
    counters: std::sync::Arc<global::Counters>,
}

impl Cache {
    /// An empty cache for `shared`'s classes.
    pub(crate) fn new(shared: &Shared) -> Cache {
        Cache {
            lists: vec![
                ClassLists {
                    free: EMPTY,
                    spare: EMPTY,
                };
                shared.classes + 1
            ],
            cur: 0,
            end: 0,
            #[cfg(not(loom))]
            counters: global::register(shared),
        }
    }

    /// A block of class `g` (`1..=shared.classes`) from the region, or
    /// `None` when the region has no span left.
    #[inline]
    pub(crate) fn alloc_index(&mut self, shared: &Shared, g: usize) -> Option<u32> {
        let c = &mut self.lists[g];
        if c.free.len == 0 {
            if c.spare.len != 0 {
                c.free = c.spare;
                c.spare = EMPTY;
            } else if let Some(b) = shared.depot_take(g) {
                c.free = b;
            }
        }
        if c.free.len != 0 {
            let i = c.free.head;
            c.free.head = shared.region().link(i);
            c.free.len -= 1;
            return Some(i);
        }
        self.carve(shared, g as u32)
    }

    /// Carves `g` granules from the span, taking a new span when the rest
    /// is too short (the rest becomes a free block of its own class).
    fn carve(&mut self, shared: &Shared, g: u32) -> Option<u32> {
        while self.end - self.cur < g {
            let (start, end) = shared.take_span()?;
            let rest = self.end - self.cur;
            if rest != 0 {
                self.free_index(shared, rest as usize, self.cur);
            }
            self.cur = start;
            self.end = end;
        }
        let i = self.cur;
        self.cur += g;
        Some(i)
    }

    /// Frees block `i` of class `g` into this cache.
    #[inline]
    pub(crate) fn free_index(&mut self, shared: &Shared, g: usize, i: u32) {
        let c = &mut self.lists[g];
        shared.region().set_link(i, c.free.head);
        c.free.head = i;
        c.free.len += 1;
        if c.free.len == BATCH {
            if c.spare.len != 0 {
                shared.depot_put(g, c.spare);
            }
            c.spare = c.free;
            c.free = EMPTY;
        }
    }

    /// Hands every list and the span's rest to `shared` (the cache ends).
    pub(crate) fn release(&mut self, shared: &Shared) {
        for g in 1..self.lists.len() {
            let c = &mut self.lists[g];
            let (f, s) = (c.free, c.spare);
            *c = ClassLists {
                free: EMPTY,
                spare: EMPTY,
            };
            shared.depot_put(g, f);
            shared.depot_put(g, s);
        }
        if self.cur != self.end {
            shared
                .rests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((self.cur, self.end));
            self.cur = self.end;
        }
        #[cfg(not(loom))]
        global::unregister(shared, &self.counters);
    }
}
