//! Pieces every workload shares: run phases, the timekeeper, a cheap PRNG,
//! latency histograms and the worst-transaction list.

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::Serialize;
use snapshot_engine::with_protocol::{Engine, Protocol, Txn};
use snapshot_engine::{CommitOptions, Error, Timestamp, TimestampUpdate, TxnOptions};
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
    pub fn commit_at_next_ts<P: Protocol>(&self, mut t: Txn<'_, '_, P>) {
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

/// splitmix64: a few instructions, no shared state.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    #[inline]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// A key as the store sees it: big-endian, so key order is numeric order.
#[inline]
pub fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

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
    /// This thread's CPU time when the measured window opened.
    cpu0: Option<u64>,
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
            cpu0: None,
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
            self.cpu0 = thread_cpu_ns();
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
        let cpu = self
            .cpu0
            .zip(thread_cpu_ns())
            .map(|(a, b)| b.saturating_sub(a));
        (self.hist, self.worst.v, cpu)
    }
}

/// Sleeps through warm-up and the measured window, ticking the progress
/// bar; returns the measured seconds.
pub fn run_phases(ctl: &Ctl, warmup: f64, seconds: f64, pb: &ProgressBar) -> f64 {
    run_phases_sampled(ctl, warmup, seconds, pb).seconds
}

/// How many of this process's threads, other than the caller, are
/// runnable (running or waiting for a CPU) now, from
/// `/proc/self/task/*/stat`; `None` where that cannot be read.
pub fn runnable_threads() -> Option<u64> {
    let mut n = 0u64;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(t) = t else { continue };
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // "pid (comm) S ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next());
        if state == Some('R') {
            n += 1;
        }
    }
    // The caller is running while it reads.
    Some(n.saturating_sub(1))
}

/// Scheduler counters summed over this process's threads, from
/// `/proc/self/task/*/schedstat` (ns on a CPU, ns waiting on a run queue)
/// and `/proc/self/task/*/status` (context switches).
#[derive(Serialize, Clone, Copy, Debug, Default)]
pub struct Sched {
    pub on_cpu_ns: u64,
    pub runqueue_wait_ns: u64,
    /// The thread blocked (a futex sleep, a lock parked, a sleep).
    pub voluntary_switches: u64,
    /// The thread was preempted while it could still run.
    pub involuntary_switches: u64,
}

impl Sched {
    /// Now, or `None` where the files cannot be read.
    pub fn now() -> Option<Sched> {
        let mut s = Sched::default();
        for t in std::fs::read_dir("/proc/self/task").ok()? {
            let Ok(t) = t else { continue };
            if let Ok(st) = std::fs::read_to_string(t.path().join("schedstat")) {
                let mut f = st.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
                s.on_cpu_ns += f.next().unwrap_or(0);
                s.runqueue_wait_ns += f.next().unwrap_or(0);
            }
            if let Ok(st) = std::fs::read_to_string(t.path().join("status")) {
                for l in st.lines() {
                    let v = |l: &str| {
                        l.split_once(':')
                            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
                            .unwrap_or(0)
                    };
                    if l.starts_with("voluntary_ctxt_switches") {
                        s.voluntary_switches += v(l);
                    } else if l.starts_with("nonvoluntary_ctxt_switches") {
                        s.involuntary_switches += v(l);
                    }
                }
            }
        }
        Some(s)
    }

    /// `later - self`, counter by counter.
    pub fn until(&self, later: &Sched) -> Sched {
        Sched {
            on_cpu_ns: later.on_cpu_ns.saturating_sub(self.on_cpu_ns),
            runqueue_wait_ns: later.runqueue_wait_ns.saturating_sub(self.runqueue_wait_ns),
            voluntary_switches: later
                .voluntary_switches
                .saturating_sub(self.voluntary_switches),
            involuntary_switches: later
                .involuntary_switches
                .saturating_sub(self.involuntary_switches),
        }
    }
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

/// The timekeeper of W1/W4: every 1 ms, stable = last commit ts - `stable_lag`
/// and oldest = stable - `oldest_lag`, both clamped at 1 and only moved
/// forward. Times its own `set_timestamps` calls and sleeps (measured
/// window only; two clock reads per 1 ms tick).
pub fn timekeeper<P: Protocol>(
    e: &Engine<P>,
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

/// A phase's share of the progress bar: it moves the bar by the time that
/// passes, but never by more than the phase's planned `secs`, so sleeps that
/// overshoot (a 0.01 s phase sleeps in 20-50 ms steps) never carry the bar
/// past 100%.
pub struct Budget<'a> {
    pb: &'a ProgressBar,
    left_ms: u64,
}

impl<'a> Budget<'a> {
    pub fn new(pb: &'a ProgressBar, secs: f64) -> Budget<'a> {
        Budget {
            pb,
            left_ms: (secs * 1000.0) as u64,
        }
    }

    pub fn advance(&mut self, d: Duration) {
        let ms = (d.as_millis() as u64).min(self.left_ms);
        self.left_ms -= ms;
        advance(self.pb, ms);
    }
}

/// Moves the bar by `ms`, clamped to its length.
pub fn advance(pb: &ProgressBar, ms: u64) {
    let len = pb.length().unwrap_or(u64::MAX);
    pb.set_position(pb.position().saturating_add(ms).min(len));
}

/// `n` and the word, plural unless `n` is 1: "1 round", "3 rounds".
pub fn plural(n: impl Into<u64>, word: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Loads `keys` keys with `value_size`-byte values, committed at ts 1, and
/// sets oldest = stable = 1. The bar's message counts the keys loaded (a
/// load of millions of keys takes seconds to a minute, outside the bar's
/// planned time).
pub fn load<P: Protocol>(e: &Engine<P>, keys: u64, value_size: usize, pb: &ProgressBar) {
    let mut s = e.session().expect("a session for the loader");
    let mut value = vec![0x5a; value_size];
    let mut k = 0;
    let msg = pb.message();
    while k < keys {
        if k % 100_000 == 0 {
            pb.set_message(format!(
                "{msg}: loading keys {}/{}",
                fmt_int(k as f64),
                fmt_int(keys as f64)
            ));
        }
        let mut t = s.begin(&TxnOptions::default()).expect("begin");
        for _ in 0..1000.min(keys - k) {
            value[..8.min(value_size)].copy_from_slice(&k.to_le_bytes()[..8.min(value_size)]);
            t.put(key(k), &value).expect("load put");
            k += 1;
        }
        t.commit(CommitOptions::at(1)).expect("load commit");
    }
    pb.set_message(msg);
    e.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(1)),
        stable: Some(Timestamp::new(1)),
        durable: None,
    })
    .expect("initial timestamps");
}

/// Thousands separators.
pub fn fmt_int(x: f64) -> String {
    let n = x.round() as i128;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Nanoseconds as a short human string.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=9_999_999 => format!("{:.1}us", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}
