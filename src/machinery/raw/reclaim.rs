//! Epoch-based reclamation of descriptors and versions.
//!
//! The engine uses crossbeam-epoch's default collector (see DESIGN.md,
//! "Why crossbeam-epoch"). Memory retired with [`Collector::defer`] is freed
//! only after every thread that was pinned when it was retired has unpinned
//! (invariant 11). Nobody holds a guard longer than one operation: a guard is
//! taken per `get`, per write, per descriptor load, and dropped before the
//! call returns, so a long transaction never stalls reclamation. (A gated
//! commit on an in-memory engine is one operation: it holds one guard from
//! before the serializable gate until it returns, `kv/serializable.rs`.)
//!
//! Under `--cfg loom` without `--cfg crossbeam_loom` loom cannot see
//! crossbeam-epoch's atomics, so a loom-visible stand-in replaces it: guards
//! are empty and retired memory is freed when the [`Collector`] drops, which
//! is trivially safe (nothing is freed while any model thread runs) and lets
//! loom check for leaks. With `--cfg crossbeam_loom` the real collector runs
//! inside the models.

#[cfg(all(test, not(loom)))]
thread_local! {
    /// The pins this thread made that did not nest in a guard it already
    /// held (each pays the pin's fence and, every so often, crossbeam's
    /// collection): a unit test counts them.
    pub(crate) static OUTER_PINS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(any(not(loom), crossbeam_loom))]
mod imp {
    use crate::sync::mutant::{self as m, mutant_on};

    /// Protection for reading shared pointers; see [`Collector::pin`].
    pub type Guard = crossbeam_epoch::Guard;

    /// Hands out guards and takes retired memory.
    #[derive(Default)]
    pub struct Collector;

    impl Collector {
        /// A handle on crossbeam-epoch's default collector.
        pub fn new() -> Collector {
            Collector
        }

        /// Pins the current thread. Pointers loaded while the guard lives
        /// stay valid until it drops.
        #[inline]
        pub fn pin(&self) -> Guard {
            #[cfg(all(test, not(loom)))]
            if !crossbeam_epoch::is_pinned() {
                super::OUTER_PINS.with(|n| n.set(n.get() + 1));
            }
            crossbeam_epoch::pin()
        }

        /// Runs `f` once no thread pinned now can still be pinned.
        #[inline]
        pub fn defer<F: FnOnce() + Send + 'static>(&self, guard: &Guard, f: F) {
            if mutant_on(m::FREE_SKIPS_EPOCH) {
                // The broken twin: frees while older guards may still read.
                f();
                return;
            }
            guard.defer(f);
        }

        /// Hands this thread's deferred destructors to the global queue and
        /// runs those that are due. crossbeam-epoch moves a thread's bag
        /// only when it fills (64 entries), so a thread that retires a few
        /// objects and then only pins would keep them forever.
        #[inline]
        pub fn flush(&self, guard: &Guard) {
            guard.flush();
        }
    }
}

#[cfg(all(loom, not(crossbeam_loom)))]
mod imp {
    use crate::sync::mutant::{self as m, mutant_on};
    use crate::sync::Mutex;

    /// The stand-in guard: protection comes from never freeing early.
    pub struct Guard(());

    /// Empty, so the `drop(guard)` that ends a protected section at the
    /// call sites means the same in every build (and clippy's
    /// `drop_non_drop` stays quiet under `--cfg loom`).
    impl Drop for Guard {
        fn drop(&mut self) {}
    }

    type Deferred = Box<dyn FnOnce() + Send>;

    /// The stand-in collector: frees everything when it drops.
    #[derive(Default)]
    pub struct Collector {
        retired: Mutex<Vec<Deferred>>,
    }

    impl Collector {
        /// An empty stand-in collector.
        pub fn new() -> Collector {
            Collector::default()
        }

        /// A guard (protection comes from never freeing early).
        #[inline]
        pub fn pin(&self) -> Guard {
            Guard(())
        }

        /// Keeps `f` until the collector drops.
        pub fn defer<F: FnOnce() + Send + 'static>(&self, _guard: &Guard, f: F) {
            if mutant_on(m::FREE_SKIPS_EPOCH) {
                // The broken twin, as in the real collector's `defer`.
                f();
                return;
            }
            self.retired.lock().unwrap().push(Box::new(f));
        }

        /// Nothing to hand on: the stand-in frees when it drops.
        pub fn flush(&self, _guard: &Guard) {}
    }

    impl Drop for Collector {
        fn drop(&mut self) {
            let v = std::mem::take(&mut *self.retired.lock().unwrap());
            for f in v {
                f();
            }
        }
    }
}

pub use imp::{Collector, Guard};

/// A raw pointer that may cross into a deferred destructor.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

// SAFETY: a SendPtr is only created for memory that has been unlinked from
// every shared structure and is handed, whole, to one deferred destructor;
// no other thread can reach it through the SendPtr. The pointee types
// (Descriptor, Version) are themselves Send.
unsafe impl<T: Send> Send for SendPtr<T> {}

/// How many retired objects a session collects before handing them to the
/// collector in one deferred destructor (1 under loom, so the models see
/// every retirement).
pub const RETIRE_BATCH: usize = if cfg!(loom) { 1 } else { 32 };

/// Unlinked objects waiting to be handed to the collector together: one
/// deferred destructor per batch instead of one per object keeps the
/// collector's per-thread bags (and their allocations) off the commit path.
/// Replaced descriptors and pruned chain tails both go through one.
pub struct RetireBatch<T: Send + 'static> {
    items: Vec<SendPtr<T>>,
    /// Frees one pushed object; returns how many objects that freed.
    free: unsafe fn(*mut T) -> u64,
}

impl<T: Send + 'static> RetireBatch<T> {
    /// An empty batch whose objects `free` frees.
    pub fn new(free: unsafe fn(*mut T) -> u64) -> RetireBatch<T> {
        RetireBatch {
            items: Vec::new(),
            free,
        }
    }

    /// Takes ownership of `p`.
    ///
    /// # Safety
    /// `p` is unlinked from every shared structure (no new reader can load
    /// it), is pushed exactly once, and this batch's `free` is the right way
    /// to free it once no guard can reach it.
    pub unsafe fn push(&mut self, p: *mut T) {
        self.items.push(SendPtr(p));
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Holds nothing?
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Hands every held object to the collector; `done` gets the number of
    /// objects freed once they are.
    pub fn flush(
        &mut self,
        collector: &Collector,
        guard: &Guard,
        done: impl FnOnce(u64) + Send + 'static,
    ) {
        let free = self.free;
        self.flush_with(collector, guard, move |items| {
            let mut n = 0;
            for p in items {
                // SAFETY: `push`'s contract: unlinked and pushed once; the
                // collector runs this only after every guard that could
                // reach it has dropped (invariant 11).
                n += unsafe { free(p.0) };
            }
            done(n);
        });
    }

    /// Hands every held object to the collector, which passes them all to
    /// `f` once no guard can reach them; `f` owns them from then on (it
    /// frees them in [`RetireBatch::flush`], reuses them elsewhere).
    pub(crate) fn flush_with(
        &mut self,
        collector: &Collector,
        guard: &Guard,
        f: impl FnOnce(Vec<SendPtr<T>>) + Send + 'static,
    ) {
        if self.items.is_empty() {
            return;
        }
        // The next batch gets the room this one needed at once, rather
        // than growing into it one reallocation at a time.
        let room = self.items.len();
        let items = std::mem::replace(&mut self.items, Vec::with_capacity(room));
        collector.defer(guard, move || f(items));
    }

    /// Frees every held object now.
    ///
    /// # Safety
    /// No thread may still hold a guard under which it loaded one of them
    /// (the engine is being dropped).
    pub unsafe fn free_now(&mut self) {
        for p in self.items.drain(..) {
            // SAFETY: the caller guarantees no reader remains; `push`'s
            // contract makes this the only free.
            unsafe { (self.free)(p.0) };
        }
    }
}

impl<T: Send + 'static> Drop for RetireBatch<T> {
    fn drop(&mut self) {
        debug_assert!(self.items.is_empty(), "an unflushed retire batch leaks");
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Frees one boxed `u64`.
    ///
    /// # Safety
    /// `p` came from `Box::into_raw` and is freed once.
    unsafe fn free_u64(p: *mut u64) -> u64 {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(p) });
        1
    }

    /// A flush leaves the batch room for as many objects as it held, so
    /// the next batch fills without reallocating.
    #[test]
    fn a_flushed_batch_keeps_room_for_the_next() {
        let collector = Collector::new();
        let mut batch = RetireBatch::new(free_u64);
        for i in 0..5u64 {
            // SAFETY: a fresh allocation nobody else can reach, pushed once.
            unsafe { batch.push(Box::into_raw(Box::new(i))) };
        }
        batch.flush(&collector, &collector.pin(), |_| {});
        assert!(batch.is_empty());
        assert!(batch.items.capacity() >= 5);
    }
}
