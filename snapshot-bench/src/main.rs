//! `snapshot-bench`: the project's workload driver. Runs the workloads of
//! BENCHMARKS.md (read-ts, begin, ro-mix, rw-mix, replicated, durable-writes, tail) on
//! any set of engines, in rounds with alternating engine order and a fresh
//! engine per run, and reports medians, ranges, exact Mann-Whitney p-values
//! and rounds won. A progress bar goes to stderr, the table to stdout (or,
//! with `--json`, one JSON object on one line).

mod begin;
mod ceiling;
mod cli;
mod durable_writes;
mod engines;
mod fmt;
mod keys;
#[cfg(feature = "peers")]
mod lmdb;
mod measure;
mod memory;
mod phases;
mod plot;
mod progress;
mod read_ts;
#[cfg(feature = "replication")]
mod replicated;
mod report;
mod ro_mix;
mod rw_mix;
mod sched;
mod stats;
mod tables;
mod timekeeper;

use cli::{Plan, Workload};
use engines::{order, EngineKind};
use indicatif::ProgressBar;
use progress::Progress;
use report::{compare, EngineRounds, Round};
use serde_json::json;
use snapshot_bench::begin_rows;

/// One allocator for every engine in the run. The system allocator (glibc)
/// takes an arena lock when a thread frees a block another thread's arena
/// owns; epoch reclamation frees on whichever thread collects, so under
/// glibc the lock-free engine's threads block on that lock (the tail
/// workload's 50 ms+ tail; README, "The allocator").
///
/// Wrapped in a byte count that is off (one Relaxed load per call) except
/// during `--report-memory`'s pass.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: memory::Counting<mimalloc::MiMalloc> = memory::Counting(mimalloc::MiMalloc);

#[cfg(not(feature = "mimalloc"))]
#[global_allocator]
static ALLOC: memory::Counting<std::alloc::System> = memory::Counting(std::alloc::System);

/// The allocator this build runs on, for the report headers.
pub const ALLOCATOR: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system (glibc)"
};

/// Loads of this many keys and more take seconds: say so before each one
/// (the bar shows the count as it goes; without a terminal, this line is
/// all there is until the run ends).
const SLOW_LOAD_KEYS: u64 = 1_000_000;

/// The one JSON object of `--json`, on one line (`| head -1` is all of it).
pub(crate) fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string(v).expect("json"));
}

fn rmw_note() -> &'static str {
    if snapshot_engine::bench_api::thread_rmw_count().is_some() {
        "rmw/rtxn: shared-word read-modify-writes per reader transaction, counted by the sync shim (baselines: + 2 per lock acquisition)"
    } else {
        "rmw/rtxn: not counted in this build (the counter costs time on every transaction; a counted pass: cargo run --release -p snapshot-bench --features count-rmw -- --rounds 1)"
    }
}

fn main() {
    // A closed stdout (`snapshot-bench | head`) ends the process quietly, as
    // it ends any Unix filter, instead of a "failed printing to stdout"
    // panic: Rust's runtime ignores SIGPIPE, so restore the default action.
    // SAFETY: called first in main, before any other thread exists; setting
    // a signal's disposition to SIG_DFL installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A panic anywhere (the main thread or a worker) ends the process: the
    // default hook prints the message, then the process exits with 101
    // instead of leaving the other threads running with nobody to stop them.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(101);
    }));
    #[cfg(feature = "replication")]
    {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.first().map(String::as_str) == Some(replicated::NODE_ARG) {
            std::process::exit(replicated::node_main(&args[1..]));
        }
    }
    let plan = match cli::plan(cli::parse()) {
        Ok(p) => p,
        Err(r) => cli::refuse(&r),
    };
    match plan.workload {
        Workload::ReadTs | Workload::Tail => read_ts(&plan),
        Workload::Begin => begin_table(&plan),
        Workload::RoMix => ro_mix(&plan),
        Workload::RwMix => rw_mix(&plan),
        Workload::Replicated => replicated_main(&plan),
        Workload::Memory => memory_main(&plan),
        Workload::Tables => tables::main(&plan),
        Workload::DurableWrites => durable_writes::main(&durable_writes::Params {
            writers: plan.configs.iter().map(|&(_, w)| w.max(1)).collect(),
            seconds: plan.seconds,
            // No timekeeper: a steady warm-up is its floor.
            warmup: plan.warmup.floor_secs(),
            rounds: plan.rounds,
            value_size: plan.value_size,
            keys: plan.keys,
        }),
    }
}

#[cfg(feature = "replication")]
fn replicated_main(plan: &Plan) {
    let p = replicated::Params {
        threads: plan.threads,
        // No timekeeper moves a stable lag here: a steady warm-up is its
        // floor.
        warmup: plan.warmup.floor_secs(),
        seconds: plan.seconds,
        raft_log: plan.raft_log,
    };
    replicated::main(&p, plan.rounds, plan.json, plan.progress);
}

/// `cli::plan` refuses the workload in a build without the feature.
#[cfg(not(feature = "replication"))]
fn replicated_main(_: &Plan) {
    unreachable!("cli::plan refuses `replicated` without the replication feature")
}

fn read_ts(plan: &Plan) {
    let tail = plan.workload == Workload::Tail;
    let engines = &plan.engines;
    let (seconds, warmup, rounds) = (plan.seconds, plan.warmup, plan.rounds);
    let configs = &plan.configs;
    // One row per engine and --tables value, engine-major.
    let rows: Vec<(EngineKind, usize)> = engines
        .iter()
        .flat_map(|&e| plan.tables.iter().map(move |&t| (e, t)))
        .collect();
    let names: Vec<&'static str> = rows.iter().map(|&(e, t)| tables::row_name(e, t)).collect();
    let total =
        (configs.len() * rounds * rows.len()) as f64 * (warmup.planned_secs() + seconds) * 1000.0;
    let pg = Progress::new(total as u64, plan.progress);
    let pb = &pg.bar;
    let mut json_configs = Vec::new();
    let mut all_configs = Vec::new();
    let mem = if plan.report_memory {
        let m = pb.suspend(|| {
            memory::report(
                engines,
                plan.keys,
                plan.key_size,
                plan.value_size,
                &plan.tables,
            )
        });
        if !plan.json {
            pb.suspend(|| memory::print(&m));
        }
        m
    } else {
        Vec::new()
    };
    for &(readers, writers) in configs {
        let mut per: Vec<EngineRounds> = names
            .iter()
            .map(|&name| EngineRounds {
                engine: name,
                rounds: Vec::new(),
            })
            .collect();
        for r in 0..rounds {
            for (pos, row) in order(&rows, r).into_iter().enumerate() {
                let (kind, ntables) = row;
                let col = rows.iter().position(|&x| x == row).expect("listed");
                let name = names[col];
                pb.set_message(format!(
                    "{readers}/{writers} round {}/{rounds} {name}",
                    r + 1
                ));
                let p = read_ts::Params {
                    keys: plan.keys,
                    tables: ntables,
                    key_size: plan.key_size,
                    value_size: plan.value_size,
                    batch: plan.batch,
                    readers,
                    writers,
                    warmup,
                    seconds,
                    stable_lag: plan.stable_lag,
                    oldest_lag: plan.oldest_lag,
                    stable_sweep: plan.stable_sweep,
                    worst: if tail { plan.worst } else { 0 },
                    round: r,
                };
                if plan.keys >= SLOW_LOAD_KEYS {
                    pg.line(format_args!(
                        "{readers}/{writers} loading {} keys for {name}",
                        fmt::fmt_int(plan.keys as f64),
                    ));
                }
                let out = run_read_ts(kind, &p, pb);
                let round = Round::from_out(r, pos, out);
                if round.warmup.capped {
                    pg.warn(format_args!(
                        "{readers}/{writers} round {}/{rounds} {name}: stable was still at its clamp when the warm-up hit its {} s cap (the writers had not committed --stable-lag {} timestamps); this run measures the load with nothing pruned",
                        r + 1,
                        phases::STEADY_CAP_S,
                        plan.stable_lag
                    ));
                }
                for (side, threads, txns) in [
                    ("reader", readers, round.reader_txns),
                    ("writer", writers, round.writer_txns),
                ] {
                    if threads > 0 && txns == 0 {
                        pg.warn(format_args!(
                            "{readers}/{writers} round {}/{rounds} {name}: no {side} transaction finished in the {seconds} s measured; left out of the {side} medians and comparisons (a longer --seconds helps)",
                            r + 1,
                        ));
                    }
                }
                pg.line(format_args!(
                    "{readers}/{writers} round {}/{rounds} {:<9} readers {:>12}/s  writers {:>12}/s",
                    r + 1,
                    name,
                    fmt::fmt_int(round.reader_txn_per_s),
                    fmt::fmt_int(round.writer_txn_per_s),
                ));
                per[col].rounds.push(round);
            }
        }
        let timed: Vec<&timekeeper::Timekeeping> = per
            .iter()
            .flat_map(|e| &e.rounds)
            .filter_map(|x| x.timekeeper.as_ref())
            .collect();
        let clamped: u64 = timed.iter().map(|t| t.opened_clamped).sum();
        if readers > 0 && writers > 0 && clamped > 0 {
            pg.warn(format_args!(
                "{readers}/{writers}: in {clamped} of {} runs stable was still at its clamp when the measured window opened (the writers had not yet committed --stable-lag {} timestamps): there the readers read the load and nothing was pruned, not a moving stable; {}",
                timed.len(),
                plan.stable_lag,
                match warmup {
                    phases::Warmup::Fixed(_) => "the default --warmup steady waits for it",
                    phases::Warmup::Steady => "the steady warm-up hit its cap",
                }
            ));
        }
        let warmed: Vec<(&str, Vec<phases::WarmedUp>)> = per
            .iter()
            .map(|e| (e.engine, e.rounds.iter().map(|x| x.warmup).collect()))
            .collect();
        let warm_line = phases::warmup_line(warmup, plan.stable_lag, &warmed);
        let mut cmps = Vec::new();
        for other in per.iter().skip(1) {
            if readers > 0 {
                cmps.push(compare("readers", &per[0], other, |x| x.reader_txn_per_s));
            }
            // The ceiling starts no writers.
            if writers > 0 && other.engine != EngineKind::Ceiling.name() {
                cmps.push(compare("writers", &per[0], other, |x| x.writer_txn_per_s));
            }
        }
        let table_ratios = tables::ratios(&rows, &per, readers, writers);
        pb.suspend(|| {
            if plan.json {
                return;
            }
            let title = format!(
                "{}: {readers} readers / {writers} writers, {} keys of {} bytes, {}-byte values, {}{seconds} s measured after {}, {}, engine order alternating, fresh engine per run{}, allocator {}\n{warm_line}",
                if tail { "tail" } else { "read-ts" },
                fmt::fmt_int(plan.keys as f64),
                plan.key_size,
                plan.value_size,
                batch_words(plan.batch),
                warmup_words(warmup),
                fmt::plural(rounds as u64, "round"),
                if plan.stable_sweep {
                    ", stable sweep on"
                } else {
                    ""
                },
                ALLOCATOR
            );
            report::print_read_ts(&title, &per, &cmps);
            tables::print_ratios(&table_ratios);
            if plan.batch > 1 && readers > 0 {
                println!("{}", batch_line(plan.batch, readers, &per));
            }
            if tail {
                let tails: Vec<_> = per.iter().map(|e| report::tail_of(e, plan.worst)).collect();
                report::print_tail("tail: per-transaction latency, all rounds", &tails);
            } else {
                println!("{}", rmw_note());
                report::print_headline(&per);
                println!(
                    "What the columns mean: snapshot-bench/README.md, section \"Reading the read-ts table\".\n"
                );
            }
        });
        let tails: Vec<_> = if tail {
            per.iter().map(|e| report::tail_of(e, plan.worst)).collect()
        } else {
            Vec::new()
        };
        json_configs.push(json!({
            "readers": readers,
            "writers": writers,
            "engines": per.iter().map(|e| (e.engine.to_string(), json!(e.rounds))).collect::<serde_json::Map<_, _>>(),
            "comparisons": cmps,
            "table_ratios": table_ratios,
            "tail": tails,
        }));
        all_configs.push(((readers, writers), per));
    }
    pb.finish_and_clear();
    let sweep = plan.sweep.map(|axis| report::sweep_of(axis, &all_configs));
    if let (Some(sw), false) = (&sweep, plan.json) {
        report::print_sweep(sw, rounds);
    }
    if let Some((path, file)) = &plan.plot {
        let title = format!(
            "{}, {} keys, {seconds} s after {}, {}",
            if tail { "tail" } else { "read-ts" },
            fmt::fmt_int(plan.keys as f64),
            warmup_words(warmup),
            fmt::plural(rounds as u64, "round"),
        );
        let drawn = match &sweep {
            Some(sw) => plot::draw_sweep(file, &title, sw),
            None => plot::draw(file, &title, &all_configs),
        };
        match drawn {
            Ok(()) => {
                if !plan.json {
                    println!("picture: {}", path.display());
                }
            }
            Err(e) => {
                eprintln!("error: could not draw '{}': {e}", path.display());
                std::process::exit(1);
            }
        }
    }
    if plan.json {
        let v = json!({
            "workload": if tail { "tail" } else { "read-ts" },
            "allocator": ALLOCATOR,
            "keys": plan.keys,
            "key_size": plan.key_size,
            "value_size": plan.value_size,
            "batch": plan.batch,
            "tables": plan.tables,
            "seconds": seconds,
            "warmup": match warmup {
                phases::Warmup::Fixed(s) => json!(s),
                phases::Warmup::Steady => json!("steady"),
            },
            "rounds": rounds,
            "rmw_counted": snapshot_engine::bench_api::thread_rmw_count().is_some(),
            // The first configuration's engines at the top level, as the
            // README documents; every configuration under "configs".
            "engines": json_configs[0]["engines"].clone(),
            "configs": json_configs,
            "sweep": sweep,
            "memory": mem,
        });
        print_json(&v);
    }
}

/// The title's words for the warm-up.
fn warmup_words(w: phases::Warmup) -> String {
    match w {
        phases::Warmup::Fixed(s) => format!("{s} s warm-up"),
        phases::Warmup::Steady => "a steady-state warm-up".to_string(),
    }
}

/// The title's words for `--batch` (nothing for one key per transaction).
fn batch_words(batch: usize) -> String {
    if batch > 1 {
        format!("{batch} keys per reader transaction (get_many_with), ")
    } else {
        String::new()
    }
}

/// Keys read per second per reader thread and per reader CPU-second, per
/// engine (medians of rounds), with each engine's ratio to the ceiling's
/// where the ceiling ran.
fn batch_line(batch: usize, readers: usize, per: &[EngineRounds]) -> String {
    let is_ceiling = |e: &EngineRounds| e.engine == EngineKind::Ceiling.name();
    let measure = |f: &dyn Fn(&Round) -> Option<f64>| -> String {
        let med = |e: &EngineRounds| {
            let v: Vec<f64> = e.rounds.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| stats::median(&v))
        };
        let ceiling = per.iter().find(|e| is_ceiling(e)).and_then(med);
        let cells: Vec<String> = per
            .iter()
            .map(|e| match (med(e), ceiling) {
                (Some(k), Some(c)) if c > 0.0 && !is_ceiling(e) => {
                    format!("{} {} ({:.2}x ceiling)", e.engine, fmt::fmt_int(k), k / c)
                }
                (Some(k), _) => format!("{} {}", e.engine, fmt::fmt_int(k)),
                (None, _) => format!("{} -", e.engine),
            })
            .collect();
        cells.join(", ")
    };
    let b = batch as f64;
    format!(
        "keys read ({batch} per transaction), medians of rounds: per second per reader thread: {}; per reader CPU-second: {}",
        measure(&|x| Some(x.reader_txn_per_s * b / readers as f64)),
        measure(&|x| x.reader_txn_per_cpu_s.map(|c| c * b)),
    )
}

fn run_read_ts(kind: EngineKind, p: &read_ts::Params, pb: &ProgressBar) -> read_ts::Out {
    use read_ts::run;
    if kind == EngineKind::Ceiling {
        return ceiling::run(p, pb);
    }
    if let Some(mode) = kind.durability() {
        return read_ts::run_logged(mode, p, pb);
    }
    dispatch!(kind, run(p, pb), run_lmdb(p, pb))
}

#[cfg(feature = "peers")]
fn run_lmdb(p: &read_ts::Params, pb: &ProgressBar) -> read_ts::Out {
    lmdb::run(p, pb)
}

#[cfg(not(feature = "peers"))]
fn run_lmdb(_p: &read_ts::Params, _pb: &ProgressBar) -> read_ts::Out {
    unreachable!("refused in cli::plan: lmdb needs the peers feature")
}

fn begin_table(plan: &Plan) {
    let engines = &plan.engines;
    let (rounds, secs) = (plan.rounds, plan.seconds);
    let total = (rounds * engines.len() * begin_rows::begin_rows().len()) as f64 * secs * 1000.0;
    let pg = Progress::new(total as u64, plan.progress);
    let rows = begin::run(engines, rounds, secs, &pg);
    pg.bar.finish_and_clear();
    if plan.json {
        let v = json!({ "workload": "begin", "allocator": ALLOCATOR, "rounds": rounds, "seconds_per_cell": secs, "rows": rows });
        print_json(&v);
    } else {
        begin::print(&rows, rounds, secs);
    }
}

fn ro_mix(plan: &Plan) {
    let engines = &plan.engines;
    let (rounds, seconds, warmup) = (plan.rounds, plan.seconds, plan.warmup);
    let total = (rounds * engines.len() * 2) as f64 * (warmup.floor_secs() + seconds) * 1000.0;
    let pg = Progress::new(total as u64, plan.progress);
    let pb = &pg.bar;
    // Variants: (engine, fast path?), alternating order per round.
    let variants: Vec<(EngineKind, bool)> = engines
        .iter()
        .flat_map(|&e| [(e, false), (e, true)])
        .collect();
    let mut res: Vec<Vec<ro_mix::RoundOut>> = vec![Vec::new(); variants.len()];
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
            let p = ro_mix::Params {
                keys: plan.keys,
                value_size: plan.value_size,
                threads: plan.threads,
                warmup,
                seconds,
                fast_path: fast,
            };
            use ro_mix::run;
            let out = dispatch!(
                kind,
                run(&p, r, pb),
                unreachable!("lmdb is refused in cli::plan")
            );
            pg.line(format_args!(
                "round {}/{rounds} {:<9} {:<6} path: total {:>12} txn/s",
                r + 1,
                kind.name(),
                if fast { "fast" } else { "normal" },
                fmt::fmt_int(out.total_txn_per_s)
            ));
            res[i].push(out);
        }
    }
    pb.finish_and_clear();
    if plan.json {
        let v = json!({
            "workload": "ro-mix",
            "allocator": ALLOCATOR,
            "threads": plan.threads,
            "rounds": rounds,
            "variants": variants.iter().zip(&res).map(|((k, f), r)| json!({
                "engine": k.name(), "path": if *f { "fast" } else { "normal" }, "rounds": r
            })).collect::<Vec<_>>(),
        });
        print_json(&v);
        return;
    }
    println!(
        "ro-mix: {} threads, 90% read-only (3 gets + 10-key range) / 10% read-write (5 updates + 5 inserts), {seconds} s after {} s warm-up, {}, order alternating",
        plan.threads,
        warmup.floor_secs(),
        fmt::plural(rounds as u64, "round")
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
            fmt::fmt_int(stats::median(&v)),
            fmt::fmt_int(lo),
            fmt::fmt_int(hi)
        )
    };
    for ((k, fast), r) in variants.iter().zip(&res) {
        let med =
            |f: fn(&ro_mix::RoundOut) -> f64| stats::median(&r.iter().map(f).collect::<Vec<_>>());
        println!(
            "{:<10} {:<7} {:>30} {:>30} {:>14} {:>9} {:>9} {:>9}",
            k.name(),
            if *fast { "fast" } else { "normal" },
            mr(r.iter().map(|x| x.ro_txn_per_s).collect()),
            mr(r.iter().map(|x| x.rw_txn_per_s).collect()),
            fmt::fmt_int(med(|x| x.total_txn_per_s)),
            fmt::fmt_ns(med(|x| x.ro_latency_ns.p50 as f64) as u64),
            fmt::fmt_ns(med(|x| x.ro_latency_ns.p99 as f64) as u64),
            fmt::fmt_ns(r.iter().map(|x| x.ro_latency_ns.max).max().unwrap_or(0)),
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

fn run_rw_mix(
    kind: EngineKind,
    p: &rw_mix::Params,
    r: usize,
    pb: &ProgressBar,
) -> rw_mix::RoundOut {
    use rw_mix::run;
    if let Some(mode) = kind.durability() {
        return rw_mix::run_logged(mode, p, r, pb);
    }
    dispatch!(
        kind,
        run(p, r, pb),
        unreachable!("lmdb and the ceiling are refused in cli::plan")
    )
}

/// The `rw-mix` workload: per configuration and engine, snapshot isolation
/// and serializable in alternating order by round (snapshot first on even
/// rounds), the engines in alternating order too.
fn rw_mix(plan: &Plan) {
    use snapshot_engine::Isolation;
    let engines = &plan.engines;
    let (rounds, seconds, warmup) = (plan.rounds, plan.seconds, plan.warmup);
    let levels = [Isolation::Snapshot, Isolation::Serializable];
    let total = (plan.configs.len() * rounds * engines.len() * levels.len()) as f64
        * (warmup.floor_secs() + seconds)
        * 1000.0;
    let pg = Progress::new(total as u64, plan.progress);
    let pb = &pg.bar;
    let level_name = |l: Isolation| {
        if l == Isolation::Serializable {
            "serializable"
        } else {
            "snapshot"
        }
    };
    let mut json_configs = Vec::new();
    for &(readers, writers) in &plan.configs {
        // res[engine][level]: that variant's rounds.
        let mut res: Vec<[Vec<rw_mix::RoundOut>; 2]> = vec![Default::default(); engines.len()];
        for r in 0..rounds {
            for kind in order(engines, r) {
                let col = engines.iter().position(|&k| k == kind).expect("listed");
                let mut ls = [0, 1];
                if r % 2 == 1 {
                    ls.reverse();
                }
                for li in ls {
                    pb.set_message(format!(
                        "{readers}/{writers} round {}/{rounds} {} {}",
                        r + 1,
                        kind.name(),
                        level_name(levels[li])
                    ));
                    let p = rw_mix::Params {
                        keys: plan.keys,
                        value_size: plan.value_size,
                        readers,
                        writers,
                        batch: plan.batch,
                        rmw_reads: plan.rmw_reads,
                        rmw_writes: plan.rmw_writes,
                        rmw_scan: plan.rmw_scan,
                        warmup,
                        seconds,
                        isolation: levels[li],
                    };
                    let out = run_rw_mix(kind, &p, r, pb);
                    pg.line(format_args!(
                        "{readers}/{writers} round {}/{rounds} {:<9} {:<12} writers {:>12} commits/s  readers {:>12}/s",
                        r + 1,
                        kind.name(),
                        level_name(levels[li]),
                        fmt::fmt_int(out.writer_commits_per_s),
                        fmt::fmt_int(out.reader_txn_per_s),
                    ));
                    res[col][li].push(out);
                }
            }
        }
        let mut ratios = Vec::new();
        for (kind, lv) in engines.iter().zip(&res) {
            type Side = fn(&rw_mix::RoundOut) -> Option<f64>;
            for (side, f, threads, goal) in [
                (
                    "writer commits/s",
                    (|x: &rw_mix::RoundOut| Some(x.writer_commits_per_s)) as Side,
                    writers,
                    Some(0.85),
                ),
                (
                    "writer commits per writer CPU-s",
                    |x| x.writer_commits_per_cpu_s,
                    writers,
                    None,
                ),
                (
                    "reader txn/s",
                    |x| Some(x.reader_txn_per_s),
                    readers,
                    Some(0.97),
                ),
            ] {
                if threads == 0 {
                    continue;
                }
                // A side with a round that has no figure (a CPU clock
                // that could not be read) gets no ratio.
                let (Some(si), Some(ser)) = (
                    lv[0].iter().map(f).collect::<Option<Vec<f64>>>(),
                    lv[1].iter().map(f).collect::<Option<Vec<f64>>>(),
                ) else {
                    continue;
                };
                let (ms, mr) = (stats::median(&si), stats::median(&ser));
                ratios.push(json!({
                    "engine": kind.name(),
                    "side": side,
                    "snapshot_median": ms,
                    "serializable_median": mr,
                    "ratio": if ms > 0.0 { Some(mr / ms) } else { None },
                    "goal": goal,
                    "p": stats::mann_whitney_p(&ser, &si),
                    "serializable_higher_rounds": stats::rounds_won(&ser, &si),
                    "rounds": ser.len(),
                }));
            }
        }
        json_configs.push(json!({
            "readers": readers,
            "writers": writers,
            "engines": engines.iter().zip(&res).map(|(k, lv)| (k.name().to_string(), json!({
                "snapshot": lv[0], "serializable": lv[1],
            }))).collect::<serde_json::Map<_, _>>(),
            "ratios": ratios,
        }));
        if plan.json {
            continue;
        }
        pb.suspend(|| {
            let writers_do = if plan.rmw_scan > 0 {
                format!(
                    "range-scan variant: writers scan {} consecutive keys from a random start and update the first {} of them",
                    plan.rmw_scan, plan.rmw_writes
                )
            } else {
                format!(
                    "point variant: writers read {} and update {} of them",
                    fmt::plural(plan.rmw_reads as u64, "key"),
                    plan.rmw_writes
                )
            };
            println!(
                "rw-mix: {readers} readers / {writers} writers; {writers_do}, commit at the next timestamp; readers read {} at stable and commit; {} keys, {}-byte values, {seconds} s after {} s warm-up, {}, isolation and engine order alternating, fresh engine per run",
                fmt::plural(plan.batch as u64, "key"),
                fmt::fmt_int(plan.keys as f64),
                plan.value_size,
                warmup.floor_secs(),
                fmt::plural(rounds as u64, "round"),
            );
            println!(
                "{:<19} {:<12} {:>34} {:>14} {:>8} {:>10} {:>10} {:>12} {:>12} {:>12} {:>10} {:>34}",
                "engine",
                "isolation",
                "writer commits/s med (min-max)",
                "per writer CPU-s",
                "w. CPU",
                "gate w/c",
                "wait us/c",
                "ww/commit",
                "serial/commit",
                "ts-retry/c",
                "tracked B",
                "reader txn/s med (min-max)",
            );
            let mr = |v: Vec<f64>| {
                let (lo, hi) = stats::min_max(&v);
                format!(
                    "{} ({}-{})",
                    fmt::fmt_int(stats::median(&v)),
                    fmt::fmt_int(lo),
                    fmt::fmt_int(hi)
                )
            };
            for (kind, lv) in engines.iter().zip(&res) {
                for (li, r) in lv.iter().enumerate() {
                    let med = |f: fn(&rw_mix::RoundOut) -> f64| {
                        stats::median(&r.iter().map(f).collect::<Vec<_>>())
                    };
                    // The median of a figure every round has; "-" where
                    // one has none.
                    let med_some = |f: fn(&rw_mix::RoundOut) -> Option<f64>, fmt: fn(f64) -> String| {
                        r.iter()
                            .map(f)
                            .collect::<Option<Vec<f64>>>()
                            .filter(|v| !v.is_empty())
                            .map_or("-".to_string(), |v| fmt(stats::median(&v)))
                    };
                    println!(
                        "{:<19} {:<12} {:>34} {:>14} {:>8} {:>10.4} {:>10.3} {:>12.4} {:>12.4} {:>12.4} {:>10.0} {:>34}",
                        kind.name(),
                        level_name(levels[li]),
                        mr(r.iter().map(|x| x.writer_commits_per_s).collect()),
                        med_some(|x| x.writer_commits_per_cpu_s, fmt::fmt_int),
                        med_some(|x| x.writer_cpu_share, |c| format!("{c:.2}")),
                        med(|x| x.gate_waits_per_commit),
                        med(|x| x.gate_wait_us_per_commit),
                        med(|x| x.write_conflicts_per_commit),
                        med(|x| x.serialization_conflicts_per_commit),
                        med(|x| x.ts_order_retries_per_commit),
                        med(|x| x.tracked_bytes_per_commit),
                        mr(r.iter().map(|x| x.reader_txn_per_s).collect()),
                    );
                }
            }
            for c in json_configs.last().expect("pushed")["ratios"]
                .as_array()
                .expect("an array")
            {
                let ratio = c["ratio"]
                    .as_f64()
                    .map_or("-".to_string(), |r| format!("x{r:.3}"));
                let goal = c["goal"]
                    .as_f64()
                    .map_or(String::new(), |g| format!("goal x{g:.2}; "));
                println!(
                    "  {} serializable/snapshot {}: {ratio} ({} vs {}; {goal}exact Mann-Whitney p = {:.3}, serializable higher in {}/{} rounds)",
                    c["engine"].as_str().expect("a name"),
                    c["side"].as_str().expect("a side"),
                    fmt::fmt_int(c["serializable_median"].as_f64().expect("a number")),
                    fmt::fmt_int(c["snapshot_median"].as_f64().expect("a number")),
                    c["p"].as_f64().expect("a number"),
                    c["serializable_higher_rounds"],
                    c["rounds"],
                );
            }
            println!();
        });
    }
    pb.finish_and_clear();
    if plan.json {
        print_json(&json!({
            "workload": "rw-mix",
            "allocator": ALLOCATOR,
            "keys": plan.keys,
            "value_size": plan.value_size,
            "batch": plan.batch,
            // The point variant's reads; none where the scan replaces them.
            "rmw_reads": (plan.rmw_scan == 0).then_some(plan.rmw_reads),
            "rmw_writes": plan.rmw_writes,
            "variant": if plan.rmw_scan > 0 { "scan" } else { "point" },
            "rmw_scan": plan.rmw_scan,
            "seconds": seconds,
            "warmup": warmup.floor_secs(),
            "rounds": rounds,
            "configs": json_configs,
        }));
    }
}

/// The `memory` workload: the memory pass alone.
fn memory_main(plan: &Plan) {
    let m = memory::report(
        &plan.engines,
        plan.keys,
        plan.key_size,
        plan.value_size,
        &plan.tables,
    );
    if plan.json {
        print_json(&json!({
            "workload": "memory",
            "allocator": ALLOCATOR,
            "memory": m,
        }));
    } else {
        memory::print(&m);
    }
}
