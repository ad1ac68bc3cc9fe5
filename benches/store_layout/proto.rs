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
//! * **12-byte slots** (the policy's `slot12`): three 32-bit words, each a
//!   28-bit *slab index* and a nibble of the key's 12-bit hash tag (the
//!   tag's three nibbles are compared together): the node, the head (the
//!   newest version's record; 0: the node's inline version) and the side
//!   record (0: none). Nodes come from one indexed [`Slab`], side records
//!   and records from another (two index spaces, so the head cannot name
//!   the node by the node's index). A slab index is a chunk number (+1)
//!   and a granule offset; the slab's *chunk table* (8 bytes a 64 KiB
//!   chunk) turns it into an address: a dependent load, L2-resident (at
//!   most 32,767 entries, 256 KiB a slab), counted apart from the levels.
//!   Each slab addresses 2^28 granules of 8 bytes: 32,767 chunks, just
//!   under 2 GiB of nodes and as much of records; past it the slab panics
//!   naming the bound, and it serves blocks up to 2,048 bytes only. A
//!   reader loads the slot, then node, side record and head record side
//!   by side (one level): the newest version in two levels, a version at
//!   stable in three (the finger's, a full address in the side record).
//!   Writers store the slot's head word at each write to an existing key
//!   and its side word when a side record is made or given back (counted:
//!   [`Store::slot_stores`]). The side record's words and the record links
//!   stay full addresses; the node word as above.
//! * **Ordered view**: an exact-size sorted array of node addresses (4-byte
//!   node indices with 12-byte slots) and a sorted delta of the keys
//!   created since, merged at a sixteenth.
//!
//! Every read and write counts its dependent loads ([`Loads`]): hash-table
//! lines, the node, the side record, each record, each transaction record
//! met on an unfrozen status, and (12-byte slots) each chunk-table entry.

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
    /// The chunk `cur` carves (its number in `chunks`).
    chunk: u32,
}

/// Bits of a granule's offset in its chunk in a slab index: a chunk holds
/// 8,184 granules, under 2^13.
const IDX_OFF_BITS: u32 = 13;
/// Bits of a slab index: 2^28 granules of 8 bytes.
const IDX_BITS: u32 = 28;
const IDX_MASK: u32 = (1 << IDX_BITS) - 1;
/// Chunks an indexed slab can address: index 0 is reserved (none), so
/// chunk `c` is named `c + 1` in an index's top 15 bits: 32,767 chunks of
/// [`CHUNK`] bytes, 2,145,386,496 bytes (just under 2 GiB).
pub const IDX_CHUNKS: usize = (1 << (IDX_BITS - IDX_OFF_BITS)) - 1;

/// Size classes of 8-byte granules up to [`SMALL_MAX`], each carving
/// [`CHUNK`]-byte chunks and keeping a free list through the freed blocks'
/// first word.
///
/// An *indexed* slab also names each block by a 28-bit *slab index*
/// (chunk number + 1 in the top 15 bits, granule offset in the low 13),
/// turned back into an address through `chunks`, the *chunk table*
/// ([`Slab::addr`]: one load of an 8-byte entry; 16,384 chunks, 128 KiB,
/// a gigabyte of blocks). It serves blocks up to [`SMALL_MAX`] only, and
/// refuses (panics, naming the bound) a chunk past [`IDX_CHUNKS`].
pub struct Slab {
    classes: Vec<Class>,
    chunks: Vec<*mut u8>,
    large: HashMap<usize, Layout>,
    indexed: bool,
    /// Chunk bases in address order with their numbers: an indexed slab
    /// that frees finds a reused block's index here (the engine would keep
    /// its free lists by index; bookkeeping of the prototype's).
    by_addr: Option<Vec<(usize, u32)>>,
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
            chunk: 0,
        };
        Slab {
            classes: vec![empty; SMALL_MAX / GRANULE + 1],
            chunks: Vec::new(),
            large: HashMap::new(),
            indexed: false,
            by_addr: None,
        }
    }

    /// An indexed slab; `frees`: blocks are freed and reused.
    fn indexed(frees: bool) -> Slab {
        let mut s = Slab::new();
        s.indexed = true;
        s.by_addr = frees.then(Vec::new);
        s
    }

    /// The address of the block with slab index `i` (not 0): the chunk
    /// table's entry plus the offset.
    #[inline]
    fn addr(&self, i: u32) -> *mut u8 {
        debug_assert!(self.indexed && i != 0 && i <= IDX_MASK);
        let c = (i >> IDX_OFF_BITS) as usize - 1;
        let off = (i & ((1 << IDX_OFF_BITS) - 1)) as usize * GRANULE;
        // SAFETY: an index names a granule inside chunk `c`.
        unsafe { self.chunks[c].add(off) }
    }

    /// The slab index of block `p` in chunk `c`.
    fn index(&self, c: u32, p: *mut u8) -> u32 {
        let off = (p as usize - self.chunks[c as usize] as usize) / GRANULE;
        ((c + 1) << IDX_OFF_BITS) | off as u32
    }

    /// A block of at least `bytes` bytes from an indexed slab, and its
    /// slab index.
    fn alloc_idx(&mut self, bytes: usize) -> (*mut u8, u32) {
        assert!(self.indexed, "a slab index from an indexed slab");
        let size = bytes.max(GRANULE).next_multiple_of(GRANULE);
        assert!(
            size <= SMALL_MAX,
            "an indexed slab serves blocks up to {SMALL_MAX} bytes, asked {size}"
        );
        let reused = !self.classes[size / GRANULE].free.is_null();
        let p = self.alloc(bytes);
        let c = if reused {
            let by = self
                .by_addr
                .as_ref()
                .expect("only a slab that frees reuses");
            let at = by.partition_point(|&(b, _)| b <= p as usize) - 1;
            by[at].1
        } else {
            self.classes[size / GRANULE].chunk
        };
        (p, self.index(c, p))
    }

    /// A block of at least `bytes` bytes, 8-aligned.
    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        let size = bytes.max(GRANULE).next_multiple_of(GRANULE);
        if size > SMALL_MAX {
            assert!(
                !self.indexed,
                "an indexed slab serves blocks up to {SMALL_MAX} bytes, asked {size}"
            );
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
            assert!(
                !self.indexed || self.chunks.len() < IDX_CHUNKS,
                "slab index range: {IDX_CHUNKS} chunks of {CHUNK} bytes (2^{IDX_BITS} granules of {GRANULE} bytes, under 2 GiB) are full"
            );
            // SAFETY: a non-zero size.
            let p = unsafe { alloc::alloc(chunk_layout()) };
            if p.is_null() {
                alloc::handle_alloc_error(chunk_layout());
            }
            c.chunk = self.chunks.len() as u32;
            if let Some(by) = &mut self.by_addr {
                let at = by.partition_point(|&(b, _)| b < p as usize);
                by.insert(at, (p as usize, c.chunk));
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
        assert!(
            !self.indexed || self.by_addr.is_some(),
            "a slab made without frees frees nothing"
        );
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
    /// Head records reached through the 12-byte slot's head index, loaded
    /// beside the node (counted in `record` too, also when the read then
    /// starts at the finger and does not use it).
    pub head_hinted: u64,
    /// Chunk-table entries loaded (12-byte slots: each slab index turned
    /// into an address).
    pub chunk: u64,
    /// Dependent chunk-table steps: one a read that found its node through
    /// a slab index (the head's and side record's translations go beside
    /// the node's). The table is a few hundred KiB at most, L2-resident:
    /// a dependent load but not a miss, so not in `levels`.
    pub chunk_levels: u64,
    /// Dependent levels: one for the probe, the node, a side record not
    /// hinted, each record not hinted, each transaction record.
    pub levels: u64,
}

impl Loads {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.table + self.node + self.side + self.record + self.txn + self.chunk
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
    /// 12-byte slots of three slab indices (node, head, side record) and
    /// a 12-bit tag; nodes and records from indexed slabs; the ordered
    /// view holds 4-byte node indices.
    pub slot12: bool,
}

impl Policy {
    /// Today's: grow at three quarters by half again.
    pub const TODAY: Policy = Policy {
        max_num: 3,
        max_den: 4,
        grow_num: 3,
        grow_den: 2,
        side_hint: false,
        slot12: false,
    };
    /// Denser: grow at seven eighths by a quarter.
    pub const DENSE: Policy = Policy {
        max_num: 7,
        max_den: 8,
        grow_num: 5,
        grow_den: 4,
        side_hint: false,
        slot12: false,
    };
    /// Denser, with 16-byte slots carrying the side record's address.
    pub const DENSE_HINT: Policy = Policy {
        side_hint: true,
        ..Policy::DENSE
    };
    /// Denser, with 12-byte slots of slab indices (node, head, side).
    pub const DENSE_SLOT12: Policy = Policy {
        slot12: true,
        ..Policy::DENSE
    };
    /// Grow at seven eighths by an eighth (load 0.78-0.875), with 12-byte
    /// slots of slab indices: twice the rehash moves of [`Policy::DENSE`].
    pub const DENSER_SLOT12: Policy = Policy {
        grow_num: 9,
        grow_den: 8,
        ..Policy::DENSE_SLOT12
    };
    /// Today's growth, with 12-byte slots of slab indices.
    pub const TODAY_SLOT12: Policy = Policy {
        slot12: true,
        ..Policy::TODAY
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

/// Slab-index words of a 12-byte slot: the index in the low 28 bits, a
/// third of the key's 12-bit tag in the top 4. The node's.
const SLOT_NODE: usize = 0;
/// The head: the key's newest version's record index, 0 when the head is
/// the node's inline version (records and nodes are separate index
/// spaces, so the node's own index cannot name it).
const SLOT_HEAD: usize = 1;
/// The side record's index (0: none).
const SLOT_SIDE: usize = 2;

/// The 12-bit tag of `hash` (its top 12 bits), a nibble in the top of
/// each slot word.
#[inline]
fn tag12(hash: u64) -> [u32; 3] {
    let t = (hash >> 52) as u32;
    [
        (t & 0xF) << IDX_BITS,
        ((t >> 4) & 0xF) << IDX_BITS,
        (t >> 8) << IDX_BITS,
    ]
}

/// A hash table of 12-byte slots: three 32-bit words, each a slab index
/// and a nibble of the tag ([`SLOT_NODE`], [`SLOT_HEAD`], [`SLOT_SIDE`]).
/// Node index 0 is never made, so a zero node word is an empty slot.
struct Table12 {
    slots: Box<[[u32; 3]]>,
    len: usize,
    policy: Policy,
}

impl Table12 {
    fn new(cap: usize, policy: Policy) -> Table12 {
        Table12 {
            slots: vec![[0; 3]; cap].into_boxed_slice(),
            len: 0,
            policy,
        }
    }

    #[inline]
    fn cap(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        let mixed = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((u128::from(mixed) * self.cap() as u128) >> 64) as usize
    }

    /// The node of `key` and its slot, counting the lines probed (a slot
    /// may straddle two; the array taken as line-aligned), the chunk-table
    /// entries and the nodes loaded.
    fn find(
        &self,
        key: &[u8],
        hash: u64,
        nodes: &Slab,
        loads: &mut Loads,
    ) -> Option<(*mut u8, usize)> {
        let t = tag12(hash);
        let mut i = self.home(hash);
        let mut line = usize::MAX;
        loop {
            for l in i * 12 / 64..=(i * 12 + 11) / 64 {
                if l != line {
                    line = l;
                    loads.table += 1;
                }
            }
            let w = self.slots[i];
            if w[SLOT_NODE] == 0 {
                return None;
            }
            if (0..3).all(|j| w[j] & !IDX_MASK == t[j]) {
                loads.chunk += 1;
                let n = nodes.addr(w[SLOT_NODE] & IDX_MASK);
                loads.node += 1;
                // SAFETY: slots name live nodes (freed only with the store).
                if unsafe { node_key(n) } == key {
                    return Some((n, i));
                }
            }
            i = if i + 1 == self.cap() { 0 } else { i + 1 };
        }
    }

    /// Slot `i`'s index in word `w`.
    #[inline]
    fn get(&self, i: usize, w: usize) -> u32 {
        self.slots[i][w] & IDX_MASK
    }

    /// Stores `idx` in slot `i`'s word `w`, keeping its tag nibble.
    fn set(&mut self, i: usize, w: usize, idx: u32) {
        assert!(idx <= IDX_MASK, "a slab index fits in {IDX_BITS} bits");
        let s = &mut self.slots[i][w];
        *s = (*s & !IDX_MASK) | idx;
    }

    fn place(&mut self, words: [u32; 3], hash: u64) {
        let mut i = self.home(hash);
        while self.slots[i][SLOT_NODE] != 0 {
            i = if i + 1 == self.cap() { 0 } else { i + 1 };
        }
        self.slots[i] = words;
    }

    /// Inserts node index `n` (head inline, no side record).
    fn insert(&mut self, n: u32, hash: u64, nodes: &Slab, hasher: &foldhash::fast::RandomState) {
        assert!(
            n != 0 && n <= IDX_MASK,
            "a node index fits in {IDX_BITS} bits"
        );
        let p = self.policy;
        if (self.len + 1) * p.max_den > self.cap() * p.max_num {
            let cap = (self.cap() * p.grow_num / p.grow_den).next_multiple_of(64);
            let old = std::mem::replace(&mut self.slots, vec![[0; 3]; cap].into_boxed_slice());
            for &s in old.iter().filter(|s| s[SLOT_NODE] != 0) {
                let m = nodes.addr(s[SLOT_NODE] & IDX_MASK);
                // SAFETY: a live node.
                self.place(s, hasher.hash_one(unsafe { node_key(m) }));
            }
        }
        let t = tag12(hash);
        self.place([t[0] | n, t[1], t[2]], hash);
        self.len += 1;
    }
}

/// The hash index: 8- or 16-byte slots of addresses, or 12-byte slots of
/// slab indices.
enum Index {
    Wide(Table),
    Narrow(Table12),
}

impl Index {
    fn cap(&self) -> usize {
        match self {
            Index::Wide(t) => t.cap(),
            Index::Narrow(t) => t.cap(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Index::Wide(t) => t.len,
            Index::Narrow(t) => t.len,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Index::Wide(t) => t.slots.len() * 8,
            Index::Narrow(t) => t.slots.len() * 12,
        }
    }
}

/// The ordered view: an exact-size sorted base and a sorted delta of node
/// references (addresses, or 4-byte node indices with 12-byte slots).
struct Ordered<E> {
    base: Box<[E]>,
    delta: Vec<E>,
}

/// # Safety
/// Both are live nodes.
unsafe fn key_cmp(a: *const u8, b: *const u8) -> std::cmp::Ordering {
    // SAFETY: the caller's.
    unsafe { node_key(a).cmp(node_key(b)) }
}

impl<E: Copy> Ordered<E> {
    fn new() -> Ordered<E> {
        Ordered {
            base: Box::new([]),
            delta: Vec::new(),
        }
    }

    /// Inserts `n`, whose node `node` turns into an address.
    fn insert(&mut self, n: E, node: impl Fn(E) -> *const u8) {
        let cmp = |a: E, b: E| {
            // SAFETY: live nodes.
            unsafe { key_cmp(node(a), node(b)) }
        };
        let at = self
            .delta
            .partition_point(|&d| cmp(d, n) == std::cmp::Ordering::Less);
        self.delta.insert(at, n);
        if self.delta.len() >= (self.base.len() / 16).max(1024) {
            let mut merged = Vec::with_capacity(self.base.len() + self.delta.len());
            let (mut i, mut j) = (0, 0);
            while i < self.base.len() || j < self.delta.len() {
                let take_base = j == self.delta.len()
                    || (i < self.base.len()
                        && cmp(self.base[i], self.delta[j]) == std::cmp::Ordering::Less);
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

    /// Every node in key order (base and delta merged), visited by `f`.
    fn scan(&self, node: impl Fn(E) -> *const u8, mut f: impl FnMut(*const u8)) {
        let (b, d) = (&self.base, &self.delta);
        let (mut i, mut j) = (0, 0);
        while i < b.len() || j < d.len() {
            // SAFETY: live nodes.
            let take_base = j == d.len()
                || (i < b.len()
                    && unsafe { key_cmp(node(b[i]), node(d[j])) } == std::cmp::Ordering::Less);
            let n = if take_base {
                i += 1;
                b[i - 1]
            } else {
                j += 1;
                d[j - 1]
            };
            f(node(n));
        }
    }

    fn bytes(&self) -> usize {
        (self.base.len() + self.delta.capacity()) * std::mem::size_of::<E>()
    }
}

/// The ordered view's entries: node addresses, or node indices.
enum OrderedView {
    Addr(Ordered<*const u8>),
    Idx(Ordered<u32>),
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
    /// Side records and records (and, but with 12-byte slots, nodes).
    slab: Slab,
    /// Nodes, with 12-byte slots (indexed, never freed); else unused.
    nodes: Slab,
    policy: Policy,
    table: Index,
    ordered: OrderedView,
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
    /// 12-byte slots: the writers' stores of a slot's head word (one a
    /// write to an existing key) and side word (a side record made or
    /// given back).
    pub slot_stores: (u64, u64),
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
        let (slab, nodes, table, ordered) = if policy.slot12 {
            (
                Slab::indexed(true),
                Slab::indexed(false),
                Index::Narrow(Table12::new(1024, policy)),
                OrderedView::Idx(Ordered::new()),
            )
        } else {
            (
                Slab::new(),
                Slab::new(),
                Index::Wide(Table::new(1024, policy)),
                OrderedView::Addr(Ordered::new()),
            )
        };
        Store {
            slab,
            nodes,
            policy,
            table,
            ordered,
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
            slot_stores: (0, 0),
        }
    }

    /// The node of `key` (hash `h`) and its slot.
    fn find(&self, key: &[u8], h: u64, loads: &mut Loads) -> Option<(*mut u8, usize)> {
        match &self.table {
            Index::Wide(t) => t.find(key, h, loads),
            Index::Narrow(t) => t.find(key, h, &self.nodes, loads),
        }
    }

    /// Records a new side record (`s`, slab index `si`; 0: given back) of
    /// the key in `slot`: the slot's hint or side word.
    fn set_side(&mut self, slot: usize, s: u64, si: u32) {
        match &mut self.table {
            Index::Wide(t) => t.set_hint(slot, s),
            Index::Narrow(t) => {
                t.set(slot, SLOT_SIDE, si);
                self.slot_stores.1 += 1;
            }
        }
    }

    /// Records the key's new head (record index `ri`; 0: inline) in its
    /// 12-byte slot.
    fn set_head(&mut self, slot: usize, ri: u32) {
        if let Index::Narrow(t) = &mut self.table {
            t.set(slot, SLOT_HEAD, ri);
            self.slot_stores.0 += 1;
        }
    }

    /// A record-slab block of `bytes` bytes and its slab index (0 without
    /// 12-byte slots).
    fn alloc_rec(&mut self, bytes: usize) -> (*mut u8, u32) {
        if self.policy.slot12 {
            self.slab.alloc_idx(bytes)
        } else {
            (self.slab.alloc(bytes), 0)
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
        let Some((n, slot)) = self.find(key, h, &mut l) else {
            let (size, short) = node_size(key.len(), value.map(<[u8]>::len));
            let (n, ni) = if self.policy.slot12 {
                self.nodes.alloc_idx(size)
            } else {
                (self.slab.alloc(size), 0)
            };
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
            match (&mut self.table, &mut self.ordered) {
                (Index::Wide(t), OrderedView::Addr(o)) => {
                    t.insert(n, h, &self.hasher);
                    o.insert(n, |n| n);
                }
                (Index::Narrow(t), OrderedView::Idx(o)) => {
                    t.insert(ni, h, &self.nodes, &self.hasher);
                    let nodes = &self.nodes;
                    o.insert(ni, |i| nodes.addr(i));
                }
                _ => unreachable!("12-byte slots come with node indices"),
            }
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
                let (s, si) = self.alloc_rec(SIDE_BYTES);
                let s = s.cast::<Side>();
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
                self.set_side(slot, s as u64, si);
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
                self.set_head(slot, 0);
            } else {
                let size = rec_size(value.map(<[u8]>::len));
                let (r, ri) = self.alloc_rec(size);
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
                self.set_head(slot, ri);
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
                let found = self.find(key, self.hasher.hash_one(key), &mut Loads::default());
                self.set_side(found.expect("a live key").1, 0, 0);
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
        let (n, slot) = self.find(key, h, loads)?;
        loads.levels += 2;
        // The slot's hints, loaded beside the node: the side record (16-
        // and 12-byte slots) and the head record (12-byte slots; `pre`).
        let (side_hint, mut pre) = match &self.table {
            Index::Wide(t) => (t.hint(slot), 0),
            Index::Narrow(t) => {
                // Slot, chunk table, node: the table's step.
                loads.chunk_levels += 1;
                let (si, hi) = (t.get(slot, SLOT_SIDE), t.get(slot, SLOT_HEAD));
                let side = if si == 0 {
                    0
                } else {
                    loads.chunk += 1;
                    self.slab.addr(si) as u64
                };
                let head = if hi == 0 {
                    0
                } else {
                    loads.chunk += 1;
                    loads.record += 1;
                    loads.head_hinted += 1;
                    self.slab.addr(hi) as u64
                };
                (side, head)
            }
        };
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
            if side_hint == w & !3 {
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
                if v == pre {
                    // The head, loaded beside the node.
                    pre = 0;
                } else if v != INLINE {
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
        // SAFETY: the ordered view names live nodes.
        let mut visit = |n: *const u8| f(unsafe { node_key(n) });
        match &self.ordered {
            OrderedView::Addr(o) => o.scan(|n| n, &mut visit),
            OrderedView::Idx(o) => o.scan(|i| self.nodes.addr(i).cast_const(), &mut visit),
        }
    }

    /// Keys and slots of the hash table.
    pub fn table_stats(&self) -> (usize, usize) {
        (self.table.len(), self.table.cap())
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
        self.table.bytes()
    }

    /// Bytes of the ordered view's arrays (capacities).
    pub fn ordered_bytes(&self) -> usize {
        match &self.ordered {
            OrderedView::Addr(o) => o.bytes(),
            OrderedView::Idx(o) => o.bytes(),
        }
    }

    /// Bytes the slabs hold from the allocator (chunks and large blocks).
    pub fn slab_bytes(&self) -> usize {
        [&self.slab, &self.nodes]
            .iter()
            .map(|s| s.chunks.len() * CHUNK + s.large.values().map(Layout::size).sum::<usize>())
            .sum()
    }

    /// The indexed slabs' chunk tables (`Vec` capacities, 8 bytes an
    /// entry) and their chunk counts (nodes, records), of
    /// [`IDX_CHUNKS`] each; and the records slab's address-ordered copy
    /// (bookkeeping for reuse). Zeros for the other layouts.
    pub fn chunk_tables(&self) -> (usize, usize, usize, usize) {
        if !self.policy.slot12 {
            return (0, 0, 0, 0);
        }
        let table = (self.nodes.chunks.capacity() + self.slab.chunks.capacity()) * 8;
        let by = self.slab.by_addr.as_ref().map_or(0, |b| b.capacity() * 16);
        (table, self.nodes.chunks.len(), self.slab.chunks.len(), by)
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
