//! The timekeeper of the read-ts and tail workloads: the thread that
//! moves stable and oldest every millisecond, and what it saw.

use crate::measure::{new_hist, Pct};
use crate::phases::{Ctl, MEASURE, STOP};
use hdrhistogram::Histogram;
use serde::Serialize;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{Timestamp, TimestampUpdate};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What the timekeeper saw in the measured window: how long each
/// `set_timestamps` call took (the stable setter waits there for commits
/// holding a claim at or below the new stable), and how late each 1 ms
/// sleep woke up (a scheduling-delay probe that involves no engine at all).
#[derive(Serialize, Clone, Debug)]
pub struct Timekeeping {
    /// `set_timestamps` calls in the measured window.
    pub calls: u64,
    /// Runs whose measured window opened with stable still at its clamp
    /// (no commit yet past the stable lag): their readers read the load,
    /// with nothing pruned, not a moving stable.
    pub opened_clamped: u64,
    /// Their durations.
    pub set_ns: Pct,
    /// When the slowest one ended, in ms after the window opened.
    pub set_max_at_ms: f64,
    /// How far past its 1 ms each sleep woke.
    pub late_ns: Pct,
    /// When the latest wake-up was, in ms after the window opened.
    pub late_max_at_ms: f64,
    #[serde(skip)]
    pub set_hist: Histogram<u64>,
    #[serde(skip)]
    pub late_hist: Histogram<u64>,
}

impl Timekeeping {
    /// An empty record (no calls yet).
    pub fn new() -> Timekeeping {
        Timekeeping {
            calls: 0,
            opened_clamped: 0,
            set_ns: Pct::default(),
            set_max_at_ms: 0.0,
            late_ns: Pct::default(),
            late_max_at_ms: 0.0,
            set_hist: new_hist(),
            late_hist: new_hist(),
        }
    }

    /// Folds `o` (another round) into `self`; the "at" times keep the
    /// slowest one's.
    pub fn add(&mut self, o: &Timekeeping) {
        if o.set_ns.max > self.set_ns.max {
            self.set_max_at_ms = o.set_max_at_ms;
        }
        if o.late_ns.max > self.late_ns.max {
            self.late_max_at_ms = o.late_max_at_ms;
        }
        self.calls += o.calls;
        self.opened_clamped += o.opened_clamped;
        self.set_hist.add(&o.set_hist).expect("same bounds");
        self.late_hist.add(&o.late_hist).expect("same bounds");
        self.set_ns = Pct::of(&self.set_hist);
        self.late_ns = Pct::of(&self.late_hist);
    }
}

/// The timekeeper's stable for the last commit timestamp `last`: `last -
/// lag`, clamped at 1 (the clamp holds until the writers pass the lag).
fn stable_for(last: u64, lag: u64) -> u64 {
    last.saturating_sub(lag).max(1)
}

/// The timekeeper of read-ts and tail: every 1 ms, stable = last commit ts -
/// `stable_lag` and oldest = stable - `oldest_lag`, both clamped at 1 and only
/// moved forward. Times its own `set_timestamps` calls and sleeps (measured
/// window only; two clock reads per 1 ms tick).
pub fn timekeeper<M: Machinery>(
    e: &Engine<M>,
    ctl: &Ctl,
    stable_lag: u64,
    oldest_lag: u64,
) -> Timekeeping {
    let mut tk = Timekeeping::new();
    let mut cur = ctl.stable.load(Ordering::Relaxed);
    let mut t0: Option<Instant> = None;
    while ctl.phase() != STOP {
        let slept = Instant::now();
        std::thread::sleep(Duration::from_millis(1));
        let woke = Instant::now();
        let measuring = ctl.phase() == MEASURE;
        if measuring && t0.is_none() {
            t0 = Some(woke);
            let last = ctl.ts.load(Ordering::Relaxed);
            tk.opened_clamped = u64::from(stable_for(last, stable_lag) == 1);
        }
        let at_ms = |t: Instant| t0.map_or(0.0, |t0| (t - t0).as_secs_f64() * 1e3);
        if measuring {
            let late = ((woke - slept).as_nanos() as u64).saturating_sub(1_000_000);
            if late >= tk.late_hist.max() {
                tk.late_max_at_ms = at_ms(woke);
            }
            tk.late_hist.saturating_record(late.max(1));
        }
        let last = ctl.ts.load(Ordering::Relaxed);
        let stable = stable_for(last, stable_lag);
        if stable <= cur {
            continue;
        }
        let oldest = stable.saturating_sub(oldest_lag).max(1);
        let t = Instant::now();
        e.set_timestamps(TimestampUpdate {
            oldest: Some(Timestamp::new(oldest)),
            stable: Some(Timestamp::new(stable)),
            durable: None,
        })
        .expect("timekeeper moves timestamps forward only");
        if measuring {
            let done = Instant::now();
            let ns = (done - t).as_nanos() as u64;
            if ns >= tk.set_hist.max() {
                tk.set_max_at_ms = at_ms(done);
            }
            tk.set_hist.saturating_record(ns.max(1));
            tk.calls += 1;
        }
        cur = stable;
        ctl.stable.store(stable, Ordering::Relaxed);
    }
    tk.set_ns = Pct::of(&tk.set_hist);
    tk.late_ns = Pct::of(&tk.late_hist);
    tk
}
