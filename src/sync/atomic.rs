//! The atomic wrappers (loom's atomics under `--cfg loom`, std's otherwise)
//! and the per-thread count of the read-modify-writes issued through them
//! (feature `count-rmw`).

use super::Ordering;

#[cfg(loom)]
use loom::sync::atomic as imp;
#[cfg(not(loom))]
use std::sync::atomic as imp;

#[cfg(all(feature = "count-rmw", not(loom)))]
mod counting {
    use std::cell::Cell;
    std::thread_local! {
        pub(super) static RMW: Cell<u64> = const { Cell::new(0) };
    }
}

/// Records one atomic read-modify-write on this thread (feature `count-rmw`).
#[inline(always)]
pub(crate) fn count_rmw() {
    #[cfg(all(feature = "count-rmw", not(loom)))]
    counting::RMW.with(|c| c.set(c.get() + 1));
}

/// The number of atomic read-modify-writes this thread has issued through the
/// engine's `sync` shim since it started.
///
/// Only counts with the `count-rmw` cargo feature; without it this always
/// returns `None`. Atomics inside crossbeam-epoch and crossbeam-skiplist do
/// not go through the shim and are not counted (see DESIGN.md, "What the RMW
/// counter sees").
pub fn thread_rmw_count() -> Option<u64> {
    #[cfg(all(feature = "count-rmw", not(loom)))]
    {
        Some(counting::RMW.with(|c| c.get()))
    }
    #[cfg(not(all(feature = "count-rmw", not(loom))))]
    {
        None
    }
}

macro_rules! int_atomic {
    ($name:ident, $int:ty) => {
        #[derive(Debug)]
        #[repr(transparent)]
        pub(crate) struct $name(imp::$name);

        impl Default for $name {
            fn default() -> Self {
                Self::new(0)
            }
        }

        #[allow(dead_code)]
        impl $name {
            #[inline(always)]
            pub(crate) fn new(v: $int) -> Self {
                Self(imp::$name::new(v))
            }
            /// As `new`, in a `static` (std's constructor is `const`;
            /// loom's is not, so this exists only outside loom).
            #[cfg(not(loom))]
            pub(crate) const fn new_static(v: $int) -> Self {
                Self(imp::$name::new(v))
            }
            #[inline(always)]
            pub(crate) fn load(&self, o: Ordering) -> $int {
                self.0.load(o)
            }
            #[inline(always)]
            pub(crate) fn store(&self, v: $int, o: Ordering) {
                self.0.store(v, o)
            }
            #[inline(always)]
            pub(crate) fn swap(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.swap(v, o)
            }
            #[inline(always)]
            pub(crate) fn fetch_add(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.fetch_add(v, o)
            }
            #[inline(always)]
            pub(crate) fn fetch_max(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.fetch_max(v, o)
            }
            #[inline(always)]
            pub(crate) fn fetch_or(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.fetch_or(v, o)
            }
            #[inline(always)]
            pub(crate) fn compare_exchange(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                count_rmw();
                self.0.compare_exchange(current, new, success, failure)
            }
            /// Owner-only increment: a load and a store, not a read-modify-write.
            /// Correct only when this thread is the word's single writer.
            #[inline(always)]
            pub(crate) fn bump(&self, by: $int) {
                self.0.store(
                    self.0.load(Ordering::Relaxed).wrapping_add(by),
                    Ordering::Relaxed,
                )
            }
        }
    };
}

int_atomic!(AtomicU64, u64);

/// A boolean atomic through the shim.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct AtomicBool(imp::AtomicBool);

#[allow(dead_code)]
impl AtomicBool {
    #[inline(always)]
    pub(crate) fn new(v: bool) -> Self {
        Self(imp::AtomicBool::new(v))
    }
    #[inline(always)]
    pub(crate) fn load(&self, o: Ordering) -> bool {
        self.0.load(o)
    }
    #[inline(always)]
    pub(crate) fn store(&self, v: bool, o: Ordering) {
        self.0.store(v, o)
    }
    #[inline(always)]
    pub(crate) fn compare_exchange(
        &self,
        current: bool,
        new: bool,
        success: Ordering,
        failure: Ordering,
    ) -> Result<bool, bool> {
        count_rmw();
        self.0.compare_exchange(current, new, success, failure)
    }
}

/// A pointer atomic through the shim.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct AtomicPtr<T>(imp::AtomicPtr<T>);

#[allow(dead_code)]
impl<T> AtomicPtr<T> {
    #[inline(always)]
    pub(crate) fn new(p: *mut T) -> Self {
        Self(imp::AtomicPtr::new(p))
    }
    #[inline(always)]
    pub(crate) fn load(&self, o: Ordering) -> *mut T {
        self.0.load(o)
    }
    #[inline(always)]
    pub(crate) fn store(&self, p: *mut T, o: Ordering) {
        self.0.store(p, o)
    }
    #[inline(always)]
    pub(crate) fn swap(&self, p: *mut T, o: Ordering) -> *mut T {
        count_rmw();
        self.0.swap(p, o)
    }
    #[inline(always)]
    pub(crate) fn compare_exchange(
        &self,
        current: *mut T,
        new: *mut T,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut T, *mut T> {
        count_rmw();
        self.0.compare_exchange(current, new, success, failure)
    }
    /// Reads the pointer through exclusive access (no atomic operation).
    #[inline(always)]
    pub(crate) fn get_mut_ptr(&mut self) -> *mut T {
        #[cfg(loom)]
        {
            self.0.with_mut(|p| *p)
        }
        #[cfg(not(loom))]
        {
            *self.0.get_mut()
        }
    }
}
