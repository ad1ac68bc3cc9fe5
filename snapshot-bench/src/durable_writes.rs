//! The durable-writes workload: writers that each commit one key and one
//! value per transaction, on the durable engine (`Engine::open`) in each
//! durability mode, on the in-memory engine, and (feature `peers`) on LMDB
//! with its syncs on and redb with `Durability::Immediate`; then the
//! recovery replay rate and a checkpoint of `--keys` keys beside one
//! sequential write and one fsync of the same bytes. Rounds alternate the
//! order of the engines; figures are medians with min-max. Beside each
//! commit rate: the writers' wait per commit (the time from `begin` until
//! `commit` returns, p50 and p99), and for the commit log the commits per
//! fsync (`log_stats`) and the batch fsyncs' latency (p50, p99, from the
//! bench hooks).
//!
//! The files live in `SNAPSHOT_BENCH_DIR` (default: the system temporary
//! directory), which must be on the disk being measured (not a tmpfs).

use hdrhistogram::Histogram;
use snapshot_engine::bench_api;
use snapshot_engine::with_machinery::Engine;
use snapshot_engine::{CommitOptions, Durability, DurabilityOptions, EngineConfig, TxnOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// The workload's knobs (from the command line).
pub struct Params {
    pub writers: Vec<usize>,
    pub seconds: f64,
    pub warmup: f64,
    pub rounds: usize,
    pub value_size: usize,
    pub keys: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Mem,
    Durable(Durability),
    #[cfg(feature = "peers")]
    LmdbSync,
    #[cfg(feature = "peers")]
    RedbImmediate,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Mem => "in-memory",
            Peer::Durable(Durability::Sync) => "log-sync",
            Peer::Durable(Durability::Periodic(_)) => "log-periodic-10ms",
            Peer::Durable(Durability::None) => "log-none",
            #[cfg(feature = "peers")]
            Peer::LmdbSync => "lmdb-sync",
            #[cfg(feature = "peers")]
            Peer::RedbImmediate => "redb-immediate",
        }
    }
}

fn peers() -> Vec<Peer> {
    vec![
        Peer::Durable(Durability::Sync),
        Peer::Durable(Durability::Periodic(Duration::from_millis(10))),
        Peer::Durable(Durability::None),
        Peer::Mem,
        #[cfg(feature = "peers")]
        Peer::LmdbSync,
        #[cfg(feature = "peers")]
        Peer::RedbImmediate,
    ]
}

fn base_dir() -> PathBuf {
    std::env::var_os("SNAPSHOT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

pub(crate) fn fresh_dir(what: &str) -> PathBuf {
    let d = base_dir().join(format!("snapshot-bench-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("bench directory");
    d
}

/// Runs `f` on an engine with `config` opened in `mode` on a fresh
/// directory (tagged `what`), removed afterwards.
pub(crate) fn on_logged_engine<R>(
    what: &str,
    config: EngineConfig,
    mode: Durability,
    f: impl FnOnce(&Engine) -> R,
) -> R {
    let dir = fresh_dir(what);
    let e = Engine::open(
        &dir,
        config,
        DurabilityOptions {
            durability: mode,
            ..DurabilityOptions::default()
        },
    )
    .expect("open the durable engine");
    let r = f(&e);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn key(writer: usize, i: u64) -> [u8; 8] {
    ((writer as u64) << 32 | (i % 1024)).to_be_bytes()
}

/// One measured run.
#[derive(Clone, Copy, Default)]
struct Run {
    /// Commits per second.
    rate: f64,
    /// The writers' wait per commit, p50 and p99, microseconds.
    wait_p50: f64,
    wait_p99: f64,
    /// The commit log's work over the measured part, if logged.
    log: Option<LogRun>,
}

/// The commit log's side of a run.
#[derive(Clone, Copy, Default)]
struct LogRun {
    commits_per_sync: f64,
    /// Batch fsync latency, p50 and p99, microseconds.
    sync_p50: f64,
    sync_p99: f64,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
}

fn micros(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e3
}

/// Runs `writers` threads of `one(writer, i)` for warmup + seconds,
/// timing each call; with `logged`, reads its log's counters and the
/// batch syncs' durations over the measured part.
fn drive(
    writers: usize,
    p: &Params,
    logged: Option<&Engine>,
    one: &(dyn Fn(usize, u64) + Sync),
) -> Run {
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    let measuring = AtomicBool::new(false);
    let start = Barrier::new(writers + 1);
    let waits = Mutex::new(hist());
    let (rate, log) = std::thread::scope(|sc| {
        for w in 0..writers {
            let (stop, count, measuring, start, waits) =
                (&stop, &count, &measuring, &start, &waits);
            sc.spawn(move || {
                let mut h = hist();
                start.wait();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    one(w, i);
                    i += 1;
                    if measuring.load(Ordering::Relaxed) {
                        h.saturating_record(t.elapsed().as_nanos() as u64);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
                waits.lock().unwrap().add(&h).expect("same bounds");
            });
        }
        start.wait();
        std::thread::sleep(Duration::from_secs_f64(p.warmup));
        let before = logged.map(|e| {
            bench_api::record_log_syncs();
            e.log_stats().expect("a logged engine")
        });
        measuring.store(true, Ordering::Relaxed);
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(p.seconds));
        let n = count.load(Ordering::Relaxed);
        let secs = t.elapsed().as_secs_f64();
        let log = logged.zip(before).map(|(e, b)| {
            let a = e.log_stats().expect("a logged engine");
            let mut syncs = hist();
            for ns in bench_api::take_log_sync_nanos() {
                syncs.saturating_record(ns);
            }
            let syncs_n = a.syncs - b.syncs;
            LogRun {
                // NaN with no sync (`Durability::None`): printed as "-".
                commits_per_sync: if syncs_n == 0 {
                    f64::NAN
                } else {
                    (a.records - b.records) as f64 / syncs_n as f64
                },
                sync_p50: micros(&syncs, 0.5),
                sync_p99: micros(&syncs, 0.99),
            }
        });
        stop.store(true, Ordering::Relaxed);
        (n as f64 / secs, log)
    });
    let h = waits.into_inner().unwrap();
    Run {
        rate,
        wait_p50: micros(&h, 0.5),
        wait_p99: micros(&h, 0.99),
        log,
    }
}

fn snapshot_writes(engine: &Engine, writers: usize, p: &Params, logged: bool) -> Run {
    let value = vec![0x5a; p.value_size];
    let sessions: Vec<_> = (0..writers)
        .map(|_| std::sync::Mutex::new(engine.session().expect("a session per writer")))
        .collect();
    drive(writers, p, logged.then_some(engine), &|w, i| {
        let mut s = sessions[w].lock().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(key(w, i), &value).unwrap();
        t.commit(CommitOptions::default()).unwrap();
    })
}

fn run_peer(peer: Peer, writers: usize, p: &Params) -> Run {
    match peer {
        Peer::Mem => snapshot_writes(
            &Engine::new(EngineConfig::default()).expect("default config"),
            writers,
            p,
            false,
        ),
        Peer::Durable(mode) => on_logged_engine("log", EngineConfig::default(), mode, |e| {
            snapshot_writes(e, writers, p, true)
        }),
        #[cfg(feature = "peers")]
        Peer::LmdbSync => lmdb_sync(writers, p),
        #[cfg(feature = "peers")]
        Peer::RedbImmediate => redb_immediate(writers, p),
    }
}

#[cfg(feature = "peers")]
fn lmdb_sync(writers: usize, p: &Params) -> Run {
    use heed::types::Bytes;
    let dir = fresh_dir("lmdb-sync");
    // SAFETY: the directory is fresh and ours alone, opened once; default
    // flags: LMDB syncs every commit (the peer as it ships).
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .map_size(1 << 30)
            .max_dbs(1)
            .open(&dir)
            .expect("LMDB environment")
    };
    let mut wtxn = env.write_txn().unwrap();
    let db: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, None).unwrap();
    wtxn.commit().unwrap();
    let value = vec![0x5a; p.value_size];
    let r = drive(writers, p, None, &|w, i| {
        let mut t = env.write_txn().unwrap();
        db.put(&mut t, &key(w, i), &value).unwrap();
        t.commit().unwrap();
    });
    drop(env);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[cfg(feature = "peers")]
fn redb_immediate(writers: usize, p: &Params) -> Run {
    const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("t");
    let dir = fresh_dir("redb");
    let db = redb::Database::create(dir.join("db.redb")).expect("redb database");
    let value = vec![0x5a; p.value_size];
    let r = drive(writers, p, None, &|w, i| {
        let mut t = db.begin_write().unwrap();
        t.set_durability(redb::Durability::Immediate);
        {
            let mut table = t.open_table(TABLE).unwrap();
            table.insert(&key(w, i)[..], &value[..]).unwrap();
        }
        t.commit().unwrap();
    });
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Median, min and max.
fn summary(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Writes `records` one-key commits with `Durability::None`, closes, and
/// times the reopen: (records replayed per second, open seconds).
fn recovery(records: u64, p: &Params) -> (f64, f64) {
    let dir = fresh_dir("recovery");
    let opts = || DurabilityOptions {
        durability: Durability::None,
        ..DurabilityOptions::default()
    };
    {
        let e = Engine::open(&dir, EngineConfig::default(), opts()).unwrap();
        let mut s = e.session().unwrap();
        let value = vec![0x5a; p.value_size];
        for i in 0..records {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(i.to_be_bytes(), &value).unwrap();
            t.commit(CommitOptions::default()).unwrap();
        }
    }
    let t = Instant::now();
    let e = Engine::open(&dir, EngineConfig::default(), opts()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let n = e.recovery_report().unwrap().records_replayed;
    assert_eq!(n, records, "every record replayed");
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    (n as f64 / secs, secs)
}

/// Loads `keys` keys, then times a checkpoint and, beside it, one write and
/// one fsync of as many bytes to a new file (order alternating by round):
/// (checkpoint seconds, write+fsync seconds, bytes).
fn checkpoint(keys: u64, p: &Params, round: usize) -> (f64, f64, u64) {
    let dir = fresh_dir("checkpoint");
    let e = Engine::open(
        &dir,
        EngineConfig::default(),
        DurabilityOptions {
            durability: Durability::None,
            ..DurabilityOptions::default()
        },
    )
    .unwrap();
    let mut s = e.session().unwrap();
    let value = vec![0x5a; p.value_size];
    let mut i = 0;
    while i < keys {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for _ in 0..1000.min(keys - i) {
            t.put(i.to_be_bytes(), &value).unwrap();
            i += 1;
        }
        t.commit(CommitOptions::default()).unwrap();
    }
    // A first checkpoint folds the log; the measured one rewrites the
    // state it holds (the steady-state cost).
    let first = e.checkpoint().unwrap();
    let bytes = first.bytes;
    let raw = || {
        let buf = vec![0xa5u8; bytes as usize];
        let path = dir.join("raw");
        let t = Instant::now();
        let mut f = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut f, &buf).unwrap();
        f.sync_data().unwrap();
        let secs = t.elapsed().as_secs_f64();
        std::fs::remove_file(&path).unwrap();
        secs
    };
    let ckpt = || {
        let t = Instant::now();
        e.checkpoint().unwrap();
        t.elapsed().as_secs_f64()
    };
    let (c, r) = if round.is_multiple_of(2) {
        let c = ckpt();
        (c, raw())
    } else {
        let r = raw();
        (ckpt(), r)
    };
    drop(s);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    (c, r, bytes)
}

pub fn main(p: &Params) {
    println!(
        "durable-writes: one {}-byte value per commit, {} s per run after {} s warm-up, {} rounds, files in {}",
        p.value_size,
        p.seconds,
        p.warmup,
        p.rounds,
        base_dir().display()
    );
    let all = peers();
    for &writers in &p.writers {
        let mut per: Vec<Vec<Run>> = vec![Vec::new(); all.len()];
        for r in 0..p.rounds {
            let mut order: Vec<usize> = (0..all.len()).collect();
            if r % 2 == 1 {
                order.reverse();
            }
            for i in order {
                per[i].push(run_peer(all[i], writers, p));
            }
        }
        println!(
            "\n{writers} writers: medians (min-max) over rounds; wait per commit and fsync latency in us"
        );
        println!(
            "  {:<18} {:>26} {:>10} {:>10} {:>14} {:>10} {:>10}",
            "engine",
            "commits/s",
            "wait p50",
            "wait p99",
            "commits/fsync",
            "fsync p50",
            "fsync p99"
        );
        let mut meds = Vec::new();
        for (i, peer) in all.iter().enumerate() {
            let runs = &per[i];
            let (m, lo, hi) = summary(&mut runs.iter().map(|r| r.rate).collect::<Vec<_>>());
            let med =
                |f: &dyn Fn(&Run) -> f64| summary(&mut runs.iter().map(f).collect::<Vec<_>>()).0;
            meds.push(m);
            let rate = format!("{m:.0} ({lo:.0}-{hi:.0})");
            let log = if runs.iter().all(|r| r.log.is_some()) {
                let l = |f: fn(&LogRun) -> f64| med(&|r: &Run| r.log.as_ref().map_or(0.0, f));
                // Rounds with no sync (NaN) are left out; none at all: "-".
                let mut per_sync: Vec<f64> = runs
                    .iter()
                    .map(|r| r.log.map_or(0.0, |l| l.commits_per_sync))
                    .filter(|c| !c.is_nan())
                    .collect();
                let (c, clo, chi) = if per_sync.is_empty() {
                    (f64::NAN, f64::NAN, f64::NAN)
                } else {
                    summary(&mut per_sync)
                };
                let syncs = if l(|x| x.sync_p50) > 0.0 {
                    format!("{:>10.0} {:>10.0}", l(|x| x.sync_p50), l(|x| x.sync_p99))
                } else {
                    format!("{:>10} {:>10}", "-", "-")
                };
                let per = if c.is_nan() {
                    "-".to_string()
                } else {
                    format!("{c:.1} ({clo:.1}-{chi:.1})")
                };
                format!("{per:>14} {syncs}")
            } else {
                String::new()
            };
            println!(
                "  {:<18} {rate:>26} {:>10.0} {:>10.0} {log}",
                peer.name(),
                med(&|r| r.wait_p50),
                med(&|r| r.wait_p99),
            );
        }
        let mem = meds[all.iter().position(|&x| x == Peer::Mem).expect("in-memory")];
        let none = meds[2];
        println!(
            "  log-none costs a writer {:.2}x the in-memory engine's time per commit",
            mem / none
        );
        #[cfg(feature = "peers")]
        {
            let lmdb = meds[all.iter().position(|&x| x == Peer::LmdbSync).expect("lmdb")];
            let redb = meds[all
                .iter()
                .position(|&x| x == Peer::RedbImmediate)
                .expect("redb")];
            println!(
                "  log-sync / lmdb-sync: {:.1}x; log-sync / redb-immediate: {:.1}x",
                meds[0] / lmdb,
                meds[0] / redb
            );
        }
    }
    let records = (p.keys / 2).max(1000);
    let mut rates = Vec::new();
    let mut opens = Vec::new();
    for _ in 0..p.rounds {
        let (rate, secs) = recovery(records, p);
        rates.push(rate);
        opens.push(secs);
    }
    let (m, lo, hi) = summary(&mut rates);
    let (om, _, _) = summary(&mut opens);
    println!("\nrecovery: {records} one-key records replayed at {m:.0}/s ({lo:.0}-{hi:.0}), open {om:.3} s");
    let (mut cs, mut rs, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    let mut bytes = 0;
    for r in 0..p.rounds {
        let (c, w, b) = checkpoint(p.keys, p, r);
        cs.push(c);
        rs.push(w);
        ratio.push(c / w);
        bytes = b;
    }
    let (cm, clo, chi) = summary(&mut cs);
    let (wm, wlo, whi) = summary(&mut rs);
    let (qm, qlo, qhi) = summary(&mut ratio);
    println!(
        "checkpoint of {} keys ({bytes} bytes): {cm:.3} s ({clo:.3}-{chi:.3}); one write + fsync of the same bytes: {wm:.3} s ({wlo:.3}-{whi:.3}); ratio {qm:.2}x ({qlo:.2}-{qhi:.2})",
        p.keys
    );
}
