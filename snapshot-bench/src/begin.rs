//! The `begin` workload: the cost of begin + end of a read-only transaction
//! for every combination of begin options (the WiredTiger WT-11105 table).
//! Options are a plain struct; the crate has no string form, so there is no
//! parsed column to contrast.

use crate::engines::{order, EngineKind};
use crate::progress::Progress;
use crate::stats::{median, min_max};
use serde::Serialize;
use snapshot_bench::begin_rows::{begin_engine, begin_rows};
use snapshot_engine::with_machinery::Machinery;
use snapshot_engine::{CommitOptions, TxnOptions};
use std::time::{Duration, Instant};

/// ns per begin + commit of an empty transaction with `opts`, over about
/// `secs` seconds.
fn cell<M: Machinery>(opts: &TxnOptions, secs: f64) -> f64 {
    let e = begin_engine::<M>();
    let mut s = e.session().expect("session");
    let once = |s: &mut snapshot_engine::with_machinery::Session<'_, M>| {
        let t = s.begin(opts).expect("begin");
        t.commit(CommitOptions::default()).expect("commit");
    };
    // Warm the session's cached snapshot and the caches.
    for _ in 0..10_000 {
        once(&mut s);
    }
    let budget = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < budget {
        for _ in 0..1000 {
            once(&mut s);
        }
        n += 1000;
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

#[derive(Serialize)]
pub struct Row {
    pub options: &'static str,
    /// Per engine: ns per begin + commit, one value per round.
    pub ns: Vec<(&'static str, Vec<f64>)>,
}

pub fn run(engines: &[EngineKind], rounds: usize, secs: f64, pg: &Progress) -> Vec<Row> {
    let rows = begin_rows();
    let mut out: Vec<Row> = rows
        .iter()
        .map(|r| Row {
            options: r.label,
            ns: engines.iter().map(|e| (e.name(), Vec::new())).collect(),
        })
        .collect();
    for r in 0..rounds {
        for kind in order(engines, r) {
            let col = engines.iter().position(|&k| k == kind).expect("listed");
            for (i, r) in rows.iter().enumerate() {
                let ns = crate::dispatch!(kind, cell(&r.opts, secs), f64::NAN);
                out[i].ns[col].1.push(ns);
                crate::progress::advance(&pg.bar, (secs * 1000.0) as u64);
            }
            pg.line(format_args!(
                "begin round {}/{rounds} {} done ({} option rows)",
                r + 1,
                kind.name(),
                rows.len()
            ));
        }
    }
    out
}

pub fn print(rows: &[Row], rounds: usize, secs: f64) {
    println!(
        "begin: begin + commit of an empty transaction, ns per pair, median (min-max) of {} of {secs} s each, one thread",
        crate::fmt::plural(rounds as u64, "round")
    );
    print!("{:<46}", "begin with");
    for (name, _) in &rows[0].ns {
        print!(" {:>22}", name);
    }
    println!();
    for r in rows {
        print!("{:<46}", r.options);
        for (_, v) in &r.ns {
            let (lo, hi) = min_max(v);
            print!(" {:>22}", format!("{:.1} ({:.1}-{:.1})", median(v), lo, hi));
        }
        println!();
    }
    println!();
}
