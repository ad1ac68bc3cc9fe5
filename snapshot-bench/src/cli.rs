//! The command line: flags, their allowed ranges, and the checks that refuse
//! a bad invocation before any engine is built or any thread starts.
//!
//! Every refusal is one line on stderr naming the flag, the value and the
//! allowed range, and exits with code 2 (clap's own usage errors too; see
//! [`parse`]).

use crate::engines::EngineKind;
use crate::keys::MIN_KEY_SIZE;
use crate::phases::{Warmup, STEADY_CAP_S, STEADY_FLOOR_S};
use clap::error::ErrorKind;
use clap::{Parser, ValueEnum};
use std::fs::File;
use std::path::PathBuf;

/// Upper bound of `--keys`.
pub const MAX_KEYS: u64 = 10_000_000;
/// Upper bound of `--value-size` (bytes).
pub const MAX_VALUE_SIZE: u64 = 65_536;
/// Upper bound of `--key-size` (bytes): LMDB's largest key, so every
/// engine takes every allowed shape.
pub const MAX_KEY_SIZE: u64 = 511;
/// Upper bound of `--batch`.
pub const MAX_BATCH: u64 = 1024;
/// Upper bound of `--keys` × (`--key-size` + `--value-size`) (bytes loaded
/// per engine).
pub const MAX_LOADED_BYTES: u64 = 4 << 30;
/// Upper bound of `--readers`, `--writers`, `--threads` and each side of a
/// `--configs` entry.
pub const MAX_THREADS: u64 = 512;
/// Upper bound of `--seconds` and `--warmup`.
pub const MAX_SECONDS: f64 = 3600.0;
/// Lower bound of `--seconds`.
pub const MIN_SECONDS: f64 = 0.001;
/// Upper bound of `--rounds` (the exact Mann-Whitney p of 50 against 50 is
/// still counted in a few megabytes).
pub const MAX_ROUNDS: u64 = 50;
/// Upper bound of `--stable-lag` and `--oldest-lag`.
pub const MAX_LAG: u64 = 1 << 48;
/// Upper bound of `--worst`.
pub const MAX_WORST: u64 = 10_000;
/// Most points in one `--sweep`.
pub const MAX_SWEEP_POINTS: usize = 64;
/// Upper bound of `--rmw-reads` (and so of `--rmw-writes`).
pub const MAX_RMW_KEYS: u64 = 16;
/// Upper bound of `--rmw-scan`.
pub const MAX_RMW_SCAN: u64 = 1024;
/// Upper bound of each `--tables` value.
pub const MAX_TABLES: u64 = 1_000_000;
/// Most values in one `--tables` list.
pub const MAX_TABLE_ROWS: usize = 8;
/// The `tables` workload's table count without `--tables`.
pub const DEFAULT_TABLES: usize = 10_000;

/// Which side of the reader/writer configuration a `--sweep` varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Readers,
    Writers,
}

impl Axis {
    pub fn name(self) -> &'static str {
        match self {
            Axis::Readers => "readers",
            Axis::Writers => "writers",
        }
    }
}

/// A `--sweep`: the swept side and its thread counts, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sweep {
    pub axis: Axis,
    pub points: Vec<usize>,
    /// As given on the command line (for refusals).
    pub spec: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Readers set a read timestamp after begin while writers commit.
    #[value(name = "read-ts")]
    ReadTs,
    /// Begin + commit of an empty transaction for every begin option.
    Begin,
    /// 90% read-only / 10% read-write, normal path versus the
    /// read-only fast path at the stable watermark.
    #[value(name = "ro-mix")]
    RoMix,
    /// Every transaction's latency under write saturation.
    Tail,
    /// Replication (Mako): a TPC-C-shaped mix on one node and on a
    /// leader with two followers serving the read-only share (needs
    /// `--features replication`).
    Replicated,
    /// Memory: the `--report-memory` pass alone (no throughput runs): bytes
    /// per key and per extra version for lock-free, ceiling and (feature
    /// `peers`) lmdb, at --keys keys of --key-size and --value-size bytes.
    Memory,
    /// Durability: writers committing one key each per transaction on the
    /// commit log in each mode, the in-memory engine and (feature `peers`)
    /// LMDB synced and redb `Durability::Immediate`; recovery replay rate;
    /// a checkpoint of --keys keys beside one write + fsync of its bytes.
    /// Writers from --configs (default `0/1,0/4,0/16,0/64`).
    #[value(name = "durable-writes")]
    DurableWrites,
    /// Snapshot isolation against serializable on one read-write mix:
    /// writers read --rmw-reads keys (or, with --rmw-scan, scan a range)
    /// and update --rmw-writes of them, readers read --batch keys at stable; commits/s, conflicts per
    /// commit and the serializable/snapshot ratios, isolation order
    /// alternating by round.
    #[value(name = "rw-mix")]
    RwMix,
    /// Named tables: create --tables tables (10,000) on a fresh lock-free
    /// engine, then drop them all; time per create and per drop, the bytes
    /// one empty table holds, and the memory back after the drops.
    Tables,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::ReadTs => "read-ts",
            Workload::Begin => "begin",
            Workload::RoMix => "ro-mix",
            Workload::Tail => "tail",
            Workload::Replicated => "replicated",
            Workload::DurableWrites => "durable-writes",
            Workload::Memory => "memory",
            Workload::RwMix => "rw-mix",
            Workload::Tables => "tables",
        }
    }
}

/// The snapshot-engine workload driver (see README: "Benchmarks").
#[derive(Parser, Debug)]
#[command(version, about, allow_negative_numbers = true)]
pub struct Cli {
    /// Which workload.
    #[arg(value_enum, default_value = "read-ts")]
    pub workload: Workload,
    /// Engines to compare, each at most once, in the order of the first
    /// round; the first is compared against each of the others.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "lock-free,rwlock3,rwlock2"
    )]
    pub engines: Vec<EngineKind>,
    /// Keys loaded before the run (u64, big-endian), 1 to 10,000,000.
    #[arg(long, default_value_t = 100_000, value_parser = int_range(1..=MAX_KEYS as i64))]
    pub keys: u64,
    /// Bytes per value, 1 to 65,536.
    #[arg(long, default_value_t = 100, value_parser = int_range(1..=MAX_VALUE_SIZE as i64))]
    pub value_size: u64,
    /// Bytes per key, 8 to 511 (read-ts, tail and memory; 8): a fixed
    /// filler, then the key's number big-endian in the last 8 bytes. The
    /// issue's second shape is `--key-size 24 --value-size 150`.
    #[arg(long, value_parser = int_range(MIN_KEY_SIZE as i64..=MAX_KEY_SIZE as i64))]
    pub key_size: Option<u64>,
    /// read-ts, tail and rw-mix: keys each reader transaction reads, 1 to
    /// 1,024 (1): 1 with `get_with`, more with one `get_many_with` of that
    /// many random keys (lmdb: that many gets in one read transaction;
    /// ceiling: that many map gets). read-ts and tail add keys read per
    /// second per reader thread.
    #[arg(long, value_parser = int_range(1..=MAX_BATCH as i64))]
    pub batch: Option<u64>,
    /// Reader threads, 0 to 512 (read-ts: 8, tail: 4, rw-mix: 4).
    #[arg(long, value_parser = int_range(0..=MAX_THREADS as i64))]
    pub readers: Option<u64>,
    /// Writer threads, 0 to 512 (read-ts: 4, tail: 8, rw-mix: 4).
    #[arg(long, value_parser = int_range(0..=MAX_THREADS as i64))]
    pub writers: Option<u64>,
    /// Several reader/writer configurations, e.g. `4/4,8/4` (read-ts, tail
    /// and rw-mix); overrides --readers/--writers.
    #[arg(long, value_delimiter = ',', value_parser = parse_config)]
    pub configs: Vec<(usize, usize)>,
    /// Worker threads for ro-mix (each runs the 90/10 mix), 1 to 512.
    #[arg(long, default_value_t = 4, value_parser = int_range(1..=MAX_THREADS as i64))]
    pub threads: u64,
    /// rw-mix: keys each writer transaction reads, 1 to 16 (2).
    #[arg(long, value_parser = int_range(1..=MAX_RMW_KEYS as i64))]
    pub rmw_reads: Option<u64>,
    /// rw-mix: how many of the keys it read each writer transaction
    /// updates, 1 to --rmw-reads (1).
    #[arg(long, value_parser = int_range(1..=MAX_RMW_KEYS as i64))]
    pub rmw_writes: Option<u64>,
    /// rw-mix, range-scan variant: each writer transaction reads with one
    /// ordered scan of this many consecutive keys from a random start key
    /// instead of --rmw-reads point reads, and updates the first
    /// --rmw-writes keys it scanned; 0 to 1,024 and at most --keys (0: the
    /// point reads).
    #[arg(long, value_parser = int_range(0..=MAX_RMW_SCAN as i64))]
    pub rmw_scan: Option<u64>,
    /// Measured seconds per run, 0.001 to 3600 (read-ts 2, tail 3, ro-mix 2,
    /// rw-mix 2;
    /// begin: per table cell, 0.2).
    #[arg(long, value_parser = parse_seconds)]
    pub seconds: Option<f64>,
    /// Warm-up per run before measuring: `steady` (the default) or seconds,
    /// 0 to 3600. `steady` warms up at least 1 s, then on until the
    /// timekeeper has moved stable off its clamp (the writers have committed
    /// --stable-lag timestamps), at most 30 s, and prints how long each
    /// configuration waited (a warning where the cap was hit); runs where
    /// nothing moves stable (no writers; lmdb, ceiling; ro-mix, replicated,
    /// durable-writes) warm up 1 s. Seconds warm up exactly that long,
    /// stable clamped or not (the driver warns when a window opened with
    /// stable clamped).
    #[arg(long, value_name = "steady|SECONDS", value_parser = parse_warmup)]
    pub warmup: Option<Warmup>,
    /// Rounds, 1 to 50 (read-ts 5, begin 5, ro-mix 3, tail 3, rw-mix 5,
    /// tables 5). 5 against 5
    /// is the smallest design whose exact two-sided p can reach 0.008.
    #[arg(long, value_parser = int_range(1..=MAX_ROUNDS as i64))]
    pub rounds: Option<u64>,
    /// read-ts/tail timekeeper: stable = last commit ts - this (0 to 2^48).
    #[arg(long, default_value_t = 1_000_000, value_parser = int_range(0..=MAX_LAG as i64))]
    pub stable_lag: u64,
    /// read-ts/tail timekeeper: oldest = stable - this (0 to 2^48).
    #[arg(long, default_value_t = 100_000, value_parser = int_range(0..=MAX_LAG as i64))]
    pub oldest_lag: u64,
    /// read-ts/tail: build each engine with `EngineConfig::stable_sweep`
    /// (writers move fingers up as stable passes their commits).
    #[arg(long)]
    pub stable_sweep: bool,
    /// tail: how many of the slowest transactions to list, 0 to 10,000.
    #[arg(long, default_value_t = 20, value_parser = int_range(0..=MAX_WORST as i64))]
    pub worst: u64,
    /// A scaling sweep (read-ts and tail): `readers=1..8` runs every
    /// reader count from 1 to 8 with --writers fixed (`writers=LO..HI`
    /// the other way round; or a list, `readers=1,2,4,8`), each 0 to 512,
    /// at most 64 points; every point is a configuration with the usual
    /// rounds, order alternating. Ends with a table of throughput against
    /// the swept count per engine; `--plot` draws it as curves.
    #[arg(long, value_name = "AXIS=LO..HI", value_parser = parse_sweep)]
    pub sweep: Option<Sweep>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr (neither the bar nor the per-round lines).
    #[arg(long)]
    pub no_progress: bool,
    /// Draw the run as an SVG picture (read-ts and tail): throughput per
    /// engine with min-max whiskers per configuration, and each engine's
    /// read latency percentile curve.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// read-ts: before the runs, measure each engine's bytes per key and
    /// per extra version (the driver's counting allocator; LMDB: its used
    /// pages) and resident-set growth, on fresh instances.
    #[arg(long)]
    pub report_memory: bool,
    /// read-ts, tail and rw-mix: also run the lock-free engine with its
    /// commit log on, in each of these modes (`sync`, `periodic` = every 10 ms,
    /// `none`), as the engines `lock-free+sync` etc., each opened in a
    /// fresh directory under `SNAPSHOT_BENCH_DIR` (default: the temporary
    /// directory); the order alternates with the other engines'.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub durability: Vec<DurabilityArg>,
    /// replicated: when a durable node's raft log entry counts as stored in
    /// the TCP and processes modes (`sync`: synced first, the default;
    /// `periodic`: written, synced every 10 ms; `none`: written to the OS).
    /// The in-process mode keeps its logs in memory.
    #[arg(long, value_enum, value_name = "MODE")]
    pub raft_log: Option<DurabilityArg>,
    /// read-ts and tail: spread the keys round-robin over this many named
    /// tables (0: the default table, the default), each read and write in
    /// its key's table; a list, e.g. `0,1,16`, runs one row per value per
    /// engine, in alternating order by round, and prints each named-table
    /// row's ratio to the default-table row. memory and --report-memory:
    /// one lock-free row per value. Each value 0 to 1,000,000 and
    /// at most --keys, at most 8 values; snapshot-engine's engines only
    /// (not lmdb or the ceiling), one key per reader transaction. `tables`
    /// workload: how many tables to create and drop, 1 to 1,000,000
    /// (10,000).
    #[arg(long, value_delimiter = ',', value_parser = int_range(0..=MAX_TABLES as i64))]
    pub tables: Vec<u64>,
}

/// A `--durability` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    Sync,
    Periodic,
    None,
}

impl DurabilityArg {
    fn engine(self) -> EngineKind {
        match self {
            DurabilityArg::Sync => EngineKind::LogSync,
            DurabilityArg::Periodic => EngineKind::LogPeriodic,
            DurabilityArg::None => EngineKind::LogNone,
        }
    }

    /// The mode itself (the one its engine logs with).
    #[cfg(feature = "replication")]
    pub fn durability(self) -> snapshot_engine::Durability {
        self.engine()
            .durability()
            .expect("a logged engine has a durability")
    }
}

/// An integer flag in `r`: clap's ranged parser says "-1 is not in 1..=N"
/// but only "invalid digit found in string" for `x` or `1.5`, so every
/// refusal here names the range.
fn int_range(
    r: std::ops::RangeInclusive<i64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.trim().parse::<i64>() {
        Ok(x) if r.contains(&x) => Ok(x as u64),
        _ => Err(format!(
            "want a whole number from {} to {}",
            r.start(),
            r.end()
        )),
    }
}

fn parse_config(s: &str) -> Result<(usize, usize), String> {
    let bad = || {
        format!("want READERS/WRITERS with each side 0 to {MAX_THREADS} and not both 0, e.g. 8/4")
    };
    let (r, w) = s.split_once('/').ok_or_else(bad)?;
    let side = |x: &str| -> Result<usize, String> {
        match x.trim().parse::<u64>() {
            Ok(n) if n <= MAX_THREADS => Ok(n as usize),
            _ => Err(bad()),
        }
    };
    let (r, w) = (side(r)?, side(w)?);
    if r == 0 && w == 0 {
        return Err(bad());
    }
    Ok((r, w))
}

fn parse_sweep(s: &str) -> Result<Sweep, String> {
    let bad = || {
        format!(
            "want readers=LO..HI or writers=LO..HI (or a list, readers=1,2,4,8), LO <= HI, each 0 to {MAX_THREADS}, 2 to {MAX_SWEEP_POINTS} points"
        )
    };
    let (axis, spec) = s.split_once('=').ok_or_else(bad)?;
    let axis = match axis.trim() {
        "readers" => Axis::Readers,
        "writers" => Axis::Writers,
        _ => return Err(bad()),
    };
    let num = |x: &str| -> Result<usize, String> {
        match x.trim().parse::<u64>() {
            Ok(n) if n <= MAX_THREADS => Ok(n as usize),
            _ => Err(bad()),
        }
    };
    let points: Vec<usize> = if let Some((lo, hi)) = spec.split_once("..") {
        let (lo, hi) = (num(lo)?, num(hi.strip_prefix('=').unwrap_or(hi))?);
        if lo > hi || hi - lo + 1 > MAX_SWEEP_POINTS {
            return Err(bad());
        }
        (lo..=hi).collect()
    } else {
        let v = spec.split(',').map(num).collect::<Result<Vec<_>, _>>()?;
        if v.len() > MAX_SWEEP_POINTS || v.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad());
        }
        v
    };
    if points.len() < 2 {
        return Err(bad());
    }
    Ok(Sweep {
        axis,
        points,
        spec: s.to_string(),
    })
}

fn parse_secs(s: &str, lo: f64, what: &str) -> Result<f64, String> {
    let range = format!("want a finite number of seconds, {what}{lo} to {MAX_SECONDS}");
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= lo && x <= MAX_SECONDS => Ok(x),
        _ => Err(range),
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    parse_secs(s, MIN_SECONDS, "")
}

fn parse_warmup(s: &str) -> Result<Warmup, String> {
    if s.trim() == "steady" {
        return Ok(Warmup::Steady);
    }
    parse_secs(s, 0.0, "").map(Warmup::Fixed).map_err(|_| {
        format!(
            "want `steady` (at least {STEADY_FLOOR_S} s, then until stable leaves its clamp, at most {STEADY_CAP_S} s) or a finite number of seconds, 0 to {MAX_SECONDS}"
        )
    })
}

/// A refused invocation: one line, exit code 2.
pub struct Refusal(pub String);

/// Parses the command line. Help and version go to stdout with exit code 0;
/// every usage error becomes one line on stderr and exit code 2.
pub fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            std::process::exit(0)
        }
        Err(e) => refuse(&Refusal(one_line(&e.render().to_string()))),
    }
}

/// Prints the refusal and exits with code 2.
pub fn refuse(r: &Refusal) -> ! {
    eprintln!("{}", r.0);
    std::process::exit(2)
}

/// clap's message on one line: its lines joined with "; ", the usage line
/// and the "for more information" hint dropped.
fn one_line(msg: &str) -> String {
    let parts: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .collect();
    let mut s = parts.join("; ");
    if !s.starts_with("error:") {
        s = format!("error: {s}");
    }
    s
}

/// Everything a run needs, checked.
pub struct Plan {
    pub workload: Workload,
    pub engines: Vec<EngineKind>,
    pub keys: u64,
    /// read-ts, tail and memory: bytes per key.
    pub key_size: usize,
    pub value_size: usize,
    /// read-ts, tail and rw-mix: keys per reader transaction.
    pub batch: usize,
    /// rw-mix: keys each writer transaction reads, and how many of them it
    /// updates.
    pub rmw_reads: usize,
    pub rmw_writes: usize,
    /// rw-mix: keys in each writer transaction's range scan (0: point
    /// reads).
    pub rmw_scan: usize,
    /// read-ts and tail: (readers, writers) per configuration.
    pub configs: Vec<(usize, usize)>,
    pub threads: usize,
    pub seconds: f64,
    pub warmup: Warmup,
    pub rounds: usize,
    pub stable_lag: u64,
    pub oldest_lag: u64,
    pub stable_sweep: bool,
    pub worst: usize,
    /// The swept axis when the configurations came from `--sweep`.
    pub sweep: Option<Axis>,
    pub json: bool,
    pub progress: bool,
    /// The picture's path and the file, created (so an unwritable path is
    /// refused before the run, not after it).
    pub plot: Option<(PathBuf, File)>,
    /// The memory pass before the read-ts runs.
    pub report_memory: bool,
    /// replicated: the durable nodes' raft log mode.
    #[cfg(feature = "replication")]
    pub raft_log: DurabilityArg,
    /// read-ts and tail: the named-table counts, one row per value per
    /// engine (`[0]`: the default table only). tables: one value, the
    /// tables to create and drop.
    pub tables: Vec<usize>,
}

fn invalid(flag: &str, value: impl std::fmt::Display, why: impl std::fmt::Display) -> Refusal {
    Refusal(format!(
        "error: invalid value '{value}' for '{flag}': {why}"
    ))
}

/// Checks what clap's per-value parsers cannot: combinations, duplicates,
/// the workload's own limits and the plot file.
///
/// # Errors
///
/// A [`Refusal`] naming the flag, the value and the allowed range.
pub fn plan(cli: Cli) -> Result<Plan, Refusal> {
    let list = |v: &[EngineKind]| v.iter().map(|e| e.name()).collect::<Vec<_>>().join(",");
    for (i, e) in cli.engines.iter().enumerate() {
        if cli.engines[..i].contains(e) {
            return Err(invalid(
                "--engines",
                list(&cli.engines),
                format_args!(
                    "{} is listed twice; name each engine at most once",
                    e.name()
                ),
            ));
        }
    }
    if cli.engines.is_empty() {
        return Err(invalid("--engines", "", "name at least one engine"));
    }
    if cli.engines.contains(&EngineKind::Lmdb) && !cfg!(feature = "peers") {
        return Err(invalid(
            "--engines",
            list(&cli.engines),
            "lmdb needs the `peers` cargo feature: cargo run --release -p snapshot-bench --features peers -- ...",
        ));
    }
    let workload = cli.workload;
    let mut engines = cli.engines.clone();
    let logged = |e: &EngineKind| e.durability().is_some();
    if !matches!(
        workload,
        Workload::ReadTs | Workload::Tail | Workload::RwMix
    ) && (!cli.durability.is_empty() || engines.iter().any(logged))
    {
        return Err(invalid(
            "--durability",
            list(&cli.engines),
            format_args!(
                "runs read-ts, tail and rw-mix only ({} has its own durability modes or none)",
                workload.name()
            ),
        ));
    }
    for d in &cli.durability {
        if !engines.contains(&d.engine()) {
            engines.push(d.engine());
        }
    }
    if cli.report_memory && engines.iter().any(logged) {
        return Err(invalid(
            "--report-memory",
            "true",
            "has no pass for an engine with its log on; drop --durability",
        ));
    }
    if matches!(
        workload,
        Workload::Begin | Workload::RoMix | Workload::RwMix
    ) {
        engines.retain(|&e| e != EngineKind::Lmdb && e != EngineKind::Ceiling);
        if engines.is_empty() {
            return Err(invalid(
                "--engines",
                list(&cli.engines),
                format_args!(
                    "{} runs on lock-free, rwlock3 and rwlock2 (and the logged lock-free engines) only",
                    workload.name()
                ),
            ));
        }
    }
    if workload == Workload::Memory {
        engines.retain(|&e| {
            matches!(
                e,
                EngineKind::LockFree | EngineKind::Ceiling | EngineKind::Lmdb
            )
        });
        if engines.is_empty() {
            return Err(invalid(
                "--engines",
                list(&cli.engines),
                "memory measures lock-free, ceiling and lmdb only (the rwlock engines share lock-free's store)",
            ));
        }
    }
    if workload == Workload::Tables {
        engines.retain(|&e| e == EngineKind::LockFree);
        if engines.is_empty() {
            return Err(invalid(
                "--engines",
                list(&cli.engines),
                "tables measures lock-free only",
            ));
        }
    }
    let tables = tables_of(&cli, workload, &engines)?;
    let key_size = cli.key_size.unwrap_or(MIN_KEY_SIZE as u64);
    let shaped = matches!(
        workload,
        Workload::ReadTs | Workload::Tail | Workload::Memory
    );
    if let (Some(k), false) = (cli.key_size, shaped) {
        return Err(invalid(
            "--key-size",
            k,
            format_args!(
                "shapes read-ts, tail and memory keys only, not {}",
                workload.name()
            ),
        ));
    }
    if key_size != MIN_KEY_SIZE as u64 && engines.contains(&EngineKind::Ceiling) {
        return Err(invalid(
            "--key-size",
            key_size,
            "the ceiling's map is keyed by the 8-byte number itself: want --key-size 8 with the ceiling",
        ));
    }
    if let (Some(b), false) = (
        cli.batch,
        matches!(
            workload,
            Workload::ReadTs | Workload::Tail | Workload::RwMix
        ),
    ) {
        return Err(invalid(
            "--batch",
            b,
            format_args!(
                "batches read-ts, tail and rw-mix readers only, not {}",
                workload.name()
            ),
        ));
    }
    let rw_mix = workload == Workload::RwMix;
    for (flag, v) in [
        ("--rmw-reads", cli.rmw_reads),
        ("--rmw-writes", cli.rmw_writes),
        ("--rmw-scan", cli.rmw_scan),
    ] {
        if let (Some(v), false) = (v, rw_mix) {
            return Err(invalid(
                flag,
                v,
                format_args!("shapes rw-mix writers only, not {}", workload.name()),
            ));
        }
    }
    let rmw_reads = cli.rmw_reads.unwrap_or(2);
    let rmw_writes = cli.rmw_writes.unwrap_or(1);
    let rmw_scan = cli.rmw_scan.unwrap_or(0);
    if rmw_scan > cli.keys {
        return Err(invalid(
            "--rmw-scan",
            rmw_scan,
            format_args!(
                "a writer scans consecutive loaded keys: want 0 to --keys ({})",
                cli.keys
            ),
        ));
    }
    if let (Some(r), 1..) = (cli.rmw_reads, rmw_scan) {
        return Err(invalid(
            "--rmw-reads",
            r,
            format_args!(
                "--rmw-scan {rmw_scan} replaces the point reads: want --rmw-reads only with --rmw-scan 0"
            ),
        ));
    }
    if rmw_scan > 0 && rmw_writes > rmw_scan {
        return Err(invalid(
            "--rmw-writes",
            rmw_writes,
            format_args!("a writer updates keys it scanned: want 1 to --rmw-scan ({rmw_scan})"),
        ));
    }
    if rmw_scan == 0 && rmw_writes > rmw_reads {
        return Err(invalid(
            "--rmw-writes",
            rmw_writes,
            format_args!("a writer updates keys it read: want 1 to --rmw-reads ({rmw_reads})"),
        ));
    }
    let bytes = cli
        .keys
        .saturating_mul(key_size.saturating_add(cli.value_size));
    if bytes > MAX_LOADED_BYTES {
        return Err(invalid(
            "--keys",
            cli.keys,
            format_args!(
                "{} keys of {key_size} + {} bytes load {bytes} bytes per engine; --keys x (--key-size + --value-size) may be at most {MAX_LOADED_BYTES}",
                cli.keys, cli.value_size
            ),
        ));
    }
    let (dr, dw) = match workload {
        Workload::Tail => (4, 8),
        Workload::RwMix => (4, 4),
        _ => (8, 4),
    };
    let configs = if let Some(sw) = &cli.sweep {
        let spec = &sw.spec;
        if !matches!(workload, Workload::ReadTs | Workload::Tail) {
            return Err(invalid(
                "--sweep",
                spec,
                "sweeps read-ts and tail runs only",
            ));
        }
        if !cli.configs.is_empty() {
            return Err(invalid(
                "--sweep",
                spec,
                "names its own configurations: want --sweep or --configs, not both (fix the other side with --readers or --writers)",
            ));
        }
        let swept_flag_given = match sw.axis {
            Axis::Readers => cli.readers.is_some(),
            Axis::Writers => cli.writers.is_some(),
        };
        if swept_flag_given {
            return Err(invalid(
                "--sweep",
                spec,
                format_args!(
                    "sweeps {0}; drop --{0} (only the other side may be fixed)",
                    sw.axis.name()
                ),
            ));
        }
        let fixed = match sw.axis {
            Axis::Readers => cli.writers.map_or(dw, |x| x as usize),
            Axis::Writers => cli.readers.map_or(dr, |x| x as usize),
        };
        if fixed == 0 && sw.points[0] == 0 {
            return Err(invalid(
                "--sweep",
                spec,
                "the point 0 with the other side at 0 runs nothing; want at least one reader or one writer in every point",
            ));
        }
        sw.points
            .iter()
            .map(|&n| match sw.axis {
                Axis::Readers => (n, fixed),
                Axis::Writers => (fixed, n),
            })
            .collect()
    } else if cli.configs.is_empty()
        && workload == Workload::DurableWrites
        && cli.readers.is_none()
        && cli.writers.is_none()
    {
        vec![(0, 1), (0, 4), (0, 16), (0, 64)]
    } else if cli.configs.is_empty() {
        let r = cli.readers.map_or(dr, |x| x as usize);
        let w = cli.writers.map_or(dw, |x| x as usize);
        if r == 0 && w == 0 {
            return Err(invalid(
                "--readers/--writers",
                "0/0",
                "want at least one reader or one writer (each 0 to 512)",
            ));
        }
        vec![(r, w)]
    } else {
        for (i, c) in cli.configs.iter().enumerate() {
            if cli.configs[..i].contains(c) {
                return Err(invalid(
                    "--configs",
                    format_args!("{}/{}", c.0, c.1),
                    "listed twice; name each configuration at most once",
                ));
            }
        }
        cli.configs.clone()
    };
    let (def_secs, def_rounds) = match workload {
        Workload::ReadTs => (2.0, 5),
        Workload::Tail => (3.0, 3),
        Workload::RoMix => (2.0, 3),
        Workload::Begin => (0.2, 5),
        Workload::Replicated => (2.0, 3),
        Workload::DurableWrites => (2.0, 3),
        Workload::Memory => (0.0, 1),
        Workload::RwMix => (2.0, 5),
        Workload::Tables => (0.0, 5),
    };
    if workload == Workload::Replicated {
        if !cfg!(feature = "replication") {
            return Err(invalid(
                "WORKLOAD",
                "replicated",
                "needs the `replication` cargo feature: cargo run --release -p snapshot-bench --features replication -- replicated",
            ));
        }
        if cli.threads > 64 {
            return Err(invalid(
                "--threads",
                cli.threads,
                "want 1 to 64 (replicated runs 3 nodes of --threads workers each)",
            ));
        }
    }
    if cli.stable_sweep && !matches!(workload, Workload::ReadTs | Workload::Tail) {
        return Err(invalid(
            "--stable-sweep",
            workload.name(),
            "configures read-ts and tail engines only",
        ));
    }
    let plot = match &cli.plot {
        None => None,
        Some(path) => {
            if !matches!(workload, Workload::ReadTs | Workload::Tail) {
                return Err(invalid(
                    "--plot",
                    path.display(),
                    "draws read-ts and tail runs only",
                ));
            }
            if path.extension().and_then(|x| x.to_str()) != Some("svg") {
                return Err(invalid(
                    "--plot",
                    path.display(),
                    "the picture is SVG; name a file ending in .svg",
                ));
            }
            match File::create(path) {
                Ok(f) => Some((path.clone(), f)),
                Err(e) => {
                    return Err(invalid(
                        "--plot",
                        path.display(),
                        format_args!("want a file that can be created ({e})"),
                    ))
                }
            }
        }
    };
    if let (Some(m), false) = (cli.raft_log, workload == Workload::Replicated) {
        return Err(invalid(
            "--raft-log",
            format_args!("{m:?}").to_string().to_lowercase(),
            format_args!("runs replicated only, not {}", workload.name()),
        ));
    }
    if cli.report_memory
        && !matches!(
            workload,
            Workload::ReadTs | Workload::Tail | Workload::Memory
        )
    {
        return Err(invalid(
            "--report-memory",
            "true",
            format_args!(
                "{} has no memory pass; use read-ts, tail or memory",
                workload.name()
            ),
        ));
    }
    Ok(Plan {
        workload,
        engines,
        keys: cli.keys,
        key_size: key_size as usize,
        value_size: cli.value_size as usize,
        batch: cli.batch.map_or(1, |b| b as usize),
        rmw_reads: rmw_reads as usize,
        rmw_writes: rmw_writes as usize,
        rmw_scan: rmw_scan as usize,
        configs,
        threads: cli.threads as usize,
        seconds: cli.seconds.unwrap_or(def_secs),
        warmup: cli.warmup.unwrap_or(Warmup::Steady),
        rounds: cli.rounds.map_or(def_rounds, |r| r as usize),
        stable_lag: cli.stable_lag,
        oldest_lag: cli.oldest_lag,
        stable_sweep: cli.stable_sweep,
        worst: cli.worst as usize,
        sweep: cli.sweep.as_ref().map(|s| s.axis),
        json: cli.json,
        progress: !cli.no_progress,
        plot,
        report_memory: cli.report_memory,
        #[cfg(feature = "replication")]
        raft_log: cli.raft_log.unwrap_or(DurabilityArg::Sync),
        tables,
    })
}

/// The checked `--tables`: read-ts, tail and memory take a list of distinct values,
/// each at most --keys, non-zero ones on snapshot-engine's engines only and
/// with one key per reader transaction; `tables` takes one value, at least
/// 1; other workloads take none.
fn tables_of(cli: &Cli, workload: Workload, engines: &[EngineKind]) -> Result<Vec<usize>, Refusal> {
    let given = !cli.tables.is_empty();
    let spec = || {
        cli.tables
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    match workload {
        Workload::Tables => match cli.tables[..] {
            [] => Ok(vec![DEFAULT_TABLES]),
            [n] if n >= 1 => Ok(vec![n as usize]),
            _ => Err(invalid(
                "--tables",
                spec(),
                format_args!("tables creates and drops one count of tables: want one value, 1 to {MAX_TABLES}"),
            )),
        },
        Workload::ReadTs | Workload::Tail | Workload::Memory => {
            if !given {
                return Ok(vec![0]);
            }
            if cli.tables.len() > MAX_TABLE_ROWS {
                return Err(invalid(
                    "--tables",
                    spec(),
                    format_args!("at most {MAX_TABLE_ROWS} values (one row per value per engine)"),
                ));
            }
            for (i, n) in cli.tables.iter().enumerate() {
                if cli.tables[..i].contains(n) {
                    return Err(invalid(
                        "--tables",
                        spec(),
                        format_args!("{n} is listed twice; name each table count at most once"),
                    ));
                }
                if *n > cli.keys {
                    return Err(invalid(
                        "--tables",
                        spec(),
                        format_args!(
                            "{n} tables for --keys {}: want at most one table per key (0 to --keys)",
                            cli.keys
                        ),
                    ));
                }
            }
            let named = cli.tables.iter().any(|&n| n > 0);
            if named {
                if let Some(e) = engines
                    .iter()
                    .find(|e| matches!(e, EngineKind::Lmdb | EngineKind::Ceiling))
                {
                    return Err(invalid(
                        "--tables",
                        spec(),
                        format_args!(
                            "{} has no named tables: want --tables 0 or --engines without lmdb and the ceiling",
                            e.name()
                        ),
                    ));
                }
                if let Some(b @ 2..) = cli.batch {
                    return Err(invalid(
                        "--tables",
                        spec(),
                        format_args!("named tables read one key per reader transaction: want --batch 1, not {b}, or --tables 0"),
                    ));
                }
            }
            Ok(cli.tables.iter().map(|&n| n as usize).collect())
        }
        _ if given => Err(invalid(
            "--tables",
            spec(),
            format_args!(
                "runs read-ts, tail, memory and tables only, not {}",
                workload.name()
            ),
        )),
        _ => Ok(vec![0]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_and_refuse() {
        assert_eq!(parse_config("8/4"), Ok((8, 4)));
        assert_eq!(parse_config(" 0/4"), Ok((0, 4)));
        for bad in ["8x4", "", "/", "0/0", "-1/4", "513/1", "a/b", "1/2/3"] {
            assert!(parse_config(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sweeps_parse_and_refuse() {
        let r = parse_sweep("readers=1..4").expect("a range");
        assert_eq!((r.axis, r.points), (Axis::Readers, vec![1, 2, 3, 4]));
        let w = parse_sweep("writers=0,2,8").expect("a list");
        assert_eq!((w.axis, w.points), (Axis::Writers, vec![0, 2, 8]));
        assert_eq!(
            parse_sweep("readers=1..=3").map(|s| s.points),
            Ok(vec![1, 2, 3])
        );
        for bad in [
            "",
            "readers",
            "readers=",
            "threads=1..4",
            "readers=4..1",
            "readers=3..3",
            "readers=1..513",
            "readers=-1..4",
            "readers=1..65",
            "readers=4,2",
            "readers=2,2",
            "readers=1,x",
            "readers=a..b",
        ] {
            assert!(parse_sweep(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn seconds_refuse_non_finite_and_out_of_range() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        assert_eq!(parse_warmup("0"), Ok(Warmup::Fixed(0.0)));
        assert_eq!(parse_warmup("2.5"), Ok(Warmup::Fixed(2.5)));
        assert_eq!(parse_warmup("steady"), Ok(Warmup::Steady));
        for bad in ["-1", "0", "nan", "inf", "-inf", "3601", "x", ""] {
            assert!(parse_seconds(bad).is_err(), "{bad:?}");
        }
        for bad in ["-1", "nan", "inf", "3601", "Steady", "stable", ""] {
            let e = parse_warmup(bad).expect_err(bad);
            assert!(e.contains("steady") && e.contains("3600"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn clap_messages_become_one_line() {
        let m = "error: invalid value 'x' for '--engines <ENGINES>'\n  [possible values: a, b]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(m),
            "error: invalid value 'x' for '--engines <ENGINES>'; [possible values: a, b]"
        );
    }
}
