//! The process's version slab: one [`Shared`] (made on first use, its
//! region reserved at its first span),
//! a [`Cache`] per thread, and the pointer API [`alloc`] / [`free`] that
//! `Version::alloc` and `free_version` call; plus the live-byte counters
//! and [`stats`].

use super::{
    global_alloc, global_free, granules, Cache, Shared, GRANULE, MAX_GRANULES, REGION_BYTES,
    SPAN_BYTES,
};
use crate::sync::{AtomicU64, Ordering};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

/// One cache's block bytes handed out and taken back; each word is
/// written by the cache's own thread only ([`AtomicU64::bump`]) and read
/// by [`stats`].
#[derive(Default)]
pub(crate) struct Counters {
    allocated: AtomicU64,
    freed: AtomicU64,
}

/// The counters of live caches, and the sums of those that ended.
#[derive(Default)]
pub(crate) struct Registry {
    live: Vec<Arc<Counters>>,
    ended_allocated: u64,
    ended_freed: u64,
}

/// Registers a new cache's counters with `shared`.
pub(super) fn register(shared: &Shared) -> Arc<Counters> {
    let c = Arc::new(Counters::default());
    shared
        .counters
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .live
        .push(c.clone());
    c
}

/// Folds an ending cache's counters into `shared`'s sums.
pub(super) fn unregister(shared: &Shared, c: &Arc<Counters>) {
    let mut r = shared.counters.lock().unwrap_or_else(|e| e.into_inner());
    r.live.retain(|x| !Arc::ptr_eq(x, c));
    // Relaxed: our own thread's words (it wrote them).
    r.ended_allocated += c.allocated.load(Ordering::Relaxed);
    r.ended_freed += c.freed.load(Ordering::Relaxed);
}

impl Cache {
    /// A block of at least `bytes` bytes, 8-aligned: from the region for a
    /// class size, else (the region exhausted, or a larger block) from the
    /// global allocator.
    #[inline]
    pub(crate) fn alloc(&mut self, shared: &Shared, bytes: usize) -> NonNull<u8> {
        let g = granules(bytes);
        if g <= shared.classes {
            if let Some(i) = self.alloc_index(shared, g) {
                self.counters.allocated.bump((g * GRANULE) as u64);
                return NonNull::new(shared.region().addr(i)).expect("the region is not at 0");
            }
        }
        shared.global_block(g)
    }

    /// Frees a block from [`Cache::alloc`] (of any cache of `shared`).
    ///
    /// # Safety
    /// `p` came from `alloc(shared, bytes)` with the same `bytes`, is
    /// freed once, and nobody reaches it any more.
    #[inline]
    pub(crate) unsafe fn free(&mut self, shared: &Shared, p: NonNull<u8>, bytes: usize) {
        let g = granules(bytes);
        if let Some(i) = shared.block_index(g, p) {
            self.free_index(shared, g, i);
            self.counters.freed.bump((g * GRANULE) as u64);
            return;
        }
        // SAFETY: not in the region, so the global allocator's, of `g`
        // granules (the caller's contract).
        unsafe { global_free(p, g) };
    }
}

impl Shared {
    /// A block of `g` granules from the global allocator, counted as a
    /// fallback if a class could have served it (the region exhausted, or
    /// the thread's cache ended).
    fn global_block(&self, g: usize) -> NonNull<u8> {
        if g <= self.classes {
            // Relaxed: a statistic.
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        global_alloc(g)
    }

    /// The region's index of block `p` of `g` granules, if a class size
    /// and carved from the region (else it is the global allocator's).
    #[inline]
    fn block_index(&self, g: usize, p: NonNull<u8>) -> Option<u32> {
        if g > self.classes {
            return None;
        }
        self.region.get().and_then(|r| r.index_of(p.as_ptr()))
    }

    /// [`Cache::free`] for a thread whose cache has ended.
    ///
    /// # Safety
    /// As [`Cache::free`].
    unsafe fn free_uncached_ptr(&self, p: NonNull<u8>, bytes: usize) {
        let g = granules(bytes);
        if let Some(i) = self.block_index(g, p) {
            self.free_uncached(g, i);
            self.counters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .ended_freed += (g * GRANULE) as u64;
            return;
        }
        // SAFETY: as in `Cache::free`.
        unsafe { global_free(p, g) };
    }

    /// This slab's figures now.
    #[cfg_attr(not(any(test, feature = "bench-hooks")), allow(dead_code))]
    pub(crate) fn stats(&self) -> SlabStats {
        let (a, f) = {
            let r = self.counters.lock().unwrap_or_else(|e| e.into_inner());
            let (mut a, mut f) = (r.ended_allocated, r.ended_freed);
            for c in &r.live {
                // Relaxed: statistics; each word has one writer.
                a += c.allocated.load(Ordering::Relaxed);
                f += c.freed.load(Ordering::Relaxed);
            }
            (a, f)
        };
        let carved = self.carved_granules();
        // Not reserved yet: nothing to count, and nothing reserved here.
        let region = self.region.get();
        SlabStats {
            reserved_bytes: region.map_or(0, |_| self.granules * GRANULE as u64),
            carved_bytes: carved * GRANULE as u64,
            resident_bytes: region.map_or(0, |r| r.resident_bytes(carved)),
            // Saturating: read while threads run, a free counted by one
            // cache can be read before the allocation another counted.
            live_bytes: a.saturating_sub(f),
            fallbacks: self.fallbacks(),
        }
    }
}

/// The version slab's figures: the region, the part of it spans were taken
/// from, its resident pages, the bytes in live blocks, and the blocks that
/// came from the global allocator because the region was exhausted.
#[cfg_attr(not(any(test, feature = "bench-hooks")), allow(dead_code))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabStats {
    /// Address space reserved.
    pub reserved_bytes: u64,
    /// Bytes of the region handed out as spans.
    pub carved_bytes: u64,
    /// Resident bytes of those spans: the committed pages, holding live
    /// blocks and the slack (free blocks, the spans' uncarved rests,
    /// partly used pages).
    pub resident_bytes: u64,
    /// Bytes of the blocks allocated and not yet freed (each a whole number
    /// of 8-byte granules).
    pub live_bytes: u64,
    /// Blocks of a class size that came from the global allocator because
    /// the region was exhausted (or could not be reserved).
    pub fallbacks: u64,
}

static SLAB: OnceLock<Shared> = OnceLock::new();

/// The process's slab, made on first use (its region is reserved when a
/// cache takes the first span).
#[inline]
fn shared() -> &'static Shared {
    SLAB.get_or_init(|| Shared::new(REGION_BYTES, SPAN_BYTES, MAX_GRANULES))
}

/// A thread's cache, handed back to the slab when the thread exits.
struct Local(RefCell<Cache>);

impl Drop for Local {
    fn drop(&mut self) {
        self.0.get_mut().release(shared());
    }
}

std::thread_local! {
    static LOCAL: Local = Local(RefCell::new(Cache::new(shared())));
}

/// A block of at least `bytes` bytes, 8-aligned, from this thread's cache
/// of the process's slab (or the global allocator: module docs).
#[inline]
pub(crate) fn alloc(bytes: usize) -> NonNull<u8> {
    let s = shared();
    LOCAL
        .try_with(|l| l.0.try_borrow_mut().ok().map(|mut c| c.alloc(s, bytes)))
        .ok()
        .flatten()
        .unwrap_or_else(|| s.global_block(granules(bytes)))
}

/// Frees a block from [`alloc`], into this thread's cache.
///
/// # Safety
/// `p` came from `alloc(bytes)` with the same `bytes`, is freed once, and
/// no thread reaches it any more.
#[inline]
pub(crate) unsafe fn free(p: NonNull<u8>, bytes: usize) {
    let s = shared();
    let done = LOCAL
        .try_with(|l| {
            l.0.try_borrow_mut()
                .ok()
                // SAFETY: the caller's contract.
                .map(|mut c| unsafe { c.free(s, p, bytes) })
        })
        .ok()
        .flatten();
    if done.is_none() {
        // SAFETY: the caller's contract.
        unsafe { s.free_uncached_ptr(p, bytes) };
    }
}

/// The region's base address for [`block_name`] and [`Names`] (0:
/// not reserved yet, or not known here yet): copied from the region by
/// the first `block_name` after it exists, so neither function passes the
/// slab's `OnceLock`s. Relaxed, loads and store: it publishes a number, not
/// memory, and a reader that sees 0 only names or prefetches nothing.
static HINT_BASE: AtomicU64 = AtomicU64::new_static(0);

/// The name a prefetch hint keeps for block `p` (the index's slots,
/// `hashindex.rs`): its granule index from the region's base plus one, so
/// 0 names nothing (null, a block from the global allocator below the
/// base or past the region's span, or no region yet).
#[inline]
pub(crate) fn block_name(p: *const u8) -> u32 {
    let mut base = HINT_BASE.load(Ordering::Relaxed);
    if base == 0 {
        base = hint_base();
    }
    let off = (p.addr() as u64).wrapping_sub(base);
    if base == 0 || off >= REGION_BYTES as u64 {
        return 0;
    }
    // Below 2^31 (the region's granules), so the sum fits.
    (off / GRANULE as u64) as u32 + 1
}

/// The region's base, published for [`block_name`] (0: none yet).
#[cold]
fn hint_base() -> u64 {
    let base = shared().region.get().map_or(0, |r| r.base_addr() as u64);
    HINT_BASE.store(base, Ordering::Relaxed);
    base
}

/// Where block names ([`block_name`]) point: the region's base, loaded
/// once for many names (a batch of lookups' hints) rather than once a
/// name. The region, once reserved, never moves; a base not known yet
/// names nothing (a prefetch skipped).
#[derive(Clone, Copy)]
pub(crate) struct Names(u64);

/// The region's [`Names`] now.
#[inline]
pub(crate) fn names() -> Names {
    Names(HINT_BASE.load(Ordering::Relaxed))
}

impl Names {
    /// The address block name `n` stands for (null for 0): only to
    /// prefetch, never to read (a stale name may stand for a freed or
    /// reused block), so it carries no provenance.
    #[inline]
    pub(crate) fn addr(self, n: u32) -> *const u8 {
        if n == 0 || self.0 == 0 {
            std::ptr::null()
        } else {
            std::ptr::without_provenance((self.0 + u64::from(n - 1) * GRANULE as u64) as usize)
        }
    }
}

/// The process's version slab's figures now.
#[cfg_attr(not(any(test, feature = "bench-hooks")), allow(dead_code))]
pub(crate) fn stats() -> SlabStats {
    shared().stats()
}
