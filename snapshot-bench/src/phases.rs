//! The phases of one run (warm-up, the measured window, stop): what the
//! driver's threads share for a run (`Ctl`) and the main thread's sleep
//! through the phases.

use crate::progress::Budget;
use crate::sched::{runnable_threads, Sched};
use indicatif::ProgressBar;
use serde::Serialize;
use snapshot_engine::with_machinery::{Machinery, Txn};
use snapshot_engine::{CommitOptions, Error};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Threads run but do not count yet.
pub const WARMUP: u8 = 0;
/// Threads count.
pub const MEASURE: u8 = 1;
/// Threads stop.
pub const STOP: u8 = 2;

/// What the driver's threads share for one run.
pub struct Ctl {
    /// WARMUP, MEASURE or STOP (driver-side; not part of any engine).
    pub phase: AtomicU8,
    /// The stable timestamp the timekeeper last set; readers use it as
    /// their read timestamp (the application knows its own stable, so
    /// readers do not ask the engine for it).
    pub stable: AtomicU64,
    /// The last commit timestamp handed out (the shared counter).
    pub ts: AtomicU64,
}

impl Ctl {
    pub fn new(first_ts: u64) -> Ctl {
        Ctl {
            phase: AtomicU8::new(WARMUP),
            stable: AtomicU64::new(first_ts),
            ts: AtomicU64::new(first_ts),
        }
    }

    #[inline]
    pub fn phase(&self) -> u8 {
        self.phase.load(Ordering::Relaxed)
    }

    /// The next commit timestamp.
    #[inline]
    pub fn next_ts(&self) -> u64 {
        self.ts.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Commits `t` at the next value of the shared counter. A timestamp the
    /// timekeeper overtook while this thread was descheduled (now at or
    /// below stable, or below oldest) is refused by the engine; take a newer
    /// one.
    pub fn commit_at_next_ts<M: Machinery>(&self, mut t: Txn<'_, '_, M>) {
        loop {
            match t.try_commit(CommitOptions::at(self.next_ts())) {
                Ok(()) => return,
                Err(e) => match e.error() {
                    Error::CommitTimestampNotAfterStable { .. }
                    | Error::CommitTimestampBeforeOldest { .. } => {
                        t = e
                            .into_txn()
                            .expect("a timestamp error keeps the transaction");
                    }
                    _ => panic!("commit: {e}"),
                },
            }
        }
    }
}

/// Least warm-up of [`Warmup::Steady`], in seconds (and all of it where
/// nothing moves stable).
pub const STEADY_FLOOR_S: f64 = 1.0;
/// Most warm-up of [`Warmup::Steady`], in seconds: past it the window opens
/// with stable still at its clamp, and the driver warns.
pub const STEADY_CAP_S: f64 = 30.0;
/// What the progress bar plans for a steady warm-up that waits for stable
/// (about what the default 8/4 run takes on 2 cores).
const STEADY_PLANNED_S: f64 = 2.5;

/// How a run warms up before its measured window opens (`--warmup`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    /// Exactly this many seconds, stable clamped or not (`--warmup S`).
    Fixed(f64),
    /// The default (`--warmup steady`): at least [`STEADY_FLOOR_S`], then
    /// on until the timekeeper has moved stable off its clamp (the writers
    /// have committed `--stable-lag` timestamps), at most [`STEADY_CAP_S`]
    /// in all, so the window measures the steady state: stable moving and
    /// pruning running. A run where nothing moves stable (no writers, no
    /// timekeeper) warms up for the floor alone.
    Steady,
}

impl Warmup {
    /// The seconds a run without a timekeeper warms up: the fixed time, or
    /// the steady warm-up's floor.
    pub fn floor_secs(self) -> f64 {
        match self {
            Warmup::Fixed(s) => s,
            Warmup::Steady => STEADY_FLOOR_S,
        }
    }

    /// The seconds the progress bar plans for one run's warm-up.
    pub fn planned_secs(self) -> f64 {
        match self {
            Warmup::Fixed(s) => s,
            Warmup::Steady => STEADY_PLANNED_S,
        }
    }
}

/// How one run's warm-up went.
#[derive(Serialize, Clone, Copy, Debug, Default)]
pub struct WarmedUp {
    /// Seconds from the start of the warm-up to the window's opening.
    pub seconds: f64,
    /// It waited for stable to leave its clamp ([`Warmup::Steady`] on a
    /// run whose timekeeper moves stable).
    pub waited_for_stable: bool,
    /// It waited and hit [`STEADY_CAP_S`] with stable still at its clamp.
    pub capped: bool,
}

/// Sleeps through warm-up and the measured window, ticking the progress
/// bar; returns the measured seconds. For runs without a timekeeper: a
/// steady warm-up is its floor here.
pub fn run_phases(ctl: &Ctl, warmup: Warmup, seconds: f64, pb: &ProgressBar) -> f64 {
    run_phases_sampled(ctl, warmup, false, seconds, pb).seconds
}

/// What [`run_phases_sampled`] saw of the scheduler in the measured window.
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    pub seconds: f64,
    /// Mean runnable threads besides the caller (20 ms samples).
    pub runnable: Option<f64>,
    /// Scheduler counter deltas over the window (every thread).
    pub sched: Option<Sched>,
    /// How the warm-up went.
    pub warmup: WarmedUp,
}

/// Sleeps in naps until `end` or until `done()`, moving `bar` by the time
/// that passes and calling `each` after every nap.
fn nap_until(
    end: Instant,
    nap_ms: u64,
    bar: &mut Budget<'_>,
    done: impl Fn() -> bool,
    mut each: impl FnMut(),
) {
    let mut last = Instant::now();
    while Instant::now() < end && !done() {
        let left = end.saturating_duration_since(Instant::now());
        std::thread::sleep(Duration::from_millis(nap_ms).min(left));
        each();
        let now = Instant::now();
        bar.advance(now - last);
        last = now;
    }
}

/// [`run_phases`], and the mean number of runnable threads of this process
/// (other than the caller) over the measured window, sampled every 20 ms:
/// with more runnable threads than cores, a thread waits for a CPU however
/// cheap its transaction is. `stable_moves`: a timekeeper moves
/// `ctl.stable` in this run, so a steady warm-up waits for it.
pub fn run_phases_sampled(
    ctl: &Ctl,
    warmup: Warmup,
    stable_moves: bool,
    seconds: f64,
    pb: &ProgressBar,
) -> Phases {
    // The driver's own tests (tests/cli.rs) panic here, on the main thread
    // while every worker runs, to show that the panic hook ends the process
    // (a scope would otherwise wait forever for workers nobody stops).
    if std::env::var_os("SNAPSHOT_BENCH_TEST_PANIC").is_some() {
        panic!("SNAPSHOT_BENCH_TEST_PANIC is set: panicking with the workers running");
    }
    let start = Instant::now();
    let mut bar = Budget::new(pb, warmup.planned_secs());
    let after = |s: f64| start + Duration::from_secs_f64(s);
    nap_until(after(warmup.floor_secs()), 50, &mut bar, || false, || {});
    let wait = warmup == Warmup::Steady && stable_moves;
    // Relaxed: the timekeeper's own value, polled; nothing else is read
    // through it.
    let left_clamp = || ctl.stable.load(Ordering::Relaxed) > 1;
    if wait {
        nap_until(after(STEADY_CAP_S), 10, &mut bar, left_clamp, || {});
    }
    let warmed = WarmedUp {
        seconds: start.elapsed().as_secs_f64(),
        waited_for_stable: wait,
        capped: wait && !left_clamp(),
    };
    let (mut sum, mut samples, mut readable) = (0u64, 0u64, true);
    let t0 = Instant::now();
    ctl.phase.store(MEASURE, Ordering::Relaxed);
    let s0 = Sched::now();
    let mut bar = Budget::new(pb, seconds);
    nap_until(
        t0 + Duration::from_secs_f64(seconds),
        20,
        &mut bar,
        || false,
        || {
            if readable {
                match runnable_threads() {
                    Some(n) => {
                        sum += n;
                        samples += 1;
                    }
                    None => readable = false,
                }
            }
        },
    );
    ctl.phase.store(STOP, Ordering::Relaxed);
    let s1 = Sched::now();
    let secs = t0.elapsed().as_secs_f64();
    let mean = (readable && samples > 0).then(|| sum as f64 / samples as f64);
    Phases {
        seconds: secs,
        runnable: mean,
        sched: s0.zip(s1).map(|(a, b)| a.until(&b)),
        warmup: warmed,
    }
}

/// The line that says how a configuration's runs warmed up: per engine,
/// the median (min-max) seconds of its runs, whether they waited for
/// stable, and how many hit the cap.
pub fn warmup_line(warmup: Warmup, stable_lag: u64, per: &[(&str, Vec<WarmedUp>)]) -> String {
    use crate::fmt::fmt_int;
    use crate::stats::{median, min_max};
    let head = match warmup {
        Warmup::Fixed(s) => format!("warm-up: {s} s per run (--warmup {s})"),
        Warmup::Steady => format!(
            "warm-up: at least {STEADY_FLOOR_S} s, then until stable left its clamp (the writers' first {} commits), at most {STEADY_CAP_S} s",
            fmt_int(stable_lag as f64)
        ),
    };
    let engines: Vec<String> = per
        .iter()
        .map(|(name, runs)| {
            let secs: Vec<f64> = runs.iter().map(|w| w.seconds).collect();
            let (lo, hi) = min_max(&secs);
            let mut s = format!("{name} {:.2} s ({lo:.2}-{hi:.2})", median(&secs));
            let capped = runs.iter().filter(|w| w.capped).count();
            if capped > 0 {
                s += &format!(", {capped} of {} runs at the cap", runs.len());
            } else if warmup == Warmup::Steady && !runs.iter().any(|w| w.waited_for_stable) {
                s += " (nothing moves stable: the floor)";
            }
            s
        })
        .collect();
    format!("{head}: {}, median (min-max)", engines.join(", "))
}
