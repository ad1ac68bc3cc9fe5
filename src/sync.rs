//! The synchronization shim: the only file that names `std::sync::atomic`,
//! `std::sync::Mutex` or `loom`.
//!
//! Every atomic the engine uses is one of the wrappers below. They exist for
//! two reasons:
//!
//! * Under `--cfg loom` they wrap loom's atomics, so the loom models in
//!   `loom_tests/` check the real protocol code, not a copy.
//! * Under the `count-rmw` cargo feature every read-modify-write (CAS, swap,
//!   fetch-op) increments a per-thread counter ([`thread_rmw_count`]), so the
//!   benchmark driver can count shared-word read-modify-writes per transaction
//!   mechanically instead of trusting hand-placed increments.
//!
//! Loads and stores are never counted: they are what readers are allowed to
//! do. The wrappers are `#[inline(always)]` and compile to the bare atomic
//! when the feature is off.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, Ordering};

#[cfg(loom)]
use loom::sync::atomic as imp;
#[cfg(not(loom))]
use std::sync::atomic as imp;

/// A mutex for paths that are neither reads nor writes of data (setting
/// global timestamps, the loom stand-ins). Loom sees it under `--cfg loom`.
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

/// A causality witness for plain (non-atomic) data published through one
/// atomic pointer, such as a descriptor's fields.
///
/// Loom sees only its own atomics and cells, so a plain field read through a
/// pointer loaded with too weak an ordering is invisible to it. Embed a
/// `Witness` in the published structure (it is created, and counts as
/// written, with it) and call [`Witness::check`] right where a thread that
/// loaded the pointer reads the fields: under `--cfg loom` it is a
/// `loom::cell::UnsafeCell<()>` whose construction is a write and whose
/// `check` is a read, and loom panics with "Causality violation" unless the
/// construction happens-before the check. Check at the read itself, before
/// any fence the reader issues later (loom's fences join more than C++'s,
/// DESIGN.md "What loom cannot check"). In every other build it is a
/// zero-sized type and `check` compiles to nothing.
#[derive(Debug)]
pub(crate) struct Witness {
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<()>,
}

// SAFETY: the cell holds `()` and is only ever read (`check`), never
// written after construction, so sharing it between threads cannot race;
// loom tracks the accesses itself. Needed because loom's `UnsafeCell`, like
// std's, is not `Sync`, and the structures that embed a witness are shared
// (invariant 11: descriptors are read by any thread under a guard).
#[cfg(loom)]
unsafe impl Sync for Witness {}

impl Witness {
    /// A witness written by the current thread, now.
    #[inline(always)]
    pub(crate) fn new() -> Witness {
        Witness {
            #[cfg(loom)]
            cell: loom::cell::UnsafeCell::new(()),
        }
    }

    /// Under loom, panics ("Causality violation") unless this witness's
    /// construction happens-before the call; nothing otherwise.
    #[inline(always)]
    pub(crate) fn check(&self) {
        #[cfg(loom)]
        self.cell.with(|_| ());
    }
}

/// The fence pair of handshake 1 (pin versus horizon): a light fence on the
/// readers' side, run on every snapshot take, and a heavy fence on the
/// horizon advancer's side, run once per advance (DESIGN.md "Slots and the
/// three handshakes", "The asymmetric fence").
///
/// * **Asymmetric** (Linux, registered for `MEMBARRIER_CMD_PRIVATE_EXPEDITED`,
///   not switched off): [`Fences::light`] is `compiler_fence(SeqCst)`, no
///   instruction; [`Fences::heavy`] is `fence(SeqCst)` then
///   `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which returns only after
///   every thread of the process that was running executed a full memory
///   barrier (an IPI), and every thread not running passes through the
///   scheduler (itself a full barrier) before it runs again.
/// * **Symmetric** (the fallback: no membarrier, registration refused,
///   another OS, [`EngineConfig::asymmetric_fences`](crate::EngineConfig)
///   false, or the environment variable `SNAPSHOT_ENGINE_FENCES=symmetric`,
///   [`FENCES_ENV`]):
///   both are `fence(SeqCst)`, the pair the protocol used before.
///
/// The mode is decided once, when the engine is built, and never changes:
/// every reader and the advancer of one engine use the same pair.
///
/// Under `--cfg loom` the mode is always symmetric, so both are
/// `fence(SeqCst)` whatever the config: loom cannot see a membarrier, so it
/// checks the protocol with the guarantee the pair gives (the two sides
/// ordered as two SeqCst fences are), and the argument that the asymmetric
/// pair gives it rests on the kernel (DESIGN.md "What loom cannot see: the
/// membarrier").
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fences {
    asymmetric: bool,
}

/// `MEMBARRIER_CMD_QUERY`, `_PRIVATE_EXPEDITED`, `_REGISTER_PRIVATE_EXPEDITED`
/// from `<linux/membarrier.h>` (the `libc` crate defines the syscall number,
/// not the commands).
#[cfg(all(target_os = "linux", not(loom)))]
mod membarrier {
    const CMD_QUERY: libc::c_int = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn call(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: membarrier(2) takes (cmd, flags, cpu_id) integers and
        // touches no user memory; an unknown command only returns EINVAL.
        // No DESIGN.md invariant is involved in the call itself; what its
        // success guarantees is invariant 2's asymmetric-fence argument.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }

    /// Registers the process for private expedited membarriers, once. True
    /// when the kernel supports them and the registration succeeded.
    pub(super) fn register() -> bool {
        let q = call(CMD_QUERY);
        // `< 0`: the call failed (ENOSYS, EPERM under seccomp). Not an
        // ordering; `<= 0` would be an equivalent mutant (a mask of 0 fails
        // the bit tests below anyway), and loom never runs this code.
        if q < 0
            || q & libc::c_long::from(CMD_PRIVATE_EXPEDITED) == 0
            || q & libc::c_long::from(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
        {
            return false;
        }
        call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// A full barrier on every running thread of the process. The only
    /// error after a registration is EPERM in a forked child (the
    /// registration belongs to the address space, and `fork` makes a new
    /// one): register again and retry. Should that fail, the readers' light
    /// fences are compiler fences only, and no fallback can be switched on
    /// under them, so continuing could free versions a reader is about to
    /// read: abort.
    #[inline]
    pub(super) fn expedited() {
        if call(CMD_PRIVATE_EXPEDITED) == 0 {
            return;
        }
        if call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && call(CMD_PRIVATE_EXPEDITED) == 0 {
            return;
        }
        eprintln!(
            "snapshot-engine: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after a \
             successful registration ({}); aborting, as the readers' fences rely on it",
            std::io::Error::last_os_error()
        );
        std::process::abort();
    }
}

/// The environment variable that overrides `EngineConfig::asymmetric_fences`
/// for every engine of the process: `symmetric` forces the fallback,
/// `asymmetric` asks for the membarrier pair (granted where the process can
/// register); unset or anything else leaves the config's choice. Read once,
/// at the first engine.
#[cfg_attr(not(all(target_os = "linux", not(loom))), allow(dead_code))]
pub(crate) const FENCES_ENV: &str = "SNAPSHOT_ENGINE_FENCES";

/// The override [`FENCES_ENV`] sets, if any: `Some(false)` for
/// `symmetric`, `Some(true)` for `asymmetric`.
#[cfg_attr(not(all(target_os = "linux", not(loom))), allow(dead_code))]
pub(crate) fn fences_override() -> Option<bool> {
    static ENV: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| match std::env::var(FENCES_ENV).as_deref() {
        Ok("symmetric") => Some(false),
        Ok("asymmetric") => Some(true),
        _ => None,
    })
}

/// Whether this process is registered for private expedited membarriers.
/// Registers at the first call, once per process.
#[cfg(all(target_os = "linux", not(loom)))]
fn process_registered() -> bool {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REGISTERED.get_or_init(membarrier::register)
}

impl Fences {
    /// The pair for a new engine: asymmetric when `want` (or the
    /// environment's override) asks for it and the process can register
    /// (see the type's docs), symmetric otherwise.
    pub(crate) fn new(want: bool) -> Fences {
        #[cfg(all(target_os = "linux", not(loom)))]
        {
            let want = fences_override().unwrap_or(want);
            Fences {
                asymmetric: want && process_registered(),
            }
        }
        #[cfg(not(all(target_os = "linux", not(loom))))]
        {
            let _ = want;
            Fences { asymmetric: false }
        }
    }

    /// Is this the asymmetric pair (membarrier on the heavy side)?
    pub(crate) fn is_asymmetric(&self) -> bool {
        self.asymmetric
    }

    /// The readers' side: between storing a pin and loading the floor it
    /// is checked against. A compiler fence in the asymmetric mode (the
    /// compiler must not move the pin store below the floor load; the
    /// hardware may, and the heavy side's membarrier rules that out), a
    /// SeqCst fence otherwise. The mode is a field of the engine that never
    /// changes, so the branch is predicted and costs one load of a
    /// read-mostly line.
    ///
    /// Under loom the mode is always symmetric, so loom runs the same
    /// `fence(SeqCst)` the fallback runs (and the mutation check's fence
    /// mutants here reach both).
    #[inline(always)]
    pub(crate) fn light(&self) {
        #[cfg(all(test, not(loom)))]
        fence_count::bump(&fence_count::LIGHT);
        if self.asymmetric {
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    /// The advancer's side: between storing the floors and scanning the
    /// pins. Always a SeqCst fence, then, in the asymmetric mode, the
    /// membarrier. The fence is kept although the kernel issues a full
    /// barrier on the calling thread at the syscall's entry: the Rust
    /// memory model knows nothing of the syscall, and the fence is noise
    /// next to it (a few ns against microseconds).
    #[inline]
    pub(crate) fn heavy(&self) {
        #[cfg(all(test, not(loom)))]
        fence_count::bump(&fence_count::HEAVY);
        fence(Ordering::SeqCst);
        #[cfg(all(target_os = "linux", not(loom)))]
        if self.asymmetric {
            #[cfg(test)]
            fence_count::bump(&fence_count::MEMBARRIER);
            membarrier::expedited();
        }
    }
}

/// Unit tests only: how many light fences, heavy fences and membarriers
/// this thread has issued through [`Fences`], so a test can check which
/// side of the pair a call site runs (loom runs both sides as the same
/// SeqCst fence and cannot tell them apart).
#[cfg(all(test, not(loom)))]
pub(crate) mod fence_count {
    use std::cell::Cell;
    std::thread_local! {
        pub(crate) static LIGHT: Cell<u64> = const { Cell::new(0) };
        pub(crate) static HEAVY: Cell<u64> = const { Cell::new(0) };
        pub(crate) static MEMBARRIER: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn bump(c: &'static std::thread::LocalKey<Cell<u64>>) {
        c.with(|c| c.set(c.get() + 1));
    }

    /// `(light, heavy, membarrier)` issued by this thread so far.
    pub(crate) fn now() -> (u64, u64, u64) {
        (
            LIGHT.with(Cell::get),
            HEAVY.with(Cell::get),
            MEMBARRIER.with(Cell::get),
        )
    }
}

/// Backs off inside a spin loop. Under loom this yields to the model
/// scheduler, which loom requires for every spin loop.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

#[cfg(all(feature = "count-rmw", not(loom)))]
mod counting {
    use std::cell::Cell;
    std::thread_local! {
        pub(super) static RMW: Cell<u64> = const { Cell::new(0) };
    }
}

/// Records one atomic read-modify-write on this thread (feature `count-rmw`).
#[inline(always)]
pub(crate) fn count_rmw() {
    #[cfg(all(feature = "count-rmw", not(loom)))]
    counting::RMW.with(|c| c.set(c.get() + 1));
}

/// The number of atomic read-modify-writes this thread has issued through the
/// engine's `sync` shim since it started.
///
/// Only counts with the `count-rmw` cargo feature; without it this always
/// returns `None`. Atomics inside crossbeam-epoch and crossbeam-skiplist do
/// not go through the shim and are not counted (see DESIGN.md, "What the RMW
/// counter sees").
pub fn thread_rmw_count() -> Option<u64> {
    #[cfg(all(feature = "count-rmw", not(loom)))]
    {
        Some(counting::RMW.with(|c| c.get()))
    }
    #[cfg(not(all(feature = "count-rmw", not(loom))))]
    {
        None
    }
}

/// A process-wide unique, never-zero id (a session's savepoint token).
/// Relaxed: only uniqueness is needed (the RMW makes every value distinct);
/// nothing is published with it. Under loom, where a static atomic cannot be
/// built, a per-thread counter (no model opens sessions across threads to
/// compare savepoint tokens).
pub(crate) fn unique_id() -> u64 {
    #[cfg(not(loom))]
    {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        count_rmw();
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
    #[cfg(loom)]
    {
        std::thread_local! {
            static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) };
        }
        NEXT.with(|c| {
            let v = c.get();
            c.set(v + 1);
            v
        })
    }
}

macro_rules! int_atomic {
    ($name:ident, $int:ty) => {
        #[derive(Debug)]
        #[repr(transparent)]
        pub(crate) struct $name(imp::$name);

        impl Default for $name {
            fn default() -> Self {
                Self::new(0)
            }
        }

        #[allow(dead_code)]
        impl $name {
            #[inline(always)]
            pub(crate) fn new(v: $int) -> Self {
                Self(imp::$name::new(v))
            }
            #[inline(always)]
            pub(crate) fn load(&self, o: Ordering) -> $int {
                self.0.load(o)
            }
            #[inline(always)]
            pub(crate) fn store(&self, v: $int, o: Ordering) {
                self.0.store(v, o)
            }
            #[inline(always)]
            pub(crate) fn swap(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.swap(v, o)
            }
            #[inline(always)]
            pub(crate) fn fetch_add(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.fetch_add(v, o)
            }
            #[inline(always)]
            pub(crate) fn fetch_max(&self, v: $int, o: Ordering) -> $int {
                count_rmw();
                self.0.fetch_max(v, o)
            }
            #[inline(always)]
            pub(crate) fn compare_exchange(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                count_rmw();
                self.0.compare_exchange(current, new, success, failure)
            }
            /// Owner-only increment: a load and a store, not a read-modify-write.
            /// Correct only when this thread is the word's single writer.
            #[inline(always)]
            pub(crate) fn bump(&self, by: $int) {
                self.0.store(
                    self.0.load(Ordering::Relaxed).wrapping_add(by),
                    Ordering::Relaxed,
                )
            }
        }
    };
}

int_atomic!(AtomicU64, u64);
int_atomic!(AtomicUsize, usize);

/// A boolean atomic through the shim.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct AtomicBool(imp::AtomicBool);

#[allow(dead_code)]
impl AtomicBool {
    #[inline(always)]
    pub(crate) fn new(v: bool) -> Self {
        Self(imp::AtomicBool::new(v))
    }
    #[inline(always)]
    pub(crate) fn load(&self, o: Ordering) -> bool {
        self.0.load(o)
    }
    #[inline(always)]
    pub(crate) fn store(&self, v: bool, o: Ordering) {
        self.0.store(v, o)
    }
    #[inline(always)]
    pub(crate) fn compare_exchange(
        &self,
        current: bool,
        new: bool,
        success: Ordering,
        failure: Ordering,
    ) -> Result<bool, bool> {
        count_rmw();
        self.0.compare_exchange(current, new, success, failure)
    }
}

/// A pointer atomic through the shim.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct AtomicPtr<T>(imp::AtomicPtr<T>);

#[allow(dead_code)]
impl<T> AtomicPtr<T> {
    #[inline(always)]
    pub(crate) fn new(p: *mut T) -> Self {
        Self(imp::AtomicPtr::new(p))
    }
    #[inline(always)]
    pub(crate) fn load(&self, o: Ordering) -> *mut T {
        self.0.load(o)
    }
    #[inline(always)]
    pub(crate) fn store(&self, p: *mut T, o: Ordering) {
        self.0.store(p, o)
    }
    #[inline(always)]
    pub(crate) fn swap(&self, p: *mut T, o: Ordering) -> *mut T {
        count_rmw();
        self.0.swap(p, o)
    }
    #[inline(always)]
    pub(crate) fn compare_exchange(
        &self,
        current: *mut T,
        new: *mut T,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut T, *mut T> {
        count_rmw();
        self.0.compare_exchange(current, new, success, failure)
    }
    /// Reads the pointer through exclusive access (no atomic operation).
    #[inline(always)]
    pub(crate) fn get_mut_ptr(&mut self) -> *mut T {
        #[cfg(loom)]
        {
            self.0.with_mut(|p| *p)
        }
        #[cfg(not(loom))]
        {
            *self.0.get_mut()
        }
    }
}

/// Test-only switches that turn on a deliberately broken variant of the
/// protocol, so the loom models can show that they catch it.
///
/// The switch functions exist only under `--cfg loom`; in every other build
/// [`mutant_on`] is a constant `false` and the broken variants compile away.
pub mod mutant {
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
    /// another writer can write on top and the unlink fails (issue 16).
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
    /// floor from with Relaxed instead of Acquire (issue 9's bug 2;
    /// invariants 7 and 11).
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
    /// (`Machinery::begin_at_read_ts`) checks the floors before it stores
    /// its xmin and read-timestamp pins instead of after (handshake 1,
    /// invariants 1 and 2; issue 14b).
    pub const LAZY_PINS_AFTER_CHECK: u32 = 36;
    /// A transaction's first read takes no snapshot and reads with the
    /// session's cached one from an earlier transaction (the lazy snapshot
    /// skipped; invariant 7; issue 14b).
    pub const LAZY_VIEW_SKIPS_SNAPSHOT: u32 = 37;
    /// A commit leaves its installed descriptor in the session's snapshot
    /// cache labelled with the published generation it loads after its
    /// `fetch_max`, not with the generation it installed, so a racing newer
    /// commit's generation can mark the older copy current (invariants 5
    /// and 7; issue 14w).
    pub const COMMIT_CACHE_TAKES_PUBLISHED: u32 = 40;
    /// A commit that restarts its slot's durable word after the application
    /// set the global durable timestamp keeps the word's tag, so a restart
    /// at the value the set captured looks unchanged and is not reported
    /// (`all_durable`; issue 14w).
    pub const DURABLE_RESTART_KEEPS_TAG: u32 = 41;
    /// A durable report loads the last durable set's record with Relaxed
    /// instead of Acquire, so it may read the record's fields before they
    /// are visible (invariant 11; issue 14w).
    pub const RELAXED_DURABLE_SET_LOAD: u32 = 42;
    /// A commit compares its durable timestamp with its slot's durable word
    /// with the word's tag bits left on, so once a durable set has made the
    /// word restart (tag non-zero) the session's later commits never raise
    /// it (`all_durable`).
    pub const DURABLE_COMPARE_KEEPS_TAG: u32 = 43;
    /// A durable report counts a slot's word only when it grew since the
    /// last durable set instead of when it changed, so a word whose 2-bit
    /// restart tag wrapped (four restarts) is ignored (`all_durable`).
    pub const DURABLE_REPORT_COUNTS_GROWTH: u32 = 44;
    /// Prepare lists the transaction in the prepared table after it flips
    /// its statuses to prepared instead of before, so a writer whose check
    /// meets a prepared status in between takes the transaction for a
    /// dropped one and settles the status to aborted (first updater wins).
    pub const PREPARED_PUBLISHED_AFTER_FLIP: u32 = 45;
    /// The horizon advancer issues the readers' light fence between its
    /// floor stores and its scan instead of the heavy one (with the
    /// asymmetric pair: no membarrier; handshake 1). Loom runs both sides
    /// as one SeqCst fence, so this one is a unit-test mutant
    /// (`lockfree.rs` tests, which count the fences a call site issues).
    pub const ADVANCE_LIGHT_FENCE: u32 = 46;
    /// A reader that finds the link below a version it skipped cut does not
    /// judge that version again, so a reader that skipped a prepared update
    /// which then committed and became the safe point reads nothing
    /// (invariants 3 and 10).
    pub const SKIPPED_NOT_REJUDGED: u32 = 47;

    #[cfg(loom)]
    static ACTIVE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(NONE);

    /// Turns mutant `m` on (or [`NONE`] off) for the models that follow.
    #[cfg(loom)]
    pub fn set(m: u32) {
        ACTIVE.store(m, std::sync::atomic::Ordering::SeqCst);
    }

    /// Is mutant `m` on?
    #[cfg(loom)]
    #[inline]
    pub fn on(m: u32) -> bool {
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

    /// Is mutant `m` on for this thread? (unit tests)
    #[cfg(all(test, not(loom)))]
    #[inline]
    pub(crate) fn on_for_thread(m: u32) -> bool {
        THREAD_ACTIVE.with(|a| a.get()) == m
    }
}

/// Is mutant `m` on? Always false outside loom builds and unit tests.
#[inline(always)]
#[allow(unused_variables)]
pub(crate) fn mutant_on(m: u32) -> bool {
    #[cfg(loom)]
    {
        mutant::on(m)
    }
    #[cfg(all(test, not(loom)))]
    {
        mutant::on_for_thread(m)
    }
    #[cfg(not(any(loom, test)))]
    {
        false
    }
}

/// Returns `strong`, or `Relaxed` when mutant `m` is on (loom builds only).
#[inline(always)]
pub(crate) fn ordering_or_mutant(strong: Ordering, m: u32) -> Ordering {
    if mutant_on(m) {
        Ordering::Relaxed
    } else {
        strong
    }
}

/// The store-buffering litmus test on the real fence pair: one thread
/// stores `x` then loads `y` across the light fence, the other stores `y`
/// then loads `x` across the heavy fence. Both loads seeing 0 is exactly
/// what handshake 1 forbids (a pin the scan misses while the reader misses
/// the floor). x86 allows it without fences (the store buffer), so the
/// ignored third test, with the membarrier taken out, shows the pair is
/// what forbids it here.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::{fences_override, Fences, Ordering};
    use std::sync::atomic::AtomicU64;

    /// Rounds in which both loads read 0.
    fn store_buffering(light: &(dyn Fn() + Sync), heavy: &(dyn Fn() + Sync), rounds: u64) -> u64 {
        let (x, y) = (AtomicU64::new(0), AtomicU64::new(0));
        let (go, done, seen) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let wait = |w: &AtomicU64, round: u64| {
            let mut spins = 0u32;
            while w.load(Ordering::Acquire) != round {
                spins += 1;
                if spins % 1024 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        };
        let mut both_zero = 0;
        std::thread::scope(|sc| {
            sc.spawn(|| {
                for round in 1..=rounds {
                    wait(&go, round);
                    x.store(1, Ordering::Relaxed);
                    light();
                    seen.store(y.load(Ordering::Relaxed), Ordering::Relaxed);
                    done.store(round, Ordering::Release);
                }
            });
            for round in 1..=rounds {
                x.store(0, Ordering::Relaxed);
                y.store(0, Ordering::Relaxed);
                go.store(round, Ordering::Release);
                y.store(1, Ordering::Relaxed);
                heavy();
                let r2 = x.load(Ordering::Relaxed);
                wait(&done, round);
                if r2 == 0 && seen.load(Ordering::Relaxed) == 0 {
                    both_zero += 1;
                }
            }
        });
        both_zero
    }

    const ROUNDS: u64 = 20_000;

    #[test]
    fn the_asymmetric_pair_registers_and_forbids_store_buffering() {
        let f = Fences::new(true);
        if cfg!(target_os = "linux") && fences_override() != Some(false) {
            assert!(
                f.is_asymmetric(),
                "membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) failed: the kernel \
                 (4.14+ needed) or a seccomp filter refuses it"
            );
        }
        assert_eq!(store_buffering(&|| f.light(), &|| f.heavy(), ROUNDS), 0);
    }

    #[test]
    fn the_symmetric_fallback_forbids_store_buffering() {
        let f = Fences { asymmetric: false };
        assert!(!Fences::new(false).is_asymmetric() || fences_override() == Some(true));
        assert_eq!(store_buffering(&|| f.light(), &|| f.heavy(), ROUNDS), 0);
    }

    /// The heavy side without its membarrier (a SeqCst fence only) against
    /// the asymmetric light fence (a compiler fence): the reorder handshake 1
    /// forbids, seen on x86 when the two threads really run at once. Ignored:
    /// whether a run shows it depends on scheduling (`cargo test --release
    /// --lib sync::tests -- --ignored`; counts in the issue-14m note).
    #[test]
    #[ignore]
    fn without_the_membarrier_store_buffering_is_seen() {
        let light = || std::sync::atomic::compiler_fence(Ordering::SeqCst);
        let heavy = || super::fence(Ordering::SeqCst);
        let n = store_buffering(&light, &heavy, 1_000_000);
        eprintln!("both loads 0 in {n} of 1000000 rounds");
        assert!(n > 0, "no reorder seen in 1000000 rounds");
    }
}
