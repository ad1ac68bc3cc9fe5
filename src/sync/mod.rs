//! The synchronization shim: the only file that names `std::sync::atomic`,
//! `std::sync::Mutex` or `loom`.
//!
//! Every atomic the engine uses is one of the wrappers below. They exist for
//! two reasons:
//!
//! * Under `--cfg loom` they wrap loom's atomics, so the loom models in
//!   `loom_tests/` check the real protocol code, not a copy.
//! * Under the `count-rmw` cargo feature every read-modify-write (CAS, swap,
//!   fetch-op) increments a per-thread counter ([`thread_rmw_count`]), so the
//!   benchmark driver can count shared-word read-modify-writes per transaction
//!   mechanically instead of trusting hand-placed increments.
//!
//! Loads and stores are never counted: they are what readers are allowed to
//! do. The wrappers are `#[inline(always)]` and compile to the bare atomic
//! when the feature is off.
//!
//! * `atomic.rs`: the atomic wrappers and the read-modify-write count.
//! * `fences.rs`: handshake 1's fence pair (`Fences`) and its membarrier.
//! * `mutant.rs`: the switches of the loom models' broken-code twins.
//! * here: the loom/std switch for `fence`, `Ordering` and `Mutex`, the
//!   causality witness, the spin hint and `unique_id`.
//!
//! Unsafe here, and nowhere else outside the `raw/` folders: the
//! `membarrier(2)` syscall (`fences.rs`) and, under `--cfg loom` only, the
//! witness's `Sync` (below), each with its `// SAFETY:` comment.

mod atomic;
mod fences;
pub(crate) mod mutant;

#[cfg(not(loom))]
pub(crate) use atomic::count_rmw;
pub use atomic::thread_rmw_count;
pub(crate) use atomic::{AtomicBool, AtomicPtr, AtomicU64};
#[cfg(all(test, not(loom)))]
pub(crate) use fences::fence_count;
pub(crate) use fences::Fences;
pub(crate) use mutant::{mutant_on, ordering_or_mutant};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, Ordering};

/// A mutex for paths that are neither reads nor writes of data (setting
/// global timestamps, the loom stand-ins). Loom sees it under `--cfg loom`.
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

/// A cell whose every access loom checks (the slab's stand-in region,
/// `store/raw/slab/region_loom.rs`).
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell as ModelCell;

/// A causality witness for plain (non-atomic) data published through one
/// atomic pointer, such as a descriptor's fields.
///
/// Loom sees only its own atomics and cells, so a plain field read through a
/// pointer loaded with too weak an ordering is invisible to it. Embed a
/// `Witness` in the published structure (it is created, and counts as
/// written, with it) and call [`Witness::check`] right where a thread that
/// loaded the pointer reads the fields: under `--cfg loom` it is a
/// `loom::cell::UnsafeCell<()>` whose construction is a write and whose
/// `check` is a read, and loom panics with "Causality violation" unless the
/// construction happens-before the check. Check at the read itself, before
/// any fence the reader issues later (loom's fences join more than C++'s,
/// DESIGN.md "How the invariants are checked"). In every other build it is a
/// zero-sized type and `check` compiles to nothing.
#[derive(Debug)]
pub(crate) struct Witness {
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<()>,
}

// SAFETY: the cell holds `()` and is only ever read (`check`), never
// written after construction, so sharing it between threads cannot race;
// loom tracks the accesses itself. Needed because loom's `UnsafeCell`, like
// std's, is not `Sync`, and the structures that embed a witness are shared
// (invariant 11: descriptors are read by any thread under a guard).
#[cfg(loom)]
unsafe impl Sync for Witness {}

impl Witness {
    /// A witness written by the current thread, now.
    #[inline(always)]
    pub(crate) fn new() -> Witness {
        Witness {
            #[cfg(loom)]
            cell: loom::cell::UnsafeCell::new(()),
        }
    }

    /// Under loom, panics ("Causality violation") unless this witness's
    /// construction happens-before the call; nothing otherwise.
    #[inline(always)]
    pub(crate) fn check(&self) {
        #[cfg(loom)]
        self.cell.with(|_| ());
    }
}

/// Backs off inside a spin loop. Under loom this yields to the model
/// scheduler, which loom requires for every spin loop.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// A process-wide unique, never-zero id (a session's savepoint token).
/// Relaxed: only uniqueness is needed (the RMW makes every value distinct);
/// nothing is published with it. Under loom, where a static atomic cannot be
/// built, a per-thread counter (no model opens sessions across threads to
/// compare savepoint tokens).
pub(crate) fn unique_id() -> u64 {
    #[cfg(not(loom))]
    {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        count_rmw();
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
    #[cfg(loom)]
    {
        std::thread_local! {
            static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) };
        }
        NEXT.with(|c| {
            let v = c.get();
            c.set(v + 1);
            v
        })
    }
}
