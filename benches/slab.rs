//! `version_alloc/<allocator>`: what a version's block costs to allocate
//! and free, from the store's version slab (`store/raw/slab.rs`, through
//! `snapshot_engine::bench_api`) beside mimalloc (the driver's global
//! allocator), for today's version sizes (the 40-byte header with a
//! 100-byte and a 150-byte value: 140 and 190 bytes).
//!
//! * `pair`: one allocation and its free, back to back (a block reused at
//!   once, as a commit that prunes one version a key does).
//! * `1000`: a thousand allocations, then their frees (a load, then the
//!   collector freeing a batch of pruned tails).
//!
//! Both run on one thread: the slab's cross-thread handoff goes through
//! its depot once per 64 blocks.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use mimalloc::MiMalloc;
use snapshot_engine::bench_api::{slab_alloc, slab_free};
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

/// One way to get blocks.
trait Blocks {
    const NAME: &'static str;
    fn alloc(bytes: usize) -> NonNull<u8>;
    /// # Safety
    /// `p` came from `alloc(bytes)` and is freed once.
    unsafe fn free(p: NonNull<u8>, bytes: usize);
}

struct Slab;

impl Blocks for Slab {
    const NAME: &'static str = "slab";
    #[inline]
    fn alloc(bytes: usize) -> NonNull<u8> {
        slab_alloc(bytes)
    }
    #[inline]
    unsafe fn free(p: NonNull<u8>, bytes: usize) {
        // SAFETY: the caller's contract.
        unsafe { slab_free(p, bytes) }
    }
}

struct Mimalloc;

fn layout(bytes: usize) -> Layout {
    Layout::from_size_align(bytes.next_multiple_of(8), 8).expect("a small block")
}

impl Blocks for Mimalloc {
    const NAME: &'static str = "mimalloc";
    #[inline]
    fn alloc(bytes: usize) -> NonNull<u8> {
        // SAFETY: a non-zero size.
        NonNull::new(unsafe { MiMalloc.alloc(layout(bytes)) }).expect("memory")
    }
    #[inline]
    unsafe fn free(p: NonNull<u8>, bytes: usize) {
        // SAFETY: the caller's contract: allocated with this layout.
        unsafe { MiMalloc.dealloc(p.as_ptr(), layout(bytes)) }
    }
}

fn run<B: Blocks>(c: &mut Criterion, bytes: usize) {
    let mut g = c.benchmark_group("version_alloc");
    g.bench_function(BenchmarkId::new(B::NAME, format!("pair/{bytes}")), |b| {
        b.iter(|| {
            let p = B::alloc(black_box(bytes));
            // SAFETY: a live block of `bytes`.
            unsafe { p.as_ptr().write(1) };
            // SAFETY: from `alloc(bytes)`, freed once.
            unsafe { B::free(black_box(p), bytes) };
        })
    });
    let mut ps = Vec::with_capacity(1000);
    g.bench_function(BenchmarkId::new(B::NAME, format!("1000/{bytes}")), |b| {
        b.iter(|| {
            for _ in 0..1000 {
                let p = B::alloc(black_box(bytes));
                // SAFETY: a live block of `bytes`.
                unsafe { p.as_ptr().write(1) };
                ps.push(p);
            }
            for p in ps.drain(..) {
                // SAFETY: from `alloc(bytes)`, freed once.
                unsafe { B::free(p, bytes) };
            }
        })
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    for bytes in [140, 190] {
        run::<Slab>(c, bytes);
        run::<Mimalloc>(c, bytes);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
