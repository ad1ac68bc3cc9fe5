//! `--report-memory`: what each engine holds per key and per extra version,
//! measured, not reasoned: the bytes the driver's global allocator hands
//! out (counted by [`Counting`], a wrapper around it), plus the bytes of
//! the live blocks of the store's version slab (its own mapping, which the
//! allocator never sees: `bench_api::version_slab`), and the process's
//! resident set, before the throughput runs.
//!
//! Per engine, on a fresh instance: load `--keys` keys of `--key-size` bytes
//! (one version each, as read-ts loads them), then, with a reader holding its snapshot so nothing
//! can be pruned, write every key once more (a second version each). The
//! report gives the allocator's bytes per key after the load, per extra
//! version after the second pass, and the growth of the resident set over
//! each; LMDB (whose data lives in its memory map, not the heap) reports its
//! used pages instead of allocator bytes, beside the same resident-set growth.

use crate::keys::{load_into, table_of, KeyBuf};
use serde::Serialize;
use snapshot_engine::bench_api::{self, SlabStats};
use snapshot_engine::with_machinery::{Engine, LockFree};
use snapshot_engine::{CommitOptions, EngineConfig, Table, TableOptions, TxnOptions};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Counting is on (set once, before the memory pass, and off after it).
static ON: AtomicBool = AtomicBool::new(false);
/// Bytes handed out minus bytes given back while counting was on.
static LIVE: AtomicI64 = AtomicI64::new(0);

/// The driver's global allocator with a byte count: while counting is on,
/// every allocation adds the size it really holds (mimalloc's usable size,
/// size-class rounding included; the requested size on the system
/// allocator) and every free subtracts it. Off, it costs one Relaxed load
/// per call.
pub struct Counting<A>(pub A);

/// The bytes a block of layout `l` at `p` really holds.
pub trait Usable {
    /// # Safety
    /// `p` is a live block of this allocator with layout `l`.
    unsafe fn usable(&self, p: *mut u8, l: Layout) -> usize;
}

#[cfg(feature = "mimalloc")]
impl Usable for mimalloc::MiMalloc {
    unsafe fn usable(&self, p: *mut u8, _l: Layout) -> usize {
        // SAFETY: the caller passes a live block of this allocator.
        unsafe { self.usable_size(p) }
    }
}

impl Usable for std::alloc::System {
    unsafe fn usable(&self, _p: *mut u8, l: Layout) -> usize {
        l.size()
    }
}

#[inline]
fn add(n: usize) {
    // Relaxed: a statistic, read after the threads that moved it joined.
    LIVE.fetch_add(n as i64, Ordering::Relaxed);
}

#[inline]
fn sub(n: usize) {
    // Relaxed: as in `add`.
    LIVE.fetch_sub(n as i64, Ordering::Relaxed);
}

#[inline]
fn on() -> bool {
    // Relaxed: set by the main thread before the pass it measures starts.
    ON.load(Ordering::Relaxed)
}

// SAFETY: every call is forwarded to the wrapped allocator unchanged; the
// wrapper only counts, touching no block.
unsafe impl<A: GlobalAlloc + Usable> GlobalAlloc for Counting<A> {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's contract.
        let p = unsafe { self.0.alloc(l) };
        if !p.is_null() && on() {
            // SAFETY: `p` was just allocated with `l`.
            add(unsafe { self.0.usable(p, l) });
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's contract.
        let p = unsafe { self.0.alloc_zeroed(l) };
        if !p.is_null() && on() {
            // SAFETY: as in `alloc`.
            add(unsafe { self.0.usable(p, l) });
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if on() {
            // SAFETY: `p` is live until the dealloc below.
            sub(unsafe { self.0.usable(p, l) });
        }
        // SAFETY: forwarded with the caller's contract.
        unsafe { self.0.dealloc(p, l) }
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let counting = on();
        // SAFETY: `p` is live until the realloc below.
        let old = if counting {
            unsafe { self.0.usable(p, l) }
        } else {
            0
        };
        // SAFETY: forwarded with the caller's contract.
        let q = unsafe { self.0.realloc(p, l, new) };
        if !q.is_null() && counting {
            sub(old);
            // SAFETY: `q` is live with the new size and `l`'s alignment.
            add(unsafe {
                self.0
                    .usable(q, Layout::from_size_align_unchecked(new, l.align()))
            });
        }
        q
    }
}

/// Turns the allocator's byte count on or off (the memory pass and the
/// `tables` workload turn it on while they measure).
pub fn count_bytes(on: bool) {
    // The version slab's process-wide bookkeeping (its depot) is made on
    // first use: made here, before counting, it is not charged to the
    // first table or key.
    bench_api::version_slab();
    // Relaxed: set by the main thread before (and after) the pass it
    // measures; the threads it measures start after it.
    ON.store(on, Ordering::Relaxed);
}

/// Bytes handed out minus bytes given back while counting was on, plus
/// the bytes of the version slab's live blocks (counted always, and by
/// their 8-byte granules as the allocator's by its usable sizes): callers
/// take differences.
pub fn live_bytes() -> i64 {
    live_with(&bench_api::version_slab())
}

/// [`live_bytes`] with the slab's figures already taken.
fn live_with(slab: &SlabStats) -> i64 {
    // Relaxed: a statistic, read after the threads that moved it joined.
    LIVE.load(Ordering::Relaxed) + slab.live_bytes as i64
}

/// The process's resident set now, in bytes (`/proc/self/statm`).
pub fn rss_now() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// The process's maximum resident set so far, in bytes.
pub fn max_rss() -> Option<u64> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid out-pointer for one rusage.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    // SAFETY: getrusage filled it when it returned 0.
    (r == 0).then(|| unsafe { ru.assume_init() }.ru_maxrss as u64 * 1024)
}

/// One engine's memory figures.
#[derive(Serialize, Clone, Debug)]
pub struct Mem {
    pub engine: &'static str,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Bytes held per key after the load (allocator bytes; LMDB: used map
    /// pages).
    pub bytes_per_key: f64,
    /// `bytes_per_key` over the raw key and value bytes (key size + value
    /// size).
    pub times_raw: f64,
    /// Bytes added per extra version (same measure).
    pub bytes_per_extra_version: f64,
    /// Resident-set growth over the load, per key.
    pub rss_per_key: Option<f64>,
    /// Resident-set growth over the second pass, per key.
    pub rss_per_extra_version: Option<f64>,
    /// Growth of the version slab's slack (its resident pages less its
    /// live blocks: free blocks, uncarved span rests, partly used pages)
    /// over the load, per key; not in `bytes_per_key`.
    pub slab_slack_per_key: f64,
    /// The same over the second pass, per key.
    pub slab_slack_per_extra_version: f64,
    /// Version blocks that came from the global allocator because the
    /// slab's region was exhausted, over both passes (counted in the bytes
    /// as the allocator's).
    pub slab_fallbacks: u64,
}

struct Probe {
    /// [`live_bytes`]: the allocator's and the slab's live blocks.
    live: i64,
    rss: Option<u64>,
    slab: SlabStats,
}

fn probe() -> Probe {
    // One reading of the slab (its resident pages cost a `mincore` pass)
    // serves both the live bytes and the slack.
    let slab = bench_api::version_slab();
    Probe {
        live: live_with(&slab),
        rss: rss_now(),
        slab,
    }
}

fn per(a: &Probe, b: &Probe, n: u64) -> (f64, Option<f64>) {
    (
        (b.live - a.live) as f64 / n as f64,
        a.rss
            .zip(b.rss)
            .map(|(x, y)| (y as f64 - x as f64) / n as f64),
    )
}

/// The growth of the slab's slack from `a` to `b`, per `n`.
fn slack(a: &Probe, b: &Probe, n: u64) -> f64 {
    let s = |p: &Probe| p.slab.resident_bytes as f64 - p.slab.live_bytes as f64;
    (s(b) - s(a)) / n as f64
}

/// Writes every key once more (in its table: [`table_of`]), 1,000 keys per
/// transaction, committed at 2.
fn second_pass(
    e: &Engine<LockFree>,
    tables: &[Table],
    keys: u64,
    key_size: usize,
    value_size: usize,
) {
    let mut s = e.session().expect("a session for the second pass");
    let value = vec![0x6bu8; value_size];
    let mut kb = KeyBuf::new(key_size);
    let mut k = 0;
    while k < keys {
        let mut t = s.begin(&TxnOptions::default()).expect("begin");
        for _ in 0..1000.min(keys - k) {
            match table_of(tables, k) {
                None => t.put(kb.at(k), &value),
                Some(tb) => t
                    .table(tb)
                    .expect("a live table of this engine")
                    .put(kb.at(k), &value),
            }
            .expect("second-pass put");
            k += 1;
        }
        t.commit(CommitOptions::at(2)).expect("second-pass commit");
    }
}

/// Lets the collector free what the pass before retired (the hash table's
/// old arrays after growth), so it is not counted against the next pass.
pub fn settle(e: &Engine<LockFree>) {
    for _ in 0..8 {
        e.collect();
    }
}

/// The lock-free engine's figures with the keys spread over `ntables`
/// named tables (0: the default table); the tables' own bytes count.
fn lock_free(keys: u64, key_size: usize, value_size: usize, ntables: usize) -> Mem {
    let p0 = probe();
    let e = Engine::new(EngineConfig::default()).expect("the default config is valid");
    let tables: Vec<Table> = (0..ntables)
        .map(|i| {
            e.create_table(&format!("t{i}"), TableOptions::default())
                .expect("a fresh engine takes t0, t1, ...")
        })
        .collect();
    load_into(
        &e,
        &tables,
        keys,
        key_size,
        value_size,
        &indicatif::ProgressBar::hidden(),
    );
    settle(&e);
    let p1 = probe();
    let mut rs = e.session().expect("the pinning reader's session");
    let mut rt = rs.begin(&TxnOptions::default()).expect("begin");
    rt.take_snapshot().expect("snapshot");
    second_pass(&e, &tables, keys, key_size, value_size);
    settle(&e);
    let p2 = probe();
    let mid = KeyBuf::new(key_size).at(keys / 2).to_vec();
    match table_of(&tables, keys / 2) {
        None => assert_eq!(
            e.chain_len(&mid),
            2,
            "the pinning reader keeps both versions"
        ),
        // The pinning reader still reads the load's value (its first byte
        // is the key's number's low byte; the second pass wrote 0x6b).
        Some(tb) => assert_eq!(
            rt.table(tb)
                .expect("a live table")
                .get(&mid)
                .expect("no prepared updates")
                .map(|v| v[0]),
            Some((keys / 2) as u8),
            "the pinning reader keeps the first version"
        ),
    }
    drop(rt);
    let (bk, rk) = per(&p0, &p1, keys);
    let (bv, rv) = per(&p1, &p2, keys);
    Mem {
        slab_slack_per_key: slack(&p0, &p1, keys),
        slab_slack_per_extra_version: slack(&p1, &p2, keys),
        slab_fallbacks: p2.slab.fallbacks - p0.slab.fallbacks,
        engine: crate::tables::row_name(crate::engines::EngineKind::LockFree, ntables),
        keys,
        key_size,
        value_size,
        bytes_per_key: bk,
        times_raw: bk / (key_size + value_size) as f64,
        bytes_per_extra_version: bv,
        rss_per_key: rk,
        rss_per_extra_version: rv,
    }
}

fn ceiling(keys: u64, value_size: usize) -> Mem {
    let p0 = probe();
    let mut m = crate::ceiling::Map::default();
    crate::ceiling::fill(&mut m, keys, value_size);
    let p1 = probe();
    let (bk, rk) = per(&p0, &p1, keys);
    std::hint::black_box(&m);
    Mem {
        engine: "ceiling",
        keys,
        key_size: crate::keys::MIN_KEY_SIZE,
        value_size,
        bytes_per_key: bk,
        times_raw: bk / (8 + value_size) as f64,
        // A plain map holds one value per key.
        bytes_per_extra_version: f64::NAN,
        rss_per_key: rk,
        rss_per_extra_version: None,
        slab_slack_per_key: 0.0,
        slab_slack_per_extra_version: 0.0,
        slab_fallbacks: 0,
    }
}

/// The memory pass over `engines` (each on a fresh instance, in order), at
/// `keys` keys of `key_size` bytes with `value_size`-byte values. The
/// ceiling's map is keyed by the u64 itself (the CLI refuses it with any
/// other key size). The lock-free engine gives one row per `tables` value
/// (the keys spread over that many named tables; 0: the default table).
pub fn report(
    engines: &[crate::engines::EngineKind],
    keys: u64,
    key_size: usize,
    value_size: usize,
    tables: &[usize],
) -> Vec<Mem> {
    use crate::engines::EngineKind;
    count_bytes(true);
    let mut out = Vec::new();
    for &e in engines {
        match e {
            EngineKind::LockFree => {
                for &n in tables {
                    out.push(lock_free(keys, key_size, value_size, n));
                }
            }
            EngineKind::Ceiling => out.push(ceiling(keys, value_size)),
            #[cfg(feature = "peers")]
            EngineKind::Lmdb => out.push(crate::lmdb::memory(keys, key_size, value_size)),
            _ => {}
        }
    }
    ON.store(false, Ordering::Relaxed);
    out
}

/// The memory table.
pub fn print(ms: &[Mem]) {
    let Some(m0) = ms.first() else { return };
    println!(
        "memory: {} keys of {} bytes with {}-byte values (raw {} bytes a key); per engine on a fresh instance: load, then every key written once more under a pinning reader",
        crate::fmt::fmt_int(m0.keys as f64),
        m0.key_size,
        m0.value_size,
        m0.key_size + m0.value_size
    );
    println!(
        "{:<14} {:>12} {:>8} {:>16} {:>14} {:>12} {:>16} {:>18}",
        "engine",
        "bytes/key",
        "x raw",
        "bytes/+version",
        "+version-value",
        "rss/key",
        "rss/+version",
        "slab slack key/+v"
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
    for m in ms {
        let extra = (!m.bytes_per_extra_version.is_nan()).then_some(m.bytes_per_extra_version);
        println!(
            "{:<14} {:>12.1} {:>8.2} {:>16} {:>14} {:>12} {:>16} {:>18}",
            m.engine,
            m.bytes_per_key,
            m.times_raw,
            f(extra),
            f(extra.map(|x| x - m.value_size as f64)),
            f(m.rss_per_key),
            f(m.rss_per_extra_version),
            format!(
                "{:.1}/{:.1}",
                m.slab_slack_per_key, m.slab_slack_per_extra_version
            ),
        );
        if m.slab_fallbacks != 0 {
            println!(
                "{}: {} versions came from the allocator (the version slab's region was full)",
                m.engine, m.slab_fallbacks
            );
        }
    }
    println!(
        "bytes: the allocator's usable bytes plus the version slab's live blocks (lmdb: used map pages x 4096); slab slack: the growth of the slab's resident pages less its live blocks, not in bytes; +version-value: what an extra version costs beyond its value bytes; rss: resident-set growth; rss and slab slack are clean only for the first engine (later ones reuse what earlier ones freed, the slab's pages included, so their slack can be negative; run one engine per process for them); process max RSS so far {} MB\n",
        max_rss().map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1e6))
    );
}
