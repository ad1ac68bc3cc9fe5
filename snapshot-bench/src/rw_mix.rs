//! The `rw-mix` workload: snapshot isolation against serializable on the
//! same read-write mix. Writers run read-modify-write transactions (read
//! `--rmw-reads` random keys, update `--rmw-writes` of them with a value
//! derived from what they read, commit at the next timestamp); in the
//! range-scan variant (`--rmw-scan N`) a writer's reads are instead one
//! `Txn::scan` of N consecutive keys from a random start, and it updates
//! the first `--rmw-writes` keys the scan returned. A serializable writer
//! tracks that scan as a range, so a concurrent commit to any key in it
//! fails the scanning writer at commit (`RangeConflict`). Readers run
//! the read-ts reader (begin, read timestamp = stable, `--batch` point
//! reads, commit). Every transaction of a run has the run's isolation
//! level, so a serializable writer validates its reads at commit and a
//! serializable reader tracks its reads and never fails.
//!
//! The timekeeper keeps stable one tick (1 ms) behind the newest commit
//! timestamp handed out, as in `ro-mix`.

use crate::keys::{key, load, Rng};
use crate::measure::CpuWindow;
use crate::phases::{run_phases, Ctl, MEASURE, STOP};
use indicatif::ProgressBar;
use serde::Serialize;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{
    CommitOptions, Durability, EngineConfig, Error, Isolation, Timestamp, TxnOptions,
};
use std::hint::black_box;
use std::sync::atomic::Ordering;

#[derive(Clone, Debug)]
pub struct Params {
    pub keys: u64,
    pub value_size: usize,
    pub readers: usize,
    pub writers: usize,
    /// Keys each reader transaction reads.
    pub batch: usize,
    /// Keys each writer transaction reads.
    pub rmw_reads: usize,
    /// Of those, how many it updates (the first ones read).
    pub rmw_writes: usize,
    /// Keys in each writer transaction's range scan, which then replaces
    /// its `rmw_reads` point reads; 0: point reads (at most `keys`).
    pub rmw_scan: usize,
    pub warmup: crate::phases::Warmup,
    pub seconds: f64,
    pub isolation: Isolation,
}

/// One run: one engine, one configuration, one isolation level.
#[derive(Serialize, Clone, Debug)]
pub struct RoundOut {
    pub round: usize,
    pub seconds: f64,
    /// Writer transactions committed per second.
    pub writer_commits_per_s: f64,
    /// Reader transactions (read-only, committed) per second.
    pub reader_txn_per_s: f64,
    /// Writer transactions that hit a write conflict (first updater wins),
    /// rolled back, per committed writer transaction.
    pub write_conflicts_per_commit: f64,
    /// Writer transactions refused at commit by serializable validation
    /// (`SerializationConflict`, `RangeConflict`, `PreparedReadConflict`),
    /// per committed writer transaction.
    pub serialization_conflicts_per_commit: f64,
    /// Of those, the ones on a scanned range (`RangeConflict`: a
    /// concurrent commit inside it), per committed writer transaction.
    pub range_conflicts_per_commit: f64,
    /// Commits refused for the serializable timestamp order
    /// (`SerializableTimestampOrder`) and retried at a newer timestamp, per
    /// committed writer transaction.
    pub ts_order_retries_per_commit: f64,
    /// Mean bytes of read tracking a writer held at commit
    /// (`Txn::tracked_bytes`).
    pub tracked_bytes_per_commit: f64,
    /// Writer transactions committed per second of the writers' own CPU
    /// time in the measured window (what a commit costs, apart from the
    /// time writers spent waiting off the CPU); `None` where a thread's
    /// CPU clock could not be read or the writers got no CPU time.
    pub writer_commits_per_cpu_s: Option<f64>,
    /// Seconds of CPU time the writers used in the measured window, all
    /// together, per second of it (`None` as above).
    pub writer_cpu_share: Option<f64>,
    /// Writer commits and prepares that found the serializable gate held
    /// (`Stats::gate_waits`), per committed writer transaction.
    pub gate_waits_per_commit: f64,
    /// Microseconds writers waited for the gate (`Stats::gate_wait_ns`),
    /// per committed writer transaction.
    pub gate_wait_us_per_commit: f64,
}

#[derive(Default)]
struct ThreadOut {
    commits: u64,
    write_conflicts: u64,
    serial_conflicts: u64,
    range_conflicts: u64,
    ts_retries: u64,
    tracked: u64,
    reads: u64,
    /// A writer's CPU time in the measured window: none where it never saw
    /// the window open, `None` where its CPU clock could not be read.
    cpu_ns: Option<u64>,
    /// Its session's waits for the serializable gate in the window, and
    /// their nanoseconds.
    gate_waits: u64,
    gate_wait_ns: u64,
}

fn opts(p: &Params) -> TxnOptions {
    TxnOptions {
        isolation: p.isolation,
        ..TxnOptions::default()
    }
}

fn reader<M: Machinery>(e: &Engine<M>, ctl: &Ctl, p: &Params, id: usize) -> ThreadOut {
    let mut s = e.session().expect("reader session");
    let mut rng = Rng::new(0x5000 + id as u64);
    let opts = opts(p);
    let mut batch = vec![[0u8; 8]; p.batch];
    let mut out = ThreadOut::default();
    loop {
        let ph = ctl.phase();
        if ph == STOP {
            break;
        }
        let mut t = s.begin(&opts).expect("begin");
        loop {
            let stable = ctl.stable.load(Ordering::Relaxed);
            match t.set_read_timestamp(Timestamp::new(stable)) {
                Ok(_) => break,
                // Preempted long enough for oldest to pass the stable it
                // loaded: take the newer one (the transaction stays usable).
                Err(Error::ReadTimestampTooOld { .. }) => continue,
                Err(e) => panic!("set_read_timestamp: {e}"),
            }
        }
        let mut touched = 0u8;
        if p.batch > 1 {
            for b in batch.iter_mut() {
                *b = key(rng.below(p.keys));
            }
            t.get_many_with(&batch, |_, v| touched ^= v.map_or(0, |v| v[0]))
                .expect("no prepared updates in rw-mix");
        } else {
            touched = t
                .get_with(key(rng.below(p.keys)), |v| v.map_or(0, |v| v[0]))
                .expect("no prepared updates in rw-mix");
        }
        black_box(touched);
        t.commit(CommitOptions::default())
            .expect("a read-only transaction never fails at commit");
        if ph == MEASURE {
            out.reads += 1;
        }
    }
    out
}

fn writer<M: Machinery>(e: &Engine<M>, ctl: &Ctl, p: &Params, id: usize) -> ThreadOut {
    let mut s = e.session().expect("writer session");
    let mut rng = Rng::new(0x6000 + id as u64);
    let opts = opts(p);
    let mut value = vec![0x5au8; p.value_size];
    // The keys read by point; in the scan variant, the scanned keys to update.
    let n_keys = if p.rmw_scan > 0 {
        p.rmw_writes
    } else {
        p.rmw_reads
    };
    let mut ks = vec![0u64; n_keys];
    let mut out = ThreadOut::default();
    let mut cpu = CpuWindow::default();
    let mut stats0 = None;
    loop {
        let ph = ctl.phase();
        if ph == STOP {
            break;
        }
        if ph == MEASURE && cpu.open() {
            stats0 = Some(s.stats());
        }
        let measuring = ph == MEASURE;
        let mut t = s.begin(&opts).expect("begin");
        let mut sum = 0u8;
        if p.rmw_scan > 0 {
            // One ordered scan of rmw_scan consecutive keys, all loaded
            // (the CLI bounds rmw_scan by keys); the first rmw_writes keys
            // it returns are the ones updated.
            let n = p.rmw_scan as u64;
            let start = rng.below(p.keys - n + 1);
            let mut seen = 0;
            t.scan(key(start)..key(start + n), |k, v| {
                if seen < p.rmw_writes {
                    ks[seen] = u64::from_be_bytes(k.try_into().expect("8-byte keys"));
                }
                seen += 1;
                sum = sum.wrapping_add(v[0]);
                true
            })
            .expect("no prepared updates in rw-mix");
            assert_eq!(seen, p.rmw_scan, "rw-mix deletes no key");
        } else {
            for k in ks.iter_mut() {
                *k = rng.below(p.keys);
            }
            for &k in &ks {
                sum = sum.wrapping_add(
                    t.get_with(key(k), |v| v.map_or(0, |v| v[0]))
                        .expect("no prepared updates in rw-mix"),
                );
            }
        }
        value[0] = sum.wrapping_add(1);
        let mut conflict = false;
        for &k in &ks[..p.rmw_writes] {
            match t.put(key(k), &value) {
                Ok(()) => {}
                Err(Error::WriteConflict { .. }) => {
                    conflict = true;
                    break;
                }
                Err(e) => panic!("writer put: {e}"),
            }
        }
        if conflict {
            t.rollback();
            if measuring {
                out.write_conflicts += 1;
            }
            continue;
        }
        let tracked = t.tracked_bytes() as u64;
        // Commit at the next timestamp; one the timekeeper overtook, or one
        // below the last serializable commit's, is retried at a newer one
        // (the transaction comes back open).
        let committed = loop {
            match t.try_commit(CommitOptions::at(ctl.next_ts())) {
                Ok(()) => break true,
                Err(err) => match err.error() {
                    Error::CommitTimestampNotAfterStable { .. }
                    | Error::CommitTimestampBeforeOldest { .. } => {
                        t = err
                            .into_txn()
                            .expect("a timestamp error keeps the transaction");
                    }
                    Error::SerializableTimestampOrder { .. } => {
                        if measuring {
                            out.ts_retries += 1;
                        }
                        t = err
                            .into_txn()
                            .expect("a timestamp error keeps the transaction");
                    }
                    Error::RangeConflict { .. } => {
                        if measuring {
                            out.range_conflicts += 1;
                        }
                        break false;
                    }
                    Error::SerializationConflict { .. } | Error::PreparedReadConflict { .. } => {
                        break false
                    }
                    _ => panic!("writer commit: {err}"),
                },
            }
        };
        if measuring {
            if committed {
                out.commits += 1;
                out.tracked += tracked;
            } else {
                out.serial_conflicts += 1;
            }
        }
    }
    out.cpu_ns = if cpu.is_open() { cpu.spent() } else { Some(0) };
    if let Some(b) = stats0 {
        let a = s.stats();
        out.gate_waits = a.gate_waits - b.gate_waits;
        out.gate_wait_ns = a.gate_wait_ns - b.gate_wait_ns;
    }
    out
}

fn config(p: &Params) -> EngineConfig {
    EngineConfig {
        max_sessions: p.readers + p.writers + 8,
        ..EngineConfig::default()
    }
}

/// One rw-mix run on a fresh engine.
pub fn run<M: Machinery>(p: &Params, round: usize, pb: &ProgressBar) -> RoundOut {
    let e = Engine::<M>::with_machinery(config(p))
        .expect("the CLI bounds the threads (MAX_THREADS) well below EngineConfig::MAX_SESSIONS");
    run_on(&e, p, round, pb)
}

/// One rw-mix run on a fresh lock-free engine with its commit log on in
/// `mode`, in a fresh directory (removed afterwards).
pub fn run_logged(mode: Durability, p: &Params, round: usize, pb: &ProgressBar) -> RoundOut {
    crate::durable_writes::on_logged_engine("rw-mix", config(p), mode, |e| run_on(e, p, round, pb))
}

fn run_on<M: Machinery>(e: &Engine<M>, p: &Params, round: usize, pb: &ProgressBar) -> RoundOut {
    load(e, p.keys, crate::keys::MIN_KEY_SIZE, p.value_size, pb);
    let ctl = Ctl::new(1);
    let (rs, ws, secs) = std::thread::scope(|sc| {
        let ctl = &ctl;
        let tk = sc.spawn(move || crate::ro_mix::watermark(e, ctl));
        let rh: Vec<_> = (0..p.readers)
            .map(|i| sc.spawn(move || reader(e, ctl, p, i)))
            .collect();
        let wh: Vec<_> = (0..p.writers)
            .map(|i| sc.spawn(move || writer(e, ctl, p, i)))
            .collect();
        let secs = run_phases(ctl, p.warmup, p.seconds, pb);
        let rs: Vec<ThreadOut> = rh.into_iter().map(|h| h.join().expect("reader")).collect();
        let ws: Vec<ThreadOut> = wh.into_iter().map(|h| h.join().expect("writer")).collect();
        tk.join().expect("timekeeper");
        (rs, ws, secs)
    });
    let sum = |f: fn(&ThreadOut) -> u64| ws.iter().map(f).sum::<u64>() as f64;
    let commits = sum(|o| o.commits);
    // Per committed writer transaction; 0 where none committed (the
    // counts are then all that says anything, and they are 0 or tiny).
    let per = |n: f64| if commits > 0.0 { n / commits } else { 0.0 };
    let writer_cpu_s = ws
        .iter()
        .map(|o| o.cpu_ns)
        .sum::<Option<u64>>()
        .filter(|&ns| ns > 0)
        .map(|ns| ns as f64 / 1e9);
    RoundOut {
        round,
        seconds: secs,
        writer_commits_per_s: commits / secs,
        reader_txn_per_s: rs.iter().map(|o| o.reads).sum::<u64>() as f64 / secs,
        write_conflicts_per_commit: per(sum(|o| o.write_conflicts)),
        serialization_conflicts_per_commit: per(sum(|o| o.serial_conflicts)),
        range_conflicts_per_commit: per(sum(|o| o.range_conflicts)),
        ts_order_retries_per_commit: per(sum(|o| o.ts_retries)),
        tracked_bytes_per_commit: per(sum(|o| o.tracked)),
        writer_commits_per_cpu_s: writer_cpu_s.map(|c| commits / c),
        writer_cpu_share: writer_cpu_s.map(|c| c / secs),
        gate_waits_per_commit: per(sum(|o| o.gate_waits)),
        gate_wait_us_per_commit: per(sum(|o| o.gate_wait_ns)) / 1e3,
    }
}
