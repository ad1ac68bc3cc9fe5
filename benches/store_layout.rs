//! The store's layout in bytes and in versions examined, not in time:
//! `cargo bench --bench store_layout` (`STORE_LAYOUT_KEYS=100000,1000000`
//! picks the sizes, `STORE_LAYOUT_SKIP_READS=1` the memory part alone).
//!
//! * **memory**: for each key shape (8-byte keys with 100-byte values, as
//!   `read-ts` loads them, and 24-byte keys with 150-byte values) and size,
//!   a fresh engine is loaded with one version a key, then every key is
//!   written once more while a reader holds its snapshot (nothing can be
//!   pruned). Bytes are the global allocator's (mimalloc, as the driver's)
//!   usable sizes, counted around each pass, per key and per extra version,
//!   beside the raw key and value bytes; and the resident set's growth.
//!   Then the same allocator's bytes for `N` single allocations of the
//!   sizes candidate layouts would make, to show its size-class rounding
//!   (the prototypes: a version with today's 48-byte header, with a
//!   16-byte header, and one allocation holding the key's entry, key and
//!   newest version).
//! * **reads at stable**: the `read-ts` steady state, single-threaded and
//!   deterministic: random updates with rising commit timestamps, stable
//!   trailing the newest commit by a lag of one or ten updates per key
//!   (moved every 100 commits), oldest a tenth of the lag below it, pruning on;
//!   after three lags of updates, each further update is followed by two
//!   reads at stable; then reads at the newest commit. Each with the
//!   versions a read examined (the store's `Stats::versions_read`).

use mimalloc::MiMalloc;
use snapshot_engine::{CommitOptions, Engine, EngineConfig, TimestampUpdate, TxnOptions};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Counting is on.
static ON: AtomicBool = AtomicBool::new(false);
/// Usable bytes handed out minus those given back while counting was on.
static LIVE: AtomicI64 = AtomicI64::new(0);

/// mimalloc with a byte count (usable sizes, size-class rounding included).
struct Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

// SAFETY: every call is forwarded to mimalloc unchanged; the wrapper only
// counts, touching no block.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's contract.
        let p = unsafe { MiMalloc.alloc(l) };
        // Relaxed: a switch the main thread sets between passes.
        if !p.is_null() && ON.load(Ordering::Relaxed) {
            // SAFETY: `p` is a live mimalloc block. Relaxed: a statistic.
            LIVE.fetch_add(unsafe { MiMalloc.usable_size(p) } as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // Relaxed: as in `alloc`.
        if ON.load(Ordering::Relaxed) {
            // SAFETY: `p` is live until the dealloc below. Relaxed: a
            // statistic.
            LIVE.fetch_sub(unsafe { MiMalloc.usable_size(p) } as i64, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's contract.
        unsafe { MiMalloc.dealloc(p, l) }
    }
}

fn counting(on: bool) {
    // Relaxed: read by this thread's allocations only (the engine runs no
    // threads of its own in memory).
    ON.store(on, Ordering::Relaxed);
}

fn live() -> i64 {
    // Relaxed: a statistic of this thread's own allocations.
    LIVE.load(Ordering::Relaxed)
}

fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .map_or(0, |p| p * 4096)
}

#[derive(Clone, Copy)]
struct Shape {
    key: usize,
    value: usize,
}

impl Shape {
    fn key(&self, i: u64) -> Vec<u8> {
        let mut k = vec![b'k'; self.key];
        let n = self.key.min(8);
        k[self.key - n..].copy_from_slice(&i.to_be_bytes()[8 - n..]);
        k
    }

    fn raw(&self) -> usize {
        self.key + self.value
    }
}

const SHAPES: [Shape; 2] = [
    Shape { key: 8, value: 100 },
    Shape {
        key: 24,
        value: 150,
    },
];

fn at(ts: u64) -> CommitOptions {
    CommitOptions::at(ts)
}

/// Loads `n` keys of `shape`, one version each, in transactions of 1,000.
fn load(e: &Engine, shape: Shape, n: u64, ts: &mut u64, fill: u8) {
    let mut s = e.session().unwrap();
    let v = vec![fill; shape.value];
    let mut i = 0;
    while i < n {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in i..(i + 1000).min(n) {
            t.put(shape.key(k), &v).unwrap();
        }
        *ts += 1;
        t.commit(at(*ts)).unwrap();
        i += 1000;
    }
}

fn memory(shape: Shape, n: u64) {
    let before = (live(), rss());
    counting(true);
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut ts = 0;
    load(&e, shape, n, &mut ts, 1);
    let loaded = (live(), rss());
    // A reader holding its snapshot: the second pass prunes nothing.
    let mut rs = e.session().unwrap();
    let mut held = rs.begin(&TxnOptions::default()).unwrap();
    assert!(held.get(shape.key(0)).unwrap().is_some());
    load(&e, shape, n, &mut ts, 2);
    let second = (live(), rss());
    counting(false);
    let per_key = (loaded.0 - before.0) as f64 / n as f64;
    let per_version = (second.0 - loaded.0) as f64 / n as f64;
    println!(
        "memory {}/{} keys={n}: {per_key:.1} B a key ({:.2}x the {} raw), +{per_version:.1} B per extra version (value {}); rss +{:.1} B a key, +{:.1} per version",
        shape.key,
        shape.value,
        per_key / shape.raw() as f64,
        shape.raw(),
        shape.value,
        (loaded.1.saturating_sub(before.1)) as f64 / n as f64,
        (second.1.saturating_sub(loaded.1)) as f64 / n as f64,
    );
    drop(held);
    drop(rs);
    counting(true);
    drop(e);
    counting(false);
}

/// Bytes mimalloc holds for one block of `size` bytes (its size class).
fn class(size: usize) -> usize {
    let l = Layout::from_size_align(size, 8).unwrap();
    // SAFETY: a non-zero layout; the block is freed right away.
    unsafe {
        let p = MiMalloc.alloc(l);
        assert!(!p.is_null());
        let u = MiMalloc.usable_size(p);
        MiMalloc.dealloc(p, l);
        u
    }
}

fn prototypes(shape: Shape) {
    let (k, v) = (shape.key, shape.value);
    // Today: a version is a 48-byte header and the value; the key's node is
    // one 64-byte line from 4 KiB chunks (an out-of-line key past 22 bytes).
    let today = class(48 + v);
    let heap_key = if k > 22 { class(k) } else { 0 };
    // A 16-byte header (status word and one link; writer id and length
    // elsewhere) and the value.
    let compact = class(16 + v);
    // The key's entry (40 bytes: head, summary, finger, floor, hint), its
    // key, and its newest version (16-byte status, 8-byte length) in one
    // allocation.
    let inline = 40 + k + 16 + 8 + v;
    println!(
        "classes {k}/{v}: version today {}+{v} -> {today} B (+{heap_key} B key block); 16-byte header {} -> {compact} B; entry+key+newest version {inline} -> {} B, exact in a slab {} B",
        48,
        16 + v,
        class(inline),
        inline.next_multiple_of(8),
    );
}

fn reads(shape: Shape, n: u64, per_key: u64) {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut ts = 0;
    load(&e, shape, n, &mut ts, 1);
    let mut s = e.session().unwrap();
    let v = vec![3u8; shape.value];
    // Lag: `per_key` updates per key between stable and the newest commit.
    let lag = n * per_key;
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut stable = 1;
    let set = |e: &Engine, stable: u64| {
        let oldest = stable.saturating_sub(lag / 10).max(1);
        e.set_timestamps(TimestampUpdate::stable(stable).and_oldest(oldest))
            .unwrap();
    };
    set(&e, stable);
    let mut update = |e: &Engine, s: &mut snapshot_engine::Session<'_>, k: u64| {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(shape.key(k), &v).unwrap();
        ts += 1;
        t.commit(at(ts)).unwrap();
        if ts % 100 == 0 && ts > lag && ts - lag > stable {
            stable = ts - lag;
            set(e, stable);
        }
        (stable, ts)
    };
    // Three lags of updates: the chains reach their steady state.
    for _ in 0..3 * lag {
        let k = next() % n;
        update(&e, &mut s, k);
    }
    // Then a lag of updates, each followed by two reads at stable, as
    // `read-ts` readers interleave with its writers.
    let mut r = e.session().unwrap();
    let read = |r: &mut snapshot_engine::Session<'_>, k: u64, at: u64| {
        let mut t = r.begin(&TxnOptions::at(at)).unwrap();
        assert!(t.get(shape.key(k)).unwrap().is_some());
    };
    let before = e.stats();
    let mut newest = 0;
    for _ in 0..n {
        let k = next() % n;
        let (stable, last) = update(&e, &mut s, k);
        newest = last;
        for _ in 0..2 {
            let k = next() % n;
            read(&mut r, k, stable);
        }
    }
    let after = e.stats();
    println!(
        "reads {}/{} keys={n} lag={lag}: at stable {:.3} versions examined a read",
        shape.key,
        shape.value,
        (after.versions_read - before.versions_read) as f64 / (after.reads - before.reads) as f64
    );
    let before = e.stats();
    for _ in 0..n {
        let k = next() % n;
        read(&mut r, k, newest);
    }
    let after = e.stats();
    println!(
        "reads {}/{} keys={n} lag={lag}: at the newest commit {:.3} versions examined a read",
        shape.key,
        shape.value,
        (after.versions_read - before.versions_read) as f64 / (after.reads - before.reads) as f64
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes
    // nothing that asks for a run: build only then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let sizes: Vec<u64> = std::env::var("STORE_LAYOUT_KEYS")
        .unwrap_or_else(|_| "100000,1000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("STORE_LAYOUT_KEYS: a list of key counts")
        })
        .collect();
    for shape in SHAPES {
        prototypes(shape);
        for &n in &sizes {
            memory(shape, n);
        }
    }
    if std::env::var_os("STORE_LAYOUT_SKIP_READS").is_none() {
        // One update per key per lag, and ten (`read-ts`'s defaults:
        // 100,000 keys, a lag of 1,000,000).
        for per_key in [1, 10] {
            for shape in SHAPES {
                reads(shape, 100_000, per_key);
            }
        }
    }
}
