//! The slab's region under `--cfg loom`: a vector of loom-checked cells,
//! one a granule, holding each block's first word (its free-list link, or
//! what a model writes there while it holds the block). Loom sees every
//! link read and write, so a block reached by two threads without a
//! happens-before edge between them fails the model. Nothing is mapped:
//! under loom versions come from the global allocator (`global_loom.rs`)
//! and only the models (`loom_tests/slab.rs`) drive a region.

use super::{GRANULE, NONE};
use crate::sync::ModelCell;

/// The stand-in region: a link cell per granule.
pub(crate) struct Region {
    links: Vec<ModelCell<u32>>,
}

// SAFETY: the cells are loom's: every access goes through `with` or
// `with_mut`, which loom checks against the other threads' accesses
// (concurrent ones fail the model), so sharing them is what is checked.
unsafe impl Sync for Region {}

/// The stand-in made at once (a model's slab is built before its threads
/// start, so nothing races to reserve it).
pub(crate) struct LazyRegion(Option<Region>);

impl LazyRegion {
    /// A stand-in of `bytes / 8` granules.
    pub(crate) fn new(bytes: usize) -> LazyRegion {
        LazyRegion(Region::reserve(bytes))
    }

    /// The stand-in.
    pub(crate) fn get(&self) -> Option<&Region> {
        self.0.as_ref()
    }

    /// The stand-in.
    pub(crate) fn get_or_reserve(&self) -> Option<&Region> {
        self.0.as_ref()
    }
}

impl Region {
    /// A stand-in of `bytes / 8` granules.
    pub(crate) fn reserve(bytes: usize) -> Option<Region> {
        Some(Region {
            links: (0..bytes / GRANULE).map(|_| ModelCell::new(NONE)).collect(),
        })
    }

    /// Nothing to commit.
    pub(crate) fn commit(&self, _start: u32, _granules: u32) -> bool {
        true
    }

    /// Block `i`'s first word.
    pub(crate) fn link(&self, i: u32) -> u32 {
        // SAFETY: loom checks the read against every write of the cell.
        self.links[i as usize].with(|p| unsafe { *p })
    }

    /// Writes block `i`'s first word.
    pub(crate) fn set_link(&self, i: u32, next: u32) {
        // SAFETY: loom checks the write against every access of the cell.
        self.links[i as usize].with_mut(|p| unsafe { *p = next })
    }
}
