//! `descriptor/<crate>/<n>-reader`: loading and using the current snapshot
//! descriptor while another thread keeps installing new ones, with the
//! pointer managed by crossbeam-epoch, arc-swap and seize (the three
//! reclamation crates the design considered). `n` readers load at once; one
//! of them is measured. "Using" is what a transaction does with a
//! descriptor: read its generation, xmin, xmax and search its running list.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A stand-in with the engine descriptor's shape.
struct Desc {
    generation: u64,
    xmin: u64,
    xmax: u64,
    running: Box<[u64]>,
}

impl Desc {
    fn new(g: u64) -> Desc {
        Desc {
            generation: g,
            xmin: g,
            xmax: g + 8,
            running: (g..g + 4).collect(),
        }
    }

    #[inline]
    fn use_it(&self, probe: u64) -> u64 {
        let seen = self.running.binary_search(&probe).is_err();
        self.generation ^ self.xmin ^ self.xmax ^ seen as u64
    }
}

/// A way to publish descriptors.
trait Cell: Sync {
    const NAME: &'static str;
    fn new() -> Self;
    fn load_use(&self, probe: u64) -> u64;
    fn install(&self, g: u64);
}

struct Epoch(crossbeam_epoch::Atomic<Desc>);

impl Cell for Epoch {
    const NAME: &'static str = "crossbeam-epoch";
    fn new() -> Self {
        Epoch(crossbeam_epoch::Atomic::new(Desc::new(1)))
    }
    #[inline]
    fn load_use(&self, probe: u64) -> u64 {
        let guard = crossbeam_epoch::pin();
        let p = self.0.load(Ordering::Acquire, &guard);
        // SAFETY: loaded under `guard`; retired only after replacement and
        // freed only after every guard that could see it is gone.
        unsafe { p.deref() }.use_it(probe)
    }
    fn install(&self, g: u64) {
        let guard = crossbeam_epoch::pin();
        let old = self.0.swap(
            crossbeam_epoch::Owned::new(Desc::new(g)),
            Ordering::AcqRel,
            &guard,
        );
        // SAFETY: `old` is unlinked by the swap; the collector frees it after
        // every guard that could hold it is dropped.
        unsafe { guard.defer_destroy(old) };
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        // SAFETY: exclusive access; no guard can still reach the pointer.
        unsafe {
            let g = crossbeam_epoch::unprotected();
            drop(self.0.load(Ordering::Relaxed, g).into_owned());
        }
    }
}

struct Swap(arc_swap::ArcSwap<Desc>);

impl Cell for Swap {
    const NAME: &'static str = "arc-swap";
    fn new() -> Self {
        Swap(arc_swap::ArcSwap::from_pointee(Desc::new(1)))
    }
    #[inline]
    fn load_use(&self, probe: u64) -> u64 {
        self.0.load().use_it(probe)
    }
    fn install(&self, g: u64) {
        self.0.store(std::sync::Arc::new(Desc::new(g)));
    }
}

struct Seize {
    collector: seize::Collector,
    ptr: AtomicPtr<Desc>,
}

impl Cell for Seize {
    const NAME: &'static str = "seize";
    fn new() -> Self {
        Seize {
            collector: seize::Collector::new(),
            ptr: AtomicPtr::new(Box::into_raw(Box::new(Desc::new(1)))),
        }
    }
    #[inline]
    fn load_use(&self, probe: u64) -> u64 {
        use seize::Guard;
        let guard = self.collector.enter();
        let p = guard.protect(&self.ptr, Ordering::Acquire);
        // SAFETY: protected by `guard`; retired only after replacement.
        unsafe { &*p }.use_it(probe)
    }
    fn install(&self, g: u64) {
        let new = Box::into_raw(Box::new(Desc::new(g)));
        let old = self.ptr.swap(new, Ordering::AcqRel);
        // SAFETY: `old` came from Box::into_raw and is unlinked by the swap;
        // seize frees it once no guard can hold it.
        unsafe { self.collector.retire(old, seize::reclaim::boxed) };
    }
}

impl Drop for Seize {
    fn drop(&mut self) {
        // SAFETY: exclusive access; the current pointer was never retired.
        drop(unsafe { Box::from_raw(*self.ptr.get_mut()) });
    }
}

fn run<C: Cell>(c: &mut Criterion) {
    let mut g = c.benchmark_group("descriptor");
    for readers in [1usize, 2] {
        let cell = C::new();
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            // The installer: a new descriptor as fast as it can (a commit
            // storm).
            sc.spawn(|| {
                let mut gen = 2;
                while !stop.load(Ordering::Relaxed) {
                    cell.install(gen);
                    gen += 1;
                }
            });
            for _ in 1..readers {
                sc.spawn(|| {
                    let mut x = 0;
                    while !stop.load(Ordering::Relaxed) {
                        x ^= cell.load_use(black_box(5));
                    }
                    black_box(x);
                });
            }
            g.bench_function(
                BenchmarkId::new(C::NAME, format!("{readers}-reader")),
                |b| b.iter(|| cell.load_use(black_box(5))),
            );
            stop.store(true, Ordering::Relaxed);
        });
    }
    g.finish();
}

fn benches_all(c: &mut Criterion) {
    run::<Epoch>(c);
    run::<Swap>(c);
    run::<Seize>(c);
}

criterion_group!(benches, benches_all);
criterion_main!(benches);
