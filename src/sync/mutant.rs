//! The switches of the broken-code twins: each constant names a
//! deliberately broken variant of one protocol step, and a loom model's (or
//! a unit test's) `#[should_panic]` twin turns it on to show that the check
//! catches it.
//!
//! The switch itself (`set` and `on` under `--cfg loom`, a per-thread one in
//! the crate's unit tests, which the threads of a runtime the test starts
//! take over with `inherit`) is compiled only in those builds. In every other
//! build [`mutant_on`] is the constant `false`, so each broken branch is dead
//! code the compiler removes; nothing here is visible outside the crate.

use super::Ordering;

/// No mutant active.
#[cfg_attr(not(loom), allow(dead_code))]
pub const NONE: u32 = 0;
/// The reader publishes its snapshot pin without the SeqCst fence before
/// it checks the horizon floor (invariant 2, publish window).
pub const PIN_WITHOUT_FENCE: u32 = 1;
/// The horizon advancer scans the slots without the fence after it
/// publishes the floor (invariant 2).
pub const SCAN_WITHOUT_FENCE: u32 = 2;
/// A completion installs its descriptor without bumping the generation
/// (invariant 5, cache validity).
pub const SKIP_GENERATION_BUMP: u32 = 3;
/// Readers load the descriptor pointer with Relaxed instead of Acquire
/// (invariant 11).
pub const RELAXED_DESCRIPTOR_LOAD: u32 = 4;
/// Commit flips a version's status with Relaxed instead of Release
/// (invariant 9).
pub const RELAXED_STATUS_STORE: u32 = 5;
/// Pruning cuts below the first committed version it meets instead of
/// the newest one at or below the horizon (invariant 3, safe point).
pub const PRUNE_PAST_SAFE_POINT: u32 = 6;
/// The reader validates its read timestamp against the floor before it
/// publishes the pin instead of after (invariant 2).
pub const READ_TS_PUBLISH_AFTER_CHECK: u32 = 7;
/// Releasing a slot forgets to clear its pins (invariant 12).
pub const SLOT_KEEPS_PINS: u32 = 8;
/// The stable-timestamp setter publishes stable before it waits for
/// commits at or below it (invariant 8).
pub const STABLE_BEFORE_WAIT: u32 = 9;
/// Prepare leaves the running set without bumping the descriptor
/// generation (invariant 5 for two-phase commit).
pub const PREPARE_SKIPS_EXIT: u32 = 10;
/// A prepared transaction announces its durable timestamp without the
/// SeqCst fence before it checks the stable bound (handshake 3,
/// invariant 10).
pub const ANNOUNCE_WITHOUT_FENCE: u32 = 11;
/// `commit` releases its stable claim before it installs its descriptor
/// instead of after (handshake 2, invariant 8).
pub const CLAIM_RELEASED_BEFORE_INSTALL: u32 = 12;
/// The read-only fast path checks the floors before it stores its pins
/// instead of after (handshake 1, invariants 1 and 2).
pub const STABLE_VIEW_CHECKS_BEFORE_PINS: u32 = 13;
/// A completion raises the published generation before its descriptor
/// CAS instead of after (the published generation "never leads" the
/// pointer, invariant 5).
pub const GENERATION_BEFORE_CAS: u32 = 14;
/// Rollback flips its versions to aborted before unlinking them, so
/// another writer can write on top and the unlink fails.
pub const ROLLBACK_FLIPS_BEFORE_UNLINK: u32 = 15;
/// Prepare flips its versions without holding a commit claim at the
/// prepare timestamp, so raising stable past it does not wait for the
/// flips (invariant 8 for prepared transactions).
pub const PREPARE_WITHOUT_CLAIM: u32 = 16;
/// The read-only fast path takes an untimestamped version by a writer
/// *at* `complete_below` as completed (`<=` instead of `<`; invariant 7).
pub const FAST_PATH_BELOW_INCLUSIVE: u32 = 17;
/// A commit flips its version's status before it links the key's
/// previous committed version to it (invariant 13, climb links).
pub const LINK_AFTER_FLIP: u32 = 21;
/// A reader with a read timestamp starts at the finger without
/// examining the head first, so it can miss a prepared head (invariants
/// 10 and 13).
pub const READ_SKIPS_HEAD: u32 = 23;
/// The horizon advancer loads the descriptor pointer it takes the xmin
/// floor from with Relaxed instead of Acquire (invariants 7
/// and 11).
pub const RELAXED_FLOOR_SOURCE: u32 = 24;
/// A commit links the key's previous committed version to its own with
/// a Relaxed store of `newer` instead of Release, so a pruner climbing
/// the links has no edge to the version it reaches (invariants 11, 13).
pub const RELAXED_NEWER_STORE: u32 = 25;
/// Clearing a prepared transaction's entry in the manager's prepared
/// table is a Relaxed store instead of Release (a dropped prepared
/// transaction's statuses, `machinery/version.rs`).
pub const PREPARED_CLEAR_RELAXED: u32 = 28;
/// The settler scans the prepared table with Relaxed loads instead of
/// Acquire.
pub const PREPARED_SCAN_RELAXED: u32 = 29;
/// A prepared commit clears its prepared-table entry before it flips its
/// statuses instead of after.
pub const PREPARED_CLEARED_BEFORE_FLIP: u32 = 30;
/// A prepend installs its version without clearing the key's head
/// summary, so a reader can skip a prepared head (invariant 16).
pub const PREPEND_KEEPS_SUMMARY: u32 = 32;
/// A commit stores the key's head summary after its status flip, so the
/// store can land after the next writer's clearing one (invariant 16).
pub const SUMMARY_AFTER_FLIP: u32 = 33;
/// A commit stores the key's head summary with Relaxed instead of
/// Release, so a reader that skips the head on it may not see the links
/// below the head (invariant 16).
pub const RELAXED_SUMMARY_STORE: u32 = 34;
/// A lazy snapshot taken together with a read timestamp
/// (`MachineryImpl::begin_at_read_ts`) checks the floors before it stores
/// its xmin and read-timestamp pins instead of after (handshake 1,
/// invariants 1 and 2).
pub const LAZY_PINS_AFTER_CHECK: u32 = 36;
/// A transaction's first read takes no snapshot and reads with the
/// session's cached one from an earlier transaction (the lazy snapshot
/// skipped; invariant 7).
pub const LAZY_VIEW_SKIPS_SNAPSHOT: u32 = 37;
/// A commit leaves its installed descriptor in the session's snapshot
/// cache labelled with the published generation it loads after its
/// `fetch_max`, not with the generation it installed, so a racing newer
/// commit's generation can mark the older copy current (invariants 5
/// and 7).
pub const COMMIT_CACHE_TAKES_PUBLISHED: u32 = 40;
/// A commit that restarts its slot's durable word after the application
/// set the all-durable timestamp keeps the word's tag, so a restart
/// at the value the set captured looks unchanged and is not reported
/// (`all_durable`).
pub const ALL_DURABLE_RESTART_KEEPS_TAG: u32 = 41;
/// A all-durable report loads the last durable set's record with Relaxed
/// instead of Acquire, so it may read the record's fields before they
/// are visible (invariant 11).
pub const RELAXED_ALL_DURABLE_SET_LOAD: u32 = 42;
/// A commit compares its durable timestamp with its slot's durable word
/// with the word's tag bits left on, so once a durable set has made the
/// word restart (tag non-zero) the session's later commits never raise
/// it (`all_durable`).
pub const ALL_DURABLE_COMPARE_KEEPS_TAG: u32 = 43;
/// A all-durable report counts a slot's word only when it grew since the
/// last durable set instead of when it changed, so a word whose 2-bit
/// restart tag wrapped (four restarts) is ignored (`all_durable`).
pub const ALL_DURABLE_REPORT_COUNTS_GROWTH: u32 = 44;
/// Prepare lists the transaction in the prepared table after it flips
/// its statuses to prepared instead of before, so a writer whose check
/// meets a prepared status in between takes the transaction for a
/// dropped one and settles the status to aborted (first updater wins).
pub const PREPARED_PUBLISHED_AFTER_FLIP: u32 = 45;
/// The horizon advancer issues the readers' light fence between its
/// floor stores and its scan instead of the heavy one (with the
/// asymmetric pair: no membarrier; handshake 1). Loom runs both sides
/// as one SeqCst fence, so this one is a unit-test mutant
/// (`lockfree/pin_horizon.rs` tests, which count the fences a call site issues).
pub const ADVANCE_LIGHT_FENCE: u32 = 46;
/// A reader that finds the link below a version it skipped cut does not
/// judge that version again, so a reader that skipped a prepared update
/// which then committed and became the safe point reads nothing
/// (invariants 3 and 10).
pub const SKIPPED_NOT_REJUDGED: u32 = 47;
/// The hash index places a key's node in its slot with a Relaxed store
/// instead of Release, so a reader that finds the node need not see it
/// built (`store/raw/hashindex.rs`, invariant 11).
pub const RELAXED_SLOT_STORE: u32 = 48;
/// A hash-index lookup loads the table pointer with Relaxed instead of
/// Acquire, so it may probe a grown table before its slots are visible.
pub const RELAXED_TABLE_LOAD: u32 = 49;
/// A hash-index lookup loads the migrating table's link (`prev`) with
/// Relaxed instead of Acquire, so it can see the link cleared and still
/// miss a key the migration moved.
pub const RELAXED_PREV_LOAD: u32 = 50;
/// The insert that ends a migration unlinks `prev` with a Relaxed store
/// instead of Release (the other half of `RELAXED_PREV_LOAD`'s pair).
pub const RELAXED_UNLINK_STORE: u32 = 51;
/// A replica's state machine sets its stable timestamp to each commit it
/// applies, a watermark that jumps the holes below it
/// (`replication/state_machine.rs`; a unit-test mutant, as the apply path
/// is not loom-visible).
#[cfg_attr(not(feature = "replication"), allow(dead_code))]
pub const STABLE_FOLLOWS_NEWEST_COMMIT: u32 = 52;
/// A serializable commit (or prepare) skips the validation of its read
/// set under the commit gate (`kv/serializable.rs`), so write skew and
/// phantoms commit as under snapshot isolation.
pub const SERIALIZABLE_SKIPS_VALIDATION: u32 = 53;
/// A serializable commit leaves the commit gate after its validation and
/// before its commit instead of after, so a second committer can validate
/// while the first's versions are still in progress (and pass over them).
pub const SERIALIZABLE_GATE_RELEASED_BEFORE_COMMIT: u32 = 54;
/// A prune that cuts a tail leaves the key's hint as it was, so the hint
/// can name a retired version (invariant 18).
pub const PRUNE_KEEPS_HINT: u32 = 55;
/// A pruner refreshes the key's hint with a plain store instead of a
/// compare-and-swap, so it can overwrite the unordered flag a committer
/// set meanwhile (invariants 13 and 18).
pub const HINT_STORE_LOSES_FLAG: u32 = 56;
/// A prune that cuts nothing leaves the key's hint as it was, so a new
/// commit's summary leaves the hint's gap stale and readers at stable
/// climb from the finger again (invariant 18).
pub const HINT_REFRESHED_ONLY_ON_CUT: u32 = 57;
/// A serializable commit keeps the pass of its validation run before the
/// commit gate even when the gate's sequence moved meanwhile, so it can
/// pass over the versions of a commit that went through the gate in
/// between (`kv/serializable.rs`).
pub const SERIALIZABLE_EARLY_PASS_TRUSTED: u32 = 58;
/// The commit gate raises its sequence with a Relaxed store instead of
/// Release, so a validation run before the gate that loads the raised
/// value need not see the flips of the commit that raised it.
pub const RELAXED_GATE_SEQ_STORE: u32 = 59;
/// The slab's depot hands a batch out in two holds of its lock (read the
/// top batch, then remove one), so two takers can get the same blocks
/// (`store/raw/slab.rs`).
pub const DEPOT_TAKE_SPLIT: u32 = 60;
/// The collector runs a deferred destructor at once on the retiring thread
/// instead of after every guard that could reach the memory dropped, so a
/// retired version's slab block joins that thread's free list (and comes
/// back from its next allocation of the class) while a reader pinned
/// before the retirement still reads it (invariant 11; loom `slab/reuse`
/// and `store/raw/slab/tests.rs`).
pub const FREE_SKIPS_EPOCH: u32 = 61;
/// A serializable validation checks a scanned range on the entries its
/// scan kept even when the index's creation count moved since, so it
/// misses a key created inside the range meanwhile (a phantom:
/// `kv/serializable.rs`).
pub const SERIALIZABLE_SCAN_KEPT_TRUSTED: u32 = 62;
/// A key creation raises the index's creation count before the key is in
/// the index, so a scan can load the raised count and miss the key, and a
/// validation that finds the count unchanged trusts that scan's entries
/// (the loom stand-in index, `store/raw/index_loom.rs`, as the real one's
/// order).
#[cfg_attr(not(loom), allow(dead_code))]
pub const KEY_COUNTED_BEFORE_INSERT: u32 = 63;

#[cfg(loom)]
static ACTIVE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(NONE);

/// Turns mutant `m` on (or [`NONE`] off) for the models that follow.
#[cfg(all(loom, test))]
pub(crate) fn set(m: u32) {
    // SeqCst: stronger than needed; the models set the switch before they
    // start their loom threads, which orders it anyway.
    ACTIVE.store(m, std::sync::atomic::Ordering::SeqCst);
}

/// Is mutant `m` on?
#[cfg(loom)]
#[inline]
pub(crate) fn on(m: u32) -> bool {
    ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == m
}

// Unit tests run in parallel threads, so their switch is per thread:
// a should_panic twin turns a mutant on for its own thread only.
#[cfg(all(test, not(loom)))]
std::thread_local! {
    static THREAD_ACTIVE: std::cell::Cell<u32> = const { std::cell::Cell::new(NONE) };
}

/// Turns mutant `m` on (or [`NONE`] off) for this thread (unit tests).
#[cfg(all(test, not(loom)))]
pub(crate) fn set_for_thread(m: u32) {
    THREAD_ACTIVE.with(|a| a.set(m));
}

/// A thread-start hook that turns this thread's mutant on in each new
/// thread it runs in: for a runtime a unit test starts, whose threads run
/// the code under test.
#[cfg(all(test, not(loom), feature = "replication"))]
pub(crate) fn inherit() -> impl Fn() + Send + Sync + 'static {
    let m = THREAD_ACTIVE.with(|a| a.get());
    move || set_for_thread(m)
}

/// Is mutant `m` on for this thread? (unit tests)
#[cfg(all(test, not(loom)))]
#[inline]
pub(crate) fn on_for_thread(m: u32) -> bool {
    THREAD_ACTIVE.with(|a| a.get()) == m
}

/// Is mutant `m` on? The constant `false` outside loom builds and unit
/// tests.
#[inline(always)]
#[allow(unused_variables)]
pub(crate) fn mutant_on(m: u32) -> bool {
    #[cfg(loom)]
    {
        on(m)
    }
    #[cfg(all(test, not(loom)))]
    {
        on_for_thread(m)
    }
    #[cfg(not(any(loom, test)))]
    {
        false
    }
}

/// Returns `strong`, or `Relaxed` when mutant `m` is on (loom builds and
/// unit tests only).
#[inline(always)]
pub(crate) fn ordering_or_mutant(strong: Ordering, m: u32) -> Ordering {
    if mutant_on(m) {
        Ordering::Relaxed
    } else {
        strong
    }
}
