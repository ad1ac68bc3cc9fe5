//! The version allocation under `--cfg loom`: the global allocator, one
//! block a version. The slab's region is a mapping loom cannot model; the
//! handoff of free blocks between threads, which it can, has its own
//! models over the stand-in region (`region_loom.rs`, `loom_tests/slab.rs`).

use super::{global_alloc, global_free, granules};
use std::ptr::NonNull;

/// A block of at least `bytes` bytes, 8-aligned.
pub(crate) fn alloc(bytes: usize) -> NonNull<u8> {
    global_alloc(granules(bytes))
}

/// Frees a block from [`alloc`].
///
/// # Safety
/// `p` came from `alloc(bytes)` with the same `bytes` and is freed once.
pub(crate) unsafe fn free(p: NonNull<u8>, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe { global_free(p, granules(bytes)) };
}
