//! The fence pair of handshake 1, with the raw `membarrier(2)` calls of
//! its asymmetric mode.

use super::{fence, Ordering};

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
/// pair gives it rests on the kernel (DESIGN.md "What loom cannot see").
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
        // ordering; `<= 0` is equivalent (a mask of 0 fails
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
    /// `fence(SeqCst)` the fallback runs (and `scripts/mutants.sh`'s fence
    /// mutants here reach both).
    #[inline(always)]
    pub(crate) fn light(&self) {
        #[cfg(all(test, not(loom)))]
        fence_count::bump(&fence_count::LIGHT);
        if self.asymmetric {
            // Pairs with the heavy side's membarrier, which makes this
            // compiler fence a full barrier on this thread when it matters.
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        } else {
            // Pairs with the heavy side's SeqCst fence.
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
        // Pairs with the light side's fence (or, asymmetric, its compiler
        // fence through the membarrier below).
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
                if spins.is_multiple_of(1024) {
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
    /// --lib sync::fences::tests -- --ignored`).
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
