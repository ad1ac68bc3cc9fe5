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
//!   A third pass writes every key again (the second extra version). The
//!   real index alone (its hash index, then hash index and ordered view,
//!   through `snapshot_engine::bench_api`) splits today's bytes a key.
//!   Then the same allocator's bytes for `N` single allocations of the
//!   sizes candidate layouts would make, to show its size-class rounding
//!   (the prototypes: a version with today's 40-byte header, with a
//!   16-byte header, and one allocation holding the key's entry, key and
//!   newest version).
//! * **reads at stable**: the `read-ts` steady state, single-threaded and
//!   deterministic: random updates with rising commit timestamps, stable
//!   trailing the newest commit by a lag of one or ten updates per key
//!   (moved every 100 commits), oldest a tenth of the lag below it, pruning on;
//!   after three lags of updates, each further update is followed by two
//!   reads at stable; then reads at the newest commit. Each with the
//!   versions a read examined (the store's `Stats::versions_read`).
//!   Every read's value is checked against a reference history (values
//!   carry their commit timestamp).
//! * **the prototype** (`store_layout/proto.rs`, its module docs): the
//!   candidate compact layout, self-contained, with the same key sets, the
//!   same passes and the same read regimes, under hash-table growth
//!   policies (today's, a denser one, and for 12-byte slots a denser one
//!   grown by an eighth), with 8-byte slots, 16-byte slots
//!   (node and side record) and 12-byte slots of slab indices (node, head,
//!   side record); bytes from the same allocator, and per read its
//!   dependent loads (table lines, node, side record, version records,
//!   transaction records, chunk-table entries). Every key and version it
//!   stores is read back and checked. Read times are printed for context
//!   only (one shared machine: noisy; the real store's include a
//!   transaction's begin and end, the prototype's do not).
//!
//! `STORE_LAYOUT_PASSES` (default 3) sets the memory passes (1: one
//! version a key only), `STORE_LAYOUT_TODAY=0` leaves the real store out
//! (the prototype alone), `STORE_LAYOUT_VARIANTS=7/8,7/8+12B` picks
//! prototype variants by name (`3/4`, `7/8`, `7/8+hint`, `7/8+12B`,
//! `3/4+12B`, `7/8x9/8+12B`: grown by an eighth; all by default).

#[path = "store_layout/proto.rs"]
mod proto;

use mimalloc::MiMalloc;
use snapshot_engine::bench_api::{HashIndexHook, IndexHook};
use snapshot_engine::{CommitOptions, Engine, EngineConfig, TimestampUpdate, TxnOptions};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Instant;

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

/// Frees what earlier passes retired to crossbeam-epoch's default
/// collector (the store's), so that it is not taken off the next count.
fn settle() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
    }
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

    /// A value of `fill` bytes carrying `ts` in its first eight.
    fn value(&self, ts: u64, fill: u8) -> Vec<u8> {
        let mut v = vec![fill; self.value];
        v[..8].copy_from_slice(&ts.to_le_bytes());
        v
    }
}

/// The commit timestamp a value carries.
fn ts_of(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("values hold 8 bytes"))
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
    let mut i = 0;
    while i < n {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let v = shape.value(*ts + 1, fill);
        for k in i..(i + 1000).min(n) {
            t.put(shape.key(k), &v).unwrap();
        }
        *ts += 1;
        t.commit(at(*ts)).unwrap();
        i += 1000;
    }
}

fn memory(shape: Shape, n: u64, passes: u8) {
    settle();
    let before = (live(), rss());
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut ts = 0;
    load(&e, shape, n, &mut ts, 1);
    settle();
    let loaded = (live(), rss());
    // A reader holding its snapshot: the later passes prune nothing.
    let mut rs = e.session().unwrap();
    let mut held = rs.begin(&TxnOptions::default()).unwrap();
    assert!(held.get(shape.key(0)).unwrap().is_some());
    let mut extra = Vec::new();
    let mut last = loaded.0;
    for pass in 2..=passes {
        load(&e, shape, n, &mut ts, pass);
        settle();
        extra.push(format!("+{:.1}", (live() - last) as f64 / n as f64));
        last = live();
    }
    let second = (live(), rss());
    // Spot checks (1 key in 64): the held snapshot reads the first pass,
    // a new one the last.
    let mut fs = e.session().unwrap();
    let mut fresh = fs.begin(&TxnOptions::default()).unwrap();
    for k in (0..n).step_by(64) {
        assert_eq!(held.get(shape.key(k)).unwrap().unwrap()[8], 1);
        assert_eq!(fresh.get(shape.key(k)).unwrap().unwrap()[8], passes);
    }
    drop(fresh);
    drop(fs);
    let per_key = (loaded.0 - before.0) as f64 / n as f64;
    println!(
        "memory today {}/{} keys={n}: {per_key:.1} B a key ({:.2}x the {} raw), {} B per extra version (value {}); rss +{:.1} B a key, +{:.1} per version",
        shape.key,
        shape.value,
        per_key / shape.raw() as f64,
        shape.raw(),
        extra.join(", then "),
        shape.value,
        (loaded.1.saturating_sub(before.1)) as f64 / n as f64,
        (second.1.saturating_sub(loaded.1)) as f64 / n as f64 / f64::from(passes.max(2) - 1),
    );
    drop(held);
    drop(rs);
    drop(e);
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
    // Today: a version is a 40-byte header and the value; the key's node
    // (length, key, entry) is carved exact-size from 4 KiB chunks.
    let today = class(40 + v);
    let node = (4 + k).next_multiple_of(8) + 40;
    // A 16-byte header (status word and one link; writer id and length
    // elsewhere) and the value.
    let compact = class(16 + v);
    // The key's entry (40 bytes: head, summary, finger, floor, hint), its
    // key, and its newest version (16-byte status, 8-byte length) in one
    // allocation.
    let inline = 40 + k + 16 + 8 + v;
    println!(
        "classes {k}/{v}: version today {}+{v} -> {today} B (+{node} B node); 16-byte header {} -> {compact} B; entry+key+newest version {inline} -> {} B, exact in a slab {} B",
        40,
        16 + v,
        class(inline),
        inline.next_multiple_of(8),
    );
    let (node, side, record) = proto::sizes(k, v);
    println!(
        "proto blocks {k}/{v}: node (word, lengths, key, inline value) {node} B, side record {side} B, extra version record {record} B (slab granules of 8)"
    );
}

/// The bytes live after `make()` holds keys `0..n` of `shape`, inserted
/// with `insert`, measured before it is dropped.
fn held_by<H>(shape: Shape, n: u64, make: impl FnOnce() -> H, insert: impl Fn(&H, &[u8])) -> i64 {
    settle();
    let b = live();
    let h = make();
    for k in 0..n {
        insert(&h, &shape.key(k));
    }
    settle();
    let bytes = live() - b;
    drop(h);
    bytes
}

/// Today's index alone: the hash index (nodes and slots), then the whole
/// index (and the ordered view), bytes a key.
fn index_today(shape: Shape, n: u64) {
    let hash = held_by(shape, n, HashIndexHook::new, |h, k| {
        h.insert(k);
    });
    let whole = held_by(shape, n, IndexHook::new, IndexHook::insert);
    println!(
        "index today {}/{} keys={n}: {:.1} B a key: hash index (nodes, slots) {:.1}, ordered view {:.1}",
        shape.key,
        shape.value,
        whole as f64 / n as f64,
        hash as f64 / n as f64,
        (whole - hash) as f64 / n as f64,
    );
}

/// The prototype's memory: the same key set and passes as [`memory`].
fn proto_memory(shape: Shape, n: u64, passes: u8, policy: proto::Policy, name: &str) {
    settle();
    let b = live();
    let mut st = proto::Store::new(policy);
    let mut ts = 0;
    let load = |st: &mut proto::Store, fill: u8, ts: &mut u64| {
        let mut i = 0;
        while i < n {
            let mut t = st.begin();
            let v = shape.value(*ts + 1, fill);
            for k in i..(i + 1000).min(n) {
                st.put(&mut t, &shape.key(k), Some(&v)).unwrap();
            }
            *ts += 1;
            st.commit(t, *ts);
            i += 1000;
        }
        st.freeze();
    };
    load(&mut st, 1, &mut ts);
    let loaded = live();
    let first = st.parts;
    let (keys, cap) = st.table_stats();
    let (slots, ordered, slab, pending) = (
        st.slot_bytes(),
        st.ordered_bytes(),
        st.slab_bytes(),
        st.pending_bytes(),
    );
    let chunk_tables = st.chunk_tables();
    // A reader holding its snapshot: nothing frozen or pruned after this.
    let held = st.view(0);
    st.held_xmin = held.xmin;
    let mut extra = Vec::new();
    let mut last = loaded;
    for pass in 2..=passes {
        load(&mut st, pass, &mut ts);
        extra.push(format!("+{:.1}", (live() - last) as f64 / n as f64));
        last = live();
    }
    // Every key and version read back: the held snapshot reads the first
    // pass, each pass's timestamp its own, a new snapshot the last.
    let newest = st.view(0);
    let mut loads = proto::Loads::default();
    for k in 0..n {
        let key = shape.key(k);
        let v = st.get(&key, &held, &mut loads).unwrap().unwrap();
        assert_eq!((v[8], v.len()), (1, shape.value));
        let v = st.get(&key, &newest, &mut loads).unwrap().unwrap();
        assert_eq!(v[8], passes);
        for pass in 1..=passes {
            // Pass `p` committed at timestamps (p-1)*ceil(n/1000)+1...
            let at = u64::from(pass) * n.div_ceil(1000);
            let v = st.get(&key, &st.view(at), &mut loads).unwrap().unwrap();
            assert_eq!(v[8], pass);
        }
    }
    let mut seen = 0u64;
    let mut prev = Vec::new();
    st.scan(|k| {
        assert!(prev.as_slice() < k, "the ordered view is sorted");
        prev = k.to_vec();
        seen += 1;
    });
    assert_eq!(seen, n);
    let nf = n as f64;
    let per_key = (loaded - b) as f64 / nf;
    let used = first.nodes + first.sides + first.records;
    println!(
        "memory proto-{name} {}/{} keys={n}: {per_key:.1} B a key ({:.2}x the {} raw), {} B per extra version (value {}); a key: node {:.1}, slots {:.1} (load {:.3}), ordered view {:.1}, slab slack {:.1}, pending {:.1}; after the passes {} side records, {} records, {} transactions unfrozen holding {:.1} B a key",
        shape.key,
        shape.value,
        per_key / shape.raw() as f64,
        shape.raw(),
        extra.join(", then "),
        shape.value,
        first.nodes as f64 / nf,
        slots as f64 / nf,
        keys as f64 / cap as f64,
        ordered as f64 / nf,
        (slab - used) as f64 / nf,
        pending as f64 / nf,
        st.parts.side_count,
        st.parts.record_count,
        st.pending(),
        st.pending_bytes() as f64 / nf,
    );
    if policy.slot12 {
        // One version a key: the chunk tables then; the chunk counts after
        // the passes too (the index range's use).
        let (tables, node_chunks, rec_chunks, by_addr) = chunk_tables;
        let (_, node_after, rec_after, _) = st.chunk_tables();
        let parts = (first.nodes + slots + ordered + (slab - used) + pending + tables + by_addr)
            as f64
            / nf;
        println!(
            "memory proto-{name} {}/{} keys={n}: {per_key:.2} B a key, {:.4}x; chunk tables {:.3} B a key ({node_chunks} node chunks, {rec_chunks} record chunks; after the passes {node_after} and {rec_after}, of {} each), the records slab's address-ordered chunk list {:.3}; rest (allocator rounding of the big arrays, the store's own fields) {:.3}",
            shape.key,
            shape.value,
            per_key / shape.raw() as f64,
            tables as f64 / nf,
            proto::IDX_CHUNKS,
            by_addr as f64 / nf,
            per_key - parts,
        );
    }
    drop(st);
}

/// Commit timestamps per key, to check every read against.
struct History(Vec<Vec<u64>>);

impl History {
    fn new(n: u64) -> History {
        History((0..n).map(|_| Vec::new()).collect())
    }

    /// The commit timestamp a read of `k` at `t` must find.
    fn at(&self, k: u64, t: u64) -> u64 {
        let h = &self.0[k as usize];
        h[h.partition_point(|&c| c <= t) - 1]
    }
}

/// The `read-ts` steady state's driver, shared by both stores: `write(k,
/// ts)` commits one update of key `k` at `ts` (`stable`, `oldest` moved by
/// `set` every 100 commits), `read(k, t)` reads `k` at `t` and returns the
/// commit timestamp it found.
struct Sim {
    n: u64,
    lag: u64,
    rng: u64,
    ts: u64,
    stable: u64,
    hist: History,
}

impl Sim {
    fn new(n: u64, per_key: u64) -> Sim {
        Sim {
            n,
            lag: n * per_key,
            rng: 0x9E37_79B9_7F4A_7C15,
            ts: 0,
            stable: 1,
            hist: History::new(n),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % self.n
    }

    fn oldest(&self) -> u64 {
        self.stable.saturating_sub(self.lag / 10).max(1)
    }

    /// Loads every key (transactions of 1,000 at one timestamp each).
    fn load(&mut self, mut txn: impl FnMut(std::ops::Range<u64>, u64)) {
        let mut i = 0;
        while i < self.n {
            let end = (i + 1000).min(self.n);
            self.ts += 1;
            txn(i..end, self.ts);
            for k in i..end {
                self.hist.0[k as usize].push(self.ts);
            }
            i = end;
        }
    }

    /// One update; returns whether stable moved.
    fn update(&mut self, write: &mut impl FnMut(u64, u64)) -> bool {
        let k = self.next();
        self.ts += 1;
        write(k, self.ts);
        self.hist.0[k as usize].push(self.ts);
        if self.ts.is_multiple_of(100) && self.ts > self.lag && self.ts - self.lag > self.stable {
            self.stable = self.ts - self.lag;
            return true;
        }
        false
    }

    /// Three lags of updates, then a lag of updates each followed by two
    /// reads at stable (timed), then `n` reads at the newest commit
    /// (timed); returns the nanoseconds a read of each kind.
    fn run(
        &mut self,
        write: &mut impl FnMut(u64, u64),
        set: &mut impl FnMut(u64, u64),
        read: &mut impl FnMut(u64, u64, bool) -> u64,
    ) -> (f64, f64) {
        set(self.stable, self.oldest());
        for _ in 0..3 * self.lag {
            if self.update(write) {
                set(self.stable, self.oldest());
            }
        }
        let mut spent = std::time::Duration::ZERO;
        for _ in 0..self.n {
            if self.update(write) {
                set(self.stable, self.oldest());
            }
            for _ in 0..2 {
                let k = self.next();
                let t = Instant::now();
                let found = read(k, self.stable, true);
                spent += t.elapsed();
                assert_eq!(found, self.hist.at(k, self.stable), "read of {k} at stable");
            }
        }
        let at_stable = spent.as_nanos() as f64 / (2 * self.n) as f64;
        let newest = self.ts;
        let mut spent = std::time::Duration::ZERO;
        for _ in 0..self.n {
            let k = self.next();
            let t = Instant::now();
            let found = read(k, newest, false);
            spent += t.elapsed();
            assert_eq!(found, self.hist.at(k, newest), "read of {k} at the newest");
        }
        (at_stable, spent.as_nanos() as f64 / self.n as f64)
    }
}

fn reads(shape: Shape, n: u64, per_key: u64) {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut sim = Sim::new(n, per_key);
    let mut s = e.session().unwrap();
    sim.load(|keys, ts| {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let v = shape.value(ts, 1);
        for k in keys {
            t.put(shape.key(k), &v).unwrap();
        }
        t.commit(at(ts)).unwrap();
    });
    let mut write = |k: u64, ts: u64| {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(shape.key(k), shape.value(ts, 3)).unwrap();
        t.commit(at(ts)).unwrap();
    };
    let mut set = |stable: u64, oldest: u64| {
        e.set_timestamps(TimestampUpdate::stable(stable).and_oldest(oldest))
            .unwrap();
    };
    let mut r = e.session().unwrap();
    let mut counts = [(0u64, 0u64); 2];
    let mut read = |k: u64, ts: u64, stable: bool| {
        let before = e.stats();
        let mut t = r.begin(&TxnOptions::at(ts)).unwrap();
        let v = t.get(shape.key(k)).unwrap().expect("every key is loaded");
        drop(t);
        let after = e.stats();
        let c = &mut counts[usize::from(!stable)];
        c.0 += after.versions_read - before.versions_read;
        c.1 += after.reads - before.reads;
        ts_of(&v)
    };
    let (ns_stable, ns_newest) = sim.run(&mut write, &mut set, &mut read);
    let lag = sim.lag;
    // Dependent levels: the slot, then the node with the head version
    // prefetched beside it (the slot's head hint), then each further
    // version. A read at stable whose head the summary rejects unloaded
    // starts at the finger or hint, a level below the node: at most
    // 2 + examined.
    for (c, what, ns, levels) in [
        (counts[0], "at stable", ns_stable, "at most 2 +"),
        (counts[1], "at the newest commit", ns_newest, "1 +"),
    ] {
        let examined = c.0 as f64 / c.1 as f64;
        let l = if levels == "1 +" { 1.0 } else { 2.0 };
        println!(
            "reads today {}/{} keys={n} lag={lag}: {what} {examined:.3} versions examined a read; dependent levels {levels} {examined:.3} = {:.3}; {ns:.0} ns a read with its transaction (noisy)",
            shape.key,
            shape.value,
            l + examined,
        );
    }
}

/// The prototype in the same regime as [`reads`].
fn proto_reads(shape: Shape, n: u64, per_key: u64, policy: proto::Policy, name: &str) {
    let st = std::cell::RefCell::new(proto::Store::new(policy));
    let mut sim = Sim::new(n, per_key);
    sim.load(|keys, ts| {
        let mut st = st.borrow_mut();
        let mut t = st.begin();
        let v = shape.value(ts, 1);
        for k in keys {
            st.put(&mut t, &shape.key(k), Some(&v)).unwrap();
        }
        st.commit(t, ts);
    });
    let mut write = |k: u64, ts: u64| {
        let mut st = st.borrow_mut();
        let mut t = st.begin();
        st.put(&mut t, &shape.key(k), Some(&shape.value(ts, 3)))
            .unwrap();
        st.commit(t, ts);
    };
    let mut set = |stable: u64, oldest: u64| st.borrow_mut().set_timestamps(stable, oldest);
    let mut loads = [proto::Loads::default(); 2];
    let mut reads = [0u64; 2];
    // The writers' walks from the first measured read on (the steady state).
    let mut mark = None;
    let mut read = |k: u64, ts: u64, stable: bool| {
        let st = st.borrow();
        if mark.is_none() {
            mark = Some((st.writer_loads, st.txns(), st.slot_stores));
        }
        let view = st.view(ts);
        let i = usize::from(!stable);
        reads[i] += 1;
        let v = st.get(&shape.key(k), &view, &mut loads[i]);
        ts_of(v.expect("every key is loaded").expect("no tombstones"))
    };
    let (ns_stable, ns_newest) = sim.run(&mut write, &mut set, &mut read);
    let st = st.into_inner();
    let lag = sim.lag;
    let (from, txns, stores) = mark.expect("reads ran");
    let writes = (st.txns() - txns) as f64;
    for (l, r, what, ns) in [
        (loads[0], reads[0], "at stable", ns_stable),
        (loads[1], reads[1], "at the newest commit", ns_newest),
    ] {
        let f = |x: u64| x as f64 / r as f64;
        println!(
            "reads proto-{name} {}/{} keys={n} lag={lag}: {what} {:.3} dependent levels a read; loads {:.3} = table lines {:.3} + node {:.3} + side {:.3} ({:.3} through the slot's hint) + records {:.3} + txn records {:.3}; {ns:.0} ns a read (noisy)",
            shape.key,
            shape.value,
            f(l.levels),
            f(l.total()),
            f(l.table),
            f(l.node),
            f(l.side),
            f(l.side_hinted),
            f(l.record),
            f(l.txn),
        );
        if policy.slot12 {
            println!(
                "reads proto-{name} {}/{} keys={n} lag={lag}: {what}: chunk-table loads {:.3} a read, chunk-table steps {:.3}: {:.3} dependent loads a read with them; head records loaded beside the node {:.3}",
                shape.key,
                shape.value,
                f(l.chunk),
                f(l.chunk_levels),
                f(l.levels + l.chunk_levels),
                f(l.head_hinted),
            );
        }
    }
    println!(
        "writes proto-{name} {}/{} keys={n} lag={lag}: a commit in the measured phase: {:.3} records loaded by the freeze and prune walks, {:.3} side records by the stable sweep; {} side records and {} records live, {} versions retired",
        shape.key,
        shape.value,
        (st.writer_loads.record - from.record) as f64 / writes,
        (st.writer_loads.side - from.side) as f64 / writes,
        st.parts.side_count,
        st.parts.record_count,
        st.retired,
    );
    if policy.slot12 {
        println!(
            "writes proto-{name} {}/{} keys={n} lag={lag}: a commit in the measured phase: {:.3} stores of a slot's head word, {:.3} of its side word",
            shape.key,
            shape.value,
            (st.slot_stores.0 - stores.0) as f64 / writes,
            (st.slot_stores.1 - stores.1) as f64 / writes,
        );
    }
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
    let passes: u8 = std::env::var("STORE_LAYOUT_PASSES")
        .map_or(3, |p| p.parse().expect("STORE_LAYOUT_PASSES: 1 to 9"));
    assert!((1..=9).contains(&passes), "STORE_LAYOUT_PASSES: 1 to 9");
    // Counting stays on: every block's free is taken off its own count.
    counting(true);
    let today = std::env::var("STORE_LAYOUT_TODAY").map_or(true, |v| v != "0");
    // `STORE_LAYOUT_VARIANTS` (names, comma-separated) picks prototype
    // variants; all by default.
    let picked = std::env::var("STORE_LAYOUT_VARIANTS").ok();
    let policies: Vec<(proto::Policy, &str)> = [
        (proto::Policy::TODAY, "3/4"),
        (proto::Policy::DENSE, "7/8"),
        (proto::Policy::DENSE_HINT, "7/8+hint"),
        (proto::Policy::DENSE_SLOT12, "7/8+12B"),
        (proto::Policy::TODAY_SLOT12, "3/4+12B"),
        (proto::Policy::DENSER_SLOT12, "7/8x9/8+12B"),
    ]
    .into_iter()
    .filter(|(_, name)| {
        picked
            .as_deref()
            .is_none_or(|p| p.split(',').any(|v| v.trim() == *name))
    })
    .collect();
    for shape in SHAPES {
        prototypes(shape);
        for &n in &sizes {
            if today {
                memory(shape, n, passes);
                index_today(shape, n);
            }
            for &(policy, name) in &policies {
                proto_memory(shape, n, passes, policy, name);
            }
        }
    }
    if std::env::var_os("STORE_LAYOUT_SKIP_READS").is_none() {
        // One update per key per lag, and ten (`read-ts`'s defaults:
        // 100,000 keys, a lag of 1,000,000).
        for per_key in [1, 10] {
            for shape in SHAPES {
                if today {
                    reads(shape, 100_000, per_key);
                }
                for &(policy, name) in &policies {
                    proto_reads(shape, 100_000, per_key, policy, name);
                }
            }
        }
    }
}
