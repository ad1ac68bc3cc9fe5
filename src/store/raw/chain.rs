//! Version chains: per key, a newest-first singly linked list of versions,
//! plus `newer` links between committed versions and two per-key pointers
//! into the list (DESIGN.md, "Version chains and the index").
//!
//! A version is one block of the version slab (`slab.rs`): a header (the machinery's
//! [`VersionStatus`]: its writer's id and one word packing state and
//! timestamp, so one Acquire load reads both consistently; the link to the
//! next older version; the link to the next newer *committed* version and
//! that version's commit timestamp) with the value's bytes right behind it.
//!
//! * Writers prepend with a CAS on the head, after checking the newest
//!   non-aborted version for a write-write conflict (first updater wins).
//!   So a key has at most one unfinished version, at the top, and its
//!   committed versions are linked in commit order.
//! * A commit ([`KeyEntry::commit_version`], called from `kv/txn.rs`
//!   inside the machinery's [`Completion`](crate::machinery::Completion))
//!   first links the key's newest committed version to the new one
//!   (`newer`, and `stop` = the new commit timestamp), notes whether the new
//!   timestamp is below the old one (the key then is *unordered* for good),
//!   and then has the completion flip the status. Prepare and rollback only
//!   flip.
//! * A reader whose timestamp bound is below the key's head *summary* (the
//!   head's commit timestamp, kept by writers: cleared by every prepend,
//!   stored by every commit before its flip; DESIGN.md invariant 16) knows
//!   the head is too new without loading it and starts at the finger.
//! * Otherwise readers examine the head first. The first committed version their view
//!   rejects only because its commit timestamp is above the read timestamp
//!   sends them to the key's *finger* (the newest committed version at or
//!   below a recently published stable timestamp) or *floor* (the last safe
//!   point), or first to the key's *hint* (the version right above the
//!   finger) when the hint's gap puts it at or below the read timestamp:
//!   from there they climb `newer` links to the newest version they
//!   accept; `stop` tells them without a load of the next version when it
//!   is already too new. In read-ts that is one version (finger or hint)
//!   for three reads in four whatever the read timestamp's age. A point
//!   read does no read-modify-write.
//! * Pruning climbs from the floor along `newer` links to the newest
//!   version covered by the reclaim horizon (the safe point, invariant 3),
//!   cuts the chain below it and retires the tail to the epoch collector
//!   (a reader that skipped the safe point while it was prepared and
//!   finds the cut judges it again: it is visible to that reader now);
//!   then it moves the finger up to the published stable timestamp and
//!   points the hint above it (invariant 18). Each version is stepped over
//!   once by each pointer, so the work per commit is O(1) amortized.
//!   Pruning is logical; freeing is the collector's. The key's pruning
//!   lock is the finger word's low bit.
//!
//! # Files
//!
//! This file holds the layout and allocation: [`Version`] (header and value
//! in one slab block) and its allocation and freeing, the [`KeyEntry`] words
//! with the finger word's lock bit, and what every concern below shares.
//! Each concern is a child module, so the fields stay private to the chain:
//!
//! * `read.rs`: reads ([`KeyEntry::read_counted`]: the summary, the walk
//!   from the head, the jump to the hint, finger or floor, the climb), and
//!   [`Found`];
//! * `write.rs`: writes and commit (the conflict checks, `prepend`,
//!   `commit_version` and its link step, `unlink_head`), and [`Conflict`];
//! * `prune.rs`: pruning (`prune`, `cut`: the safe point, floor, finger and
//!   hint upkeep, and the checks of them for tests and models), [`Pruned`]
//!   and [`Tails`];
//! * `rollback_to_stable.rs`: rollback to stable's surgery on whole chains;
//! * `tests.rs`: the unit tests.
//!
//! The invariants they rely on are numbered in DESIGN.md, "Invariants", and
//! cited at each use; the orderings of all of them are listed once, below.
//!
//! # Orderings
//!
//! * Head CAS (Release) pairs with every Acquire load of the head and of
//!   `next` links: a reader that reaches a version sees its fields.
//! * Status words are the machinery's ([`VersionStatus`]): it flips them
//!   with Release stores before the writer's descriptor install (invariant
//!   9) and every read of one is an Acquire load inside the machinery, so
//!   the chain's files name no ordering for them. A reader that sees
//!   `Committed(ts)` sees the version exactly as written and everything its
//!   committer wrote before the flip: the `newer`/`stop` link into it and
//!   the unordered flag.
//! * `newer` stores (Release) pair with the Acquire `newer` loads in the
//!   climbs; finger and floor stores (Release) pair with their Acquire
//!   loads in readers. Both only ever point at versions already published
//!   by a head CAS, so the pairing carries the version's contents.
//! * The cut's swap of the link below the safe point is a Release store
//!   (AcqRel) paired with the Acquire `next` loads: a reader that skipped
//!   the safe point while it was still prepared and then finds that link
//!   null judges the version again and sees the commit the cutter saw
//!   (`skipped_into_cut`, invariants 3 and 10).
//! * The hint's refresh (a CAS under the pruning lock, keeping the
//!   unordered flag that committers set with `fetch_or`) is a Release
//!   paired with the readers' Acquire hint load: the hinted version can be
//!   newer than what the reader's head or summary load ordered it after.
//! * `stop` and the unordered flag are Relaxed: a reader acts on them only
//!   after an Acquire status load of a committed version at or above the
//!   version that wrote them, or an Acquire load of the head summary, which
//!   that version's committer (or a later one) stored with Release after
//!   them (invariants 13, 16).
//! * The summary's clearing store in `prepend` is Relaxed: it is sequenced
//!   before the Release head CAS and any later flip of that writer, and
//!   after its Acquire load of the head's committed status (invariant 16).

use super::{hint, slab};
use crate::machinery::epoch::Guard;
use crate::machinery::{VersionState, VersionStatus};
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use crate::ts::Timestamp;
use std::alloc::Layout;
use std::ptr::{self, NonNull};

mod prune;
mod read;
/// Rollback to stable's surgery on whole chains (its module docs).
pub(crate) mod rollback_to_stable;
mod write;

pub(crate) use prune::{tails, Pruned, Tails};
pub(crate) use read::Found;
pub(crate) use write::Conflict;

/// `stop` before a newer committed version is linked.
const NO_STOP: u64 = u64::MAX;
/// The value length of a tombstone, as [`Version::alloc`] takes it.
const TOMBSTONE: usize = usize::MAX;
/// Bits of a version's address in its `newer` word (user-space addresses
/// on the targets this builds for fit: checked for every version in
/// [`Version::alloc`]); the length code sits above them.
const LINK_BITS: u32 = hint::ADDR_BITS;
const LINK_MASK: u64 = (1 << LINK_BITS) - 1;
/// The length code of a tombstone.
const CODE_TOMBSTONE: u64 = 0xFFFE;
/// The length code of a value of [`CODE_LONG`] bytes or more: its length is
/// the 8-byte word right after the header, its bytes after that.
const CODE_LONG: u64 = 0xFFFF;

/// The length code for a value of `len` bytes (or [`TOMBSTONE`]).
#[inline]
fn len_code(len: usize) -> u64 {
    match len {
        TOMBSTONE => CODE_TOMBSTONE,
        n if (n as u64) < CODE_TOMBSTONE => n as u64,
        _ => CODE_LONG,
    }
}

/// The finger word's low bit: a prune of this key is under way (the key's
/// pruning lock; versions are 8-aligned, so an address never has it).
const PRUNING: usize = 1;

/// The finger of a finger word (the pruning bit masked off).
#[inline]
fn finger_of(p: *mut Version) -> *mut Version {
    p.map_addr(|a| a & !PRUNING)
}

/// `p` with the pruning bit set.
#[inline]
fn locked(p: *mut Version) -> *mut Version {
    p.map_addr(|a| a | PRUNING)
}

/// One version of one key: this 40-byte header, then the value in the
/// same slab block (`slab.rs`; made by [`Version::alloc`], freed by
/// [`free_version`]). The value's length is a 16-bit code in the top of
/// the `newer` word: the length itself below [`CODE_TOMBSTONE`], a
/// tombstone, or [`CODE_LONG`], when an 8-byte length word sits between
/// the header and the bytes (values of 64 KiB less 2 bytes or more).
#[repr(C)]
pub(crate) struct Version {
    /// The writer and the packed state/timestamp word.
    pub(crate) status: VersionStatus,
    next: AtomicPtr<Version>,
    /// The next newer committed version's address in the low
    /// [`LINK_BITS`] (0: none linked yet), written once, by that version's
    /// committer before its status flip; and the value's length code above
    /// them, fixed at allocation.
    newer: AtomicU64,
    /// The commit timestamp of `newer` ([`NO_STOP`] until it is linked):
    /// this version is the one visible at timestamps in `[cts, stop)`.
    stop: AtomicU64,
}

/// A version not yet shared: frees itself on drop.
pub(crate) struct OwnedVersion(NonNull<Version>);

impl Drop for OwnedVersion {
    fn drop(&mut self) {
        // SAFETY: an OwnedVersion is the only reference to its version,
        // made by `Version::alloc` and never linked.
        unsafe { free_version(self.0.as_ptr()) };
    }
}

impl OwnedVersion {
    fn into_raw(self) -> *mut Version {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

/// Where a value with length code `code` starts, from the version's start.
#[inline]
fn value_at(code: u64) -> usize {
    std::mem::size_of::<Version>() + if code == CODE_LONG { 8 } else { 0 }
}

/// The block of a version holding a value of `len` bytes (or
/// [`TOMBSTONE`]).
#[inline]
fn layout_for(len: usize) -> Layout {
    let bytes = if len == TOMBSTONE { 0 } else { len };
    Layout::from_size_align(
        value_at(len_code(len)) + bytes,
        std::mem::align_of::<Version>(),
    )
    .expect("value length is bounded by the config")
    .pad_to_align()
}

const _: () = assert!(
    std::mem::align_of::<Version>() <= slab::GRANULE,
    "a slab block is aligned enough for a version"
);

impl Version {
    /// A new version with `status` (fresh from
    /// [`Transaction::new_version`](crate::machinery::Transaction::new_version))
    /// holding `value` (`None`: a tombstone), header and bytes in one
    /// slab block.
    pub(crate) fn alloc(status: VersionStatus, value: Option<&[u8]>) -> OwnedVersion {
        let len = value.map_or(TOMBSTONE, <[u8]>::len);
        let nn = slab::alloc(layout_for(len).size()).cast::<Version>();
        let p = nn.as_ptr();
        // The hint word (`hint.rs`) keeps a version's address in 48
        // bits; user-space addresses on the targets this builds for fit.
        assert!(
            p.addr() >> hint::ADDR_BITS == 0,
            "a version's address fits in {} bits",
            hint::ADDR_BITS
        );
        let code = len_code(len);
        // SAFETY: `p` is a fresh 8-aligned block of `layout_for(len)`'s
        // size (no version needs more alignment: the assertion below
        // `layout_for`): a `Version`, for a long value its 8-byte length,
        // and the value's bytes from `value_at(code)`.
        unsafe {
            p.write(Version {
                status,
                next: AtomicPtr::new(ptr::null_mut()),
                newer: AtomicU64::new(code << LINK_BITS),
                stop: AtomicU64::new(NO_STOP),
            });
            if let Some(v) = value {
                if code == CODE_LONG {
                    p.add(1).cast::<u64>().write(v.len() as u64);
                }
                ptr::copy_nonoverlapping(v.as_ptr(), p.cast::<u8>().add(value_at(code)), v.len());
            }
        }
        OwnedVersion(nn)
    }

    /// The value's length code (immutable: any load gives it).
    #[inline]
    fn code(&self) -> u64 {
        // Relaxed: the code's bits never change after `alloc`, which
        // happens-before any use of the version (its publication).
        self.newer.load(Ordering::Relaxed) >> LINK_BITS
    }

    /// The value (`None`: a tombstone).
    #[inline]
    pub(crate) fn value(&self) -> Option<&[u8]> {
        let code = self.code();
        if code == CODE_TOMBSTONE {
            return None;
        }
        let base = (self as *const Version).cast::<u8>();
        // SAFETY: `Version::alloc` wrote the value (and for a long one its
        // length word right after the header) at `value_at(code)` in the
        // same block; they are never written again.
        Some(unsafe {
            let len = if code == CODE_LONG {
                base.add(std::mem::size_of::<Version>())
                    .cast::<u64>()
                    .read() as usize
            } else {
                code as usize
            };
            std::slice::from_raw_parts(base.add(value_at(code)), len)
        })
    }

    /// The value's length as [`Version::alloc`] took it ([`TOMBSTONE`]
    /// for a tombstone).
    #[inline]
    fn len(&self) -> usize {
        self.value().map_or(TOMBSTONE, <[u8]>::len)
    }

    /// Links `v` as the next newer committed version (`stop` apart),
    /// keeping the length code: the store is `order`.
    #[inline]
    fn set_newer(&self, v: *mut Version, order: Ordering) {
        let link = v.expose_provenance() as u64;
        debug_assert_eq!(link & !LINK_MASK, 0, "checked in `alloc`");
        self.newer.store(self.code() << LINK_BITS | link, order);
    }

    #[inline]
    fn next_ptr(&self) -> *mut Version {
        // Acquire, required: pairs with the Release of the cut's swap in
        // `cut`, so a reader that loads the null a cut left below a version
        // it skipped sees that version's commit when it judges it again
        // (`skipped_into_cut`; loom `skipped_prepared`). For a non-null link
        // it also pairs with the Release head CAS that published the next
        // version (it was the head once), which is stronger than needed
        // there: every walk starts at an Acquire-loaded head, floor or
        // finger, and each prepender acquired the head it linked below its
        // own Release CAS, so what lies below is already ordered.
        self.next.load(Ordering::Acquire)
    }

    #[inline]
    fn newer_ptr(&self) -> *mut Version {
        // Acquire, required: pairs with the Release `newer` store in
        // `link_committed` (the newer version's contents; loom `prune_race`).
        let w = self.newer.load(Ordering::Acquire);
        // The address `set_newer` exposed, with its block's provenance.
        ptr::with_exposed_provenance_mut((w & LINK_MASK) as usize)
    }
}

/// Frees one version.
///
/// # Safety
/// `p` was made by [`Version::alloc`], no other thread can reach it, and it is
/// freed nowhere else.
unsafe fn free_version(p: *mut Version) {
    // SAFETY: the caller guarantees exclusive ownership; the length code
    // (and a long value's length word) is immutable; the block came from
    // `slab::alloc` with this size.
    unsafe {
        let bytes = layout_for((*p).len()).size();
        ptr::drop_in_place(p);
        slab::free(NonNull::new_unchecked(p.cast()), bytes);
    }
}

/// A key's version chain.
pub(crate) struct KeyEntry {
    /// The newest version (any state): the newest committed one is the head
    /// or right below an unfinished head, one step from the key's node.
    head: AtomicPtr<Version>,
    /// The head summary (invariant 16): `0`, or a timestamp `s` meaning
    /// that the head is a version committed (or, its committer having
    /// decided, committing) at `s`, that nothing unfinished lies above it
    /// but its own transaction's versions committing at `s`, and that the
    /// key was ordered when it was stored. A reader whose timestamp bound
    /// is below `s` rejects the head without loading it and starts at the
    /// finger. Cleared by every prepend before its head CAS; stored by
    /// every commit before its status flip.
    summary: AtomicU64,
    /// The newest timestamped committed version at or below the stable
    /// timestamp published when it was last moved (null: none). Always at
    /// or above `floor`, so never retired while it points there
    /// (invariant 13). Its low bit ([`PRUNING`]) is the key's pruning
    /// lock: set by a pruner's compare-and-swap, cleared by its last store;
    /// only a pruner holding it writes the word.
    finger: AtomicPtr<Version>,
    /// The oldest committed version still linked: the last safe point the
    /// chain was cut at, or the key's first committed version (null: none
    /// committed yet). Written under the pruning lock, or once by the
    /// first commit.
    floor: AtomicPtr<Version>,
    /// The hint word (`hint.rs`): the version right above the finger (or
    /// the floor, with no finger), the one a reader at a stable timestamp
    /// that has passed the finger reads; a lower bound on the gap between
    /// the head's commit timestamp and its own; and the *unordered* flag,
    /// set for good when a commit's timestamp is below the key's newest
    /// committed version's (untimestamped counts as below any timestamp):
    /// the committed versions are then not ordered by timestamp, and
    /// readers walk from the head only. Every cut refreshes the version
    /// and gap under the pruning lock before it retires anything, so the
    /// hint never names a retired version; committers only set the flag
    /// (invariant 18).
    hint: AtomicU64,
}

impl Default for KeyEntry {
    fn default() -> Self {
        KeyEntry::new()
    }
}

impl KeyEntry {
    pub(crate) fn new() -> KeyEntry {
        KeyEntry {
            head: AtomicPtr::new(ptr::null_mut()),
            summary: AtomicU64::new(0),
            finger: AtomicPtr::new(ptr::null_mut()),
            floor: AtomicPtr::new(ptr::null_mut()),
            hint: AtomicU64::new(hint::empty(false)),
        }
    }

    #[inline]
    fn head_ptr(&self) -> *mut Version {
        // Acquire, required: pairs with the Release head CAS in `prepend`
        // (the new version's fields) and in `unlink_head`.
        self.head.load(Ordering::Acquire)
    }

    /// Versions in the chain (for tests and stats).
    pub(crate) fn chain_len(&self, _guard: &Guard) -> usize {
        let mut n = 0;
        let mut p = self.head_ptr();
        while !p.is_null() {
            n += 1;
            // SAFETY: loaded under `_guard` (invariant 11).
            p = unsafe { &*p }.next_ptr();
        }
        n
    }
}

/// Is `status` committed with a timestamp? One Acquire load.
#[inline]
fn timestamped(status: &VersionStatus) -> bool {
    matches!(status.state(), VersionState::Committed(ts) if ts != Timestamp::NONE)
}

/// The timestamp of a committed or prepared state (0 otherwise).
#[inline]
fn ts_get(st: VersionState) -> u64 {
    match st {
        VersionState::Committed(ts) | VersionState::Prepared(ts) => ts.get(),
        _ => 0,
    }
}

/// Frees every version from `p` down.
///
/// # Safety
/// No other thread may reach any version of the chain, and each was made by
/// `Version::alloc` and is freed nowhere else.
pub(crate) unsafe fn free_chain(mut p: *mut Version) -> u64 {
    let mut n = 0;
    while !p.is_null() {
        // SAFETY: the caller guarantees exclusive ownership of the chain.
        let next = unsafe { &mut *p }.next.get_mut_ptr();
        // SAFETY: as above; `p` is freed once and not used again.
        unsafe { free_version(p) };
        p = next;
        n += 1;
    }
    n
}

impl Drop for KeyEntry {
    fn drop(&mut self) {
        let p = self.head.get_mut_ptr();
        // SAFETY: `&mut self`: nobody else can reach the chain; pruned tails
        // were cut off (their links nulled) before retirement, so nothing
        // here is also owned by the collector.
        unsafe { free_chain(p) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
