//! The point-lookup side of the index: an insert-only open-addressing hash
//! table of pointers to key nodes, read without locks.
//!
//! A point read hashes the key, loads the table pointer and probes: loads
//! only, no read-modify-write, no pointer chase per comparison beyond the
//! node itself (a skiplist compares through a key pointer at every level,
//! which measured at over 1 µs per lookup on 100,000 keys here).
//!
//! Keys are never removed (DESIGN.md, "Boundaries"), so a slot goes from
//! null to a node pointer once and never changes, and the table never holds
//! tombstones. Inserting a new key happens under the index's insert mutex
//! (writers creating keys only; readers never take it).
//!
//! # Growth
//!
//! When the table is three quarters full the inserter installs one half as
//! large again (so a table is between half and three quarters full once it
//! has grown; a named table's small first tables double until they reach a
//! default table's first size), empty but for the new key and linked to the table it
//! replaces (`prev`). The keys move over a few slots at a time: each later
//! insert moves [`MOVE_STEP`] slots of `prev` (rehashing their keys), and
//! the one that moves the last slot unlinks `prev` and retires it to the
//! epoch collector. So no single insert copies a large table, and a
//! migration ends within a sixth of the inserts until the next growth
//! (which, should one come first, finishes it). A table of at most
//! [`MOVE_WHOLE`] slots is moved whole by the insert that grows it: a
//! migration waits for later inserts, and a small table (a named table's)
//! whose inserts stop would otherwise stay migrating, its unmoved keys
//! probed in both tables by every read; a larger table's pending move is
//! finished by the maintenance pass ([`HashIndex::finish_migration`], from
//! `Engine::collect`). Meanwhile every key is in the new table or
//! still in `prev`, which is never written again: a lookup that misses in
//! the new table probes `prev` too. The new slot array comes zeroed from
//! the allocator (fresh pages, zeroed by the kernel as they are first
//! touched), so the insert that grows the table does not pass over it.
//!
//! # Orderings
//!
//! * Slot stores and the table-pointer store are Release; a reader's loads
//!   are Acquire, so a reader that finds a node sees its key and entry
//!   initialized.
//! * The store that unlinks `prev` is Release and a reader's load of `prev`
//!   is Acquire, before it probes the new table: a reader that finds no
//!   `prev` sees every slot the migration moved.
//! * A reader that must see a key (because it acquired a descriptor or a
//!   chain head that a writer published after inserting the key) sees it:
//!   the insert (Release) happens-before that later publication, which
//!   happens-before the reader's load of the table and slot.

use super::chain::{KeyEntry, Version};
use super::{slab, SendPtr};
use crate::machinery::epoch::{Collector, Guard};
use crate::sync::{mutant as m, ordering_or_mutant, AtomicPtr, AtomicU64, Ordering, Witness};
use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::hash::BuildHasher;
use std::ptr::{self, NonNull};

/// One key: its length and bytes, then its [`KeyEntry`] at the next
/// 8-byte boundary, in one exact-size block of the index's arena
/// ([`Arena`]): 56 bytes for an 8-byte key, 72 for a 24-byte one. Built
/// when the key is first written, freed when the index drops. The ordered
/// view (scans) and the hash table (point reads) both point here.
///
/// The type is the node's head; the key bytes follow it at [`KEY_AT`] and
/// the entry at [`entry_at`] of the key's length, written once before the
/// node is published ([`HashIndex::new_node`]) and reached through
/// [`Node::key`] and [`Node::entry`]. The key comes first: a scan's or a
/// merge's comparisons read the node's first bytes only. A point read's
/// key comparison and its loads of the entry touch this block only: no
/// second block for a key of any length. A node is 8-aligned and may cross
/// a cache line; lookups and scans prefetch the lines their first touch
/// reads ([`prefetch_node`]).
#[repr(C)]
pub(crate) struct Node {
    /// The key's length (below 2 GiB: `EngineConfig::MAX_KEY_LEN`).
    len: u32,
    /// Zero-sized but under loom, where a reader that finds the node checks
    /// that its building happens-before (the loom model `hash_index`).
    witness: Witness,
}

/// Where a node's key bytes start: right after its head.
const KEY_AT: usize = std::mem::size_of::<Node>();

/// Where a node's entry starts for a key of `key_len` bytes: after the key,
/// at the next multiple of 8.
#[inline]
fn entry_at(key_len: usize) -> usize {
    (KEY_AT + key_len).next_multiple_of(NODE_ALIGN)
}

/// The bytes of the block that holds a node for a key of `key_len` bytes
/// (a multiple of 8, the arena's alignment).
#[inline]
fn node_bytes(key_len: usize) -> usize {
    entry_at(key_len) + std::mem::size_of::<KeyEntry>()
}

/// A node's alignment, and the granule of the arena's bump: the slab's,
/// whose global-allocator blocks hold the nodes too large for a chunk.
const NODE_ALIGN: usize = slab::GRANULE;
const _: () = assert!(
    std::mem::align_of::<Node>() <= NODE_ALIGN
        && std::mem::align_of::<KeyEntry>() <= NODE_ALIGN
        && std::mem::size_of::<KeyEntry>().is_multiple_of(NODE_ALIGN),
    "an 8-aligned block is aligned enough for a node and its entry"
);

impl Node {
    /// The address `at` bytes into this node's block, with the provenance
    /// of the block's arena chunk (the head type's reference covers only
    /// the head), which `HashIndex::new_node` exposed when it built the
    /// node.
    #[inline(always)]
    fn at<T>(&self, at: usize) -> *const T {
        ptr::with_exposed_provenance((self as *const Node).addr() + at)
    }

    /// The key's bytes.
    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        // SAFETY: the node's block holds `len` key bytes at `KEY_AT`,
        // written by `HashIndex::new_node` before the node was published
        // and never written again; the block lives as long as the index
        // (which `&self` borrows).
        unsafe { std::slice::from_raw_parts(self.at(KEY_AT), self.len as usize) }
    }

    /// The key's entry.
    #[inline]
    pub(crate) fn entry(&self) -> &KeyEntry {
        // SAFETY: the node's block holds an initialized `KeyEntry` at
        // `entry_at(len)`, 8-aligned, written by `HashIndex::new_node`
        // before the node was published and dropped only with the index
        // (which `&self` borrows); it is shared through atomics only.
        unsafe { &*self.at::<KeyEntry>(entry_at(self.len as usize)) }
    }

    /// The node whose key bytes `key` is (as [`Node::key`] lent them):
    /// `KEY_AT` bytes before them, with the provenance `new_node` exposed.
    /// Only an address here; [`Index::key_of`](super::index::Index::key_of)
    /// dereferences it under the contract that makes it a node.
    #[inline]
    pub(crate) fn of_key(key: &[u8]) -> *const Node {
        ptr::with_exposed_provenance(key.as_ptr().addr().wrapping_sub(KEY_AT))
    }

    /// Is this node's key `key`? A short key compares with a few
    /// fixed-width loads ([`short_eq`]), not a call to `memcmp`.
    #[inline(always)]
    fn is(&self, key: &[u8]) -> bool {
        self.len as usize == key.len() && short_eq(self.key(), key)
    }
}

/// Starts loading what a lookup's or a scan's first touch of a node reads:
/// the line of its first byte and, when it is another line (a node is
/// 8-aligned), the line of an 8-byte key's last byte.
#[inline(always)]
pub(super) fn prefetch_node(n: *const Node) {
    super::prefetch(n);
    let last = n.cast::<u8>().wrapping_add(KEY_AT + 7);
    // Different lines when the addresses differ above their low 6 bits;
    // `>` is equivalent: 11 bytes apart, their XOR is never exactly 64.
    if (n.addr() ^ last.addr()) >= 64 {
        super::prefetch(last);
    }
}

/// `a == b` for slices of the same length: up to 24 bytes with two or
/// three overlapping loads of up to 8 bytes from each side (the first and
/// the last bytes, and the middle ones for 17 to 24), longer ones with
/// the slice comparison. Nothing but a point read's key comparison needs
/// it inline: `memcmp` costs a call and its register saves for an 8-byte
/// key.
#[inline(always)]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    /// The `N` bytes of `s` from `i` (`i + N <= s.len()`: the callers'
    /// length tests let the compiler drop the bounds checks).
    #[inline(always)]
    fn word<const N: usize>(s: &[u8], i: usize) -> [u8; N] {
        let mut w = [0; N];
        w.copy_from_slice(&s[i..i + N]);
        w
    }
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // Each bound below is a choice of width, not of outcome: a key at a
    // bound moved to the neighbouring branch (`>` for `>=`, `<` for `<=`)
    // is still covered byte for byte (equivalent mutants), except at
    // `n >= 2`, whose neighbour compares one byte.
    if n >= 8 {
        let ends = |i| u64::from_ne_bytes(word(a, i)) ^ u64::from_ne_bytes(word(b, i));
        if n <= 16 {
            return ends(0) | ends(n - 8) == 0;
        }
        if n <= 24 {
            return ends(0) | ends(8) | ends(n - 8) == 0;
        }
        return a == b;
    }
    if n >= 4 {
        let ends = |i| u32::from_ne_bytes(word(a, i)) ^ u32::from_ne_bytes(word(b, i));
        return ends(0) | ends(n - 4) == 0;
    }
    if n >= 2 {
        let ends = |i| u16::from_ne_bytes(word(a, i)) ^ u16::from_ne_bytes(word(b, i));
        return ends(0) | ends(n - 2) == 0;
    }
    a.first() == b.first()
}

/// A table slot. `word`: the node pointer in the low [`ADDR_BITS`] bits
/// and the top bits of its key's hash (the *tag*) above them, so a probe
/// that meets another key's node rejects it without touching the node; 0:
/// empty (a node pointer is never null). `hints`: two versions of the key
/// named by their slab blocks ([`Hints`]), its head and its version at the
/// stable timestamp of its last prune, as its last committer stored them;
/// a lookup prefetches them beside the node so the node's and the version's
/// misses overlap (a read of the head, or at a stable timestamp, is then
/// two dependent misses: the slot, then node and version together). The
/// hints are never dereferenced, only prefetched (a prefetch reads nothing
/// and never faults): a stale or freed hint costs a miss, never a wrong
/// read, so their loads and stores are Relaxed.
struct Slot {
    word: AtomicU64,
    hints: AtomicU64,
}

/// A slot's `hints` word: the head's block name in the low 32 bits, the
/// stable version's above (`slab::block_name`; 0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hints(u64);

impl Hints {
    /// No hint.
    pub(crate) const NONE: Hints = Hints(0);

    /// Names `head` and `stable` (null, or a block outside the slab:
    /// none).
    #[inline]
    pub(crate) fn new(head: *const Version, stable: *const Version) -> Hints {
        let h = u64::from(slab::block_name(head.cast()));
        let s = u64::from(slab::block_name(stable.cast()));
        Hints(h | s << 32)
    }

    /// Starts loading the versions `p` asks for: the head's first line,
    /// and for [`Want::Stable`] the stable version's first three lines too
    /// (its header and a value of up to 144 bytes).
    #[inline]
    fn prefetch(self, p: Prefetch) {
        let names = p.names;
        super::prefetch(names.addr(self.0 as u32));
        let s = (self.0 >> 32) as u32;
        if p.stable && s != 0 && s != self.0 as u32 {
            let p = names.addr(s);
            super::prefetch(p);
            super::prefetch(p.wrapping_add(64));
            super::prefetch(p.wrapping_add(128));
        }
    }
}

/// What a probe prefetches in each slot whose tag matches: the versions a
/// [`Want`] other than [`Want::Nothing`] asks for, at the slab's
/// [`slab::Names`] (loaded once, by [`Prefetch::of`]).
#[derive(Clone, Copy)]
struct Prefetch {
    /// [`Want::Stable`]: the stable version as well as the head.
    stable: bool,
    names: slab::Names,
}

impl Prefetch {
    /// What `want` asks a probe to prefetch (`None`: nothing).
    #[inline]
    fn of(want: Want) -> Option<Prefetch> {
        (want != Want::Nothing).then(|| Prefetch {
            stable: want == Want::Stable,
            names: slab::names(),
        })
    }
}

/// Where a lookup found a key's slot: the table's address and the slot's
/// position in it, for [`HashIndex::hint`] to store there again without a
/// probe while that table is still the current one. Only compared, never
/// dereferenced: a table freed and another allocated at its address (with
/// a slot at that position holding another key) gets that key a stale
/// hint, never an unsafe access.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotAt {
    table: usize,
    index: usize,
}

impl SlotAt {
    /// Not known (a key just inserted): the hint probes.
    pub(crate) const NONE: SlotAt = SlotAt { table: 0, index: 0 };
}

/// Which of a slot's hinted versions a lookup prefetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// None (a lookup that reads no version).
    Nothing,
    /// The head (a read with no timestamp bound; a writer).
    Head,
    /// The head and the stable version (a read with a timestamp bound).
    Stable,
}

/// Bits of a node address: user-space addresses on the 64-bit targets this
/// builds for fit in 48 (checked for every node in `new_node`).
const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

/// The tag of `hash`, in place above the address bits.
#[inline]
fn tag(hash: u64) -> u64 {
    hash & !ADDR_MASK
}

/// The slot word for `node` with `hash`'s tag.
#[inline]
fn pack(node: *mut Node, hash: u64) -> u64 {
    node.expose_provenance() as u64 | tag(hash)
}

/// The node pointer of a non-empty slot word.
#[inline]
fn node_of(w: u64) -> *mut Node {
    ptr::with_exposed_provenance_mut((w & ADDR_MASK) as usize)
}

/// A node pointer found by [`HashIndex::candidate`], to resolve.
#[derive(Clone, Copy)]
pub(crate) struct Candidate(*const Node);

impl Candidate {
    /// No candidate yet.
    pub(crate) const NONE: Candidate = Candidate(ptr::null());
}

/// The index's hasher, seeded afresh for each index.
#[cfg(not(loom))]
type Hasher = foldhash::fast::RandomState;
/// Under loom (where foldhash is not a dependency) std's SipHash with its
/// fixed keys: every execution of a model must place its keys alike.
#[cfg(loom)]
type Hasher = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// Slots in a new index's table.
#[cfg(not(loom))]
const FIRST_CAP: usize = 1024;
/// Slots in a new index's table under loom: few enough that a model's
/// handful of inserts grows it and runs a migration.
#[cfg(loom)]
const FIRST_CAP: usize = 8;

/// Slots in a new named table's index (a small table costs about 1 KiB of
/// slots, not 16; it doubles until it has [`FIRST_CAP`], then grows as any
/// does).
#[cfg(not(loom))]
const SMALL_CAP: usize = 64;
/// Under loom, as [`FIRST_CAP`].
#[cfg(loom)]
const SMALL_CAP: usize = FIRST_CAP;

/// The most keys a table of `cap` slots holds before it grows: three
/// quarters (a hit then probes about 2.5 slots on average, at most,
/// and an empty slot always ends a probe).
#[inline]
fn max_len(cap: usize) -> usize {
    cap / 4 * 3
}

/// The size of the table that replaces a full one of `cap` slots: half as
/// large again (a multiple of 64), so the new table starts half full; below
/// [`FIRST_CAP`] (a named table's first tables) twice as large, so a small
/// table's sizes meet a default one's at `FIRST_CAP` and the same number of
/// keys sits in the same number of slots in either kind of table.
#[inline]
fn grown(cap: usize) -> usize {
    if cap < FIRST_CAP {
        cap * 2
    } else {
        (cap + cap / 2).next_multiple_of(64)
    }
}

/// `cap` empty slots, from a zeroed allocation: the allocator hands a
/// large one over as fresh pages the kernel zeroes on first touch, so the
/// creation that grows the table pays neither a pass over it nor its page
/// faults (the moves and inserts that follow touch the pages).
#[cfg(not(loom))]
fn empty_slots(cap: usize) -> Box<[Slot]> {
    let layout = Layout::array::<Slot>(cap).expect("a table's slots fit the address space");
    assert!(layout.size() > 0, "a table has slots");
    // SAFETY: the layout's size is not zero (asserted above).
    let p = unsafe { alloc::alloc_zeroed(layout) }.cast::<Slot>();
    if p.is_null() {
        alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` is the global allocator's, with the layout of `cap` slots,
    // which `Box<[Slot]>` frees with; all-zero bits are an empty slot (the
    // shim's atomics are std's, transparently: a 0 word and no hints).
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, cap)) }
}

/// `cap` empty slots, built one by one: under loom all-zero bits are not an
/// atomic.
#[cfg(loom)]
fn empty_slots(cap: usize) -> Box<[Slot]> {
    (0..cap)
        .map(|_| Slot {
            word: AtomicU64::new(0),
            hints: AtomicU64::new(0),
        })
        .collect()
}

struct Table {
    slots: Box<[Slot]>,
    /// Zero-sized but under loom, where a lookup checks that the table's
    /// building happens-before its probe (the loom model `hash_index`).
    witness: Witness,
    /// The table this one replaced, while its keys are still moving here
    /// (null: none, or every slot moved). Set before this table is
    /// installed; unlinked once, by the insert that moves its last slot.
    prev: AtomicPtr<Table>,
}

/// The most slots a table may have for the insert that grows it to move
/// all of them at once (at most this many slot moves, once per growth of
/// a small table), so a small table, such as a named table's, is never
/// left migrating when its inserts stop. Under loom 0:
/// the models exercise the stepwise migration.
#[cfg(not(loom))]
const MOVE_WHOLE: usize = 8 * 1024;
/// Under loom, see above.
#[cfg(loom)]
const MOVE_WHOLE: usize = 0;

/// Slots of the previous table each insert moves during a migration. A
/// table of `1.5 c` slots, installed when the index holds `0.75 c` keys,
/// grows again after `0.375 c` more inserts; moving the `c` slots of its
/// `prev` takes `c / 16` of them, a sixth.
const MOVE_STEP: usize = 16;

/// Slots [`HashIndex::finish_migration`] moves per hold of the insert
/// mutex: a key creator waits for at most this many slot moves.
const FINISH_STEP: usize = 4 * 1024;

impl Table {
    /// The first slot of `hash`'s probe sequence: a Fibonacci multiply,
    /// then its top bits scaled to the table's size (any size, not only a
    /// power of two), so a hasher with weak low bits cannot cluster the
    /// probes.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        let mixed = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((u128::from(mixed) * self.slots.len() as u128) >> 64) as usize
    }

    /// The slot after `i` in a probe sequence (wrapping to the first).
    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// An empty table of `cap` slots, migrating from `prev` (or null).
    fn with_capacity(cap: usize, prev: *mut Table) -> Box<Table> {
        Box::new(Table {
            slots: empty_slots(cap),
            witness: Witness::new(),
            prev: AtomicPtr::new(prev),
        })
    }

    /// The table still migrating into this one (null: none). Acquire,
    /// required where a lookup relies on a null (`find`): pairs with the
    /// Release unlinking store in `HashIndex::migrate`, so a reader that
    /// sees null sees every slot moved here. Stronger than needed for
    /// `hint`, whose miss only leaves a stale hint.
    #[inline]
    fn prev(&self) -> *mut Table {
        self.prev
            .load(ordering_or_mutant(Ordering::Acquire, m::RELAXED_PREV_LOAD))
    }

    /// The slot holding `key`'s node, and its word, in this table only,
    /// prefetching the versions `want` names.
    #[inline]
    fn slot_of(&self, key: &[u8], hash: u64, want: Want) -> Option<(&Slot, u64)> {
        self.probe(self.home(hash), hash, Prefetch::of(want), |w| {
            // SAFETY: nodes are freed only when the index drops, and the
            // caller borrows the index.
            let n = unsafe { &*node_of(w) };
            n.witness.check();
            n.is(key)
        })
    }

    /// The first slot of `hash`'s probe sequence (starting at its `home`)
    /// whose tag matches, as a candidate (its node and the versions
    /// `prefetch` asks for started); `None` if an empty slot comes first.
    /// Touches slots only.
    #[inline(always)]
    fn first_match(&self, home: usize, hash: u64, prefetch: Option<Prefetch>) -> Option<Candidate> {
        self.probe(home, hash, prefetch, |w| {
            prefetch_node(node_of(w));
            true
        })
        .map(|(_, w)| Candidate(node_of(w)))
    }

    /// Walks `hash`'s probe sequence from `home` (`self.home(hash)`) to the
    /// first slot whose tag matches and whose word `accept` takes,
    /// prefetching what `prefetch` asks for (`None`: nothing) in each slot
    /// whose tag matches (before `accept`, which may wait for the node);
    /// `None` if an empty slot comes first.
    #[inline(always)]
    fn probe(
        &self,
        home: usize,
        hash: u64,
        prefetch: Option<Prefetch>,
        mut accept: impl FnMut(u64) -> bool,
    ) -> Option<(&Slot, u64)> {
        // The slice and the tag once, outside the loop (the Acquire loads
        // would otherwise have them loaded again each step).
        let slots = &self.slots[..];
        // A word's tag bits shifted down, compared with the hash's:
        // `w & !ADDR_MASK == tag(hash)`, in fewer instructions.
        let tag = hash >> ADDR_BITS;
        // From `home` to the last slot, then on from the first: a table is
        // at most three quarters full, so an empty slot ends the walk.
        let mut from = home;
        loop {
            for slot in &slots[from..] {
                // Acquire, required: pairs with the Release slot store in
                // `Table::place` (the node's key and entry; loom
                // `hash_index`).
                let w = slot.word.load(Ordering::Acquire);
                if w == 0 {
                    return None;
                }
                if w >> ADDR_BITS == tag {
                    if let Some(p) = prefetch {
                        // Relaxed: hints, only prefetched (see `Slot`).
                        Hints(slot.hints.load(Ordering::Relaxed)).prefetch(p);
                    }
                    if accept(w) {
                        return Some((slot, w));
                    }
                }
            }
            from = 0;
        }
    }

    /// Stores `node` in the first empty slot of its probe sequence. Only the
    /// inserter (holding `inserting`) calls this.
    fn place(&self, node: *mut Node, hash: u64, hints: Hints) {
        let mut i = self.home(hash);
        loop {
            let s = &self.slots[i];
            // Relaxed: only the inserter writes slots, under the mutex.
            if s.word.load(Ordering::Relaxed) == 0 {
                // Relaxed: hints, never dereferenced.
                s.hints.store(hints.0, Ordering::Relaxed);
                // Release, required: pairs with the Acquire slot loads in
                // `Table::probe`, so a reader that finds the node sees it
                // fully built (loom `hash_index`, publication).
                s.word.store(
                    pack(node, hash),
                    ordering_or_mutant(Ordering::Release, m::RELAXED_SLOT_STORE),
                );
                return;
            }
            i = self.next(i);
        }
    }
}

/// Bytes of an arena chunk (the global allocator's 4 KiB class: no
/// rounding). A node of more than [`ALONE`] bytes gets a block of its own.
const CHUNK_BYTES: usize = 4096;
/// The largest node carved from a chunk: a larger one would leave up to
/// its size unused at a chunk's end.
const ALONE: usize = CHUNK_BYTES / 8;

/// Where nodes live: exact-size blocks carved in order from chunks of
/// [`CHUNK_BYTES`] (a node never spans two, and its head and first key
/// bytes never span two lines: [`node_start`]), or, past [`ALONE`] bytes,
/// a block each; freed only when the index drops (keys are never removed).
struct Arena {
    /// Every chunk with the bytes carved from it (the last one's grow).
    chunks: Vec<(*mut u8, usize)>,
    /// The nodes of more than [`ALONE`] bytes, each its own block.
    alone: Vec<*mut Node>,
}

#[inline]
fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK_BYTES, LINE).expect("a fixed, small size")
}

/// A cache line; chunks are aligned to one.
const LINE: usize = 64;

/// Bytes at a node's start that stay in one line: its head and 8 key bytes,
/// what a scan's comparison reads.
const HEAD_IN_LINE: usize = KEY_AT + 8;

/// Where the node carved at offset `at` of a chunk starts: `at`, or the
/// next line when the node's first [`HEAD_IN_LINE`] bytes would cross one
/// (one start in eight for 56- and 72-byte nodes: a byte a key).
#[inline]
fn node_start(at: usize) -> usize {
    // `>=` is equivalent: `at` is a multiple of 8 and the head 12 bytes, so
    // the head never ends exactly at a line's end.
    if at % LINE + HEAD_IN_LINE > LINE {
        at.next_multiple_of(LINE)
    } else {
        at
    }
}

impl Arena {
    /// A block for a node of `bytes` (a multiple of [`NODE_ALIGN`]).
    fn carve(&mut self, bytes: usize) -> *mut Node {
        // `>=` is equivalent: a node of exactly `ALONE` bytes is as sound
        // alone as in a chunk (a choice of where, not of what).
        if bytes > ALONE {
            let p = slab::global_alloc(bytes / NODE_ALIGN)
                .as_ptr()
                .cast::<Node>();
            self.alone.push(p);
            return p;
        }
        // A new chunk when this one has no room; `>=` is equivalent: a node
        // that would end exactly at the chunk's end goes to a new one (8 to
        // 72 bytes left unused, nothing read differently).
        if self
            .chunks
            .last()
            .is_none_or(|&(_, used)| node_start(used) + bytes > CHUNK_BYTES)
        {
            let layout = chunk_layout();
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { alloc::alloc(layout) };
            if p.is_null() {
                alloc::handle_alloc_error(layout);
            }
            self.chunks.push((p, 0));
        }
        let (chunk, used) = self.chunks.last_mut().expect("a chunk with room exists");
        let at = node_start(*used);
        // `at + bytes <= CHUNK_BYTES`: in bounds of the chunk, and
        // 8-aligned (`at` is a sum of multiples of 8).
        let p = chunk.wrapping_add(at).cast::<Node>();
        *used = at + bytes;
        p
    }
}

/// The hash side of the index.
pub(crate) struct HashIndex {
    table: AtomicPtr<Table>,
    /// Keys stored; only the inserter (under the mutex) reads or writes it.
    len: std::cell::Cell<usize>,
    /// Slots of the current table's `prev` already moved; as `len`.
    moved: std::cell::Cell<usize>,
    /// Only the inserter (under the mutex) touches it, and the drop.
    arena: UnsafeCell<Arena>,
    hasher: Hasher,
    /// Held by whoever creates a key (writers only; readers never take it).
    inserting: crate::sync::Mutex<()>,
}

// SAFETY: `len`, `moved` and `arena` are touched only by `insert_locked`,
// `migrate` and `new_node`, whose callers hold the index's insert mutex (see their
// # Safety), and by the drop (`&mut self`); every other field is atomic or
// immutable after construction. Nodes are Send + Sync (KeyEntry is built
// from atomics and owned bytes).
unsafe impl Sync for HashIndex {}
// SAFETY: as above; nothing in the index is tied to a thread.
unsafe impl Send for HashIndex {}

impl HashIndex {
    pub(crate) fn new() -> HashIndex {
        HashIndex::with_first_capacity(FIRST_CAP)
    }

    /// An index starting with a small table (a named table's).
    pub(crate) fn new_small() -> HashIndex {
        HashIndex::with_first_capacity(SMALL_CAP)
    }

    fn with_first_capacity(cap: usize) -> HashIndex {
        HashIndex {
            table: AtomicPtr::new(Box::into_raw(Table::with_capacity(cap, ptr::null_mut()))),
            len: std::cell::Cell::new(0),
            moved: std::cell::Cell::new(0),
            arena: UnsafeCell::new(Arena {
                chunks: Vec::new(),
                alone: Vec::new(),
            }),
            hasher: Hasher::default(),
            inserting: crate::sync::Mutex::new(()),
        }
    }

    /// The node for `key`, inserting a new one if the key is absent. A new
    /// node is handed to `on_new` (under the insert mutex, before readers
    /// of this table can find it) and the second value is true. Nodes live
    /// until the index drops, hence the `'s` borrow.
    // The store inserts through `get_or_insert_at`; the tests, the loom
    // model and the bench hooks through this.
    #[cfg_attr(not(any(test, loom, feature = "bench-hooks")), allow(dead_code))]
    pub(crate) fn get_or_insert<'s>(
        &'s self,
        key: &[u8],
        collector: &Collector,
        guard: &Guard,
        on_new: impl FnOnce(&'s Node),
    ) -> (&'s Node, bool) {
        let (n, new, _) = self.get_or_insert_at(key, collector, guard, on_new);
        (n, new)
    }

    /// [`HashIndex::get_or_insert`], also saying where the key's slot was
    /// found ([`SlotAt::NONE`] for a key this call inserted).
    pub(crate) fn get_or_insert_at<'s>(
        &'s self,
        key: &[u8],
        collector: &Collector,
        guard: &Guard,
        on_new: impl FnOnce(&'s Node),
    ) -> (&'s Node, bool, SlotAt) {
        let h = self.hash(key);
        let found = Self::in_either(self.current(guard), |t| {
            let (s, w) = t.slot_of(key, h, Want::Head)?;
            let at = SlotAt {
                table: ptr::from_ref(t).addr(),
                index: (ptr::from_ref(s).addr() - t.slots.as_ptr().addr())
                    / std::mem::size_of::<Slot>(),
            };
            Some((w, at))
        });
        if let Some((w, at)) = found {
            // SAFETY: as in `get`.
            return (unsafe { &*node_of(w) }, false, at);
        }
        let _g = self.inserting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = self.get(key, h, Want::Head, guard) {
            return (n, false, SlotAt::NONE);
        }
        // SAFETY: we hold `inserting`.
        let node = unsafe { self.new_node(key) };
        // SAFETY: nodes live until the index drops, which the `'s` borrow of
        // `self` rules out; `new_node` wrote it in full.
        let n: &'s Node = unsafe { &*node };
        on_new(n);
        // SAFETY: we hold `inserting`, `node` is fresh from `new_node`, and
        // the re-check above under the mutex found no node for `key`.
        unsafe { self.insert_locked(node, collector, guard) };
        (n, true, SlotAt::NONE)
    }

    /// `key`'s hash: its bytes alone, without the length prefix `Hash`
    /// for `[u8]` writes (foldhash mixes the length into a write of bytes
    /// already; under loom SipHash does too, at its end), nor a
    /// finishing round for it.
    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        use std::hash::Hasher as _;
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish()
    }

    /// The current table, loaded under `_guard`.
    #[inline]
    fn current<'g>(&self, _guard: &'g Guard) -> &'g Table {
        // Acquire, required: pairs with the Release table store in
        // `insert_locked` (the new table's slots and its `prev`; loom
        // `hash_index`, migration).
        let t = self
            .table
            .load(ordering_or_mutant(Ordering::Acquire, m::RELAXED_TABLE_LOAD));
        // SAFETY: loaded under `_guard`; a replaced table is retired to the
        // epoch collector only once its migration has ended (it is then no
        // table's `prev`), and freed only after every guard that could have
        // loaded it drops (invariant 11).
        let t = unsafe { &*t };
        t.witness.check();
        t
    }

    /// `look` in `t`, then, if it finds nothing, in the table still
    /// migrating into `t`: every key is in one of the two.
    #[inline]
    fn in_either<'g, R>(t: &'g Table, look: impl Fn(&'g Table) -> Option<R>) -> Option<R> {
        // Loaded before `t` is probed (module docs, "Orderings").
        let prev = t.prev();
        // One call site of `look` (`t`, then `prev`), so it is inlined
        // once, not out of line for two.
        let (mut t, mut next) = (t, prev);
        loop {
            if let Some(r) = look(t) {
                return Some(r);
            }
            if next.is_null() {
                return None;
            }
            // SAFETY: `prev` was linked from `t` when loaded, so it had not
            // been retired then (it is retired only after it is unlinked),
            // and the caller's guard, under which `t` was loaded, keeps it
            // alive.
            t = unsafe { &*next };
            next = ptr::null_mut();
        }
    }

    /// The slot holding `key`'s node, and its word: in `t`, or in the
    /// table still migrating into `t`.
    #[inline]
    fn find<'g>(t: &'g Table, key: &[u8], hash: u64, want: Want) -> Option<(&'g Slot, u64)> {
        Self::in_either(t, |t| t.slot_of(key, hash, want))
    }

    /// The node for `key`, if inserted, prefetching the versions `want`
    /// names. Loads only.
    #[inline]
    pub(crate) fn get<'s>(
        &'s self,
        key: &[u8],
        hash: u64,
        want: Want,
        guard: &Guard,
    ) -> Option<&'s Node> {
        let (_, w) = Self::find(self.current(guard), key, hash, want)?;
        // SAFETY: nodes are freed only when the index drops, which needs
        // `&mut`; the `'s` borrow of `self` rules that out.
        Some(unsafe { &*node_of(w) })
    }

    /// Stores `hints` in `key`'s slot (see `Slot`): called by a committer
    /// after it pruned the key. Straight into the slot `at` names while its
    /// table is the current one, else a probe; nothing if the key is
    /// absent. A store into a table that growth is moving out of, into a
    /// slot already moved, is lost, which only leaves stale hints.
    #[inline]
    pub(crate) fn hint(&self, key: &[u8], at: SlotAt, hints: Hints, guard: &Guard) {
        let t = self.current(guard);
        if ptr::from_ref(t).addr() == at.table {
            if let Some(slot) = t.slots.get(at.index) {
                // Relaxed: hints, never dereferenced.
                slot.hints.store(hints.0, Ordering::Relaxed);
                return;
            }
        }
        if let Some((slot, _)) = Self::find(t, key, self.hash(key), Want::Nothing) {
            // Relaxed: hints, never dereferenced.
            slot.hints.store(hints.0, Ordering::Relaxed);
        }
    }

    /// Starts loading the home slot of `key` in the current table (a
    /// batch's [`HashIndex::hint`] then probes from a loaded line). Loads
    /// only.
    #[inline]
    pub(crate) fn prefetch_slot(&self, key: &[u8], guard: &Guard) {
        let t = self.current(guard);
        // `home` is below the table's length: a prefetch of its slot.
        super::prefetch(t.slots.as_ptr().wrapping_add(t.home(self.hash(key))));
    }

    /// A batch of lookups' hold on the index ([`Batch`]): the current
    /// table, the one still migrating into it and the slab's [`slab::Names`],
    /// each loaded once for the batch, not once a key. Loads only.
    #[inline]
    pub(crate) fn batch<'s, 'g>(&'s self, want: Want, guard: &'g Guard) -> Batch<'s, 'g> {
        let t = self.current(guard);
        // Loaded before `t` is probed (module docs, "Orderings"), as in
        // `in_either`: once, before every probe of the batch.
        let prev = t.prev();
        // SAFETY: as in `in_either`: linked from `t` when loaded, and
        // `guard`, under which `t` was loaded, keeps it alive for `'g`.
        let prev = unsafe { prev.as_ref() };
        Batch {
            index: std::marker::PhantomData,
            t,
            prev,
            prefetch: Prefetch::of(want),
        }
    }
}

/// Batched lookups (`Index::get_batch`) of keys whose hashes the caller
/// computed ([`HashIndex::hash`]), in three steps, each taken for every key
/// of the batch before the next, so their cache misses overlap:
/// [`prefetch_slot`](Batch::prefetch_slot), [`candidate`](Batch::candidate),
/// [`resolve`](Batch::resolve). The tables are the ones
/// [`HashIndex::batch`] loaded: a key inserted since may be missed, as by
/// a lookup that ran just before the insert.
pub(crate) struct Batch<'s, 'g> {
    /// Nodes found live as long as this borrow of the index.
    index: std::marker::PhantomData<&'s HashIndex>,
    t: &'g Table,
    prev: Option<&'g Table>,
    prefetch: Option<Prefetch>,
}

impl Batch<'_, '_> {
    /// First step: starts loading the slot where `hash`'s probe sequence
    /// begins (in both tables while a migration runs), and returns that
    /// slot's position in the current table (the `home` of
    /// [`candidate`](Batch::candidate)). Loads only.
    #[inline]
    pub(crate) fn prefetch_slot(&self, hash: u64) -> usize {
        let home = self.t.home(hash);
        // `home` is below the table's length: a prefetch of its slot.
        super::prefetch(self.t.slots.as_ptr().wrapping_add(home));
        if let Some(p) = self.prev {
            super::prefetch(p.slots.as_ptr().wrapping_add(p.home(hash)));
        }
        home
    }

    /// Second step: the node of the first slot in `hash`'s probe sequence
    /// (from `home`, [`prefetch_slot`](Batch::prefetch_slot)'s) whose hash
    /// matches (null if an empty slot comes first, in the table migrating
    /// into this one as well), and starts loading it and the slot's hinted
    /// versions. Touches slots only, never a node, so a batch's node misses
    /// overlap.
    #[inline(always)]
    pub(crate) fn candidate(&self, hash: u64, home: usize) -> Candidate {
        if let Some(c) = self.t.first_match(home, hash, self.prefetch) {
            return c;
        }
        match self.prev {
            None => Candidate::NONE,
            Some(p) => self.candidate_in_prev(p, hash),
        }
    }

    /// [`candidate`](Batch::candidate) in the table migrating into the
    /// current one (while a migration runs only).
    #[cold]
    #[inline(never)]
    fn candidate_in_prev(&self, p: &Table, hash: u64) -> Candidate {
        p.first_match(p.home(hash), hash, self.prefetch)
            .unwrap_or(Candidate::NONE)
    }
}

impl<'s> Batch<'s, '_> {
    /// Last step: the node for `key` given its
    /// [`candidate`](Batch::candidate), probing on (as [`HashIndex::get`],
    /// in the batch's tables) only when the candidate holds another key
    /// with the same tag.
    #[inline(always)]
    pub(crate) fn resolve(&self, key: &[u8], hash: u64, c: Candidate) -> Option<&'s Node> {
        if c.0.is_null() {
            return None;
        }
        // SAFETY: a candidate is a node pointer found in a slot; nodes are
        // freed only when the index drops, which the `'s` borrow of the
        // index rules out.
        let n = unsafe { &*c.0 };
        n.witness.check();
        if n.is(key) {
            return Some(n);
        }
        self.probe_on(key, hash)
    }

    /// [`resolve`](Batch::resolve) when the candidate holds another key.
    #[cold]
    #[inline(never)]
    fn probe_on(&self, key: &[u8], hash: u64) -> Option<&'s Node> {
        let look = |t: &Table| t.slot_of(key, hash, Want::Head).map(|(_, w)| node_of(w));
        let w = look(self.t).or_else(|| self.prev.and_then(look))?;
        // SAFETY: a node pointer found in a slot, as in `resolve`.
        Some(unsafe { &*w })
    }
}

impl HashIndex {
    /// Builds a node for `key` (not yet inserted) in the arena. It lives
    /// until the index drops, inserted or not.
    ///
    /// # Safety
    /// The caller holds the index's insert mutex (one inserter at a time).
    unsafe fn new_node(&self, key: &[u8]) -> *mut Node {
        // SAFETY: the caller holds the insert mutex, so no other thread
        // touches the arena now.
        let a = unsafe { &mut *self.arena.get() };
        let len = u32::try_from(key.len()).expect("a key is below 2 GiB (`MAX_KEY_LEN`)");
        let n = a.carve(node_bytes(key.len()));
        // SAFETY: `carve` gave a fresh block of `node_bytes(key.len())`
        // bytes, 8-aligned (enough for a node and its entry): the head,
        // the key's bytes from `KEY_AT`, the entry at `entry_at`.
        unsafe {
            n.write(Node {
                len,
                witness: Witness::new(),
            });
            ptr::copy_nonoverlapping(key.as_ptr(), n.cast::<u8>().add(KEY_AT), key.len());
            entry_of(n).write(KeyEntry::new());
        }
        assert!(
            n.expose_provenance() as u64 & !ADDR_MASK == 0,
            "a node address above {ADDR_BITS} bits cannot be tagged in a slot word"
        );
        n
    }

    /// Inserts `node` (a key not present): moves a step of a running
    /// migration, then places the key, growing the table when three
    /// quarters full (module docs, "Growth").
    ///
    /// # Safety
    /// The caller holds the index's insert mutex (one inserter at a time),
    /// `node` came from [`HashIndex::new_node`] and its key is not in the
    /// index.
    unsafe fn insert_locked(&self, node: *mut Node, collector: &Collector, guard: &Guard) {
        // Relaxed: only inserters replace the table, and we are the only one.
        let cur = self.table.load(Ordering::Relaxed);
        // SAFETY: the current table is never freed while it is current.
        let t = unsafe { &*cur };
        // SAFETY: we hold the insert mutex (our caller's contract).
        unsafe { self.migrate(t, MOVE_STEP, collector, guard) };
        let len = self.len.get() + 1;
        // SAFETY: `node` is valid (caller contract).
        let hash = self.hash(unsafe { (*node).key() });
        // Equivalent mutant (`>=`: the table grows one insert earlier; a
        // load factor, not a bound).
        if len > max_len(t.slots.len()) {
            // A migration still running (it cannot, by `MOVE_STEP`'s
            // bound) ends first: a table has at most one `prev`.
            // SAFETY: we hold the insert mutex.
            unsafe { self.migrate(t, usize::MAX, collector, guard) };
            let bigger = Table::with_capacity(grown(t.slots.len()), cur);
            bigger.place(node, hash, Hints::NONE);
            self.moved.set(0);
            let bigger = Box::into_raw(bigger);
            // Release, required: pairs with the Acquire table load in
            // `current`; the new table's slot and `prev` are visible to
            // whoever loads it.
            self.table.store(bigger, Ordering::Release);
            // Equivalent mutant (`<`: no table has exactly `MOVE_WHOLE`
            // slots).
            if t.slots.len() <= MOVE_WHOLE {
                // SAFETY: we hold the insert mutex, and `bigger` is the
                // current table, never freed while it is.
                unsafe { self.migrate(&*bigger, usize::MAX, collector, guard) };
            }
        } else {
            t.place(node, hash, Hints::NONE);
        }
        self.len.set(len);
    }

    /// Finishes a migration that key creation left pending, under the
    /// insert mutex, [`FINISH_STEP`] slots per hold so no key creator
    /// waits for a whole table's move. A migration advances only as keys
    /// are created, so one whose inserts stop within a sixth of a growth
    /// would leave its unmoved keys probed in two tables by every read;
    /// the maintenance pass (`Store::collect`) ends it.
    pub(crate) fn finish_migration(&self, collector: &Collector, guard: &Guard) {
        loop {
            let _g = self.inserting.lock().unwrap_or_else(|e| e.into_inner());
            // Relaxed: only inserters replace the table, and we hold the
            // insert mutex.
            let cur = self.table.load(Ordering::Relaxed);
            // SAFETY: the current table is never freed while it is current.
            let t = unsafe { &*cur };
            if t.prev().is_null() {
                return;
            }
            // SAFETY: we hold the insert mutex and `t` is the current table.
            unsafe { self.migrate(t, FINISH_STEP, collector, guard) };
        }
    }

    /// Moves up to `step` slots of the table migrating into `t` (if any)
    /// into `t`; the move of the last one unlinks that table and retires
    /// it.
    ///
    /// # Safety
    /// The caller holds the index's insert mutex, and `t` is the current
    /// table.
    unsafe fn migrate(&self, t: &Table, step: usize, collector: &Collector, guard: &Guard) {
        // Relaxed: only the inserter (us) writes `prev`.
        let prev = t.prev.load(Ordering::Relaxed);
        if prev.is_null() {
            return;
        }
        // SAFETY: `prev` is freed only after the unlinking below.
        let p = unsafe { &*prev };
        let from = self.moved.get();
        let to = from.saturating_add(step).min(p.slots.len());
        let words = &p.slots[from..to];
        // Two passes, so the nodes' misses (their keys give the hashes the
        // slot words keep only the tags of) overlap.
        for s in words {
            // Relaxed: only the inserter (us) writes slots.
            let w = s.word.load(Ordering::Relaxed);
            if w != 0 {
                prefetch_node(node_of(w));
            }
        }
        for s in words {
            // Relaxed: as above.
            let w = s.word.load(Ordering::Relaxed);
            if w != 0 {
                let n = node_of(w);
                // SAFETY: a node in a slot lives until the index drops; its
                // key is immutable.
                let h = self.hash(unsafe { (*n).key() });
                // Relaxed: hints, never dereferenced.
                t.place(n, h, Hints(s.hints.load(Ordering::Relaxed)));
            }
        }
        self.moved.set(to);
        if to == p.slots.len() {
            // Release, required: pairs with the Acquire load in
            // `Table::prev`; a reader that sees no `prev` sees the slots
            // moved above (loom `hash_index`, migration).
            t.prev.store(
                ptr::null_mut(),
                ordering_or_mutant(Ordering::Release, m::RELAXED_UNLINK_STORE),
            );
            let old = SendPtr(prev);
            collector.defer(guard, move || {
                let old = old;
                // SAFETY: unlinked above and no longer current, so no new
                // reader reaches it; freed after every guard that could have
                // loaded it drops. Table's drop frees the slot array only,
                // never the nodes.
                drop(unsafe { Box::from_raw(old.0) });
            });
        }
    }
}

/// The entry's place in the block of node `n`, whose head is written.
///
/// # Safety
/// `n` points at a node's block from `Arena::carve` with its head written.
unsafe fn entry_of(n: *mut Node) -> *mut KeyEntry {
    // SAFETY: the head holds the key's length; the block has room for the
    // entry at `entry_at` of it (`node_bytes`).
    unsafe { n.cast::<u8>().add(entry_at((*n).len as usize)).cast() }
}

/// Drops what `HashIndex::new_node` wrote in a node's block: its entry
/// and its head (the key's bytes need no drop).
///
/// # Safety
/// `n` is a node built by `new_node`, not yet dropped, that no one else
/// can reach.
unsafe fn drop_node(n: *mut Node) {
    // SAFETY: as the caller guarantees.
    unsafe {
        ptr::drop_in_place(entry_of(n));
        ptr::drop_in_place(n);
    }
}

impl Drop for HashIndex {
    fn drop(&mut self) {
        let a = self.arena.get_mut();
        for &(c, used) in &a.chunks {
            let mut at = 0;
            while at < used {
                // Where `carve` put the node that follows.
                at = node_start(at);
                let n = c.wrapping_add(at).cast::<Node>();
                // SAFETY: the chunk's first `used` bytes are nodes carved
                // in order by `new_node`, each written once and dropped
                // only here; the table and the ordered view (freed first)
                // hold no ownership, and `&mut self` means no one else can
                // reach them. A node's size follows from its key length.
                unsafe {
                    at += node_bytes((*n).len as usize);
                    drop_node(n);
                }
            }
            // SAFETY: allocated by `Arena::carve` with this layout, freed once.
            unsafe { alloc::dealloc(c, chunk_layout()) };
        }
        for &n in &a.alone {
            // SAFETY: as above, a node of its own block, from
            // `slab::global_alloc` with its granules (`Arena::carve`).
            unsafe {
                let granules = node_bytes((*n).len as usize) / NODE_ALIGN;
                drop_node(n);
                slab::global_free(NonNull::new_unchecked(n.cast()), granules);
            }
        }
        let t = self.table.get_mut_ptr();
        // SAFETY: the current table, and the table still migrating into it
        // (retired only once unlinked), are owned by the index; each is
        // freed once.
        let t = unsafe { Box::from_raw(t) };
        let prev = t.prev.load(Ordering::Relaxed);
        if !prev.is_null() {
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(prev) });
        }
        drop(t);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn insert(ix: &HashIndex, collector: &Collector, key: &[u8]) {
        let g = collector.pin();
        let (n, new) = ix.get_or_insert(key, collector, &g, |_| {});
        assert!(new, "a fresh key");
        assert_eq!(n.key(), key);
    }

    #[test]
    fn short_keys_compare_by_every_byte() {
        let c = Collector::new();
        let ix = HashIndex::new();
        let g = c.pin();
        for n in 0..=40usize {
            let a: Vec<u8> = (0..n).map(|i| i as u8 ^ 0x5a).collect();
            let (stored, _) = ix.get_or_insert(&a, &c, &g, |_| {});
            assert!(short_eq(&a, &a.clone()), "len {n}: equal");
            assert!(stored.is(&a), "len {n}: stored equal");
            for at in [0, n / 2, n.saturating_sub(1)] {
                if n == 0 {
                    break;
                }
                let mut b = a.clone();
                b[at] ^= 0x80;
                assert!(!short_eq(&a, &b), "len {n}: byte {at} differs");
                assert!(!short_eq(&b, &a), "len {n}: byte {at} differs");
                assert!(!stored.is(&b), "len {n}: stored, byte {at} differs");
            }
            // A prefix or an extension is another key.
            if n > 0 {
                assert!(!short_eq(&a, &a[..n - 1]), "len {n}: prefix");
                assert!(!stored.is(&a[..n - 1]), "len {n}: stored, prefix");
            }
            let mut longer = a.clone();
            longer.push(0);
            assert!(!stored.is(&longer), "len {n}: stored, extended by a zero");
        }
    }

    #[test]
    fn keys_of_every_length_keep_their_bytes_across_chunks_and_blocks_of_their_own() {
        let c = Collector::new();
        let ix = HashIndex::new();
        let key = |n: usize, salt: u8| -> Vec<u8> { (0..n).map(|i| (i as u8) ^ salt).collect() };
        // Lengths around a chunk's fill and the `ALONE` bound (a node of
        // `node_bytes(n)` bytes), and keys several chunks long.
        let mut lens: Vec<usize> = (0..=600).step_by(7).collect();
        let edge = (0..ALONE)
            .take_while(|&n| node_bytes(n) <= ALONE)
            .last()
            .unwrap();
        lens.extend([
            edge - 8,
            edge - 1,
            edge,
            edge + 1,
            edge + 8,
            CHUNK_BYTES,
            3 * CHUNK_BYTES + 5,
        ]);
        lens.sort_unstable();
        lens.dedup();
        for round in 0..3u8 {
            for &n in &lens {
                let g = c.pin();
                let (node, new) = ix.get_or_insert(&key(n, round), &c, &g, |_| {});
                assert_eq!(
                    new,
                    n > 0 || round == 0,
                    "len {n}, round {round}: fresh but `[]`"
                );
                assert_eq!(node.key(), key(n, round), "len {n}: its bytes");
            }
        }
        let g = c.pin();
        for round in 0..3u8 {
            for &n in &lens {
                let k = key(n, round);
                let found = ix.get(&k, ix.hash(&k), Want::Nothing, &g).expect("present");
                assert_eq!(found.key(), k, "len {n}, round {round}: found whole");
                let addr = (found as *const Node).addr();
                assert_eq!(addr % NODE_ALIGN, 0, "len {n}: 8-aligned");
                if node_bytes(n) <= ALONE {
                    assert!(
                        addr % LINE + HEAD_IN_LINE <= LINE,
                        "len {n}: head in one line"
                    );
                }
            }
        }
        drop(g);
        drop(ix);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_key_node_is_its_entry_and_its_key() {
        // The key's length, the key up to a multiple of 8 bytes, the key's
        // entry (head, summary, finger, floor, hint).
        assert_eq!(KEY_AT, 4);
        assert_eq!(node_bytes(0), 48);
        assert_eq!(node_bytes(4), 48);
        assert_eq!(node_bytes(5), 56);
        assert_eq!(node_bytes(8), 56);
        assert_eq!(node_bytes(24), 72);
        // A slot: the node address with the hash's tag, and two hints.
        assert_eq!(std::mem::size_of::<Slot>(), 16);
    }

    /// The hints stored for `key` (in the current table, or the one still
    /// migrating into it).
    fn hints_of(ix: &HashIndex, key: &[u8], g: &Guard) -> Hints {
        let (slot, _) =
            HashIndex::find(ix.current(g), key, ix.hash(key), Want::Nothing).expect("key present");
        Hints(slot.hints.load(Ordering::Relaxed))
    }

    #[test]
    fn hints_land_in_their_keys_slot_and_survive_growth() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let g = collector.pin();
        // Slab blocks, so each has a name; never dereferenced here.
        let blocks: Vec<_> = (0..6000).map(|_| slab::alloc(16)).collect();
        let v = |i: usize| blocks[i].as_ptr().cast::<Version>();
        let hints = |i: usize| Hints::new(v(2 * i), v(2 * i + 1));
        for i in 0..3000 {
            let k = (i as u64).to_be_bytes();
            ix.get_or_insert(&k, &collector, &g, |_| {});
            ix.hint(&k, SlotAt::NONE, hints(i), &g);
        }
        // Absent keys take no hint.
        ix.hint(b"absent", SlotAt::NONE, hints(0), &g);
        for i in 0..3000 {
            let h = hints_of(&ix, &(i as u64).to_be_bytes(), &g);
            assert_eq!(h, hints(i), "key {i}");
            assert_eq!(slab::names().addr(h.0 as u32), v(2 * i).cast::<u8>());
            assert_eq!(
                slab::names().addr((h.0 >> 32) as u32),
                v(2 * i + 1).cast::<u8>()
            );
        }
        for b in blocks {
            // SAFETY: from `slab::alloc(16)` above, freed once, never
            // reached by anything else (the hints are only names).
            unsafe { slab::free(b, 16) };
        }
    }

    #[test]
    fn a_hint_at_a_found_slot_lands_there_or_probes_after_growth() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let g = collector.pin();
        let blocks: Vec<_> = (0..2).map(|_| slab::alloc(16)).collect();
        let (a, b) = (blocks[0].as_ptr().cast::<Version>(), blocks[1].as_ptr());
        let (one, two) = (Hints::new(a, ptr::null()), Hints::new(b.cast(), a));
        let k = 7u64.to_be_bytes();
        ix.get_or_insert(&k, &collector, &g, |_| {});
        // Found, not inserted: the slot's place is known, and a hint lands.
        let (_, new, at) = ix.get_or_insert_at(&k, &collector, &g, |_| {});
        assert!(!new);
        ix.hint(&k, at, one, &g);
        assert_eq!(hints_of(&ix, &k, &g), one);
        // Growth moves the key: the stale place is another table's, so
        // the hint probes and still lands in the key's slot.
        for i in 100u64..20_000 {
            ix.get_or_insert(&i.to_be_bytes(), &collector, &g, |_| {});
        }
        ix.hint(&k, at, two, &g);
        assert_eq!(hints_of(&ix, &k, &g), two);
        for b in blocks {
            // SAFETY: from `slab::alloc(16)` above, freed once; the hints
            // are only names.
            unsafe { slab::free(b, 16) };
        }
    }

    #[test]
    fn a_version_outside_the_slab_has_no_name() {
        let outside = Box::new(0u64);
        let p: *const u64 = &*outside;
        assert_eq!(Hints::new(p.cast(), ptr::null()), Hints::NONE);
        assert!(slab::names().addr(0).is_null());
    }

    #[test]
    fn a_slot_word_gives_back_its_node_and_keeps_only_the_tag() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let g = collector.pin();
        let (n, _) = ix.get_or_insert(b"k", &collector, &g, |_| {});
        let p = n as *const Node as *mut Node;
        let h = 0xabcd_0000_0000_1234;
        let w = pack(p, h);
        assert_eq!(node_of(w), p);
        assert_eq!(w & !ADDR_MASK, 0xabcd_0000_0000_0000);
        assert_eq!(tag(h ^ 0xffff), tag(h), "low bits are not in the tag");
    }

    #[test]
    fn every_inserted_key_is_found_across_growth_and_absent_keys_are_not() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let long = vec![7u8; 100];
        insert(&ix, &collector, &long);
        for i in 0u32..5000 {
            insert(&ix, &collector, &i.to_be_bytes());
        }
        let g = collector.pin();
        for i in 0u32..5000 {
            let k = i.to_be_bytes();
            let n = ix
                .get(&k, ix.hash(&k), Want::Head, &g)
                .expect("inserted key");
            assert_eq!(n.key(), &k[..]);
        }
        assert_eq!(
            ix.get(&long, ix.hash(&long), Want::Head, &g).unwrap().key(),
            &long[..]
        );
        for i in 5000u32..6000 {
            let k = i.to_be_bytes();
            assert!(ix.get(&k, ix.hash(&k), Want::Head, &g).is_none());
        }
    }

    #[test]
    fn a_small_index_starts_small_and_grows_to_hold_every_key() {
        let collector = Collector::new();
        let ix = HashIndex::new_small();
        // SAFETY: single-threaded test; the current table is alive.
        let first = unsafe { &*ix.table.load(Ordering::Relaxed) }.slots.len();
        assert_eq!(first, SMALL_CAP);
        for i in 0u32..5_000 {
            insert(&ix, &collector, &i.to_be_bytes());
        }
        let g = collector.pin();
        for i in 0u32..5_000 {
            let k = i.to_be_bytes();
            assert!(ix.get(&k, ix.hash(&k), Want::Head, &g).is_some(), "key {i}");
        }
    }

    #[test]
    fn a_small_table_is_never_left_migrating_when_inserts_stop() {
        let collector = Collector::new();
        let ix = HashIndex::new_small();
        let g = collector.pin();
        for i in 0u32..12_000 {
            insert(&ix, &collector, &i.to_be_bytes());
            let prev = ix.current(&g).prev();
            if !prev.is_null() {
                // SAFETY: linked from the current table, under `g`.
                let from = unsafe { &*prev }.slots.len();
                assert!(
                    from > MOVE_WHOLE,
                    "{} keys: migrating from {from} slots",
                    i + 1
                );
            }
        }
    }

    #[test]
    fn a_large_table_left_migrating_is_finished_by_the_maintenance_pass() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let migrating_from = |ix: &HashIndex| {
            let g = collector.pin();
            let prev = ix.current(&g).prev();
            // SAFETY: linked from the current table, under `g`.
            (!prev.is_null()).then(|| unsafe { &*prev }.slots.len())
        };
        let mut n = 0u32;
        // Inserts stop one key after a table above `MOVE_WHOLE` slots grew.
        while migrating_from(&ix).is_none_or(|from| from <= MOVE_WHOLE) {
            insert(&ix, &collector, &n.to_be_bytes());
            n += 1;
        }
        let from = migrating_from(&ix).expect("migrating");
        assert!(from > FINISH_STEP, "{from} slots take several holds");
        let g = collector.pin();
        ix.finish_migration(&collector, &g);
        assert_eq!(migrating_from(&ix), None, "{n} keys: still migrating");
        for i in 0..n {
            let k = i.to_be_bytes();
            assert!(ix.get(&k, ix.hash(&k), Want::Head, &g).is_some(), "key {i}");
        }
        insert(&ix, &collector, &n.to_be_bytes());
    }

    #[test]
    fn a_small_index_holds_as_many_slots_as_a_default_one_from_its_first_size_on() {
        let collector = Collector::new();
        let (small, default) = (HashIndex::new_small(), HashIndex::new());
        let slots = |ix: &HashIndex| {
            // SAFETY: single-threaded test; the current table is alive.
            unsafe { &*ix.table.load(Ordering::Relaxed) }.slots.len()
        };
        for i in 0u32..20_000 {
            insert(&small, &collector, &i.to_be_bytes());
            insert(&default, &collector, &i.to_be_bytes());
            if slots(&small) >= FIRST_CAP {
                assert_eq!(slots(&small), slots(&default), "at {} keys", i + 1);
            }
        }
        assert!(slots(&default) > FIRST_CAP * 8);
    }

    #[test]
    fn a_table_stays_between_half_and_three_quarters_full() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let mut grew = 0;
        let mut cap = FIRST_CAP;
        for i in 0u32..50_000 {
            insert(&ix, &collector, &i.to_be_bytes());
            let len = i as usize + 1;
            // SAFETY: single-threaded test; the current table is alive.
            let t = unsafe { &*ix.table.load(Ordering::Relaxed) };
            let now = t.slots.len();
            if now != cap {
                assert_eq!(now, grown(cap), "grows by half, at {len} keys");
                assert_eq!(len, max_len(cap) + 1, "grows when three quarters full");
                (cap, grew) = (now, grew + 1);
            }
            assert!(len * 4 <= cap * 3, "{len} keys in {cap} slots");
            if grew > 0 {
                // Half full right after growing, less the rounding to 64.
                assert!(len * 2 + 64 >= cap, "{len} keys in {cap} slots");
            }
        }
        assert!(grew >= 8);
        let g = collector.pin();
        for i in 0u32..50_000 {
            let k = i.to_be_bytes();
            assert!(ix.get(&k, ix.hash(&k), Want::Head, &g).is_some(), "key {i}");
        }
    }

    #[test]
    fn a_migration_ends_within_a_sixth_of_a_growth_and_lookups_find_every_key_meanwhile() {
        let collector = Collector::new();
        let ix = HashIndex::new();
        let g = collector.pin();
        let mut migrations = 0;
        let mut migrating_for = 0;
        let mut cap = FIRST_CAP;
        let found = |n: u32| {
            let k = n.to_be_bytes();
            let h = ix.hash(&k);
            let plain = ix.get(&k, h, Want::Head, &g).map(|n| n as *const Node);
            let b = ix.batch(Want::Head, &g);
            let c = b.candidate(h, b.prefetch_slot(h));
            let batched = b.resolve(&k, h, c).map(|n| n as *const Node);
            assert_eq!(plain, batched, "key {n}: the batched lookup agrees");
            plain.is_some()
        };
        for i in 0u32..40_000 {
            insert(&ix, &collector, &i.to_be_bytes());
            let t = ix.current(&g);
            let prev = t.prev();
            if t.slots.len() != cap {
                if cap <= MOVE_WHOLE {
                    assert!(prev.is_null(), "a small table moves whole");
                } else {
                    assert!(!prev.is_null(), "a grown table migrates from the last");
                    // SAFETY: linked from the current table, under `g`.
                    assert_eq!(unsafe { &*prev }.slots.len(), cap);
                }
                (cap, migrations, migrating_for) = (t.slots.len(), migrations + 1, 0);
            } else if !prev.is_null() {
                migrating_for += 1;
            }
            if !prev.is_null() {
                // Mid-migration: every key so far is found, by both kinds
                // of lookup, some only in the old table.
                let step = if i < 10_000 { 1 } else { 97 };
                for j in (0..=i).step_by(step) {
                    assert!(found(j), "key {j} lost after inserting {i}");
                }
                assert!(!found(i + 1), "a key not inserted is absent");
            }
            let old_cap = cap / 3 * 2;
            assert!(
                migrating_for <= old_cap.div_ceil(MOVE_STEP),
                "{migrating_for} inserts into a migration of {old_cap} slots"
            );
        }
        assert!(migrations >= 8);
        for j in 0u32..40_000 {
            assert!(found(j), "key {j}");
        }
    }

    #[test]
    fn readers_find_every_key_inserted_before_they_looked_while_the_table_grows() {
        use std::sync::atomic::{AtomicU32, Ordering as O};
        let collector = Collector::new();
        let ix = HashIndex::new();
        let done = AtomicU32::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0u32..20_000 {
                    insert(&ix, &collector, &i.to_be_bytes());
                    done.store(i + 1, O::Release);
                }
            });
            s.spawn(|| {
                let mut x = 1u32;
                while done.load(O::Acquire) < 20_000 {
                    let upto = done.load(O::Acquire);
                    if upto == 0 {
                        continue;
                    }
                    x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    let k = (x % upto).to_be_bytes();
                    let g = collector.pin();
                    assert!(
                        ix.get(&k, ix.hash(&k), Want::Head, &g).is_some(),
                        "lost a key"
                    );
                }
            });
        });
    }
}
