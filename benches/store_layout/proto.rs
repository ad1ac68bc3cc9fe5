//! A prototype of a compact store layout, measured beside the real store by
//! `benches/store_layout.rs`. Not wired into the engine: single-threaded,
//! plain loads and stores where the engine would use atomics (the words
//! have the same sizes), frees at once where the engine would retire to
//! the epoch collector. It stores and reads back every key and version.
//! Not modelled: rollback, prepare and savepoints (every transaction
//! commits), and a key written twice by one transaction (refused).
//!
//! * **Key node**, one allocation from a size-class slab with 8-byte
//!   granules ([`Slab`]): a `word` (below), a 4-byte length word (key length
//!   below 256 and value length below 2^24 - 1, else a long form with two
//!   4-byte lengths), the key bytes and the value bytes of the key's
//!   *inline version*. 8/100: 12 + 108 = 120 bytes; 24/150: 186 -> 192.
//! * **The node's word** is either the inline version's status (the key has
//!   that one version) or, tagged, the address of the key's *side record*
//!   (the key has, or had, more than one).
//! * **Status words** are 8 bytes: a pointer to the writer's shared
//!   [`TxnRecord`] (writer id, state and timestamp: what the machinery's
//!   16-byte `VersionStatus` holds, once per transaction rather than once
//!   per version), or, once the writer is below every snapshot's xmin, the
//!   *frozen* form: committed, with the commit timestamp in the word. A
//!   committed transaction's record waits in a queue with its write set
//!   (node and version of each write) until the horizon's xmin passes it;
//!   then its versions' words are frozen (walking each written key's
//!   linked versions, as the engine would under the key's pruning lock)
//!   and the record freed ([`Store::freeze`]).
//! * **Side record** (40 bytes, allocated when the key gets its second
//!   version): the inline version's status and link, the head (newest
//!   version: a record or the inline one), the head summary (its commit
//!   timestamp), and the *finger*: the version visible at the published
//!   stable timestamp. The stable setter keeps it
//!   ([`Store::set_timestamps`]): before it publishes a new stable it
//!   sweeps the commits at or below it, oldest first, pointing each
//!   written key's finger at its version (O(1) a version; the commit queue
//!   holds node and version for each write until both this sweep and the
//!   freeze have passed it). A reader at a timestamp at or below the
//!   published stable whose bound is below the summary starts at the
//!   finger: one version.
//! * **Extra versions** are records from the slab: a 16-byte header (the
//!   status word, and one link word: the next older version in 48 bits and
//!   the value length in the top 16, with a long form) and the value.
//!   8/100: 116 -> 120 bytes; 24/150: 166 -> 168.
//! * **Inline reuse** (Cicada): once a cut takes the inline version, the
//!   inline bytes are free; the next write whose value fits goes there and
//!   is the head again (in the engine: only after the epoch of the cut).
//! * **Hash slots** are 8 bytes: the node's address in the low 48 bits and
//!   the top 16 bits of the key's hash (no head hint); linear probing, the
//!   load factor and growth set by a [`Policy`]. The policy can add a
//!   second word to each slot, the key's side record address (a hint a
//!   reader loads beside the node, so the side record costs no level of
//!   its own), to price that variant.
//! * **Ordered view**: an exact-size sorted array of node addresses and a
//!   sorted delta of the keys created since, merged at a sixteenth.
//!
//! Every read and write counts its dependent loads ([`Loads`]): hash-table
//! lines, the node, the side record, each record, and each transaction
//! record met on an unfrozen status.

use std::alloc::{self, Layout};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::ptr;

// ---------------------------------------------------------------- slab

/// Allocation granule.
const GRANULE: usize = 8;
/// Slab chunk size: 64 bytes under 64 KiB, as mimalloc (the bench's
/// allocator) serves a request of exactly 64 KiB from its 80 KiB class.
const CHUNK: usize = 64 * 1024 - 64;
/// The largest block served from a size class; larger ones are single
/// allocations.
const SMALL_MAX: usize = 2048;

#[derive(Clone, Copy)]
struct Class {
    free: *mut u8,
    cur: *mut u8,
    end: *mut u8,
}

/// Size classes of 8-byte granules up to [`SMALL_MAX`], each carving
/// [`CHUNK`]-byte chunks and keeping a free list through the freed blocks'
/// first word.
pub struct Slab {
    classes: Vec<Class>,
    chunks: Vec<*mut u8>,
    large: HashMap<usize, Layout>,
}

/// 8-aligned: nothing in a chunk needs more.
fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK, GRANULE).expect("a fixed layout")
}

impl Slab {
    fn new() -> Slab {
        let empty = Class {
            free: ptr::null_mut(),
            cur: ptr::null_mut(),
            end: ptr::null_mut(),
        };
        Slab {
            classes: vec![empty; SMALL_MAX / GRANULE + 1],
            chunks: Vec::new(),
            large: HashMap::new(),
        }
    }

    /// A block of at least `bytes` bytes, 8-aligned.
    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        let size = bytes.max(GRANULE).next_multiple_of(GRANULE);
        if size > SMALL_MAX {
            let l = Layout::from_size_align(size, GRANULE).expect("a block fits");
            // SAFETY: a non-zero size.
            let p = unsafe { alloc::alloc(l) };
            if p.is_null() {
                alloc::handle_alloc_error(l);
            }
            self.large.insert(p as usize, l);
            return p;
        }
        let c = &mut self.classes[size / GRANULE];
        if !c.free.is_null() {
            let p = c.free;
            // SAFETY: a freed block's first word holds the next free block.
            c.free = unsafe { p.cast::<*mut u8>().read() };
            return p;
        }
        if c.cur == c.end {
            // SAFETY: a non-zero size.
            let p = unsafe { alloc::alloc(chunk_layout()) };
            if p.is_null() {
                alloc::handle_alloc_error(chunk_layout());
            }
            self.chunks.push(p);
            c.cur = p;
            // SAFETY: within the chunk (a whole number of blocks).
            c.end = unsafe { p.add(CHUNK / size * size) };
        }
        let p = c.cur;
        // SAFETY: `cur < end`, both in the chunk.
        c.cur = unsafe { p.add(size) };
        p
    }

    /// Frees a block of `bytes` bytes from [`Slab::alloc`].
    ///
    /// # Safety
    /// `p` came from `alloc(bytes)` on this slab and is not used again.
    unsafe fn free(&mut self, p: *mut u8, bytes: usize) {
        let size = bytes.max(GRANULE).next_multiple_of(GRANULE);
        if size > SMALL_MAX {
            let l = self.large.remove(&(p as usize)).expect("a large block");
            // SAFETY: allocated with `l` above.
            unsafe { alloc::dealloc(p, l) };
            return;
        }
        let c = &mut self.classes[size / GRANULE];
        // SAFETY: the block is ours again; its first word links the list.
        unsafe { p.cast::<*mut u8>().write(c.free) };
        c.free = p;
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        for &c in &self.chunks {
            // SAFETY: allocated with this layout in `alloc`.
            unsafe { alloc::dealloc(c, chunk_layout()) };
        }
        for (&p, &l) in &self.large {
            // SAFETY: as above.
            unsafe { alloc::dealloc(p as *mut u8, l) };
        }
    }
}

// ---------------------------------------------------------------- words

/// Address bits of every pointer kept in a packed word.
const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

/// Status-word tags (low two bits): a [`TxnRecord`] address.
const ST_TXN: u64 = 0;
/// Frozen: committed by a writer below every snapshot's xmin; the commit
/// timestamp in bits 2..64.
const ST_FROZEN: u64 = 1;
/// The node word's tag for a side-record address.
const ST_SIDE: u64 = 2;
/// The inline bytes are free (their version was cut away).
const ST_FREE: u64 = 3;

/// A transaction record's state, in its word's top two bits.
const IN_PROGRESS: u64 = 0;
const COMMITTED: u64 = 2;
const SHIFT: u32 = 62;

#[inline]
fn frozen(ts: u64) -> u64 {
    (ts << 2) | ST_FROZEN
}

/// A version reference: 0 none, [`INLINE`] the node's inline version, else
/// a record's address.
const INLINE: u64 = 1;
/// The top 16 bits of a link word: the value length, or these codes.
const LEN_LONG: u64 = 0xFFFF;
const LEN_TOMB: u64 = 0xFFFE;

/// The writer of a set of versions: what the machinery's `VersionStatus`
/// holds per version, held once per transaction.
#[repr(C)]
pub struct TxnRecord {
    id: u64,
    word: u64,
}

// ---------------------------------------------------------------- loads

/// Dependent loads of a read (or of the writer's walks).
#[derive(Clone, Copy, Default, Debug)]
pub struct Loads {
    /// Distinct hash-table lines probed.
    pub table: u64,
    /// Key nodes.
    pub node: u64,
    /// Side records.
    pub side: u64,
    /// Version records (the inline version is in the node).
    pub record: u64,
    /// Transaction records (unfrozen statuses).
    pub txn: u64,
    /// Side records reached through the slot's hint, loaded beside the
    /// node (counted in `side` too).
    pub side_hinted: u64,
    /// Dependent levels: one for the probe, the node, a side record not
    /// hinted, each record, each transaction record.
    pub levels: u64,
}

impl Loads {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.table + self.node + self.side + self.record + self.txn
    }
}

// ---------------------------------------------------------------- views

/// What a reader sees: a snapshot (`xmin`, `xmax`, running ids) and a read
/// timestamp (0: none), or the read-only fast path (`stable`).
pub struct View {
    pub own: u64,
    pub xmin: u64,
    pub xmax: u64,
    pub running: Vec<u64>,
    pub read_ts: u64,
}

impl View {
    fn sees(&self, txn: u64) -> bool {
        txn == self.own || (txn < self.xmax && (txn < self.xmin || !self.running.contains(&txn)))
    }

    fn ts_ok(&self, cts: u64) -> bool {
        self.read_ts == 0 || cts == 0 || cts <= self.read_ts
    }
}

// ---------------------------------------------------------------- node

/// The node's fixed header: word and length word.
const NODE_HDR: usize = 12;
/// The long form's length word.
const LONG: u32 = u32::MAX;
/// A tombstone's value length in the short form (24 bits).
const SHORT_TOMB: u32 = (1 << 24) - 1;

struct NodeShape {
    key_at: usize,
    key_len: usize,
    /// Inline value capacity (its length at creation); `None`: tombstone.
    cap: Option<usize>,
}

fn node_size(key: usize, value: Option<usize>) -> (usize, bool) {
    let v = value.unwrap_or(0);
    let short = key < 256 && value.is_none_or(|l| l < SHORT_TOMB as usize);
    let hdr = if short { NODE_HDR } else { NODE_HDR + 8 };
    ((hdr + key + v).next_multiple_of(GRANULE), short)
}

/// # Safety
/// `n` is a live node.
unsafe fn shape(n: *const u8) -> NodeShape {
    // SAFETY: the caller's; the length word is at 8.
    let lens = unsafe { n.add(8).cast::<u32>().read() };
    if lens != LONG {
        let v = lens & 0xFF_FFFF;
        return NodeShape {
            key_at: NODE_HDR,
            key_len: (lens >> 24) as usize,
            cap: (v != SHORT_TOMB).then_some(v as usize),
        };
    }
    // SAFETY: the long form's lengths follow (4-aligned).
    let (k, v) = unsafe {
        (
            n.add(12).cast::<u32>().read(),
            n.add(16).cast::<u32>().read(),
        )
    };
    NodeShape {
        key_at: NODE_HDR + 8,
        key_len: k as usize,
        cap: (v != u32::MAX).then_some(v as usize),
    }
}

/// # Safety
/// `n` is a live node.
unsafe fn node_key<'a>(n: *const u8) -> &'a [u8] {
    // SAFETY: the caller's; the key follows the lengths.
    unsafe {
        let s = shape(n);
        std::slice::from_raw_parts(n.add(s.key_at), s.key_len)
    }
}

/// # Safety
/// `n` is a live node.
unsafe fn word(n: *const u8) -> u64 {
    // SAFETY: the caller's.
    unsafe { n.cast::<u64>().read() }
}

/// # Safety
/// `n` is a live node.
unsafe fn set_word(n: *mut u8, w: u64) {
    // SAFETY: the caller's.
    unsafe { n.cast::<u64>().write(w) }
}

// ---------------------------------------------------------------- side

/// The side record of a key with more than its inline version.
#[repr(C)]
struct Side {
    /// The inline version's status ([`ST_FREE`]: its bytes are free).
    inline_status: u64,
    /// The inline version's link word (next older, and its length).
    inline_link: u64,
    /// The newest version.
    head: u64,
    /// The head's commit timestamp if it is committed, else 0.
    summary: u64,
    /// The version visible at the published stable timestamp (0: none
    /// swept since the side record was made).
    finger: u64,
}

const SIDE_BYTES: usize = std::mem::size_of::<Side>();

/// A record: status, link, value.
const REC_HDR: usize = 16;

fn rec_size(value: Option<usize>) -> usize {
    match value {
        None => REC_HDR,
        Some(l) if (l as u64) < LEN_TOMB => REC_HDR + l,
        Some(l) => REC_HDR + 8 + l,
    }
}

fn len_code(value: Option<usize>) -> u64 {
    match value {
        None => LEN_TOMB,
        Some(l) if (l as u64) < LEN_TOMB => l as u64,
        Some(_) => LEN_LONG,
    }
}

fn link(next: u64, code: u64) -> u64 {
    debug_assert_eq!(next & !ADDR_MASK, 0);
    next | (code << ADDR_BITS)
}

fn next_of(link: u64) -> u64 {
    link & ADDR_MASK
}

/// # Safety
/// `r` is a live record.
unsafe fn rec_status(r: u64) -> u64 {
    // SAFETY: the caller's.
    unsafe { (r as *const u64).read() }
}

/// # Safety
/// `r` is a live record.
unsafe fn rec_link(r: u64) -> u64 {
    // SAFETY: the caller's.
    unsafe { (r as *const u64).add(1).read() }
}

/// # Safety
/// `r` is a live record.
unsafe fn rec_value<'a>(r: u64) -> Option<&'a [u8]> {
    // SAFETY: the caller's; the layout written in `new_record`.
    unsafe {
        let p = r as *const u8;
        match rec_link(r) >> ADDR_BITS {
            LEN_TOMB => None,
            LEN_LONG => {
                let l = p.add(REC_HDR).cast::<u64>().read() as usize;
                Some(std::slice::from_raw_parts(p.add(REC_HDR + 8), l))
            }
            l => Some(std::slice::from_raw_parts(p.add(REC_HDR), l as usize)),
        }
    }
}

/// # Safety
/// `r` is a live record.
unsafe fn rec_bytes(r: u64) -> usize {
    // SAFETY: the caller's.
    rec_size(unsafe { rec_value(r) }.map(<[u8]>::len))
}

// ---------------------------------------------------------------- index

/// The hash table's growth: it grows past `max_num / max_den` full, to
/// `grow_num / grow_den` times its size.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub max_num: usize,
    pub max_den: usize,
    pub grow_num: usize,
    pub grow_den: usize,
    /// 16-byte slots: the node word and the side record's address.
    pub side_hint: bool,
}

impl Policy {
    /// Today's: grow at three quarters by half again.
    pub const TODAY: Policy = Policy {
        max_num: 3,
        max_den: 4,
        grow_num: 3,
        grow_den: 2,
        side_hint: false,
    };
    /// Denser: grow at seven eighths by a quarter.
    pub const DENSE: Policy = Policy {
        max_num: 7,
        max_den: 8,
        grow_num: 5,
        grow_den: 4,
        side_hint: false,
    };
    /// Denser, with 16-byte slots carrying the side record's address.
    pub const DENSE_HINT: Policy = Policy {
        side_hint: true,
        ..Policy::DENSE
    };
}

struct Table {
    /// `stride` words a slot: the node word, then the side hint.
    slots: Box<[u64]>,
    stride: usize,
    len: usize,
    policy: Policy,
}

#[inline]
fn tag(hash: u64) -> u64 {
    hash & !ADDR_MASK
}

impl Table {
    fn new(cap: usize, policy: Policy) -> Table {
        let stride = if policy.side_hint { 2 } else { 1 };
        Table {
            slots: vec![0; cap * stride].into_boxed_slice(),
            stride,
            len: 0,
            policy,
        }
    }

    #[inline]
    fn cap(&self) -> usize {
        self.slots.len() / self.stride
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        let mixed = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((u128::from(mixed) * self.cap() as u128) >> 64) as usize
    }

    /// The node of `key` and its slot, counting the lines probed and the
    /// nodes loaded.
    fn find(&self, key: &[u8], hash: u64, loads: &mut Loads) -> Option<(*mut u8, usize)> {
        let mut i = self.home(hash);
        let mut line = usize::MAX;
        loop {
            if i * self.stride / 8 != line {
                line = i * self.stride / 8;
                loads.table += 1;
            }
            let w = self.slots[i * self.stride];
            if w == 0 {
                return None;
            }
            if w & !ADDR_MASK == tag(hash) {
                let n = (w & ADDR_MASK) as *mut u8;
                loads.node += 1;
                // SAFETY: slots name live nodes (freed only with the store).
                if unsafe { node_key(n) } == key {
                    return Some((n, i));
                }
            }
            i = if i + 1 == self.cap() { 0 } else { i + 1 };
        }
    }

    /// The side hint of slot `i` (0: none, or no hints).
    #[inline]
    fn hint(&self, i: usize) -> u64 {
        if self.stride == 2 {
            self.slots[2 * i + 1]
        } else {
            0
        }
    }

    fn set_hint(&mut self, i: usize, side: u64) {
        if self.stride == 2 {
            self.slots[2 * i + 1] = side;
        }
    }

    fn place(&mut self, n: *mut u8, hash: u64, hint: u64) {
        let mut i = self.home(hash);
        while self.slots[i * self.stride] != 0 {
            i = if i + 1 == self.cap() { 0 } else { i + 1 };
        }
        self.slots[i * self.stride] = n as u64 | tag(hash);
        self.set_hint(i, hint);
    }

    fn insert(&mut self, n: *mut u8, hash: u64, hasher: &foldhash::fast::RandomState) {
        let p = self.policy;
        if (self.len + 1) * p.max_den > self.cap() * p.max_num {
            let cap = (self.cap() * p.grow_num / p.grow_den).next_multiple_of(64);
            let old = std::mem::replace(
                &mut self.slots,
                vec![0; cap * self.stride].into_boxed_slice(),
            );
            for s in old.chunks(self.stride).filter(|s| s[0] != 0) {
                let m = (s[0] & ADDR_MASK) as *mut u8;
                let hint = if self.stride == 2 { s[1] } else { 0 };
                // SAFETY: a live node.
                self.place(m, hasher.hash_one(unsafe { node_key(m) }), hint);
            }
        }
        self.place(n, hash, 0);
        self.len += 1;
    }
}

/// The ordered view: an exact-size sorted base and a sorted delta.
struct Ordered {
    base: Box<[*const u8]>,
    delta: Vec<*const u8>,
}

/// # Safety
/// Both are live nodes.
unsafe fn key_cmp(a: *const u8, b: *const u8) -> std::cmp::Ordering {
    // SAFETY: the caller's.
    unsafe { node_key(a).cmp(node_key(b)) }
}

impl Ordered {
    fn insert(&mut self, n: *const u8) {
        // SAFETY: live nodes.
        let at = self
            .delta
            .partition_point(|&d| unsafe { key_cmp(d, n) } == std::cmp::Ordering::Less);
        self.delta.insert(at, n);
        if self.delta.len() >= (self.base.len() / 16).max(1024) {
            let mut merged = Vec::with_capacity(self.base.len() + self.delta.len());
            let (mut i, mut j) = (0, 0);
            while i < self.base.len() || j < self.delta.len() {
                let take_base = j == self.delta.len()
                    || (i < self.base.len()
                        // SAFETY: live nodes.
                        && unsafe { key_cmp(self.base[i], self.delta[j]) }
                            == std::cmp::Ordering::Less);
                if take_base {
                    merged.push(self.base[i]);
                    i += 1;
                } else {
                    merged.push(self.delta[j]);
                    j += 1;
                }
            }
            self.base = merged.into_boxed_slice();
            self.delta = Vec::new();
        }
    }
}

// ---------------------------------------------------------------- store

/// A write transaction: its record and write set (each write's node and
/// version).
pub struct WriteTxn {
    rec: *mut TxnRecord,
    writes: Vec<(*mut u8, u64)>,
    view: View,
}

/// A committed transaction not yet both frozen and swept.
struct Pending {
    rec: *mut TxnRecord,
    cts: u64,
    writes: Vec<(*mut u8, u64)>,
    frozen: bool,
}

/// What the first-updater-wins check found.
#[derive(Debug)]
pub struct Conflict;

/// The prototype store.
pub struct Store {
    slab: Slab,
    table: Table,
    ordered: Ordered,
    hasher: foldhash::fast::RandomState,
    next_id: u64,
    running: BTreeSet<u64>,
    pending: VecDeque<Pending>,
    /// Entries at the front of `pending` the stable sweep has passed.
    swept: usize,
    /// Entries at the front of `pending` all frozen.
    thawed: usize,
    /// The xmin a long reader holds (none: `u64::MAX`).
    pub held_xmin: u64,
    /// The published stable timestamp (the fingers' target; 0: none).
    stable: u64,
    /// The oldest timestamp (0: none; timestamped history is kept).
    oldest: u64,
    /// The writers' own walks (freeze, prune).
    pub writer_loads: Loads,
    /// Versions retired by cuts.
    pub retired: u64,
    /// Bytes of blocks in use, by kind (granule-rounded).
    pub parts: Parts,
}

/// Bytes of slab blocks in use, by kind.
#[derive(Clone, Copy, Default, Debug)]
pub struct Parts {
    pub nodes: usize,
    pub sides: usize,
    pub records: usize,
    pub side_count: usize,
    pub record_count: usize,
}

impl Store {
    /// An empty store whose table starts at 1,024 slots.
    pub fn new(policy: Policy) -> Store {
        Store {
            slab: Slab::new(),
            table: Table::new(1024, policy),
            ordered: Ordered {
                base: Box::new([]),
                delta: Vec::new(),
            },
            hasher: foldhash::fast::RandomState::default(),
            next_id: 1,
            running: BTreeSet::new(),
            pending: VecDeque::new(),
            swept: 0,
            thawed: 0,
            held_xmin: u64::MAX,
            stable: 0,
            oldest: 0,
            writer_loads: Loads::default(),
            retired: 0,
            parts: Parts::default(),
        }
    }

    /// A snapshot view now, at `read_ts` (0: none).
    pub fn view(&self, read_ts: u64) -> View {
        View {
            own: 0,
            xmin: self.running.first().copied().unwrap_or(self.next_id),
            xmax: self.next_id,
            running: self.running.iter().copied().collect(),
            read_ts,
        }
    }

    /// The horizon's xmin: below every snapshot's.
    fn horizon_xmin(&self) -> u64 {
        self.running
            .first()
            .copied()
            .unwrap_or(self.next_id)
            .min(self.held_xmin)
    }

    /// Starts a write transaction.
    pub fn begin(&mut self) -> WriteTxn {
        let mut view = self.view(0);
        let id = self.next_id;
        self.next_id += 1;
        self.running.insert(id);
        view.own = id;
        let rec = Box::into_raw(Box::new(TxnRecord {
            id,
            word: IN_PROGRESS << SHIFT,
        }));
        WriteTxn {
            rec,
            writes: Vec::new(),
            view,
        }
    }

    /// First updater wins: may `txn` write over a newest version with
    /// status `w`? Its own version is refused too (the prototype writes a
    /// key once per transaction).
    ///
    /// # Safety
    /// An unfrozen `w` names a live transaction record.
    unsafe fn judge_write(&self, w: u64, txn: &WriteTxn) -> Result<(), Conflict> {
        match w & 3 {
            ST_FROZEN => Ok(()),
            _ => {
                // SAFETY: an unfrozen status names a live record (freed
                // only after every version naming it is frozen).
                let r = unsafe { &*(w as *const TxnRecord) };
                let committed = r.word >> SHIFT == COMMITTED;
                assert_ne!(r.id, txn.view.own, "one write a key a transaction");
                if committed && txn.view.sees(r.id) {
                    Ok(())
                } else {
                    Err(Conflict)
                }
            }
        }
    }

    /// Writes `value` (`None`: a tombstone) for `key` in `txn`.
    ///
    /// # Errors
    /// [`Conflict`] when another transaction's version is newest and not in
    /// `txn`'s snapshot (first updater wins).
    pub fn put(
        &mut self,
        txn: &mut WriteTxn,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), Conflict> {
        let h = self.hasher.hash_one(key);
        let mut l = Loads::default();
        let Some((n, slot)) = self.table.find(key, h, &mut l) else {
            let (size, short) = node_size(key.len(), value.map(<[u8]>::len));
            let n = self.slab.alloc(size);
            self.parts.nodes += size;
            assert_eq!(n as u64 & !ADDR_MASK, 0, "node addresses fit in 48 bits");
            // SAFETY: a fresh block of `size` bytes, laid out as `shape` reads.
            unsafe {
                set_word(n, txn.rec as u64 | ST_TXN);
                let at = if short {
                    let v = value.map_or(SHORT_TOMB, |v| v.len() as u32);
                    n.add(8).cast::<u32>().write(((key.len() as u32) << 24) | v);
                    NODE_HDR
                } else {
                    n.add(8).cast::<u32>().write(LONG);
                    n.add(12).cast::<u32>().write(key.len() as u32);
                    n.add(16)
                        .cast::<u32>()
                        .write(value.map_or(u32::MAX, |v| v.len() as u32));
                    NODE_HDR + 8
                };
                ptr::copy_nonoverlapping(key.as_ptr(), n.add(at), key.len());
                if let Some(v) = value {
                    ptr::copy_nonoverlapping(v.as_ptr(), n.add(at + key.len()), v.len());
                }
            }
            self.table.insert(n, h, &self.hasher);
            self.ordered.insert(n);
            txn.writes.push((n, INLINE));
            return Ok(());
        };
        // SAFETY: `n` is a live node; side records and records it names
        // are live (single-threaded: cuts free at once and unlink first).
        unsafe {
            let w = word(n);
            let side = if w & 3 == ST_SIDE {
                let s = (w & !3) as *mut Side;
                let head = (*s).head;
                let st = if head == INLINE {
                    (*s).inline_status
                } else {
                    rec_status(head)
                };
                self.judge_write(st, txn)?;
                s
            } else {
                self.judge_write(w, txn)?;
                let s = self.slab.alloc(SIDE_BYTES).cast::<Side>();
                self.parts.sides += SIDE_BYTES;
                self.parts.side_count += 1;
                let cap = shape(n).cap;
                let summary = if w & 3 == ST_FROZEN {
                    w >> 2
                } else {
                    let r = &*(w as *const TxnRecord);
                    if r.word >> SHIFT == COMMITTED {
                        r.word & ((1 << SHIFT) - 1)
                    } else {
                        0
                    }
                };
                s.write(Side {
                    inline_status: w,
                    inline_link: link(0, len_code(cap)),
                    head: INLINE,
                    summary,
                    finger: 0,
                });
                set_word(n, s as u64 | ST_SIDE);
                self.table.set_hint(slot, s as u64);
                s
            };
            let s = &mut *side;
            let cap = shape(n).cap;
            let fits = match (value, cap) {
                (Some(v), Some(c)) => v.len() <= c && (v.len() as u64) < LEN_TOMB,
                (None, _) => true,
                _ => false,
            };
            if s.inline_status == ST_FREE && fits {
                // Inline reuse: the cut that freed these bytes came first.
                let sh = shape(n);
                if let Some(v) = value {
                    ptr::copy_nonoverlapping(v.as_ptr(), n.add(sh.key_at + sh.key_len), v.len());
                }
                s.inline_status = txn.rec as u64 | ST_TXN;
                s.inline_link = link(s.head, len_code(value.map(<[u8]>::len)));
                s.head = INLINE;
            } else {
                let size = rec_size(value.map(<[u8]>::len));
                let r = self.slab.alloc(size);
                self.parts.records += size.next_multiple_of(GRANULE);
                self.parts.record_count += 1;
                assert_eq!(r as u64 & !ADDR_MASK, 0, "record addresses fit in 48 bits");
                r.cast::<u64>().write(txn.rec as u64 | ST_TXN);
                r.cast::<u64>()
                    .add(1)
                    .write(link(s.head, len_code(value.map(<[u8]>::len))));
                if let Some(v) = value {
                    let at = if (v.len() as u64) < LEN_TOMB {
                        REC_HDR
                    } else {
                        r.add(REC_HDR).cast::<u64>().write(v.len() as u64);
                        REC_HDR + 8
                    };
                    ptr::copy_nonoverlapping(v.as_ptr(), r.add(at), v.len());
                }
                s.head = r as u64;
            }
            s.summary = 0;
            txn.writes.push((n, s.head));
        }
        Ok(())
    }

    /// Commits `txn` at `ts` (0: untimestamped): one store to its record
    /// (the machinery's flip, once per transaction), the head summaries,
    /// then freezing what the horizon allows and pruning each key written.
    pub fn commit(&mut self, txn: WriteTxn, ts: u64) {
        // SAFETY: the record is live until frozen.
        let id = unsafe {
            (*txn.rec).word = (COMMITTED << SHIFT) | ts;
            (*txn.rec).id
        };
        for &(n, _) in &txn.writes {
            // SAFETY: live nodes and side records.
            unsafe {
                let w = word(n);
                if w & 3 == ST_SIDE && ts != 0 {
                    (*((w & !3) as *mut Side)).summary = ts;
                }
            }
        }
        self.running.remove(&id);
        let nodes: Vec<*mut u8> = txn.writes.iter().map(|w| w.0).collect();
        self.pending.push_back(Pending {
            rec: txn.rec,
            cts: ts,
            writes: txn.writes,
            frozen: false,
        });
        if self.stable == 0 {
            // No stable timestamp: no finger to keep.
            self.swept = self.pending.len();
        }
        self.freeze();
        if self.oldest != 0 {
            for n in nodes {
                // SAFETY: a live node.
                unsafe { self.prune(n) };
            }
        }
    }

    /// Sets the stable and oldest timestamps: first sweeps the commits at
    /// or below the new stable (oldest first; commits here come in
    /// timestamp order), pointing each written key's finger at its version,
    /// then publishes both.
    pub fn set_timestamps(&mut self, stable: u64, oldest: u64) {
        while let Some(p) = self.pending.get(self.swept) {
            if p.cts > stable {
                break;
            }
            for &(n, v) in &p.writes {
                // SAFETY: a live node; a version at or below the new stable
                // is linked (cuts stay at or below oldest, which is at or
                // below the stable published before this sweep).
                unsafe {
                    let w = word(n);
                    if w & 3 == ST_SIDE {
                        (*((w & !3) as *mut Side)).finger = v;
                    }
                }
                self.writer_loads.side += 1;
            }
            self.swept += 1;
        }
        self.stable = stable;
        self.oldest = oldest;
        self.drain();
    }

    /// Drops the queue's front entries that are both swept and frozen.
    fn drain(&mut self) {
        while self.swept > 0 && self.pending.front().is_some_and(|p| p.frozen) {
            self.pending.pop_front();
            self.swept -= 1;
            self.thawed -= 1;
        }
    }

    /// Freezes the versions of every committed transaction below the
    /// horizon's xmin, oldest first, and frees their records.
    pub fn freeze(&mut self) {
        let xmin = self.horizon_xmin();
        // SAFETY: pending records are live until frozen; nodes are live;
        // their side records and linked records are live.
        for i in self.thawed..self.pending.len() {
            let p = &self.pending[i];
            if p.frozen {
                continue;
            }
            let rec = p.rec;
            let (id, w) = unsafe { ((*rec).id, (*rec).word) };
            if id >= xmin {
                break;
            }
            let fw = frozen(w & ((1 << SHIFT) - 1));
            let mine = rec as u64 | ST_TXN;
            let nodes: Vec<*mut u8> = p.writes.iter().map(|w| w.0).collect();
            for n in nodes {
                unsafe {
                    let nw = word(n);
                    if nw == mine {
                        set_word(n, fw);
                        continue;
                    }
                    if nw & 3 != ST_SIDE {
                        continue;
                    }
                    let s = &mut *((nw & !3) as *mut Side);
                    if s.inline_status == mine {
                        s.inline_status = fw;
                    }
                    let mut v = s.head;
                    while v != 0 {
                        if v == INLINE {
                            v = next_of(s.inline_link);
                            continue;
                        }
                        self.writer_loads.record += 1;
                        if rec_status(v) == mine {
                            (v as *mut u64).write(fw);
                            break;
                        }
                        v = next_of(rec_link(v));
                    }
                }
            }
            // SAFETY: no version names it any more.
            drop(unsafe { Box::from_raw(rec) });
            self.pending[i].frozen = true;
        }
        while self.pending.get(self.thawed).is_some_and(|p| p.frozen) {
            self.thawed += 1;
        }
        self.drain();
    }

    /// The status of version `v` of the key whose side record is `s`.
    ///
    /// # Safety
    /// `v` is a live version of that key.
    unsafe fn status_of(s: &Side, v: u64) -> u64 {
        if v == INLINE {
            s.inline_status
        } else {
            // SAFETY: the caller's.
            unsafe { rec_status(v) }
        }
    }

    /// # Safety
    /// `v` is a live version of the key with side record `s`.
    unsafe fn next(s: &Side, v: u64) -> u64 {
        if v == INLINE {
            next_of(s.inline_link)
        } else {
            // SAFETY: the caller's.
            next_of(unsafe { rec_link(v) })
        }
    }

    /// `(committed, cts, covered)` of a status word.
    ///
    /// # Safety
    /// An unfrozen `st` names a live transaction record.
    unsafe fn settled(&self, st: u64, xmin: u64) -> (bool, u64, bool) {
        match st & 3 {
            ST_FROZEN => (true, st >> 2, true),
            ST_TXN => {
                // SAFETY: the caller's.
                let r = unsafe { &*(st as *const TxnRecord) };
                let committed = r.word >> SHIFT == COMMITTED;
                (committed, r.word & ((1 << SHIFT) - 1), r.id < xmin)
            }
            _ => (false, 0, false),
        }
    }

    /// Prunes `n`'s chain: walks down from the finger (else the head) to
    /// the safe point (the newest committed version the horizon covers),
    /// cuts below it and frees the tail; a key left with its inline version
    /// alone, frozen, gives its side record back.
    ///
    /// # Safety
    /// `n` is a live node.
    unsafe fn prune(&mut self, n: *mut u8) {
        // SAFETY: the caller's; the chain's versions are live.
        unsafe {
            let w = word(n);
            if w & 3 != ST_SIDE {
                return;
            }
            let sp = (w & !3) as *mut Side;
            let s = &mut *sp;
            let xmin = self.horizon_xmin();
            // The finger is at or above the safe point (it is at or below
            // stable, the safe point at or below oldest).
            let mut v = if s.finger != 0 { s.finger } else { s.head };
            while v != 0 {
                if v != INLINE {
                    self.writer_loads.record += 1;
                }
                let st = Self::status_of(s, v);
                let (committed, cts, covered) = self.settled(st, xmin);
                if committed && cts != 0 && covered && cts <= self.oldest {
                    // The safe point: cut below it.
                    let mut t = Self::next(s, v);
                    if v == INLINE {
                        s.inline_link = link(0, s.inline_link >> ADDR_BITS);
                    } else {
                        (v as *mut u64)
                            .add(1)
                            .write(link(0, rec_link(v) >> ADDR_BITS));
                    }
                    while t != 0 {
                        let nt = Self::next(s, t);
                        if t == INLINE {
                            s.inline_status = ST_FREE;
                            s.inline_link = 0;
                        } else {
                            let b = rec_bytes(t);
                            self.slab.free(t as *mut u8, b);
                            self.parts.records -= b.next_multiple_of(GRANULE);
                            self.parts.record_count -= 1;
                        }
                        self.retired += 1;
                        t = nt;
                    }
                    break;
                }
                v = Self::next(s, v);
            }
            if s.head == INLINE && next_of(s.inline_link) == 0 && s.inline_status & 3 == ST_FROZEN {
                set_word(n, s.inline_status);
                let key = node_key(n);
                let found = self
                    .table
                    .find(key, self.hasher.hash_one(key), &mut Loads::default());
                self.table.set_hint(found.expect("a live key").1, 0);
                self.slab.free(sp.cast(), SIDE_BYTES);
                self.parts.sides -= SIDE_BYTES;
                self.parts.side_count -= 1;
            }
        }
    }

    /// The value `view` reads for `key` (`Some(None)`: a tombstone), adding
    /// the dependent loads to `loads`.
    pub fn get(&self, key: &[u8], view: &View, loads: &mut Loads) -> Option<Option<&[u8]>> {
        let h = self.hasher.hash_one(key);
        let (n, slot) = self.table.find(key, h, loads)?;
        loads.levels += 2;
        // SAFETY: a live node; what it names is live (single-threaded).
        unsafe {
            let sh = shape(n);
            let inline = |len: Option<usize>| {
                len.map(|l| std::slice::from_raw_parts(n.add(sh.key_at + sh.key_len), l))
            };
            let w = word(n);
            if w & 3 != ST_SIDE {
                return self.visible(w, view, loads).then(|| inline(sh.cap));
            }
            loads.side += 1;
            if self.table.hint(slot) == w & !3 {
                loads.side_hinted += 1;
            } else {
                loads.levels += 1;
            }
            let s = &*((w & !3) as *const Side);
            let t = view.read_ts;
            let mut v = s.head;
            if t != 0 && t <= self.stable && s.summary > t && s.finger != 0 {
                // The head is committed above `t`, and the finger is the
                // version visible at the published stable, at or above
                // `t`: nothing the reader accepts lies above it.
                v = s.finger;
            }
            while v != 0 {
                if v != INLINE {
                    loads.record += 1;
                    loads.levels += 1;
                }
                if self.visible(Self::status_of(s, v), view, loads) {
                    return Some(if v == INLINE {
                        let code = s.inline_link >> ADDR_BITS;
                        inline(match code {
                            LEN_TOMB => None,
                            LEN_LONG => sh.cap,
                            l => Some(l as usize),
                        })
                    } else {
                        rec_value(v)
                    });
                }
                v = Self::next(s, v);
            }
            None
        }
    }

    /// Is a version with status `st` visible to `view`?
    ///
    /// # Safety
    /// An unfrozen `st` names a live transaction record.
    unsafe fn visible(&self, st: u64, view: &View, loads: &mut Loads) -> bool {
        match st & 3 {
            // Its writer is below every snapshot's xmin: seen by all.
            ST_FROZEN => view.ts_ok(st >> 2),
            ST_TXN => {
                loads.txn += 1;
                loads.levels += 1;
                // SAFETY: the caller's.
                let r = unsafe { &*(st as *const TxnRecord) };
                match r.word >> SHIFT {
                    COMMITTED => view.sees(r.id) && view.ts_ok(r.word & ((1 << SHIFT) - 1)),
                    _ => r.id == view.own,
                }
            }
            _ => false,
        }
    }

    /// Every key in order (the ordered view's merge of base and delta),
    /// visited by `f`.
    pub fn scan(&self, mut f: impl FnMut(&[u8])) {
        let (b, d) = (&self.ordered.base, &self.ordered.delta);
        let (mut i, mut j) = (0, 0);
        while i < b.len() || j < d.len() {
            // SAFETY: live nodes.
            let take_base = j == d.len()
                || (i < b.len() && unsafe { key_cmp(b[i], d[j]) } == std::cmp::Ordering::Less);
            let n = if take_base {
                i += 1;
                b[i - 1]
            } else {
                j += 1;
                d[j - 1]
            };
            // SAFETY: as above.
            f(unsafe { node_key(n) });
        }
    }

    /// Keys and slots of the hash table.
    pub fn table_stats(&self) -> (usize, usize) {
        (self.table.len, self.table.cap())
    }

    /// Write transactions begun.
    pub fn txns(&self) -> u64 {
        self.next_id - 1
    }

    /// Committed transactions not yet frozen.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Bytes of the hash table's slots.
    pub fn slot_bytes(&self) -> usize {
        self.table.slots.len() * 8
    }

    /// Bytes of the ordered view's arrays (capacities).
    pub fn ordered_bytes(&self) -> usize {
        (self.ordered.base.len() + self.ordered.delta.capacity()) * 8
    }

    /// Bytes the slab holds from the allocator (chunks and large blocks).
    pub fn slab_bytes(&self) -> usize {
        self.slab.chunks.len() * CHUNK + self.slab.large.values().map(Layout::size).sum::<usize>()
    }

    /// Bytes of the transaction records and write sets waiting to be
    /// frozen (requested sizes).
    pub fn pending_bytes(&self) -> usize {
        self.pending
            .iter()
            .map(|p| {
                let rec = if p.frozen {
                    0
                } else {
                    std::mem::size_of::<TxnRecord>()
                };
                rec + p.writes.capacity() * 16
            })
            .sum::<usize>()
            + self.pending.capacity() * std::mem::size_of::<Pending>()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Nodes, side records and records are the slab's, freed with it.
        for p in self.pending.drain(..).filter(|p| !p.frozen) {
            // SAFETY: a record not yet frozen is still owned by its entry
            // (the freeze frees the others), named by nothing after the
            // drop.
            drop(unsafe { Box::from_raw(p.rec) });
        }
    }
}

/// The block sizes the prototype allocates, for the report: node, side
/// record, extra version record.
pub fn sizes(key: usize, value: usize) -> (usize, usize, usize) {
    (
        node_size(key, Some(value)).0,
        SIDE_BYTES,
        rec_size(Some(value)).next_multiple_of(GRANULE),
    )
}
