//! The unsafe core: descriptors, slots, version chains and reclamation.
//! Every `unsafe` block in the crate outside `txn.rs`'s write-set
//! dereferences lives here.

pub(crate) mod chain;
pub(crate) mod descriptor;
#[cfg(not(loom))]
pub(crate) mod hashindex;
pub(crate) mod reclaim;
pub(crate) mod slots;
