//! The version allocation under `--cfg loom`: the global allocator, one
//! block a version. The slab's region is a mapping loom cannot model; the
//! handoff of free blocks between threads, which it can, has its own
//! models over the stand-in region (`region_loom.rs`, `loom_tests/slab.rs`).

use super::{granules, GRANULE};
use std::alloc::{self, Layout};
use std::ptr::NonNull;

fn layout(bytes: usize) -> Layout {
    Layout::from_size_align(granules(bytes) * GRANULE, GRANULE).expect("a bounded block size")
}

/// A block of at least `bytes` bytes, 8-aligned.
pub(crate) fn alloc(bytes: usize) -> NonNull<u8> {
    let l = layout(bytes);
    // SAFETY: a non-zero size (at least one granule).
    let p = unsafe { alloc::alloc(l) };
    NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(l))
}

/// Frees a block from [`alloc`].
///
/// # Safety
/// `p` came from `alloc(bytes)` with the same `bytes` and is freed once.
pub(crate) unsafe fn free(p: NonNull<u8>, bytes: usize) {
    // SAFETY: the caller's contract: allocated with this layout.
    unsafe { alloc::dealloc(p.as_ptr(), layout(bytes)) };
}
