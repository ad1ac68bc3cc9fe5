//! Turning runs into rounds, tables and JSON.

use crate::fmt::{fmt_int, fmt_ns};
use crate::measure::{new_hist, Pct, Worst};
use crate::read_ts::Out;
use crate::sched::Sched;
use crate::stats::{mann_whitney_p, median, min_max, rounds_won};
use crate::timekeeper::Timekeeping;
use hdrhistogram::Histogram;
use serde::Serialize;

/// One engine's result in one round of read-ts or tail.
#[derive(Serialize, Clone, Debug)]
pub struct Round {
    pub round: usize,
    /// 0 if this engine ran first in the round.
    pub position: usize,
    pub seconds: f64,
    /// How the run warmed up before its measured window.
    pub warmup: crate::phases::WarmedUp,
    pub reader_txn_per_s: f64,
    pub writer_txn_per_s: f64,
    /// Reader transactions per second of reader-thread CPU time (the
    /// readers' own CPU clocks over the window, summed): what a reader does
    /// with the CPU it gets, apart from how much of it the writers took.
    /// `null` where the clocks could not be read or there are no readers.
    pub reader_txn_per_cpu_s: Option<f64>,
    /// The same for writer transactions and writer-thread CPU time.
    pub writer_txn_per_cpu_s: Option<f64>,
    pub reader_txns: u64,
    pub writer_txns: u64,
    pub writer_conflicts: u64,
    /// Reader transactions that retried set_read_timestamp because oldest
    /// passed the stable value they had loaded.
    pub reader_read_ts_retries: u64,
    /// Read-modify-writes issued through the engine's `sync` shim per
    /// read-only transaction (for the baselines: plus two per lock
    /// acquisition). `null` unless built with `--features count-rmw`.
    pub shared_rmw_per_read_txn: Option<f64>,
    /// The same per write transaction (every writer-thread RMW through the
    /// shim, commit-timestamp retries, conflicts and pruning included,
    /// divided by the writer sessions' begins). `null` unless built with
    /// `--features count-rmw`.
    pub shared_rmw_per_write_txn: Option<f64>,
    /// Read-modify-writes on the shared lock word per reader transaction:
    /// two (acquire, release) per read or write lock acquisition of the
    /// reader sessions, from the counters every build keeps. `null` for
    /// peers.
    pub lock_word_rmw_per_read_txn: Option<f64>,
    pub read_locks_per_read_txn: Option<f64>,
    pub snapshot_rebuilds_per_read_txn: Option<f64>,
    /// Snapshot copies per write transaction (a writer whose previous
    /// commit's descriptor is still current reuses it).
    pub snapshot_rebuilds_per_write_txn: Option<f64>,
    pub lock_wait_ns_per_read_txn: Option<f64>,
    pub read_locks_per_write_txn: Option<f64>,
    pub write_locks_per_write_txn: Option<f64>,
    pub lock_wait_ns_per_write_txn: Option<f64>,
    /// Versions examined per key read by readers (`ver/read`).
    pub versions_per_read: Option<f64>,
    /// Versions examined per writer commit, linking and pruning
    /// (`ver/commit`).
    pub versions_per_commit: Option<f64>,
    pub read_latency_ns: Pct,
    pub write_latency_ns: Pct,
    /// The timekeeper's `set_timestamps` durations and 1 ms sleep
    /// overshoots (`null` for peers).
    pub timekeeper: Option<Timekeeping>,
    /// Mean runnable threads of the driver process (besides its main
    /// thread) over the measured window, sampled every 20 ms from
    /// `/proc/self/task`; `null` where that cannot be read.
    pub runnable_threads: Option<f64>,
    /// Scheduler counters of every driver thread over the window
    /// (`/proc/self/task`); `null` where they cannot be read.
    pub sched: Option<Sched>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub worst: Vec<Worst>,
    #[serde(skip)]
    pub read_hist: Histogram<u64>,
    #[serde(skip)]
    pub write_hist: Histogram<u64>,
}

impl Round {
    pub fn from_out(round: usize, position: usize, o: Out) -> Round {
        let per = |x: u64, n: u64| (n > 0).then(|| x as f64 / n as f64);
        let rs = o.reader_stats.as_ref();
        let ws = o.writer_stats.as_ref();
        let rb = rs.map_or(0, |s| s.begins);
        let wb = ws.map_or(0, |s| s.begins);
        Round {
            round,
            position,
            seconds: o.seconds,
            warmup: o.warmup,
            reader_txn_per_s: o.reader_txns as f64 / o.seconds,
            writer_txn_per_s: o.writer_txns as f64 / o.seconds,
            reader_txn_per_cpu_s: o
                .reader_cpu_ns
                .filter(|&c| c > 0)
                .map(|c| o.reader_txns as f64 / (c as f64 / 1e9)),
            writer_txn_per_cpu_s: o
                .writer_cpu_ns
                .filter(|&c| c > 0)
                .map(|c| o.writer_txns as f64 / (c as f64 / 1e9)),
            reader_txns: o.reader_txns,
            writer_txns: o.writer_txns,
            writer_conflicts: o.writer_aborts,
            reader_read_ts_retries: o.reader_read_ts_retries,
            shared_rmw_per_read_txn: o.reader_rmw.and_then(|r| per(r, rb.max(o.reader_txns))),
            shared_rmw_per_write_txn: o
                .writer_rmw
                .and_then(|r| per(r, wb.max(o.writer_txns + o.writer_aborts))),
            lock_word_rmw_per_read_txn: rs.and_then(|s| {
                per(
                    2 * (s.read_lock_acquisitions + s.write_lock_acquisitions),
                    rb,
                )
            }),
            read_locks_per_read_txn: rs.and_then(|s| per(s.read_lock_acquisitions, rb)),
            snapshot_rebuilds_per_read_txn: rs.and_then(|s| per(s.snapshot_rebuilt, rb)),
            snapshot_rebuilds_per_write_txn: ws.and_then(|s| per(s.snapshot_rebuilt, wb)),
            lock_wait_ns_per_read_txn: rs.and_then(|s| per(s.lock_wait_ns, rb)),
            read_locks_per_write_txn: ws.and_then(|s| per(s.read_lock_acquisitions, wb)),
            write_locks_per_write_txn: ws.and_then(|s| per(s.write_lock_acquisitions, wb)),
            lock_wait_ns_per_write_txn: ws.and_then(|s| per(s.lock_wait_ns, wb)),
            versions_per_read: rs.and_then(|s| per(s.versions_read, s.reads)),
            versions_per_commit: ws.and_then(|s| per(s.commit_versions_examined, s.commits)),
            read_latency_ns: Pct::of(&o.read_hist),
            write_latency_ns: Pct::of(&o.write_hist),
            timekeeper: o.timekeeper,
            runnable_threads: o.runnable,
            sched: o.sched,
            worst: o.worst,
            read_hist: o.read_hist,
            write_hist: o.write_hist,
        }
    }
}

/// One engine's rounds.
#[derive(Serialize, Clone, Debug)]
pub struct EngineRounds {
    pub engine: &'static str,
    pub rounds: Vec<Round>,
}

/// A paired comparison of two engines on one metric.
#[derive(Serialize, Clone, Debug)]
pub struct Comparison {
    pub metric: &'static str,
    pub a: &'static str,
    pub b: &'static str,
    pub a_median: f64,
    pub b_median: f64,
    /// `(a - b) / b`.
    pub difference: f64,
    pub ratio: f64,
    pub p_value: f64,
    pub a_higher_rounds: usize,
    /// The rounds paired for `a_higher_rounds`: those where both engines
    /// finished transactions.
    pub rounds: usize,
    /// Rounds (of either engine) in which no transaction of this metric
    /// finished, left out of the medians, the p-value and the pairs.
    pub left_out: usize,
}

/// The rounds that finished transactions (a rate above 0); all of them
/// when none did (a side with no threads, or a run too short for any).
pub fn counted(xs: &[f64]) -> Vec<f64> {
    let v: Vec<f64> = xs.iter().copied().filter(|&x| x > 0.0).collect();
    if v.is_empty() {
        xs.to_vec()
    } else {
        v
    }
}

pub fn compare(
    metric: &'static str,
    a: &EngineRounds,
    b: &EngineRounds,
    f: impl Fn(&Round) -> f64,
) -> Comparison {
    let xa: Vec<f64> = a.rounds.iter().map(&f).collect();
    let xb: Vec<f64> = b.rounds.iter().map(&f).collect();
    compare_values(metric, a.engine, b.engine, &xa, &xb)
}

/// Compares per-round values of `a` and `b` (paired by round index),
/// leaving out rounds whose value is 0 (no transaction finished).
pub fn compare_values(
    metric: &'static str,
    a: &'static str,
    b: &'static str,
    xa: &[f64],
    xb: &[f64],
) -> Comparison {
    let (ca, cb) = (counted(xa), counted(xb));
    let left_out = xa.len() - ca.len() + xb.len() - cb.len();
    let (pa, pb): (Vec<f64>, Vec<f64>) = if left_out == 0 {
        (xa.to_vec(), xb.to_vec())
    } else {
        xa.iter()
            .zip(xb)
            .filter(|&(&x, &y)| x > 0.0 && y > 0.0)
            .unzip()
    };
    let (ma, mb) = (median(&ca), median(&cb));
    Comparison {
        metric,
        a,
        b,
        a_median: ma,
        b_median: mb,
        difference: (ma - mb) / mb,
        ratio: ma / mb,
        p_value: mann_whitney_p(&ca, &cb),
        a_higher_rounds: rounds_won(&pa, &pb),
        rounds: pa.len().min(pb.len()),
        left_out,
    }
}

fn med_range(xs: &[f64]) -> String {
    let (lo, hi) = min_max(xs);
    format!("{} ({}-{})", fmt_int(median(xs)), fmt_int(lo), fmt_int(hi))
}

fn med_opt(xs: Vec<Option<f64>>, digits: usize) -> String {
    let v: Vec<f64> = xs.into_iter().flatten().collect();
    if v.is_empty() {
        "-".into()
    } else {
        format!("{:.*}", digits, median(&v))
    }
}

/// The read-ts table: one row per engine, then the comparisons of the first
/// engine against each other one.
pub fn print_read_ts(title: &str, engines: &[EngineRounds], cmps: &[Comparison]) {
    println!("{title}");
    // As wide as the longest row name (`lock-free/16t` with --tables).
    let w = engines
        .iter()
        .map(|e| e.engine.len())
        .max()
        .unwrap_or(0)
        .max(10);
    println!(
        "{:<w$} {:>32} {:>14} {:>32} {:>14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>8} {:>8} {:>8} {:>8}",
        "engine",
        "reader txn/s median (min-max)",
        "rtxn/cpu-s",
        "writer txn/s median (min-max)",
        "wtxn/cpu-s",
        "rmw/rtxn",
        "rmw/wtxn",
        "rlock/rtxn",
        "rebuild/rtxn",
        "waitns/rtxn",
        "ver/read",
        "ver/commit",
        "rd p50",
        "rd p99",
        "rd p99.9",
        "rd max"
    );
    for e in engines {
        let r = &e.rounds;
        let pct = |f: fn(&Pct) -> u64| {
            fmt_ns(median(
                &r.iter()
                    .map(|x| f(&x.read_latency_ns) as f64)
                    .collect::<Vec<_>>(),
            ) as u64)
        };
        let maxv = r.iter().map(|x| x.read_latency_ns.max).max().unwrap_or(0);
        println!(
            "{:<w$} {:>32} {:>14} {:>32} {:>14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>8} {:>8} {:>8} {:>8}",
            e.engine,
            med_range(&counted(
                &r.iter().map(|x| x.reader_txn_per_s).collect::<Vec<_>>()
            )),
            med_opt(r.iter().map(|x| x.reader_txn_per_cpu_s).collect(), 0),
            med_range(&counted(
                &r.iter().map(|x| x.writer_txn_per_s).collect::<Vec<_>>()
            )),
            med_opt(r.iter().map(|x| x.writer_txn_per_cpu_s).collect(), 0),
            med_opt(r.iter().map(|x| x.shared_rmw_per_read_txn).collect(), 3),
            med_opt(r.iter().map(|x| x.shared_rmw_per_write_txn).collect(), 3),
            med_opt(r.iter().map(|x| x.read_locks_per_read_txn).collect(), 3),
            med_opt(
                r.iter().map(|x| x.snapshot_rebuilds_per_read_txn).collect(),
                3
            ),
            med_opt(r.iter().map(|x| x.lock_wait_ns_per_read_txn).collect(), 0),
            med_opt(r.iter().map(|x| x.versions_per_read).collect(), 2),
            med_opt(r.iter().map(|x| x.versions_per_commit).collect(), 2),
            pct(|p| p.p50),
            pct(|p| p.p99),
            pct(|p| p.p999),
            fmt_ns(maxv),
        );
    }
    for c in cmps {
        println!(
            "  {} {}: {} -> {} ({}, exact Mann-Whitney p = {:.3}, {} higher in {}/{} rounds{})",
            c.metric,
            format_args!("{} vs {}", c.a, c.b),
            fmt_int(c.b_median),
            fmt_int(c.a_median),
            ratio_text(c),
            c.p_value,
            c.a,
            c.a_higher_rounds,
            c.rounds,
            left_out_text(c)
        );
    }
    let wl: Vec<String> = engines
        .iter()
        .filter_map(|e| {
            let v: Vec<f64> = e
                .rounds
                .iter()
                .filter_map(|x| Some(x.read_locks_per_write_txn? + x.write_locks_per_write_txn?))
                .collect();
            (!v.is_empty() && median(&v) > 0.0).then(|| {
                let w: Vec<f64> = e
                    .rounds
                    .iter()
                    .filter_map(|x| x.lock_wait_ns_per_write_txn)
                    .collect();
                format!(
                    "{} {:.2} locks, {:.0} ns wait",
                    e.engine,
                    median(&v),
                    median(&w)
                )
            })
        })
        .collect();
    if !wl.is_empty() {
        println!("  per writer txn: {}", wl.join("; "));
    }
    for c in cmps {
        println!("verdict: {}", verdict(c));
    }
    println!();
}

/// The significance level of the verdict lines.
pub const ALPHA: f64 = 0.05;

fn ratio_text(c: &Comparison) -> String {
    if c.b_median > 0.0 {
        format!("{:+.1}%, x{:.2}", c.difference * 100.0, c.ratio)
    } else {
        "no ratio: the second engine's median is 0".into()
    }
}

/// The smallest exact two-sided p that `n` rounds against `n` can reach:
/// the two most extreme of the C(2n, n) equally likely splits.
pub fn smallest_p(n: usize) -> f64 {
    let splits = (0..n).fold(1.0, |acc, i| acc * (2 * n - i) as f64 / (i + 1) as f64);
    (2.0 / splits).min(1.0)
}

/// "; 1 round with no transactions left out" (nothing when none was).
fn left_out_text(c: &Comparison) -> String {
    if c.left_out == 0 {
        String::new()
    } else {
        format!(
            "; {} with no transactions left out",
            crate::fmt::plural(c.left_out as u64, "round")
        )
    }
}

/// One comparison in plain words: faster, slower, or no difference this
/// sample can show, with the ratio, p and the rounds won.
pub fn verdict(c: &Comparison) -> String {
    let numbers = format!(
        "{}, p = {:.3}, higher in {}/{} rounds{}",
        ratio_text(c),
        c.p_value,
        c.a_higher_rounds,
        c.rounds,
        left_out_text(c)
    );
    // The metric names what is compared: "readers", "writers", "total ops/s".
    let what = c.metric;
    if c.p_value <= ALPHA && c.a_median > c.b_median {
        format!("{} is FASTER than {} for {what}: {numbers}", c.a, c.b)
    } else if c.p_value <= ALPHA && c.a_median < c.b_median {
        format!("{} is SLOWER than {} for {what}: {numbers}", c.a, c.b)
    } else {
        let floor = smallest_p(c.rounds);
        let hint = if floor > ALPHA {
            format!(
                "; {} cannot reach p <= {ALPHA} (smallest possible p = {floor:.3}), try --rounds 5",
                crate::fmt::plural(c.rounds as u64, "round")
            )
        } else {
            String::new()
        };
        format!(
            "{} vs {} for {what}: no difference this sample can show (p > {ALPHA}): {numbers}{hint}",
            c.a, c.b
        )
    }
}

/// The headline figure: read-modify-writes on a word every thread shares,
/// per read-only transaction, per engine (median over rounds). Every build
/// counts the lock-word ones (two per lock acquisition, from the sessions'
/// counters); a `count-rmw` build also counts every read-modify-write that
/// goes through the sync shim.
pub fn print_headline(engines: &[EngineRounds]) {
    let figs = |f: fn(&Round) -> Option<f64>| -> Vec<String> {
        engines
            .iter()
            .filter_map(|e| {
                let v: Vec<f64> = e.rounds.iter().filter_map(f).collect();
                (!v.is_empty()).then(|| format!("{} {:.2}", e.engine, median(&v)))
            })
            .collect()
    };
    let lock = figs(|r| r.lock_word_rmw_per_read_txn);
    if !lock.is_empty() {
        println!(
            "headline: shared lock-word read-modify-writes per read-only transaction: {} (2 per lock acquisition, acquire + release; counted in every build)",
            lock.join(" vs ")
        );
    }
    let shim = figs(|r| r.shared_rmw_per_read_txn);
    if !shim.is_empty() {
        println!(
            "headline: every shared-word read-modify-write through the sync shim per read-only transaction: {} (count-rmw build)",
            shim.join(" vs ")
        );
    }
    let shim_w = figs(|r| r.shared_rmw_per_write_txn);
    if !shim_w.is_empty() {
        println!(
            "per write transaction: every read-modify-write through the sync shim: {} (count-rmw build; baselines: + 2 per lock acquisition, see \"per writer txn\")",
            shim_w.join(" vs ")
        );
    }
}

/// Latency buckets of the tail report: [lo, hi) in ns.
pub const BUCKETS: &[(u64, u64, &str)] = &[
    (0, 1_000, "< 1 us"),
    (1_000, 2_000, "1-2 us"),
    (2_000, 5_000, "2-5 us"),
    (5_000, 10_000, "5-10 us"),
    (10_000, 20_000, "10-20 us"),
    (20_000, 50_000, "20-50 us"),
    (50_000, 100_000, "50-100 us"),
    (100_000, 200_000, "100-200 us"),
    (200_000, 500_000, "200-500 us"),
    (500_000, 1_000_000, "0.5-1 ms"),
    (1_000_000, 2_000_000, "1-2 ms"),
    (2_000_000, 5_000_000, "2-5 ms"),
    (5_000_000, 10_000_000, "5-10 ms"),
    (10_000_000, 20_000_000, "10-20 ms"),
    (20_000_000, 50_000_000, "20-50 ms"),
    (50_000_000, 100_000_000, "50-100 ms"),
    (100_000_000, u64::MAX, ">= 100 ms"),
];

/// Counts of `h` per bucket.
pub fn bucket_counts(h: &Histogram<u64>) -> Vec<u64> {
    let mut out = vec![0u64; BUCKETS.len()];
    for v in h.iter_recorded() {
        let x = v.value_iterated_to();
        let i = BUCKETS
            .iter()
            .position(|&(lo, hi, _)| x >= lo && x < hi)
            .unwrap_or(BUCKETS.len() - 1);
        out[i] += v.count_at_value();
    }
    out
}

/// One engine's tail summary, over all its rounds.
#[derive(Serialize, Clone, Debug)]
pub struct Tail {
    pub engine: &'static str,
    pub transactions: u64,
    pub read: Pct,
    pub write: Pct,
    pub all: Pct,
    pub mean_ns: f64,
    pub buckets: Vec<(String, u64)>,
    pub worst: Vec<Worst>,
    /// The timekeeper over all rounds (`null` for peers).
    pub timekeeper: Option<Timekeeping>,
    /// Median over rounds of the mean runnable threads.
    pub runnable_threads: Option<f64>,
    /// The scheduler counters summed over rounds.
    pub sched: Option<Sched>,
}

pub fn tail_of(e: &EngineRounds, worst: usize) -> Tail {
    let (mut r, mut w, mut a) = (new_hist(), new_hist(), new_hist());
    for x in &e.rounds {
        r.add(&x.read_hist).expect("same bounds");
        w.add(&x.write_hist).expect("same bounds");
    }
    a.add(&r).expect("same bounds");
    a.add(&w).expect("same bounds");
    let counts = bucket_counts(&a);
    Tail {
        engine: e.engine,
        transactions: a.len(),
        read: Pct::of(&r),
        write: Pct::of(&w),
        all: Pct::of(&a),
        mean_ns: a.mean(),
        buckets: BUCKETS
            .iter()
            .zip(counts)
            .map(|(b, c)| (b.2.to_string(), c))
            .collect(),
        worst: crate::measure::WorstList::merge(e.rounds.iter().map(|x| x.worst.clone()), worst),
        timekeeper: e.rounds.iter().filter_map(|x| x.timekeeper.as_ref()).fold(
            None,
            |acc: Option<Timekeeping>, t| {
                let mut a = acc.unwrap_or_else(Timekeeping::new);
                a.add(t);
                Some(a)
            },
        ),
        runnable_threads: {
            let v: Vec<f64> = e.rounds.iter().filter_map(|x| x.runnable_threads).collect();
            (!v.is_empty()).then(|| median(&v))
        },
        sched: e
            .rounds
            .iter()
            .filter_map(|x| x.sched)
            .fold(None, |acc: Option<Sched>, s| {
                let a = acc.unwrap_or_default();
                Some(Sched {
                    on_cpu_ns: a.on_cpu_ns + s.on_cpu_ns,
                    runqueue_wait_ns: a.runqueue_wait_ns + s.runqueue_wait_ns,
                    voluntary_switches: a.voluntary_switches + s.voluntary_switches,
                    involuntary_switches: a.involuntary_switches + s.involuntary_switches,
                })
            }),
    }
}

pub fn print_tail(title: &str, tails: &[Tail]) {
    println!("{title}");
    println!(
        "{:<10} {:<6} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "engine", "txns", "count", "mean", "p50", "p95", "p99", "p99.9", "max"
    );
    for t in tails {
        for (kind, p, n) in [
            ("all", &t.all, t.transactions),
            ("read", &t.read, 0),
            ("write", &t.write, 0),
        ] {
            println!(
                "{:<10} {:<6} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                t.engine,
                kind,
                if n > 0 {
                    fmt_int(n as f64)
                } else {
                    String::new()
                },
                if kind == "all" {
                    fmt_ns(t.mean_ns as u64)
                } else {
                    String::new()
                },
                fmt_ns(p.p50),
                fmt_ns(p.p95),
                fmt_ns(p.p99),
                fmt_ns(p.p999),
                fmt_ns(p.max)
            );
        }
    }
    println!("\nlatency distribution, every transaction (count, % of all):");
    print!("{:<12}", "bucket");
    for t in tails {
        print!(" {:>24}", t.engine);
    }
    println!();
    for (i, b) in BUCKETS.iter().enumerate() {
        if tails.iter().all(|t| t.buckets[i].1 == 0) {
            continue;
        }
        print!("{:<12}", b.2);
        for t in tails {
            let c = t.buckets[i].1;
            print!(
                " {:>14} {:>8.4}%",
                fmt_int(c as f64),
                100.0 * c as f64 / t.transactions.max(1) as f64
            );
        }
        println!();
    }
    println!("\nwhat the driver saw around the engines (all rounds):");
    for t in tails {
        if let Some(k) = &t.timekeeper {
            println!(
                "  {:<10} timekeeper set_timestamps: {} calls, p50 {}, p99 {}, p99.9 {}, max {} (at {:.1} ms); 1 ms sleep woke late by p50 {}, p99 {}, max {} (at {:.1} ms)",
                t.engine,
                fmt_int(k.calls as f64),
                fmt_ns(k.set_ns.p50),
                fmt_ns(k.set_ns.p99),
                fmt_ns(k.set_ns.p999),
                fmt_ns(k.set_ns.max),
                k.set_max_at_ms,
                fmt_ns(k.late_ns.p50),
                fmt_ns(k.late_ns.p99),
                fmt_ns(k.late_ns.max),
                k.late_max_at_ms,
            );
        }
        if let Some(n) = t.runnable_threads {
            println!(
                "  {:<10} runnable driver threads (mean over 20 ms samples, median over rounds): {n:.1}",
                t.engine
            );
        }
        if let Some(s) = &t.sched {
            let total = (s.on_cpu_ns + s.runqueue_wait_ns).max(1) as f64;
            println!(
                "  {:<10} driver threads: {:.2} s on a CPU, {:.2} s runnable but waiting for one ({:.1}% of runnable time); {} voluntary (blocked) and {} involuntary (preempted) context switches",
                t.engine,
                s.on_cpu_ns as f64 / 1e9,
                s.runqueue_wait_ns as f64 / 1e9,
                100.0 * s.runqueue_wait_ns as f64 / total,
                fmt_int(s.voluntary_switches as f64),
                fmt_int(s.involuntary_switches as f64),
            );
        }
    }
    for t in tails {
        println!("\n{}: the {} slowest transactions", t.engine, t.worst.len());
        for (i, w) in t.worst.iter().enumerate() {
            println!(
                "  {:>2}. {:>9}  {:<17} thread {:>2}  round {}  at {:.1} ms",
                i + 1,
                fmt_ns(w.latency_ns),
                w.kind,
                w.thread,
                w.round,
                w.at_ms
            );
        }
    }
    println!();
}

/// One engine's curve in a sweep: per point, the median and min-max over
/// rounds of reader and writer transactions/s.
#[derive(Serialize, Clone, Debug)]
pub struct SweepCurve {
    pub engine: &'static str,
    /// (median, min, max) reader txn/s per point.
    pub readers: Vec<(f64, f64, f64)>,
    /// (median, min, max) writer txn/s per point.
    pub writers: Vec<(f64, f64, f64)>,
}

/// A `--sweep`'s result: the swept axis, its points, the fixed other side,
/// and each engine's curve.
#[derive(Serialize, Clone, Debug)]
pub struct SweepResult {
    pub axis: &'static str,
    pub points: Vec<usize>,
    /// The other side's thread count, the same in every point.
    pub fixed: usize,
    pub curves: Vec<SweepCurve>,
}

/// Collects the sweep's curves from the configurations just run.
pub fn sweep_of(
    axis: crate::cli::Axis,
    configs: &[((usize, usize), Vec<EngineRounds>)],
) -> SweepResult {
    use crate::cli::Axis;
    let point = |c: &(usize, usize)| match axis {
        Axis::Readers => c.0,
        Axis::Writers => c.1,
    };
    let fixed = configs.first().map_or(0, |(c, _)| match axis {
        Axis::Readers => c.1,
        Axis::Writers => c.0,
    });
    let engines = configs.first().map_or(0, |(_, es)| es.len());
    let mmm = |v: Vec<f64>| {
        let v = counted(&v);
        let (lo, hi) = min_max(&v);
        (median(&v), lo, hi)
    };
    let curves = (0..engines)
        .map(|ei| SweepCurve {
            engine: configs[0].1[ei].engine,
            readers: configs
                .iter()
                .map(|(_, es)| mmm(es[ei].rounds.iter().map(|r| r.reader_txn_per_s).collect()))
                .collect(),
            writers: configs
                .iter()
                .map(|(_, es)| mmm(es[ei].rounds.iter().map(|r| r.writer_txn_per_s).collect()))
                .collect(),
        })
        .collect();
    SweepResult {
        axis: axis.name(),
        points: configs.iter().map(|(c, _)| point(c)).collect(),
        fixed,
        curves,
    }
}

/// The sweep table: one row per point, reader and writer txn/s per engine
/// (median, min-max), and the first engine's reader ratio to each other.
pub fn print_sweep(sw: &SweepResult, rounds: usize) {
    let other = if sw.axis == "readers" {
        "writers"
    } else {
        "readers"
    };
    println!(
        "sweep: {} from {} to {} with {} {other}, {} per point, order alternating (median (min-max) txn/s)",
        sw.axis,
        sw.points.first().copied().unwrap_or(0),
        sw.points.last().copied().unwrap_or(0),
        sw.fixed,
        crate::fmt::plural(rounds as u64, "round")
    );
    print!("{:>8}", sw.axis);
    for c in &sw.curves {
        print!(
            " {:>30} {:>30}",
            format!("{} readers", c.engine),
            format!("{} writers", c.engine)
        );
    }
    if sw.curves.len() > 1 {
        for c in &sw.curves[1..] {
            print!(" {:>12}", format!("rd x vs {}", c.engine));
        }
    }
    println!();
    let cell =
        |(m, lo, hi): (f64, f64, f64)| format!("{} ({}-{})", fmt_int(m), fmt_int(lo), fmt_int(hi));
    for (i, p) in sw.points.iter().enumerate() {
        print!("{p:>8}");
        for c in &sw.curves {
            print!(" {:>30} {:>30}", cell(c.readers[i]), cell(c.writers[i]));
        }
        if sw.curves.len() > 1 {
            let a = sw.curves[0].readers[i].0;
            for c in &sw.curves[1..] {
                let b = c.readers[i].0;
                if a > 0.0 && b > 0.0 {
                    print!(" {:>12}", format!("x{:.2}", a / b));
                } else {
                    print!(" {:>12}", "-");
                }
            }
        }
        println!();
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_with_no_transactions_are_left_out_of_the_statistics() {
        // Round 2 of `b` finished nothing: the medians, p and the pairs use
        // the other rounds, and the verdict says one was left out.
        let a = [10.0, 12.0, 11.0];
        let b = [5.0, 0.0, 6.0];
        let c = compare_values("writers", "x", "y", &a, &b);
        assert_eq!(c.left_out, 1);
        assert_eq!((c.a_median, c.b_median), (11.0, 5.5));
        assert_eq!((c.rounds, c.a_higher_rounds), (2, 2));
        assert_eq!(
            c.p_value,
            crate::stats::mann_whitney_p(&[10.0, 12.0, 11.0], &[5.0, 6.0])
        );
        let v = verdict(&c);
        assert!(
            v.contains("higher in 2/2 rounds; 1 round with no transactions left out"),
            "{v}"
        );
        // Nothing finished anywhere (a side with no threads): all rounds
        // stay, as zeros, and nothing is said to be left out.
        let c = compare_values("writers", "x", "y", &[0.0, 0.0], &[0.0, 0.0]);
        assert_eq!((c.left_out, c.rounds), (0, 2));
        assert_eq!(counted(&[0.0, 3.0, 0.0]), [3.0]);
        assert_eq!(counted(&[0.0, 0.0]), [0.0, 0.0]);
    }
}
