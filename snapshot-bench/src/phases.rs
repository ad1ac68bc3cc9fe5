//! The phases of one run (warm-up, the measured window, stop): what the
//! driver's threads share for a run (`Ctl`) and the main thread's sleep
//! through the phases.

use crate::progress::Budget;
use crate::sched::{runnable_threads, Sched};
use indicatif::ProgressBar;
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

/// Sleeps through warm-up and the measured window, ticking the progress
/// bar; returns the measured seconds.
pub fn run_phases(ctl: &Ctl, warmup: f64, seconds: f64, pb: &ProgressBar) -> f64 {
    run_phases_sampled(ctl, warmup, seconds, pb).seconds
}

/// What [`run_phases_sampled`] saw of the scheduler in the measured window.
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    pub seconds: f64,
    /// Mean runnable threads besides the caller (20 ms samples).
    pub runnable: Option<f64>,
    /// Scheduler counter deltas over the window (every thread).
    pub sched: Option<Sched>,
}

/// [`run_phases`], and the mean number of runnable threads of this process
/// (other than the caller) over the measured window, sampled every 20 ms:
/// with more runnable threads than cores, a thread waits for a CPU however
/// cheap its transaction is.
pub fn run_phases_sampled(ctl: &Ctl, warmup: f64, seconds: f64, pb: &ProgressBar) -> Phases {
    // The driver's own tests (tests/cli.rs) panic here, on the main thread
    // while every worker runs, to show that the panic hook ends the process
    // (a scope would otherwise wait forever for workers nobody stops).
    if std::env::var_os("SNAPSHOT_BENCH_TEST_PANIC").is_some() {
        panic!("SNAPSHOT_BENCH_TEST_PANIC is set: panicking with the workers running");
    }
    let (mut sum, mut samples, mut readable) = (0u64, 0u64, true);
    let mut tick = |secs: f64, sample: bool| {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut last = Instant::now();
        let mut bar = Budget::new(pb, secs);
        while Instant::now() < end {
            let nap = if sample { 20 } else { 50 };
            std::thread::sleep(Duration::from_millis(nap).min(end - Instant::now()));
            if sample && readable {
                match runnable_threads() {
                    Some(n) => {
                        sum += n;
                        samples += 1;
                    }
                    None => readable = false,
                }
            }
            let now = Instant::now();
            bar.advance(now - last);
            last = now;
        }
    };
    tick(warmup, false);
    let t0 = Instant::now();
    ctl.phase.store(MEASURE, Ordering::Relaxed);
    let s0 = Sched::now();
    tick(seconds, true);
    ctl.phase.store(STOP, Ordering::Relaxed);
    let s1 = Sched::now();
    let secs = t0.elapsed().as_secs_f64();
    let mean = (readable && samples > 0).then(|| sum as f64 / samples as f64);
    Phases {
        seconds: secs,
        runnable: mean,
        sched: s0.zip(s1).map(|(a, b)| a.until(&b)),
    }
}
