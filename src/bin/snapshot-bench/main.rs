//! `snapshot-bench`: the project's workload driver. Runs the workloads of
//! BENCHMARKS.md (W1 read-ts, W2 begin, W3 ro-mix, W4 tail) on any set of
//! engines, in rounds with alternating engine order and a fresh engine per
//! run, and reports medians, ranges, exact Mann-Whitney p-values and rounds
//! won. A progress bar goes to stderr, the table to stdout (or one JSON
//! object with `--json`).

mod begin;
mod common;
mod engines;
#[cfg(feature = "peers")]
mod lmdb;
mod readts;
#[cfg(feature = "replication")]
mod replicated;
mod report;
mod romix;
mod stats;
mod w2;

use clap::{Parser, ValueEnum};
use engines::{order, EngineKind};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use report::{compare, EngineRounds, Round};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// W1: readers set a read timestamp after begin while writers commit.
    #[value(name = "read-ts")]
    ReadTs,
    /// W2: begin + commit of an empty transaction for every begin option.
    Begin,
    /// W3: 90% read-only / 10% read-write, normal path versus the
    /// read-only fast path at the stable watermark.
    #[value(name = "ro-mix")]
    RoMix,
    /// W4: every transaction's latency under write saturation.
    Tail,
    /// W3 over replication (Mako): a TPC-C-shaped mix on one node and on a
    /// leader with two followers serving the read-only share (needs
    /// `--features replication`).
    Replicated,
}

/// The snapshot-engine workload driver (see README: "Benchmarks").
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Which workload.
    #[arg(value_enum, default_value = "read-ts")]
    workload: Workload,
    /// Engines to compare, in the order of the first round; the first is
    /// compared against each of the others.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "lock-free,rwlock3,rwlock2"
    )]
    engines: Vec<EngineKind>,
    /// Keys loaded before the run (u64, big-endian).
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Reader threads (read-ts: 8, tail: 4).
    #[arg(long)]
    readers: Option<usize>,
    /// Writer threads (read-ts: 4, tail: 8).
    #[arg(long)]
    writers: Option<usize>,
    /// Several reader/writer configurations, e.g. `4/4,8/4` (read-ts and
    /// tail); overrides --readers/--writers.
    #[arg(long, value_delimiter = ',')]
    configs: Vec<String>,
    /// Worker threads for ro-mix (each runs the 90/10 mix).
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Measured seconds per run (read-ts 2, tail 3, ro-mix 2; begin: per
    /// table cell, 0.2).
    #[arg(long)]
    seconds: Option<f64>,
    /// Warm-up seconds per run before measuring (1).
    #[arg(long)]
    warmup: Option<f64>,
    /// Rounds (read-ts 5, begin 5, ro-mix 3, tail 3). 5 against 5 is the
    /// smallest design whose exact two-sided p can reach 0.008.
    #[arg(long)]
    rounds: Option<usize>,
    /// W1/W4 timekeeper: stable = last commit ts - this.
    #[arg(long, default_value_t = 1_000_000)]
    stable_lag: u64,
    /// W1/W4 timekeeper: oldest = stable - this.
    #[arg(long, default_value_t = 100_000)]
    oldest_lag: u64,
    /// tail: how many of the slowest transactions to list.
    #[arg(long, default_value_t = 20)]
    worst: usize,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

fn parse_config(s: &str) -> (usize, usize) {
    let (r, w) = s
        .split_once('/')
        .unwrap_or_else(|| panic!("--configs wants READERS/WRITERS, got {s:?}"));
    (
        r.trim().parse().expect("readers is a number"),
        w.trim().parse().expect("writers is a number"),
    )
}

fn progress(total_ms: u64, quiet: bool) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total_ms), ProgressDrawTarget::stderr());
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {percent}% {msg}")
            .expect("template"),
    );
    pb
}

fn rmw_note() -> &'static str {
    if snapshot_engine::thread_rmw_count().is_some() {
        "rmw/rtxn: shared-word read-modify-writes counted by the sync shim (baselines: + 2 per lock acquisition)"
    } else {
        "rmw/rtxn: not counted in this build (add --features count-rmw for a counted pass)"
    }
}

fn main() {
    let cli = Cli::parse();
    let warmup = cli.warmup.unwrap_or(1.0);
    let engines: Vec<EngineKind> = cli.engines.clone();
    if engines.contains(&EngineKind::Lmdb) && !cfg!(feature = "peers") {
        eprintln!("lmdb needs the `peers` cargo feature: cargo run --release --features peers --bin snapshot-bench -- ...");
        std::process::exit(2);
    }
    match cli.workload {
        Workload::ReadTs | Workload::Tail => read_ts(&cli, &engines, warmup),
        Workload::Begin => begin_table(&cli, &engines),
        Workload::RoMix => ro_mix(&cli, &engines, warmup),
        Workload::Replicated => replicated_main(&cli),
    }
}

#[cfg(feature = "replication")]
fn replicated_main(cli: &Cli) {
    let p = replicated::Params {
        threads: cli.threads,
        warmup: cli.warmup.unwrap_or(0.5),
        seconds: cli.seconds.unwrap_or(2.0),
    };
    let rounds = cli.rounds.unwrap_or(3);
    if let Err(msg) = p.check(rounds) {
        eprintln!("snapshot-bench replicated: {msg}");
        std::process::exit(2);
    }
    replicated::main(&p, rounds, cli.json, cli.no_progress);
}

#[cfg(not(feature = "replication"))]
fn replicated_main(_: &Cli) {
    eprintln!("replicated needs the `replication` cargo feature: cargo run --release --features replication --bin snapshot-bench -- replicated");
    std::process::exit(2);
}

fn read_ts(cli: &Cli, engines: &[EngineKind], warmup: f64) {
    let tail = cli.workload == Workload::Tail;
    let (dr, dw) = if tail { (4, 8) } else { (8, 4) };
    let configs: Vec<(usize, usize)> = if cli.configs.is_empty() {
        vec![(cli.readers.unwrap_or(dr), cli.writers.unwrap_or(dw))]
    } else {
        cli.configs.iter().map(|s| parse_config(s)).collect()
    };
    let seconds = cli.seconds.unwrap_or(if tail { 3.0 } else { 2.0 });
    let rounds = cli.rounds.unwrap_or(if tail { 3 } else { 5 });
    let total = (configs.len() * rounds * engines.len()) as f64 * (warmup + seconds) * 1000.0;
    let pb = progress(total as u64, cli.no_progress);
    let mut json_configs = Vec::new();
    for &(readers, writers) in &configs {
        let mut per: Vec<EngineRounds> = engines
            .iter()
            .map(|e| EngineRounds {
                engine: e.name(),
                rounds: Vec::new(),
            })
            .collect();
        for r in 0..rounds {
            for (pos, kind) in order(engines, r).into_iter().enumerate() {
                pb.set_message(format!(
                    "{readers}/{writers} round {}/{rounds} {}",
                    r + 1,
                    kind.name()
                ));
                let p = readts::Params {
                    keys: cli.keys,
                    value_size: cli.value_size,
                    readers,
                    writers,
                    warmup,
                    seconds,
                    stable_lag: cli.stable_lag,
                    oldest_lag: cli.oldest_lag,
                    worst: if tail { cli.worst } else { 0 },
                    round: r,
                };
                let out = run_w1(kind, &p, &pb);
                let col = engines.iter().position(|&k| k == kind).expect("listed");
                per[col].rounds.push(Round::from_out(r, pos, out));
            }
        }
        let mut cmps = Vec::new();
        for other in per.iter().skip(1) {
            cmps.push(compare("readers", &per[0], other, |x| x.reader_txn_per_s));
            if writers > 0 {
                cmps.push(compare("writers", &per[0], other, |x| x.writer_txn_per_s));
            }
        }
        pb.suspend(|| {
            if cli.json {
                return;
            }
            let title = format!(
                "{} ({}): {readers} readers / {writers} writers, {} keys, {}-byte values, {seconds} s measured after {warmup} s warm-up, {rounds} rounds, engine order alternating, fresh engine per run",
                if tail { "tail" } else { "read-ts" },
                if tail { "W4" } else { "W1" },
                common::fmt_int(cli.keys as f64),
                cli.value_size
            );
            report::print_read_ts(&title, &per, &cmps);
            if tail {
                let tails: Vec<_> = per.iter().map(|e| report::tail_of(e, cli.worst)).collect();
                report::print_tail("tail (W4): per-transaction latency, all rounds", &tails);
            } else {
                println!("{}\n", rmw_note());
            }
        });
        let tails: Vec<_> = if tail {
            per.iter().map(|e| report::tail_of(e, cli.worst)).collect()
        } else {
            Vec::new()
        };
        json_configs.push(json!({
            "readers": readers,
            "writers": writers,
            "engines": per.iter().map(|e| (e.engine.to_string(), json!(e.rounds))).collect::<serde_json::Map<_, _>>(),
            "comparisons": cmps,
            "tail": tails,
        }));
    }
    pb.finish_and_clear();
    if cli.json {
        let v = json!({
            "workload": if tail { "tail" } else { "read-ts" },
            "keys": cli.keys,
            "value_size": cli.value_size,
            "seconds": seconds,
            "warmup": warmup,
            "rounds": rounds,
            "rmw_counted": snapshot_engine::thread_rmw_count().is_some(),
            // The first configuration's engines at the top level, as the
            // README documents; every configuration under "configs".
            "engines": json_configs[0]["engines"].clone(),
            "configs": json_configs,
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    }
}

fn run_w1(kind: EngineKind, p: &readts::Params, pb: &ProgressBar) -> readts::Out {
    use readts::run;
    dispatch!(kind, run(p, pb), run_lmdb(p, pb))
}

#[cfg(feature = "peers")]
fn run_lmdb(p: &readts::Params, pb: &ProgressBar) -> readts::Out {
    lmdb::run(p, pb)
}

#[cfg(not(feature = "peers"))]
fn run_lmdb(_p: &readts::Params, _pb: &ProgressBar) -> readts::Out {
    unreachable!("checked in main: lmdb needs the peers feature")
}

fn begin_table(cli: &Cli, engines: &[EngineKind]) {
    let engines: Vec<EngineKind> = engines
        .iter()
        .copied()
        .filter(|&e| e != EngineKind::Lmdb)
        .collect();
    let rounds = cli.rounds.unwrap_or(5);
    let secs = cli.seconds.unwrap_or(0.2);
    let total = (rounds * engines.len() * w2::begin_rows().len()) as f64 * secs * 1000.0;
    let pb = progress(total as u64, cli.no_progress);
    let rows = begin::run(&engines, rounds, secs, &pb);
    pb.finish_and_clear();
    if cli.json {
        let v = json!({ "workload": "begin", "rounds": rounds, "seconds_per_cell": secs, "rows": rows });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        begin::print(&rows, rounds, secs);
    }
}

fn ro_mix(cli: &Cli, engines: &[EngineKind], warmup: f64) {
    let engines: Vec<EngineKind> = engines
        .iter()
        .copied()
        .filter(|&e| e != EngineKind::Lmdb)
        .collect();
    let rounds = cli.rounds.unwrap_or(3);
    let seconds = cli.seconds.unwrap_or(2.0);
    let total = (rounds * engines.len() * 2) as f64 * (warmup + seconds) * 1000.0;
    let pb = progress(total as u64, cli.no_progress);
    // Variants: (engine, fast path?), alternating order per round.
    let variants: Vec<(EngineKind, bool)> = engines
        .iter()
        .flat_map(|&e| [(e, false), (e, true)])
        .collect();
    let mut res: Vec<Vec<romix::RoundOut>> = vec![Vec::new(); variants.len()];
    for r in 0..rounds {
        let mut ord: Vec<usize> = (0..variants.len()).collect();
        if r % 2 == 1 {
            ord.reverse();
        }
        for i in ord {
            let (kind, fast) = variants[i];
            pb.set_message(format!(
                "round {}/{rounds} {} {}",
                r + 1,
                kind.name(),
                if fast { "fast path" } else { "normal path" }
            ));
            let p = romix::Params {
                keys: cli.keys,
                value_size: cli.value_size,
                threads: cli.threads,
                warmup,
                seconds,
                fast_path: fast,
            };
            use romix::run;
            res[i].push(dispatch!(kind, run(&p, r, &pb), unreachable!("filtered")));
        }
    }
    pb.finish_and_clear();
    if cli.json {
        let v = json!({
            "workload": "ro-mix",
            "threads": cli.threads,
            "rounds": rounds,
            "variants": variants.iter().zip(&res).map(|((k, f), r)| json!({
                "engine": k.name(), "path": if *f { "fast" } else { "normal" }, "rounds": r
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return;
    }
    println!(
        "ro-mix (W3): {} threads, 90% read-only (3 gets + 10-key range) / 10% read-write (5 updates + 5 inserts), {seconds} s after {warmup} s warm-up, {rounds} rounds, order alternating",
        cli.threads
    );
    println!(
        "{:<10} {:<7} {:>30} {:>30} {:>14} {:>9} {:>9} {:>9}",
        "engine",
        "path",
        "read-only txn/s med (min-max)",
        "read-write txn/s med (min-max)",
        "total txn/s",
        "ro p50",
        "ro p99",
        "ro max"
    );
    let mr = |v: Vec<f64>| {
        let (lo, hi) = stats::min_max(&v);
        format!(
            "{} ({}-{})",
            common::fmt_int(stats::median(&v)),
            common::fmt_int(lo),
            common::fmt_int(hi)
        )
    };
    for ((k, fast), r) in variants.iter().zip(&res) {
        let med =
            |f: fn(&romix::RoundOut) -> f64| stats::median(&r.iter().map(f).collect::<Vec<_>>());
        println!(
            "{:<10} {:<7} {:>30} {:>30} {:>14} {:>9} {:>9} {:>9}",
            k.name(),
            if *fast { "fast" } else { "normal" },
            mr(r.iter().map(|x| x.ro_txn_per_s).collect()),
            mr(r.iter().map(|x| x.rw_txn_per_s).collect()),
            common::fmt_int(med(|x| x.total_txn_per_s)),
            common::fmt_ns(med(|x| x.ro_latency_ns.p50 as f64) as u64),
            common::fmt_ns(med(|x| x.ro_latency_ns.p99 as f64) as u64),
            common::fmt_ns(r.iter().map(|x| x.ro_latency_ns.max).max().unwrap_or(0)),
        );
    }
    for (i, (k, _)) in variants.iter().enumerate().step_by(2) {
        let a: Vec<f64> = res[i + 1].iter().map(|x| x.total_txn_per_s).collect();
        let b: Vec<f64> = res[i].iter().map(|x| x.total_txn_per_s).collect();
        println!(
            "  {} fast vs normal path, total txn/s: {:+.1}% (p = {:.3}, fast higher in {}/{} rounds)",
            k.name(),
            (stats::median(&a) / stats::median(&b) - 1.0) * 100.0,
            stats::mann_whitney_p(&a, &b),
            stats::rounds_won(&a, &b),
            a.len()
        );
    }
    println!();
}
