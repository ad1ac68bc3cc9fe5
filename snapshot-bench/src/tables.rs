//! Named tables in the driver: the rows `--tables` adds to read-ts and tail
//! (their names and their ratios to the default-table row), and the
//! `tables` workload (create and drop many tables: time per operation,
//! bytes per empty table, memory back after the drops).

use crate::cli::Plan;
use crate::engines::EngineKind;
use crate::fmt::{fmt_int, fmt_ns, plural};
use crate::memory::{count_bytes, live_bytes, rss_now, settle};
use crate::progress::Progress;
use crate::report::{EngineRounds, Round};
use crate::stats::{median, min_max};
use serde::Serialize;
use serde_json::json;
use snapshot_engine::with_machinery::{Engine, LockFree};
use snapshot_engine::{EngineConfig, TableOptions};
use std::time::Instant;

/// A read-ts row's name: the engine's own for the default table (`tables`
/// 0), `ENGINE/Nt` for keys spread over N named tables.
pub fn row_name(e: EngineKind, tables: usize) -> &'static str {
    if tables == 0 {
        e.name()
    } else {
        // One short string per row per run.
        Box::leak(format!("{}/{tables}t", e.name()).into_boxed_str())
    }
}

/// One named-table row's ratio to its engine's default-table row, for one
/// measure: per round (the same round's runs), then the median and range.
#[derive(Serialize, Clone, Debug)]
pub struct Ratio {
    pub row: &'static str,
    pub default_row: &'static str,
    pub tables: usize,
    /// "readers/s", "readers/CPU-s", "writers/s" or "writers/CPU-s".
    pub measure: &'static str,
    /// Named-table row / default-table row, one per round where both
    /// have a non-zero figure.
    pub per_round: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The ratios of each named-table row to the default-table row of the
/// same engine (none where `rows` has no default-table row for it).
pub fn ratios(
    rows: &[(EngineKind, usize)],
    per: &[EngineRounds],
    readers: usize,
    writers: usize,
) -> Vec<Ratio> {
    type Measure = fn(&Round) -> Option<f64>;
    let measures: [(&str, bool, Measure); 4] = [
        ("readers/s", readers > 0, |x| Some(x.reader_txn_per_s)),
        ("readers/CPU-s", readers > 0, |x| x.reader_txn_per_cpu_s),
        ("writers/s", writers > 0, |x| Some(x.writer_txn_per_s)),
        ("writers/CPU-s", writers > 0, |x| x.writer_txn_per_cpu_s),
    ];
    let mut out = Vec::new();
    for (i, &(e, n)) in rows.iter().enumerate() {
        let Some(d) = rows.iter().position(|&r| r == (e, 0)) else {
            continue;
        };
        if n == 0 {
            continue;
        }
        for &(measure, on, f) in &measures {
            if !on {
                continue;
            }
            let per_round: Vec<f64> = per[i]
                .rounds
                .iter()
                .filter_map(|a| {
                    let b = per[d].rounds.iter().find(|b| b.round == a.round)?;
                    let (x, y) = (f(a)?, f(b)?);
                    (x > 0.0 && y > 0.0).then(|| x / y)
                })
                .collect();
            if per_round.is_empty() {
                continue;
            }
            let (min, max) = min_max(&per_round);
            out.push(Ratio {
                row: per[i].engine,
                default_row: per[d].engine,
                tables: n,
                measure,
                median: median(&per_round),
                min,
                max,
                per_round,
            });
        }
    }
    out
}

/// One line per named-table row: its ratios to the default-table row.
pub fn print_ratios(rs: &[Ratio]) {
    let mut i = 0;
    while i < rs.len() {
        let row = rs[i].row;
        let mut cells = Vec::new();
        while i < rs.len() && rs[i].row == row {
            let r = &rs[i];
            cells.push(format!(
                "{} x{:.3} ({:.3}-{:.3})",
                r.measure, r.median, r.min, r.max
            ));
            i += 1;
        }
        println!(
            "  {row} / {} (named tables / default table, same round; median (min-max) over {}): {}",
            rs[i - 1].default_row,
            plural(rs[i - 1].per_round.len() as u64, "round"),
            cells.join(", ")
        );
    }
}

/// One round of the `tables` workload.
#[derive(Serialize, Clone, Debug)]
pub struct TablesRound {
    pub round: usize,
    pub tables: usize,
    /// Wall time per `create_table`.
    pub create_ns: f64,
    /// Wall time per `drop_table`.
    pub drop_ns: f64,
    /// Allocator bytes held per empty table (created, handle dropped,
    /// after the collector settled).
    pub bytes_per_table: f64,
    /// Resident-set growth per table over the creates.
    pub rss_per_table: Option<f64>,
    /// Allocator bytes the drops gave back (after the collector settled),
    /// over the bytes the creates took.
    pub bytes_back: f64,
    /// Resident-set shrink over the drops, over its growth over the
    /// creates (the allocator keeps freed pages mapped: often near 0).
    pub rss_back: Option<f64>,
}

/// Creates `n` tables on a fresh lock-free engine, then drops them all.
fn round(r: usize, n: usize) -> TablesRound {
    // The names are made before the first probe: the engine's own copy of
    // each counts, the driver's does not.
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let e = Engine::<LockFree>::with_machinery(EngineConfig::default())
        .expect("the default config is valid");
    settle(&e);
    let (l0, s0) = (live_bytes(), rss_now());
    let t = Instant::now();
    for name in &names {
        // The handle is dropped at once: the engine holds the table.
        drop(
            e.create_table(name, TableOptions::default())
                .expect("a fresh engine takes t0, t1, ..."),
        );
    }
    let create_ns = t.elapsed().as_nanos() as f64 / n as f64;
    settle(&e);
    let (l1, s1) = (live_bytes(), rss_now());
    assert_eq!(e.table_names().len(), n, "every create made a table");
    let t = Instant::now();
    for name in &names {
        e.drop_table(name).expect("a live table");
    }
    let drop_ns = t.elapsed().as_nanos() as f64 / n as f64;
    settle(&e);
    let (l2, s2) = (live_bytes(), rss_now());
    assert!(e.table_names().is_empty(), "every drop took its table");
    let took = (l1 - l0) as f64;
    let grew = s0.zip(s1).map(|(a, b)| b as f64 - a as f64);
    TablesRound {
        round: r,
        tables: n,
        create_ns,
        drop_ns,
        bytes_per_table: took / n as f64,
        rss_per_table: grew.map(|g| g / n as f64),
        bytes_back: if took > 0.0 {
            (l1 - l2) as f64 / took
        } else {
            f64::NAN
        },
        rss_back: grew
            .zip(s1.zip(s2))
            .and_then(|(g, (a, b))| (g > 0.0).then(|| (a as f64 - b as f64) / g)),
    }
}

/// The `tables` workload.
pub fn main(plan: &Plan) {
    let n = plan.tables[0];
    let rounds = plan.rounds;
    let pg = Progress::new(rounds as u64, plan.progress);
    let mut res = Vec::new();
    count_bytes(true);
    for r in 0..rounds {
        pg.bar.set_message(format!("round {}/{rounds}", r + 1));
        let x = round(r, n);
        pg.line(format_args!(
            "round {}/{rounds}: create {} per table, drop {} per table, {:.0} bytes per empty table, {:.1}% back after the drops",
            r + 1,
            fmt_ns(x.create_ns as u64),
            fmt_ns(x.drop_ns as u64),
            x.bytes_per_table,
            x.bytes_back * 100.0
        ));
        pg.bar.inc(1);
        res.push(x);
    }
    count_bytes(false);
    pg.bar.finish_and_clear();
    if plan.json {
        crate::print_json(&json!({
            "workload": "tables",
            "allocator": crate::ALLOCATOR,
            "tables": n,
            "rounds": res,
        }));
        return;
    }
    println!(
        "tables: create {} tables on a fresh lock-free engine (default options, handles dropped at once), then drop them all; {}, allocator {}",
        fmt_int(n as f64),
        plural(rounds as u64, "round"),
        crate::ALLOCATOR
    );
    println!("{:<28} {:>12} {:>26}", "measure", "median", "(min-max)");
    let row = |what: &str, v: Vec<f64>, f: &dyn Fn(f64) -> String| {
        if v.is_empty() {
            println!("{what:<28} {:>12} {:>26}", "-", "");
            return;
        }
        let (lo, hi) = min_max(&v);
        println!(
            "{what:<28} {:>12} {:>26}",
            f(median(&v)),
            format!("({}-{})", f(lo), f(hi))
        );
    };
    let ns = |x: f64| fmt_ns(x as u64);
    let bytes = |x: f64| format!("{x:.0} B");
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    row(
        "create_table (per table)",
        res.iter().map(|x| x.create_ns).collect(),
        &ns,
    );
    row(
        "drop_table (per table)",
        res.iter().map(|x| x.drop_ns).collect(),
        &ns,
    );
    row(
        "bytes per empty table",
        res.iter().map(|x| x.bytes_per_table).collect(),
        &bytes,
    );
    row(
        "rss per empty table",
        res.iter().filter_map(|x| x.rss_per_table).collect(),
        &bytes,
    );
    row(
        "bytes back after the drops",
        res.iter()
            .map(|x| x.bytes_back)
            .filter(|x| !x.is_nan())
            .collect(),
        &pct,
    );
    row(
        "rss back after the drops",
        res.iter().filter_map(|x| x.rss_back).collect(),
        &pct,
    );
    println!(
        "bytes: the allocator's usable bytes held by the engine (the driver's counting allocator, as the memory workload); back: after every drop and 8 collector passes (Engine::collect), of what the creates took; rss: resident-set change (freed pages mostly stay mapped)\n"
    );
}
