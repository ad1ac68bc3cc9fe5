//! The snapshot descriptor: an immutable `{generation, xmin, xmax, running}`
//! behind one atomically swapped pointer: a snapshot is one Acquire load
//! and a copy, a completion one CAS.
//!
//! # Orderings
//!
//! * A completer builds the next descriptor from the current one and
//!   installs it with a compare-and-swap whose success ordering is Release.
//!   Everything the completer did before (flipping its versions' status to
//!   committed, aborted or prepared) happens-before any thread that loads the
//!   new pointer with Acquire ([`DescriptorCell::copy_into`],
//!   [`DescriptorCell::xmin`]).
//! * After a successful install the completer raises the published
//!   generation with `fetch_max(Release)`. A reader whose cached copy has the
//!   published generation reuses it with one Acquire load and no pin. The
//!   published generation may lag the pointer (a commit between its CAS and
//!   its `fetch_max`), never lead it, and never moves backwards; a commit
//!   returns only after its `fetch_max`, so a transaction that begins after a
//!   commit returned sees it (invariant 7, real-time order).
//! * Superseded descriptors are retired to the epoch collector; a descriptor
//!   is dereferenced only under a guard (invariant 11).

use super::reclaim::{Collector, RetireBatch};
use crate::machinery::snapshot::Snapshot;
use crate::sync::{
    mutant as m, mutant_on, ordering_or_mutant, AtomicPtr, AtomicU64, Mutex, Ordering, Witness,
};
use std::sync::{Arc, PoisonError};

/// One immutable snapshot descriptor.
#[derive(Debug)]
pub(crate) struct Descriptor {
    pub(crate) generation: u64,
    pub(crate) xmin: u64,
    pub(crate) xmax: u64,
    pub(crate) running: Running,
    /// Under loom, the fields' causality witness: written with them, checked
    /// wherever a thread that loaded the cell's pointer reads them, so a
    /// pointer load too weak to order the read after the writer fails the
    /// model (`sync::Witness`). Zero-sized in every other build.
    pub(crate) witness: Witness,
}

/// Running ids inline in the descriptor up to this many, so a completion
/// usually makes one allocation, not two (the writer-side profile showed
/// descriptor allocation and the allocator's consolidation as the engine's
/// own largest writer cost).
const INLINE_RUNNING: usize = 6;

/// The running ids of a descriptor, sorted ascending.
#[derive(Debug)]
pub(crate) enum Running {
    Inline(u8, [u64; INLINE_RUNNING]),
    Heap(Box<[u64]>),
}

impl Running {
    /// Collects `ids` (at most `upper` of them).
    fn collect(ids: impl Iterator<Item = u64>, upper: usize) -> Running {
        // Equivalent: `<` (exactly INLINE_RUNNING ids would spill to the
        // heap, with the same contents).
        if upper <= INLINE_RUNNING {
            let mut a = [0; INLINE_RUNNING];
            let mut n = 0;
            for id in ids {
                a[n] = id;
                n += 1;
            }
            Running::Inline(n as u8, a)
        } else {
            Running::Heap(ids.collect())
        }
    }
}

impl std::ops::Deref for Running {
    type Target = [u64];
    #[inline]
    fn deref(&self) -> &[u64] {
        match self {
            Running::Inline(n, a) => &a[..*n as usize],
            Running::Heap(b) => b,
        }
    }
}

impl From<&[u64]> for Running {
    fn from(ids: &[u64]) -> Running {
        Running::collect(ids.iter().copied(), ids.len())
    }
}

impl Descriptor {
    /// A descriptor with nothing running, whose generation, `xmin` and
    /// `xmax` are all `at`.
    fn empty(at: u64) -> Descriptor {
        Descriptor {
            generation: at,
            xmin: at,
            xmax: at,
            running: Running::Inline(0, [0; INLINE_RUNNING]),
            witness: Witness::new(),
        }
    }

    /// The descriptor that follows `self` once transaction `id` leaves the
    /// running set: remove `id`; if `id >= xmax`, raise
    /// `xmax` to `id + 1` and list every id in `[xmax, id)` as running, since
    /// none of them can have completed without raising `xmax` first.
    pub(crate) fn next_without(&self, id: u64) -> Descriptor {
        let cur: &[u64] = &self.running;
        let (running, xmax) = if id < self.xmax {
            let it = cur.iter().copied().filter(|&r| r != id);
            (Running::collect(it, cur.len()), self.xmax)
        } else {
            let gap = (id - self.xmax) as usize;
            let it = cur.iter().copied().chain(self.xmax..id);
            (Running::collect(it, cur.len() + gap), id + 1)
        };
        let xmin = running.first().copied().unwrap_or(xmax);
        let generation = if mutant_on(m::SKIP_GENERATION_BUMP) {
            self.generation
        } else {
            self.generation + 1
        };
        Descriptor {
            generation,
            xmin,
            xmax,
            running,
            witness: Witness::new(),
        }
    }
}

/// Descriptors replaced by one session's completions, waiting for the
/// collector.
pub(crate) type Retired = RetireBatch<Descriptor>;

/// A batch for replaced descriptors.
pub(crate) fn retired() -> Retired {
    RetireBatch::new(free_descriptor)
}

/// Reuse replaced descriptors ([`DescriptorPool`])? Not under loom, whose
/// stand-in collector runs deferred work only when it drops: the models
/// see every replaced descriptor freed, as before the pool.
const REUSE: bool = !cfg!(loom);

/// Most batches of replaced descriptors a [`DescriptorPool`] keeps; one
/// handed back beyond them is freed. Not a safety bound: it caps what the
/// pool holds (64 batches of `RETIRE_BATCH`, about 200 KB).
const POOL_BATCHES: usize = 64;

/// Replaced descriptors, each its own allocation: a reused one is installed
/// by its pointer (`Box::into_raw`) and retired alone, so the boxes are the
/// point.
#[allow(clippy::vec_box)]
type Batch = Vec<Box<Descriptor>>;

/// Replaced descriptors past their grace period, for the next completions
/// to fill. Every completion installs a new descriptor; one replaced
/// earlier, reused, saves the allocator call and the free a commit paid
/// for it otherwise. The collector hands a session's flushed batch here once
/// no guard can reach it ([`DescriptorCell::retire`]), and a session takes
/// a whole batch at a time ([`DescriptorCell::refill`]): the lock is taken
/// about twice per `RETIRE_BATCH` completions.
struct DescriptorPool {
    batches: Mutex<Vec<Batch>>,
}

impl DescriptorPool {
    /// Keeps `batch` unless the pool is full (then it is freed, after the
    /// lock is released).
    fn give(&self, batch: Batch) {
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        // Not a safety bound (`<=`: one batch more kept).
        let over = if batches.len() < POOL_BATCHES {
            batches.push(batch);
            None
        } else {
            Some(batch)
        };
        drop(batches);
        drop(over);
    }

    /// A batch to reuse, if the pool holds one.
    fn take(&self) -> Option<Batch> {
        self.batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }
}

/// One session's descriptors that its completions replaced, not yet handed
/// to the collector, and the allocations its next completions fill. The
/// session owns it and lends it to every completion and to its close
/// (`&mut`), so no other thread can touch it.
pub struct SessionRetired {
    batch: Retired,
    /// An allocation for the next descriptor this session installs, never
    /// shared: made ahead by [`SessionRetired::ready_spare`] (so a
    /// completion under a lock does not call the allocator), or left by a
    /// failed install for the next attempt.
    spare: Option<Box<Descriptor>>,
    /// Replaced descriptors past their grace period, taken from the pool
    /// ([`DescriptorCell::refill`]): the allocations of the completions
    /// after the spare. Owned here alone, like the spare.
    reuse: Batch,
}

impl Default for SessionRetired {
    fn default() -> Self {
        SessionRetired {
            batch: retired(),
            spare: None,
            reuse: Vec::new(),
        }
    }
}

impl SessionRetired {
    /// The batch itself.
    pub(crate) fn batch(&mut self) -> &mut Retired {
        &mut self.batch
    }

    /// Readies the next completion's descriptor now, if none is ready: a
    /// reused one, else a new allocation.
    pub(crate) fn ready_spare(&mut self) {
        if self.spare.is_none() {
            // Its contents are overwritten before it is installed.
            let b = self
                .reuse
                .pop()
                .unwrap_or_else(|| Box::new(Descriptor::empty(0)));
            self.spare = Some(b);
        }
    }

    /// Is an allocation ready for the next completion?
    #[cfg(all(test, not(loom)))]
    pub(crate) fn has_spare(&self) -> bool {
        self.spare.is_some()
    }
}

/// Frees one descriptor.
///
/// # Safety
/// `p` came from `Box::into_raw`, nobody can reach it, and it is freed once.
unsafe fn free_descriptor(p: *mut Descriptor) -> u64 {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(p) });
    1
}

#[cfg(test)]
thread_local! {
    /// Descriptors this thread's completions allocated themselves (no
    /// spare was ready, `DescriptorCell::complete`): a unit test counts them.
    pub(crate) static DESCRIPTOR_ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// What one completion cost.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct InstallCost {
    /// Failed compare-and-swaps before the install succeeded.
    pub(crate) cas_retries: u64,
}

/// The atomically swapped pointer to the current descriptor, and the
/// published generation that lets readers skip the pointer.
pub(crate) struct DescriptorCell {
    ptr: AtomicPtr<Descriptor>,
    published: AtomicU64,
    /// Replaced descriptors past their grace period; shared with the
    /// collector's deferred work, which may run after the cell drops.
    pool: Arc<DescriptorPool>,
}

impl DescriptorCell {
    /// The first descriptor: nothing running, ids start at 1.
    pub(crate) fn new() -> DescriptorCell {
        let first = Box::new(Descriptor::empty(1));
        DescriptorCell {
            ptr: AtomicPtr::new(Box::into_raw(first)),
            published: AtomicU64::new(1),
            pool: Arc::new(DescriptorPool {
                batches: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Hands the descriptors `retired` holds to the collector, which gives
    /// them to the pool once no guard can reach them (invariant 11); under
    /// loom it frees them. Out of line: a completion flushes once a batch,
    /// and its common path then saves no registers for this one.
    #[inline(never)]
    pub(crate) fn retire(&self, collector: &Collector, retired: &mut SessionRetired) {
        let guard = collector.pin();
        if !REUSE {
            retired.batch.flush(collector, &guard, |_| {});
            return;
        }
        let pool = Arc::clone(&self.pool);
        retired.batch.flush_with(collector, &guard, move |items| {
            let batch = items
                .into_iter()
                .map(|p| {
                    // SAFETY: `complete` pushed it once, after the CAS that
                    // unlinked it, and it came from `Box::into_raw`; the
                    // collector runs this only after every guard that could
                    // have loaded it dropped (invariant 11), so nothing else
                    // can reach it.
                    unsafe { Box::from_raw(p.0) }
                })
                .collect();
            pool.give(batch);
        });
    }

    /// Gives the session a batch of replaced descriptors to reuse, if it
    /// has none left and the pool holds one.
    pub(crate) fn refill(&self, retired: &mut SessionRetired) {
        if REUSE && retired.reuse.is_empty() {
            if let Some(b) = self.pool.take() {
                retired.reuse = b;
            }
        }
    }

    /// The newest generation whose commit has returned (or is about to).
    #[inline]
    pub(crate) fn published_generation(&self) -> u64 {
        // Acquire: pairs with the Release fetch_max in `complete`. Stronger
        // than needed: the caller only compares the value with its cached
        // generation; on a mismatch `copy_into` takes the descriptor with
        // its own Acquire loads, and real-time order needs only coherence
        // (a begin after a commit returned reads its generation with any
        // ordering).
        self.published.load(Ordering::Acquire)
    }

    /// Copies the current descriptor into `snap` (one Acquire load of the
    /// pointer, under a guard).
    pub(crate) fn copy_into(&self, collector: &Collector, snap: &mut Snapshot) {
        let guard = collector.pin();
        // Debug builds check that the published generation never leads the
        // pointer (invariant 5): a generation loaded before the pointer is at
        // most the loaded descriptor's (Acquire: pairs with the Release
        // fetch_max in `complete`, which follows its CAS).
        #[cfg(debug_assertions)]
        let published = self.published.load(Ordering::Acquire);
        // Acquire: pairs with the Release CAS in `complete`, so the contents
        // of the descriptor and every version-status flip made before it are
        // visible here (invariants 9, 11).
        let p = self.ptr.load(ordering_or_mutant(
            Ordering::Acquire,
            m::RELAXED_DESCRIPTOR_LOAD,
        ));
        // SAFETY: `p` was loaded under `guard`; a descriptor is retired only
        // after it has been replaced, and retired memory is freed only after
        // every guard that could have loaded it drops (invariant 11). The
        // pointer is never null (the cell always holds a descriptor).
        let d = unsafe { &*p };
        // Loom: the fields below must happen-after their writer.
        d.witness.check();
        #[cfg(debug_assertions)]
        debug_assert!(
            d.generation >= published,
            "published generation {published} leads the descriptor's {}",
            d.generation
        );
        snap.assign(d.generation, d.xmin, d.xmax, &d.running);
        drop(guard);
    }

    /// The current descriptor's xmin: every id below it has completed.
    pub(crate) fn xmin(&self, collector: &Collector) -> u64 {
        let guard = collector.pin();
        // Acquire: pairs with the Release CAS in `complete`; the advancer
        // then publishes this xmin with Release as the floor, so whoever
        // acquires the floor sees the completed transactions' flips (the
        // read-only fast path decides untimestamped versions by that floor).
        // Required: with Relaxed the plain `xmin` read below would
        // race with its writer, and the floor would no longer carry the
        // completers' status flips. Loom checks the first half through the
        // descriptor's witness, checked at the read and before any fence:
        // with the load Relaxed (RELAXED_FLOOR_SOURCE) model `floor_source`
        // fails with "Causality violation". The second half alone is not
        // shown by loom (its acquire fences join more than C++'s: DESIGN.md,
        // "What loom cannot see"); it falls with the first.
        let p = self.ptr.load(ordering_or_mutant(
            Ordering::Acquire,
            m::RELAXED_FLOOR_SOURCE,
        ));
        // SAFETY: as in `copy_into`: loaded under `guard` (invariant 11).
        let d = unsafe { &*p };
        // Loom: `xmin` must happen-after its writer.
        d.witness.check();
        let x = d.xmin;
        drop(guard);
        x
    }

    /// Transaction `id` leaves the running set: derive the next descriptor
    /// and install it with a CAS. No scan, no lock.
    ///
    /// The replaced descriptor goes to `retired`, which the caller hands to
    /// the collector ([`RetireBatch::flush`]). With `keep` (a commit), the
    /// installed descriptor is copied into it under its own generation: the
    /// session's next snapshot reuses it while the published generation is
    /// still that one (invariant 5), and needs no pointer load or pin.
    pub(crate) fn complete(
        &self,
        collector: &Collector,
        id: u64,
        retired: &mut SessionRetired,
        keep: Option<&mut Snapshot>,
    ) -> InstallCost {
        let mut cost = InstallCost::default();
        let _guard = collector.pin();
        // Acquire: pairs with the Release CAS of the previous completer; we
        // read the descriptor's contents to derive the next one.
        let mut cur = self.ptr.load(Ordering::Acquire);
        loop {
            // SAFETY: `cur` was loaded (or returned by a failed CAS, which
            // is a load) under `_guard` (invariant 11).
            let cur_d = unsafe { &*cur };
            // Loom: the fields `next_without` reads must happen-after their
            // writer (the Acquire load, or the failed CAS's Acquire).
            cur_d.witness.check();
            // The session's spare allocation if it has one (made before a
            // lock, or left by a failed attempt), else a replaced one to
            // reuse, else a new one.
            let next = match retired.spare.take().or_else(|| retired.reuse.pop()) {
                Some(mut b) => {
                    *b = cur_d.next_without(id);
                    b
                }
                None => {
                    #[cfg(test)]
                    DESCRIPTOR_ALLOCS.with(|n| n.set(n.get() + 1));
                    Box::new(cur_d.next_without(id))
                }
            };
            let generation = next.generation;
            let next = Box::into_raw(next);
            if mutant_on(m::GENERATION_BEFORE_CAS) {
                self.published.fetch_max(generation, Ordering::Release);
            }
            // Release on success: publishes the new descriptor and every
            // status flip this transaction made before completing; pairs
            // with the Acquire loads in `copy_into` and `xmin`.
            // Acquire on failure: the failed CAS is our load of the newer
            // descriptor, which we derive from next (a failed CAS that is
            // then read through must acquire).
            // The success's Acquire half is stronger than needed: a
            // successful CAS reads the store our Acquire load (or failed
            // CAS) of `cur` already synchronized with (a descriptor is not
            // freed, so its address not reused, while we hold the guard).
            match self
                .ptr
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(old) => {
                    // `old` is unlinked: no new reader can load it. It is
                    // freed by the collector after every guard that might
                    // have loaded it drops (invariant 11).
                    // SAFETY: unlinked by the CAS above, pushed once; it
                    // came from Box::into_raw (`free_descriptor`).
                    unsafe { retired.batch.push(old) };
                    // Release: pairs with the Acquire load in
                    // `published_generation`. fetch_max keeps the published
                    // generation monotonic when two completers race here
                    // (invariant 4).
                    self.published.fetch_max(generation, Ordering::Release);
                    if let Some(snap) = keep {
                        // SAFETY: `next` is the descriptor we just installed;
                        // it is immutable, and it is retired only after a
                        // later completion replaces it, then freed only
                        // after `_guard` drops (invariant 11).
                        let d = unsafe { &*next };
                        // The generation is the one we installed: generations
                        // are unique (each CAS installs its predecessor's
                        // + 1, in one total order), so a session that later
                        // loads a published generation equal to it knows no
                        // newer descriptor's commit has returned (they all
                        // raise the published generation before returning),
                        // and this copy is current for it (invariants 5, 7;
                        // loom `descriptors/own_commit`). Labelling it with
                        // the published generation read now instead would
                        // claim a racing newer commit that this copy does
                        // not contain (mutant COMMIT_CACHE_TAKES_PUBLISHED).
                        let label = if mutant_on(m::COMMIT_CACHE_TAKES_PUBLISHED) {
                            self.published.load(Ordering::Relaxed)
                        } else {
                            generation
                        };
                        snap.assign(label, d.xmin, d.xmax, &d.running);
                    }
                    return cost;
                }
                Err(actual) => {
                    // SAFETY: `next` came from Box::into_raw above and was
                    // never shared (the CAS failed): it is ours again, kept
                    // for the next attempt.
                    retired.spare = Some(unsafe { Box::from_raw(next) });
                    cur = actual;
                    cost.cas_retries += 1;
                }
            }
        }
    }
}

impl Drop for DescriptorCell {
    fn drop(&mut self) {
        let p = self.ptr.get_mut_ptr();
        // SAFETY: `&mut self`: no other thread can reach the cell, and the
        // current descriptor is never retired, so it is freed once, here.
        drop(unsafe { Box::from_raw(p) });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn d(gen: u64, xmin: u64, xmax: u64, running: &[u64]) -> Descriptor {
        Descriptor {
            generation: gen,
            xmin,
            xmax,
            running: running.into(),
            witness: Witness::new(),
        }
    }

    #[test]
    fn completing_below_xmax_removes_the_id() {
        let n = d(3, 5, 9, &[5, 7]).next_without(5);
        assert_eq!(
            (n.generation, n.xmin, n.xmax, &*n.running),
            (4, 7, 9, &[7][..])
        );
        let n = n.next_without(7);
        assert_eq!((n.xmin, n.xmax, &*n.running), (9, 9, &[][..]));
    }

    #[test]
    fn completing_above_xmax_lists_the_gap_as_running() {
        let n = d(1, 1, 1, &[]).next_without(4);
        assert_eq!((n.xmin, n.xmax, &*n.running), (1, 5, &[1, 2, 3][..]));
        let n = n.next_without(2);
        assert_eq!((n.xmin, n.xmax, &*n.running), (1, 5, &[1, 3][..]));
    }

    #[test]
    fn a_gap_wider_than_the_inline_space_spills_and_shrinks_back() {
        let n = d(1, 1, 1, &[]).next_without(20);
        assert!(matches!(n.running, Running::Heap(_)));
        assert_eq!(&*n.running, &(1..20).collect::<Vec<_>>()[..]);
        let mut n = n;
        for id in 1..16 {
            n = n.next_without(id);
        }
        assert!(matches!(n.running, Running::Inline(..)));
        assert_eq!(
            (n.xmin, n.xmax, &*n.running),
            (16, 21, &[16, 17, 18, 19][..])
        );
    }

    #[test]
    fn every_completion_bumps_the_generation_and_publishes_it() {
        let collector = Collector::new();
        let cell = DescriptorCell::new();
        let mut s = Snapshot::default();
        cell.copy_into(&collector, &mut s);
        assert_eq!(s.generation, 1);
        let mut done = SessionRetired::default();
        cell.complete(&collector, 1, &mut done, None);
        cell.complete(&collector, 3, &mut done, None);
        assert_eq!(done.batch().len(), 2);
        done.batch().flush(&collector, &collector.pin(), |_| {});
        assert_eq!(cell.published_generation(), 3);
        cell.copy_into(&collector, &mut s);
        assert_eq!(
            (s.generation, s.xmin, s.xmax, &s.running[..]),
            (3, 2, 4, &[2][..])
        );
        assert!(s.sees(1) && !s.sees(2) && s.sees(3) && !s.sees(4));
    }

    #[test]
    fn a_kept_completion_leaves_the_installed_descriptor_under_its_generation() {
        let collector = Collector::new();
        let cell = DescriptorCell::new();
        let mut done = SessionRetired::default();
        cell.complete(&collector, 2, &mut done, None);
        let mut kept = Snapshot::default();
        cell.complete(&collector, 1, &mut done, Some(&mut kept));
        let mut fresh = Snapshot::default();
        cell.copy_into(&collector, &mut fresh);
        assert_eq!(kept, fresh);
        assert_eq!(kept.generation, cell.published_generation());
        assert!(kept.sees(1) && kept.sees(2));
        done.batch().flush(&collector, &collector.pin(), |_| {});
    }

    /// A completion fills a descriptor the pool handed back (the
    /// collector's part run by hand here: `give` is what it calls once a
    /// retired batch's grace period has passed), not a new allocation.
    #[test]
    fn a_completion_reuses_a_descriptor_the_pool_handed_back() {
        let collector = Collector::new();
        let cell = DescriptorCell::new();
        let mut done = SessionRetired::default();
        let old = Box::new(d(7, 1, 9, &[1, 2, 3, 4, 5, 6, 7, 8]));
        let reused: *const Descriptor = &*old;
        cell.pool.give(vec![old]);
        cell.refill(&mut done);
        assert_eq!(done.reuse.len(), 1);
        assert!(cell.pool.take().is_none(), "the session took the batch");
        let allocs = DESCRIPTOR_ALLOCS.with(std::cell::Cell::get);
        cell.complete(&collector, 2, &mut done, None);
        assert_eq!(DESCRIPTOR_ALLOCS.with(std::cell::Cell::get), allocs);
        assert!(done.reuse.is_empty());
        let guard = collector.pin();
        // Acquire, as in `copy_into`.
        let p = cell.ptr.load(Ordering::Acquire);
        assert_eq!(p.cast_const(), reused);
        // SAFETY: loaded under `guard`; the cell keeps it installed.
        let n = unsafe { &*p };
        assert_eq!(
            (n.generation, n.xmin, n.xmax, &*n.running),
            (2, 1, 3, &[1][..])
        );
        drop(guard);
        done.batch().flush(&collector, &collector.pin(), |_| {});
    }

    /// The pool keeps at most `POOL_BATCHES` batches; it frees the rest.
    #[test]
    fn the_pool_keeps_at_most_its_bound_of_batches() {
        let cell = DescriptorCell::new();
        for _ in 0..POOL_BATCHES + 3 {
            cell.pool.give(vec![Box::new(Descriptor::empty(0))]);
        }
        let mut kept = 0;
        while cell.pool.take().is_some() {
            kept += 1;
        }
        assert_eq!(kept, POOL_BATCHES);
    }

    #[test]
    fn a_completion_fills_the_spare_allocation_made_ahead() {
        let collector = Collector::new();
        let cell = DescriptorCell::new();
        let mut done = SessionRetired::default();
        done.ready_spare();
        let spare: *const Descriptor = &**done.spare.as_ref().expect("made");
        cell.complete(&collector, 2, &mut done, None);
        assert!(!done.has_spare());
        let guard = collector.pin();
        // The installed descriptor lives in the spare's allocation, with
        // the next descriptor's contents.
        let p = cell.ptr.load(Ordering::Acquire);
        assert_eq!(p.cast_const(), spare);
        // SAFETY: loaded under `guard`; the cell keeps it installed.
        let d = unsafe { &*p };
        assert_eq!(
            (d.generation, d.xmin, d.xmax, &*d.running),
            (2, 1, 3, &[1][..])
        );
        drop(guard);
        done.batch().flush(&collector, &collector.pin(), |_| {});
    }
}
