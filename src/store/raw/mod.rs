//! The store's unsafe corner: version chains and the hash index. Every
//! `unsafe` block of the store layer outside `kv/txn.rs`'s write-set
//! dereferences lives here.

#[cfg(all(feature = "bench-hooks", not(loom)))]
pub(crate) mod bench;
pub(crate) mod chain;
#[cfg(not(loom))]
pub(crate) mod hashindex;

/// A raw pointer that may cross into a deferred destructor.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

// SAFETY: a SendPtr is only created for memory that has been unlinked from
// every shared structure and is handed, whole, to one deferred destructor;
// no other thread can reach it through the SendPtr. The pointee types
// (Version, hash-table arrays) are themselves Send.
unsafe impl<T: Send> Send for SendPtr<T> {}
