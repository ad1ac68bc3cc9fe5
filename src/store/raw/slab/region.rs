//! The slab's reserved region: one anonymous private mapping with no
//! access and no swap reservation (`mmap` with `PROT_NONE` and
//! `MAP_NORESERVE`), aligned to [`CHUNK`] (2 MiB) and made readable and
//! writable a chunk at a time as spans reach it (`mprotect`); the kernel
//! backs each page when it is first touched. The region is advised for
//! transparent huge pages (`MADV_HUGEPAGE`), so a committed chunk can be
//! one huge page: a read of an old version costs no more TLB misses than
//! one of mimalloc's blocks. Reserving costs address space only: a
//! `PROT_NONE` private mapping is not charged to the commit limit even
//! under strict overcommit, which charges a chunk when it is made writable
//! (a refusal is an exhausted region, not an error), and a touch past
//! every committed chunk faults instead of silently committing memory.
//! Linux only (the crate's `libc` dependency); elsewhere nothing is
//! reserved and every block falls back to the global allocator.

use super::{GRANULE, NONE};
use crate::sync::{AtomicU64, Ordering};
use std::ptr::NonNull;
use std::sync::OnceLock;

/// The region's alignment and the unit it is committed in: one transparent
/// huge page on x86-64 and aarch64 with 4 KiB pages.
pub(crate) const CHUNK: usize = 2 << 20;

/// A reserved region of whole granules.
pub(crate) struct Region {
    /// `CHUNK`-aligned.
    base: NonNull<u8>,
    bytes: usize,
    /// The mapping as made (`base` rounded down), for `munmap`.
    mapped: (NonNull<u8>, usize),
    /// Bytes from `base` known writable: a multiple of `CHUNK`, only
    /// raised.
    committed: AtomicU64,
}

// SAFETY: the region is plain memory; which thread may touch which block is
// the slab's protocol (a block has one owner at a time, handed on through
// the depot's mutex), not the address's.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` only reads `base` and `bytes`, which never
// change, and the block accesses it offers are the slab's owner's.
unsafe impl Sync for Region {}

impl Region {
    /// Reserves `bytes` of address space, or `None` if the system refuses
    /// (or is not Linux).
    pub(crate) fn reserve(bytes: usize) -> Option<Region> {
        if bytes == 0 {
            return None;
        }
        #[cfg(target_os = "linux")]
        {
            // One chunk more than asked, so an aligned `bytes` fits.
            let len = bytes.checked_add(CHUNK)?;
            // SAFETY: a fresh anonymous mapping at an address the kernel
            // picks; no existing memory is affected.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return None;
            }
            let mapped = (NonNull::new(p.cast::<u8>())?, len);
            let base = mapped.0.as_ptr().map_addr(|a| a.next_multiple_of(CHUNK));
            // SAFETY: `base .. base + bytes` lies inside the mapping (at
            // most `CHUNK - 1` bytes past its start). The advice only
            // changes how the kernel backs these pages; refused (no THP),
            // the pages stay small.
            unsafe { libc::madvise(base.cast(), bytes, libc::MADV_HUGEPAGE) };
            Some(Region {
                base: NonNull::new(base)?,
                bytes,
                mapped,
                committed: AtomicU64::new(0),
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Makes `granules` granules from granule `start` readable and
    /// writable, with the rest of their chunks; false if the system refuses
    /// (the commit limit).
    pub(crate) fn commit(&self, start: u32, granules: u32) -> bool {
        let (off, len) = (start as usize * GRANULE, granules as usize * GRANULE);
        assert!(off + len <= self.bytes, "a span lies inside the region");
        // Acquire, kept though likely stronger than needed: pairs with the
        // Release `fetch_max` below, so this thread touches pages another
        // thread's `mprotect` made writable only after that call returned.
        // The memory model says nothing of page protection (the kernel's
        // TLB handling orders it), so this is the ordering it can state.
        let done = self.committed.load(Ordering::Acquire) as usize;
        // Equivalent with `<`: at equality the `mprotect` below has length
        // 0 and changes nothing.
        if off + len <= done {
            return true;
        }
        let end = (off + len).next_multiple_of(CHUNK).min(self.bytes);
        #[cfg(target_os = "linux")]
        {
            // From the committed end on: a span taken earlier by another
            // thread may not be committed yet, and making a writable page
            // writable again changes nothing.
            // SAFETY: the range lies inside our mapping (checked above) and
            // its pages past `done` hold no block yet handed out unless
            // another thread is committing them too, to the same
            // protection; no live reference sees a page lose access.
            let r = unsafe {
                libc::mprotect(
                    self.base.as_ptr().add(done).cast(),
                    end - done,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if r != 0 {
                return false;
            }
            // Release, kept as above: pairs with the Acquire load.
            self.committed.fetch_max(end as u64, Ordering::Release);
            true
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Bytes from the base made writable so far (for tests).
    #[cfg(test)]
    pub(crate) fn committed_bytes(&self) -> usize {
        // Relaxed: read after the committing calls on this thread.
        self.committed.load(Ordering::Relaxed) as usize
    }

    /// The address of granule `i`: `base + 8 * i`.
    #[inline]
    pub(crate) fn addr(&self, i: u32) -> *mut u8 {
        debug_assert!((i as usize) < self.bytes / GRANULE);
        // SAFETY: inside the mapping (a block index names a granule of it).
        unsafe { self.base.as_ptr().add(i as usize * GRANULE) }
    }

    /// The region's first address (for the hint names, `global.rs`).
    #[inline]
    pub(crate) fn base_addr(&self) -> usize {
        self.base.as_ptr().addr()
    }

    /// The granule index of `p`, if `p` lies in the region.
    #[inline]
    pub(crate) fn index_of(&self, p: *mut u8) -> Option<u32> {
        let off = (p.addr()).wrapping_sub(self.base.as_ptr().addr());
        (off < self.bytes).then_some((off / GRANULE) as u32)
    }

    /// The link in free block `i`'s first word.
    #[inline]
    pub(crate) fn link(&self, i: u32) -> u32 {
        // SAFETY: `i` is a free block in a taken (writable) span, owned by
        // the calling cache, whose `set_link` wrote the word.
        unsafe { self.addr(i).cast::<u32>().read() }
    }

    /// Writes free block `i`'s link.
    #[inline]
    pub(crate) fn set_link(&self, i: u32, next: u32) {
        debug_assert!(next == NONE || (next as usize) < self.bytes / GRANULE);
        // SAFETY: `i` is a block in a taken (writable) span that the calling
        // cache owns and nobody else reads (it was just freed to it).
        unsafe { self.addr(i).cast::<u32>().write(next) };
    }

    /// Bytes of the first `granules` granules that are resident
    /// (`mincore`): the committed pages, used or not.
    #[cfg_attr(not(any(test, feature = "bench-hooks")), allow(dead_code))]
    pub(crate) fn resident_bytes(&self, granules: u64) -> u64 {
        let len = (granules as usize * GRANULE).min(self.bytes);
        if len == 0 {
            return 0;
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: `sysconf` has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
            let mut v = vec![0u8; len.div_ceil(page)];
            // SAFETY: the range starts at our page-aligned base and lies
            // inside the mapping; `v` has one byte per page of it.
            let r = unsafe { libc::mincore(self.base.as_ptr().cast(), len, v.as_mut_ptr()) };
            if r != 0 {
                return 0;
            }
            v.iter().filter(|&&b| b & 1 != 0).count() as u64 * page as u64
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }
}

/// A region of `bytes` reserved on first use ([`LazyRegion::get_or_reserve`]),
/// so a slab whose figures are read before it hands out a block reserves
/// no address space.
pub(crate) struct LazyRegion {
    bytes: usize,
    /// `Some(None)`: reserving was tried and refused.
    cell: OnceLock<Option<Region>>,
}

impl LazyRegion {
    /// Nothing reserved yet.
    pub(crate) fn new(bytes: usize) -> LazyRegion {
        LazyRegion {
            bytes,
            cell: OnceLock::new(),
        }
    }

    /// The region if it was reserved (never reserves).
    #[inline]
    pub(crate) fn get(&self) -> Option<&Region> {
        self.cell.get().and_then(Option::as_ref)
    }

    /// The region, reserved now if no call has tried yet; `None` if the
    /// system refused.
    pub(crate) fn get_or_reserve(&self) -> Option<&Region> {
        self.cell
            .get_or_init(|| Region::reserve(self.bytes))
            .as_ref()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: our own mapping, unmapped once; `&mut self`: no cache of
        // this region remains (the slab that owns it is being dropped).
        unsafe {
            libc::munmap(self.mapped.0.as_ptr().cast(), self.mapped.1);
        }
    }
}
