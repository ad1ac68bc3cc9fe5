//! Pieces every workload shares: run phases, the timekeeper, a cheap PRNG,
//! latency histograms and the worst-transaction list.

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::Serialize;
use snapshot_engine::{
    CommitOptions, Engine, Error, Protocol, Timestamp, TimestampUpdate, Txn, TxnOptions,
};
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
    pub fn commit_at_next_ts<P: Protocol>(&self, t: &mut Txn<'_, '_, P>) {
        loop {
            match t.commit(CommitOptions::at(self.next_ts())) {
                Ok(()) => return,
                Err(
                    Error::CommitTimestampNotAfterStable { .. }
                    | Error::CommitTimestampBeforeOldest { .. },
                ) => continue,
                Err(e) => panic!("commit: {e}"),
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
#[derive(Serialize, Clone, Copy, Debug, Default)]
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

/// Sleeps through warm-up and the measured window, ticking the progress
/// bar; returns the measured seconds.
pub fn run_phases(ctl: &Ctl, warmup: f64, seconds: f64, pb: &ProgressBar) -> f64 {
    // The driver's own tests (tests/cli.rs) panic here, on the main thread
    // while every worker runs, to show that the panic hook ends the process
    // (a scope would otherwise wait forever for workers nobody stops).
    if std::env::var_os("SNAPSHOT_BENCH_TEST_PANIC").is_some() {
        panic!("SNAPSHOT_BENCH_TEST_PANIC is set: panicking with the workers running");
    }
    let tick = |secs: f64| {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut last = Instant::now();
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
            let now = Instant::now();
            pb.inc((now - last).as_millis() as u64);
            last = now;
        }
    };
    tick(warmup);
    let t0 = Instant::now();
    ctl.phase.store(MEASURE, Ordering::Relaxed);
    tick(seconds);
    ctl.phase.store(STOP, Ordering::Relaxed);
    t0.elapsed().as_secs_f64()
}

/// The timekeeper of W1/W4: every 1 ms, stable = last commit ts - `stable_lag`
/// and oldest = stable - `oldest_lag`, both clamped at 1 and only moved
/// forward.
pub fn timekeeper<P: Protocol>(e: &Engine<P>, ctl: &Ctl, stable_lag: u64, oldest_lag: u64) {
    let mut cur = ctl.stable.load(Ordering::Relaxed);
    while ctl.phase() != STOP {
        std::thread::sleep(Duration::from_millis(1));
        let last = ctl.ts.load(Ordering::Relaxed);
        let stable = last.saturating_sub(stable_lag).max(1);
        if stable <= cur {
            continue;
        }
        let oldest = stable.saturating_sub(oldest_lag).max(1);
        e.set_timestamps(TimestampUpdate {
            oldest: Some(Timestamp::new(oldest)),
            stable: Some(Timestamp::new(stable)),
            durable: None,
        })
        .expect("timekeeper moves timestamps forward only");
        cur = stable;
        ctl.stable.store(stable, Ordering::Relaxed);
    }
}

/// Loads `keys` keys with `value_size`-byte values, committed at ts 1, and
/// sets oldest = stable = 1.
pub fn load<P: Protocol>(e: &Engine<P>, keys: u64, value_size: usize) {
    let mut s = e.session().expect("a session for the loader");
    let mut value = vec![0x5a; value_size];
    let mut k = 0;
    while k < keys {
        let mut t = s.begin(&TxnOptions::default()).expect("begin");
        for _ in 0..1000.min(keys - k) {
            value[..8.min(value_size)].copy_from_slice(&k.to_le_bytes()[..8.min(value_size)]);
            t.put(&key(k), &value).expect("load put");
            k += 1;
        }
        t.commit(CommitOptions::at(1)).expect("load commit");
    }
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
        if i > 0 && (s.len() - i) % 3 == 0 {
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
