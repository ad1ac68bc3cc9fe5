//! What a worker thread measures: each transaction's latency into an HDR
//! histogram, its percentiles, the slowest few transactions, and the
//! thread's CPU time over the measured window.

use crate::phases::{Ctl, MEASURE, STOP};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Instant;

/// A latency histogram in nanoseconds, 1 ns to 100 s, 3 significant digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Latency percentiles in nanoseconds.
#[derive(Serialize, serde::Deserialize, Clone, Copy, Debug, Default)]
pub struct Pct {
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Pct {
    pub fn of(h: &Histogram<u64>) -> Pct {
        if h.is_empty() {
            return Pct::default();
        }
        Pct {
            p50: h.value_at_quantile(0.50),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// One slow transaction.
#[derive(Serialize, Clone, Debug)]
pub struct Worst {
    pub latency_ns: u64,
    pub kind: &'static str,
    pub thread: usize,
    /// Milliseconds after the measured window opened.
    pub at_ms: f64,
    pub round: usize,
}

/// The `N` slowest transactions seen, kept cheaply: a new one is looked at
/// only when it beats the current minimum.
pub struct WorstList {
    pub v: Vec<Worst>,
    min: u64,
    cap: usize,
}

impl WorstList {
    pub fn new(cap: usize) -> WorstList {
        WorstList {
            v: Vec::with_capacity(cap + 1),
            min: 0,
            cap,
        }
    }

    #[inline]
    pub fn offer(&mut self, ns: u64, make: impl FnOnce() -> Worst) {
        if self.cap == 0 || (self.v.len() == self.cap && ns <= self.min) {
            return;
        }
        self.v.push(make());
        if self.v.len() > self.cap {
            let (i, _) = self
                .v
                .iter()
                .enumerate()
                .min_by_key(|(_, w)| w.latency_ns)
                .expect("non-empty");
            self.v.swap_remove(i);
        }
        if self.v.len() == self.cap {
            self.min = self.v.iter().map(|w| w.latency_ns).min().unwrap_or(0);
        }
    }

    pub fn merge(lists: impl IntoIterator<Item = Vec<Worst>>, cap: usize) -> Vec<Worst> {
        let mut all: Vec<Worst> = lists.into_iter().flatten().collect();
        all.sort_by_key(|w| std::cmp::Reverse(w.latency_ns));
        all.truncate(cap);
        all
    }
}

/// One thread's view of the measured window: it follows the run's phase,
/// times each transaction from the end of the one before (so time spent
/// preempted between transactions is charged to the next one, as a client
/// would see it), and keeps the latency histogram and the slowest few.
pub struct Meter {
    /// Whether the measured window has opened for this thread.
    pub measuring: bool,
    t0: Instant,
    last: Instant,
    hist: Histogram<u64>,
    worst: WorstList,
    thread: usize,
    round: usize,
    /// This thread's CPU time over the measured window.
    cpu: CpuWindow,
}

/// One thread's CPU time over the measured window: [`CpuWindow::open`]
/// where the window opens for it, [`CpuWindow::spent`] where it stops.
#[derive(Default)]
pub struct CpuWindow {
    /// The thread's CPU clock where the window opened (`Some(None)`: it
    /// could not be read); `None` until then.
    start: Option<Option<u64>>,
}

impl CpuWindow {
    /// Opens the window at the first call; says whether this call did.
    pub fn open(&mut self) -> bool {
        if self.start.is_some() {
            return false;
        }
        self.start = Some(thread_cpu_ns());
        true
    }

    /// Has the window opened?
    pub fn is_open(&self) -> bool {
        self.start.is_some()
    }

    /// The CPU time the thread spent since the window opened (`None`: it
    /// never opened, or the clock could not be read).
    pub fn spent(&self) -> Option<u64> {
        self.start
            .flatten()
            .zip(thread_cpu_ns())
            .map(|(a, b)| b.saturating_sub(a))
    }
}

/// The calling thread's CPU time in nanoseconds (user and system); `None`
/// where the clock cannot be read.
pub fn thread_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock_gettime(clock)` in nanoseconds; `None` where it fails.
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(clock, &mut t) };
    (rc == 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
}

impl Meter {
    /// A meter for thread `thread` of round `round`, keeping the `worst`
    /// slowest transactions.
    pub fn new(worst: usize, thread: usize, round: usize) -> Meter {
        let now = Instant::now();
        Meter {
            measuring: false,
            t0: now,
            last: now,
            hist: new_hist(),
            worst: WorstList::new(worst),
            thread,
            round,
            cpu: CpuWindow::default(),
        }
    }

    /// Where the run is before the next transaction: `None` once it is
    /// over, `Some(true)` the first time the measured window is open (the
    /// caller takes its base counters then), `Some(false)` otherwise.
    pub fn next(&mut self, ctl: &Ctl) -> Option<bool> {
        let ph = ctl.phase();
        if ph == STOP {
            return None;
        }
        if ph == MEASURE && !self.measuring {
            self.measuring = true;
            self.cpu.open();
            self.t0 = Instant::now();
            self.last = self.t0;
            return Some(true);
        }
        Some(false)
    }

    /// Records the transaction that has just ended as `kind`; says whether
    /// it fell inside the measured window (and so counts).
    #[inline]
    pub fn record(&mut self, kind: &'static str) -> bool {
        let now = Instant::now();
        if self.measuring {
            let ns = (now - self.last).as_nanos() as u64;
            self.hist.saturating_record(ns.max(1));
            let (thread, round, t0) = (self.thread, self.round, self.t0);
            self.worst.offer(ns, || Worst {
                latency_ns: ns,
                kind,
                thread,
                at_ms: (now - t0).as_secs_f64() * 1e3,
                round,
            });
        }
        self.last = now;
        self.measuring
    }

    /// The histogram, the slowest transactions, and the CPU time this
    /// thread spent since the measured window opened (`None`: it never
    /// opened, or the clock could not be read). Call it as soon as the
    /// thread's loop ends, so the CPU time is the window's.
    pub fn finish(self) -> (Histogram<u64>, Vec<Worst>, Option<u64>) {
        let cpu = self.cpu.spent();
        (self.hist, self.worst.v, cpu)
    }
}
