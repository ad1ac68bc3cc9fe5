//! A named table's index behind a pointer that dropping the table swaps
//! out ([`IndexSlot`]), and the index's owner that counts the versions it
//! frees ([`TableIndex`]).
//!
//! The slot holds one strong reference of an `Arc<TableIndex>` as a raw
//! pointer (the table's own). Three kinds of users reach the index:
//!
//! * a read loads the pointer under an epoch guard and uses the index
//!   until the guard drops ([`IndexSlot::get`]): no reference count is
//!   touched;
//! * a transaction that writes to the table, or opens a cursor on it
//!   (whose keys it lends for as long as the transaction), takes a strong
//!   reference under a guard ([`IndexSlot::hold`]) and keeps it until the
//!   transaction ends;
//! * dropping the table swaps the pointer to null and defers releasing the
//!   table's own reference to the epoch collector ([`IndexSlot::retire`]).
//!
//! So the index is freed once every guard that could have loaded the
//! pointer has dropped and every transaction that holds it has ended; a
//! handle to the table (an `Arc` of its state, which owns the slot) keeps
//! nothing alive after the drop.

use super::index::Index;
use super::SendPtr;
use crate::machinery::epoch::{Collector, Guard};
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

/// A table's index and the engine's freed-version counter: dropping it
/// counts the versions still linked in its chains as freed.
pub(crate) struct TableIndex {
    pub(crate) index: Index,
    freed: Arc<AtomicU64>,
}

impl TableIndex {
    pub(crate) fn new(freed: Arc<AtomicU64>) -> TableIndex {
        TableIndex {
            index: Index::new_small(),
            freed,
        }
    }
}

impl Drop for TableIndex {
    fn drop(&mut self) {
        // Only the last reference drops it: no reader or writer can reach
        // the chains any more; the guard is for the walk's signature.
        let guard = Collector::new().pin();
        let mut n = 0;
        self.index
            .for_each(&guard, |e| n += e.chain_len(&guard) as u64);
        drop(guard);
        // Relaxed: a statistic.
        self.freed.fetch_add(n, Ordering::Relaxed);
    }
}

/// The pointer from a table's state to its index (module docs).
pub(crate) struct IndexSlot {
    ptr: AtomicPtr<TableIndex>,
}

impl IndexSlot {
    pub(crate) fn new(index: TableIndex) -> IndexSlot {
        IndexSlot {
            ptr: AtomicPtr::new(Arc::into_raw(Arc::new(index)).cast_mut()),
        }
    }

    /// The index, for as long as `guard` is held; `None` once the table
    /// was dropped. One load, no read-modify-write.
    #[inline]
    pub(crate) fn get<'g>(&'g self, guard: &'g Guard) -> Option<&'g Index> {
        let _ = guard;
        // Relaxed: the pointer is non-null only as built, before the state
        // was shared (whatever shared it ordered the index's contents); its
        // one later store is the null of `retire`.
        let p = self.ptr.load(Ordering::Relaxed);
        // SAFETY: non-null, so loaded before `retire` swapped it out; the
        // table's reference is released only by a function deferred after
        // that swap, which runs once every guard pinned before it (ours)
        // has dropped (invariant 11).
        (!p.is_null()).then(|| &unsafe { &*p }.index)
    }

    /// Has the table been dropped?
    #[inline]
    pub(crate) fn is_retired(&self) -> bool {
        // Relaxed: a check of the drop alone; what it guards is read
        // through `get` or `hold`.
        self.ptr.load(Ordering::Relaxed).is_null()
    }

    /// A strong reference to the index, taken under `guard`, for a
    /// transaction to keep until it ends; `None` once the table was
    /// dropped.
    pub(crate) fn hold(&self, guard: &Guard) -> Option<Arc<TableIndex>> {
        let _ = guard;
        // Relaxed: as in `get`.
        let p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            return None;
        }
        // SAFETY: as in `get`, the table's own reference is still counted
        // while `guard` is held, so the count is at least one and `p` came
        // from `Arc::into_raw`; the increment gives the new `Arc` its own.
        unsafe {
            Arc::increment_strong_count(p);
            Some(Arc::from_raw(p))
        }
    }

    /// Does a transaction hold the index (a strong reference besides the
    /// table's own)? False once the table was dropped.
    pub(crate) fn is_held(&self, guard: &Guard) -> bool {
        let _ = guard;
        // Relaxed: as in `get`.
        let p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            return false;
        }
        // SAFETY: as in `hold`, the table's reference is counted while
        // `guard` is held; `ManuallyDrop` leaves the count as it was.
        let arc = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p.cast_const()) });
        Arc::strong_count(&arc) > 1
    }

    /// Drops the table's index: swaps the pointer to null and defers
    /// releasing the table's reference until no guard pinned now remains.
    /// Returns false if it was retired already.
    pub(crate) fn retire(&self, collector: &Collector) -> bool {
        // AcqRel: stronger than needed (a drop is rare); the epoch, not
        // this ordering, keeps the index alive for readers that loaded it.
        let p = self.ptr.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return false;
        }
        let p = SendPtr(p);
        let guard = collector.pin();
        collector.defer(&guard, move || {
            let p = p;
            // SAFETY: the table's own reference, taken out of the slot
            // above, so released once; every guard that could have loaded
            // it has dropped.
            drop(unsafe { Arc::from_raw(p.0.cast_const()) });
        });
        // Hands the deferral on now, so the memory goes back without
        // waiting for this thread's bag to fill.
        collector.flush(&guard);
        true
    }

    /// Drops the table's index now (its engine is dropping): swaps the
    /// pointer to null and releases the table's reference at once.
    /// `_exclusive`, the engine's registry borrowed mutably, is the proof
    /// that no session, so no guard that could have loaded the pointer,
    /// exists (as for [`IndexSlot::get_mut`]).
    pub(crate) fn release_now(&self, _exclusive: &mut crate::store::Registry) {
        // Relaxed: the caller has exclusive access.
        let p = self.ptr.swap(std::ptr::null_mut(), Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: the table's own reference, taken out of the slot
            // above, so released once; no guard can hold the pointer while
            // `_exclusive` is borrowed (no session exists). A leaked
            // transaction's own reference, if any, keeps the index alive.
            drop(unsafe { Arc::from_raw(p.cast_const()) });
        }
    }

    /// The index, exclusively (rollback to stable, which holds the engine
    /// by `&mut`); `None` once the table was dropped, or while a leaked
    /// transaction still holds it ([`IndexSlot::is_held`]). `_exclusive`, the
    /// engine's registry borrowed mutably, is the proof: the registry lives
    /// in its engine, and every session (so every transaction, cursor and
    /// read) borrows the engine, so none exists.
    pub(crate) fn get_mut<'a>(
        &'a self,
        _exclusive: &'a mut crate::store::Registry,
    ) -> Option<&'a mut Index> {
        // Relaxed: the caller has exclusive access.
        let p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` came from `Arc::into_raw` and is the table's counted
        // reference, released only by `retire` or the slot's drop, neither
        // of which can run while `&self` is borrowed and no session exists
        // (`_exclusive`); `ManuallyDrop` keeps that reference counted.
        let mut arc = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p.cast_const()) });
        // No transaction holds another reference (they live in sessions;
        // one leaked with `mem::forget` would): `Arc::get_mut` checks it.
        let inner = Arc::get_mut(&mut arc)?;
        let index: *mut Index = &mut inner.index;
        // SAFETY: the index lives as long as the table's reference (above);
        // no guard or reference can reach it while `_exclusive` is
        // borrowed, so this is the only reference for `'a`.
        Some(unsafe { &mut *index })
    }
}

impl Drop for IndexSlot {
    fn drop(&mut self) {
        let p = self.ptr.get_mut_ptr();
        if !p.is_null() {
            // SAFETY: `&mut self`: no guard can hold the slot; the table's
            // reference, released once.
            drop(unsafe { Arc::from_raw(p.cast_const()) });
        }
    }
}

// The slot shares its `TableIndex` between threads as an `Arc` does, so
// the index must be Send + Sync (the atomic pointer alone would not say).
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<TableIndex>();
};
