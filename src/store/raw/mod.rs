//! The store's unsafe corner: every `unsafe` block of the store lives in
//! this folder, each with its `// SAFETY:` argument.
//!
//! The boundary: outside `raw/`, the store is used through safe APIs only.
//! [`Store`](crate::store::Store)'s methods read and collect, and pin the
//! guard themselves; [`index::Index`] hands out `&KeyEntry` borrows that
//! live as long as the index (keys are never removed); the chains' safe
//! methods (`read_counted`, `prepend`, `cut`, `prune`) take a guard of the
//! store's collector (there is one: crossbeam-epoch's default); and
//! [`writes::WriteSet`] is the only thing outside the chains that holds
//! pointers to versions, which it dereferences only while they are its
//! open transaction's own (its module docs); it also holds the indexes of
//! the named tables its transaction uses, which [`table::IndexSlot`] (the
//! pointer a table drop swaps out) hands out. The unsafe functions left
//! (`KeyEntry::commit_version`, `unlink_head`) are called from
//! `writes.rs` and from the loom models' hooks (`loom_tests/api.rs`), whose unsafe
//! functions pass their contract on to the models. [`slab`] allocates
//! the versions' blocks (its reserved region's `mmap`, `mprotect` and
//! `mincore` in `slab/region.rs`) and takes them back through `alloc` and
//! the unsafe `free`, which only `chain.rs` calls.

pub(crate) mod chain;
// Under loom the store's index is a mutex map (`index_loom.rs`), and only
// the loom model `hash_index` drives the hash index.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod hashindex;
pub(crate) mod hint;
#[cfg(not(loom))]
pub(crate) mod index;
/// The index under loom: the same API over a mutex map.
#[cfg(loom)]
#[path = "index_loom.rs"]
pub(crate) mod index;
// Under loom versions come from the global allocator, and only the loom
// model `slab` drives the slab.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod slab;
pub(crate) mod sweep;
pub(crate) mod table;
pub(crate) mod writes;

/// A raw pointer that may cross into a deferred destructor.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

// SAFETY: a SendPtr is only created for memory that has been unlinked from
// every shared structure and is handed, whole, to one deferred destructor;
// no other thread can reach it through the SendPtr. The pointee types
// (Version, hash-table arrays) are themselves Send.
unsafe impl<T: Send> Send for SendPtr<T> {}

/// Asks the CPU to start loading the cache line holding `p`. A hint: it
/// never faults and reads nothing, whatever `p` points at (null included).
// Under loom the batched lookup (its only caller) is the mutex map's.
#[cfg_attr(loom, allow(dead_code))]
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    // SAFETY: a prefetch reads no memory and never faults, whatever the
    // address; SSE is part of every x86_64 target.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
