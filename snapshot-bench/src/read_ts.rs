//! The `read-ts` workload (and the engine side of `tail`): readers that set
//! their read timestamp after begin while writers commit, with the timekeeper
//! moving stable and oldest every millisecond.

use crate::keys::{load_into, table_of, KeyBuf, Rng};
use crate::measure::{new_hist, Meter, Worst, WorstList};
use crate::phases::{run_phases_sampled, Ctl, WarmedUp, Warmup};
use crate::sched::Sched;
use crate::timekeeper::{timekeeper, Timekeeping};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use snapshot_engine::bench_api::thread_rmw_count;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{
    Durability, EngineConfig, Error, Stats, Table, TableOptions, Timestamp, TxnOptions,
};
use std::hint::black_box;

/// The shape of one read-ts run.
#[derive(Clone, Debug)]
pub struct Params {
    pub keys: u64,
    /// Named tables the keys are spread over, round-robin by key number
    /// ([`table_of`]); 0 for the default table. The CLI keeps it at 0
    /// with `batch` > 1 and for the engines that are not snapshot-engine's.
    pub tables: usize,
    /// Bytes per key ([`KeyBuf`]).
    pub key_size: usize,
    pub value_size: usize,
    /// Keys each reader transaction reads: 1 with `get_with` (the read-ts
    /// reader), more with one `get_many_with`.
    pub batch: usize,
    pub readers: usize,
    pub writers: usize,
    pub warmup: Warmup,
    pub seconds: f64,
    pub stable_lag: u64,
    pub oldest_lag: u64,
    /// `EngineConfig::stable_sweep`.
    pub stable_sweep: bool,
    /// Keep the N slowest transactions (tail); 0 for none.
    pub worst: usize,
    pub round: usize,
}

/// What one read-ts run measured.
pub struct Out {
    pub seconds: f64,
    /// How the warm-up went.
    pub warmup: WarmedUp,
    pub reader_txns: u64,
    pub writer_txns: u64,
    pub writer_aborts: u64,
    /// Readers whose read timestamp fell below oldest before they set it
    /// (retried with a newer stable).
    pub reader_read_ts_retries: u64,
    /// Shim-counted read-modify-writes in reader threads (None without
    /// the `count-rmw` feature or for peers).
    pub reader_rmw: Option<u64>,
    /// The same in writer threads (every write transaction's RMWs, commit
    /// retries and pruning included).
    pub writer_rmw: Option<u64>,
    /// How long the timekeeper's `set_timestamps` calls took in the
    /// measured window (None for peers).
    pub timekeeper: Option<Timekeeping>,
    /// CPU time the reader threads spent in the measured window, summed
    /// (None where a thread's CPU clock could not be read).
    pub reader_cpu_ns: Option<u64>,
    /// The same for the writer threads.
    pub writer_cpu_ns: Option<u64>,
    /// Mean runnable threads of the process over the window (sampled).
    pub runnable: Option<f64>,
    /// Scheduler counters of every thread over the window.
    pub sched: Option<Sched>,
    /// Counter deltas of the reader sessions over the measured window.
    pub reader_stats: Option<Stats>,
    /// Counter deltas of the writer sessions.
    pub writer_stats: Option<Stats>,
    pub read_hist: Histogram<u64>,
    pub write_hist: Histogram<u64>,
    pub worst: Vec<Worst>,
}

/// A peer engine's thread result: transactions, latency histogram, the
/// slowest transactions, and CPU time in the window ([`Meter::finish`]).
pub(crate) type PeerThread = (u64, Histogram<u64>, Vec<Worst>, Option<u64>);

struct ThreadOut {
    txns: u64,
    aborts: u64,
    cpu_ns: Option<u64>,
    rmw: Option<u64>,
    stats: Option<Stats>,
    hist: Histogram<u64>,
    worst: Vec<Worst>,
}

fn delta(a: &Stats, b: &Stats) -> Stats {
    let mut d = Stats::default();
    d.begins = b.begins - a.begins;
    d.read_only_txns = b.read_only_txns - a.read_only_txns;
    d.commits = b.commits - a.commits;
    d.read_lock_acquisitions = b.read_lock_acquisitions - a.read_lock_acquisitions;
    d.write_lock_acquisitions = b.write_lock_acquisitions - a.write_lock_acquisitions;
    d.lock_wait_ns = b.lock_wait_ns - a.lock_wait_ns;
    d.snapshot_rebuilt = b.snapshot_rebuilt - a.snapshot_rebuilt;
    d.snapshot_reused = b.snapshot_reused - a.snapshot_reused;
    d.descriptor_installs = b.descriptor_installs - a.descriptor_installs;
    d.descriptor_cas_retries = b.descriptor_cas_retries - a.descriptor_cas_retries;
    d.write_conflicts = b.write_conflicts - a.write_conflicts;
    d.reads = b.reads - a.reads;
    d.versions_read = b.versions_read - a.versions_read;
    d.commit_versions_examined = b.commit_versions_examined - a.commit_versions_examined;
    d
}

/// Adds the counters the report uses.
pub fn add_stats(acc: &mut Stats, d: &Stats) {
    acc.begins += d.begins;
    acc.read_only_txns += d.read_only_txns;
    acc.commits += d.commits;
    acc.read_lock_acquisitions += d.read_lock_acquisitions;
    acc.write_lock_acquisitions += d.write_lock_acquisitions;
    acc.lock_wait_ns += d.lock_wait_ns;
    acc.snapshot_rebuilt += d.snapshot_rebuilt;
    acc.snapshot_reused += d.snapshot_reused;
    acc.descriptor_installs += d.descriptor_installs;
    acc.descriptor_cas_retries += d.descriptor_cas_retries;
    acc.write_conflicts += d.write_conflicts;
    acc.reads += d.reads;
    acc.versions_read += d.versions_read;
    acc.commit_versions_examined += d.commit_versions_examined;
}

fn reader<M: Machinery>(
    e: &Engine<M>,
    tables: &[Table],
    ctl: &Ctl,
    p: &Params,
    id: usize,
) -> ThreadOut {
    let mut s = e.session().expect("reader session");
    let mut rng = Rng::new(0x1000 + id as u64);
    let mut m = Meter::new(p.worst, id, p.round);
    let opts = TxnOptions::default();
    let (mut txns, mut retries) = (0u64, 0u64);
    let mut kb = KeyBuf::new(p.key_size);
    let mut batch = vec![KeyBuf::new(p.key_size); p.batch];
    let mut base_stats = s.stats();
    let mut base_rmw = thread_rmw_count();
    while let Some(opened) = m.next(ctl) {
        if opened {
            base_stats = s.stats();
            base_rmw = thread_rmw_count();
        }
        // Reader loop (BENCHMARKS.md, read-ts): begin; read ts = current
        // stable; one zero-copy point read of a random key (`--batch N`:
        // one `get_many_with` of N random keys); roll back. With
        // `--tables`, the read goes to the key's table.
        let mut k = 0;
        if p.batch > 1 {
            for b in batch.iter_mut() {
                b.at(rng.below(p.keys));
            }
        } else {
            k = rng.below(p.keys);
            kb.at(k);
        }
        let mut t = s.begin(&opts).expect("begin");
        loop {
            let stable = ctl.stable.load(std::sync::atomic::Ordering::Relaxed);
            match t.set_read_timestamp(Timestamp::new(stable)) {
                Ok(_) => break,
                // Preempted between loading stable and setting it, long
                // enough for oldest to pass it: take the newer stable (the
                // transaction stays usable after a timestamp error).
                Err(Error::ReadTimestampTooOld { .. }) => {
                    if m.measuring {
                        retries += 1;
                    }
                }
                Err(e) => panic!("set_read_timestamp: {e}"),
            }
        }
        if p.batch > 1 {
            let mut touched = 0u8;
            t.get_many_with(&batch, |_, v| {
                touched ^= v.map_or(0, |v| v[v.len() / 2]);
            })
            .expect("no prepared updates in read-ts");
            black_box(touched);
        } else {
            let mid = |v: Option<&[u8]>| v.map(|v| v[v.len() / 2]);
            let v = match table_of(tables, k) {
                None => t.get_with(kb.as_ref(), mid),
                Some(tb) => t
                    .table(tb)
                    .expect("read-ts drops no table")
                    .get_with(kb.as_ref(), mid),
            }
            .expect("no prepared updates in read-ts");
            black_box(v);
        }
        t.rollback();
        if m.record("read") {
            txns += 1;
        }
    }
    finish(m, txns, retries, base_rmw, delta(&base_stats, &s.stats()))
}

fn writer<M: Machinery>(
    e: &Engine<M>,
    tables: &[Table],
    ctl: &Ctl,
    p: &Params,
    id: usize,
) -> ThreadOut {
    let mut s = e.session().expect("writer session");
    let mut rng = Rng::new(0x2000 + id as u64);
    let mut m = Meter::new(p.worst, id, p.round);
    let mut value = vec![0xa5u8; p.value_size];
    let mut kb = KeyBuf::new(p.key_size);
    let opts = TxnOptions::default();
    let (mut txns, mut aborts) = (0u64, 0u64);
    let mut base_stats = s.stats();
    let mut base_rmw = thread_rmw_count();
    let mut n = 0u64;
    while let Some(opened) = m.next(ctl) {
        if opened {
            base_stats = s.stats();
            base_rmw = thread_rmw_count();
        }
        // Writer loop (read-ts): begin; update one random key with a fresh
        // value; commit at the next value of the shared counter.
        n += 1;
        let w = value.len().min(8);
        value[..w].copy_from_slice(&n.to_le_bytes()[..w]);
        let k = rng.below(p.keys);
        let key = kb.at(k);
        let mut t = s.begin(&opts).expect("begin");
        let put = match table_of(tables, k) {
            None => t.put(key, &value),
            Some(tb) => t
                .table(tb)
                .expect("read-ts drops no table")
                .put(key, &value),
        };
        let ok = match put {
            Ok(()) => {
                ctl.commit_at_next_ts(t);
                true
            }
            Err(Error::WriteConflict { .. }) => {
                t.rollback();
                false
            }
            Err(e) => panic!("writer put: {e}"),
        };
        if m.record(if ok { "write" } else { "write (conflict)" }) {
            if ok {
                txns += 1;
            } else {
                aborts += 1;
            }
        }
    }
    finish(m, txns, aborts, base_rmw, delta(&base_stats, &s.stats()))
}

/// One thread's result: its counts, the RMWs its thread did since the
/// window opened, and its session's counter deltas.
fn finish(m: Meter, txns: u64, aborts: u64, base_rmw: Option<u64>, stats: Stats) -> ThreadOut {
    let rmw = thread_rmw_count().zip(base_rmw).map(|(a, b)| a - b);
    let (hist, worst, cpu_ns) = m.finish();
    ThreadOut {
        txns,
        aborts,
        cpu_ns,
        rmw,
        stats: Some(stats),
        hist,
        worst,
    }
}

fn config(p: &Params) -> EngineConfig {
    EngineConfig {
        max_sessions: p.readers + p.writers + 8,
        stable_sweep: p.stable_sweep,
        ..EngineConfig::default()
    }
}

/// One read-ts run on a fresh engine.
pub fn run<M: Machinery>(p: &Params, pb: &ProgressBar) -> Out {
    let e = Engine::<M>::with_machinery(config(p))
        .expect("the CLI bounds the threads (MAX_THREADS) well below EngineConfig::MAX_SESSIONS");
    run_on(&e, p, pb)
}

/// One read-ts run on a fresh lock-free engine with its commit log on in
/// `mode`, in a fresh directory (removed afterwards). The load is logged
/// too, in 1,000-key commits.
pub fn run_logged(mode: Durability, p: &Params, pb: &ProgressBar) -> Out {
    crate::durable_writes::on_logged_engine("read-ts", config(p), mode, |e| run_on(e, p, pb))
}

fn run_on<M: Machinery>(e: &Engine<M>, p: &Params, pb: &ProgressBar) -> Out {
    // The handles are made once, before any thread starts.
    let tables: Vec<Table> = (0..p.tables)
        .map(|i| {
            e.create_table(&format!("t{i}"), TableOptions::default())
                .expect("a fresh engine takes t0, t1, ...")
        })
        .collect();
    let tables = &tables[..];
    load_into(e, tables, p.keys, p.key_size, p.value_size, pb);
    let ctl = Ctl::new(1);
    let (rs, ws, secs, tk) = std::thread::scope(|sc| {
        let ctl = &ctl;
        let tk = sc.spawn(move || timekeeper(e, ctl, p.stable_lag, p.oldest_lag));
        let rh: Vec<_> = (0..p.readers)
            .map(|i| sc.spawn(move || reader(e, tables, ctl, p, i)))
            .collect();
        let wh: Vec<_> = (0..p.writers)
            .map(|i| sc.spawn(move || writer(e, tables, ctl, p, p.readers + i)))
            .collect();
        // The timekeeper moves stable once the writers pass the lag.
        let secs = run_phases_sampled(ctl, p.warmup, p.writers > 0, p.seconds, pb);
        let rs: Vec<ThreadOut> = rh.into_iter().map(|h| h.join().expect("reader")).collect();
        let ws: Vec<ThreadOut> = wh.into_iter().map(|h| h.join().expect("writer")).collect();
        let tk = tk.join().expect("timekeeper");
        (rs, ws, secs, tk)
    });
    let mut out = merge(secs.seconds, rs, ws, p.worst);
    out.timekeeper = Some(tk);
    out.warmup = secs.warmup;
    out.runnable = secs.runnable;
    out.sched = secs.sched;
    out
}

fn merge(seconds: f64, rs: Vec<ThreadOut>, ws: Vec<ThreadOut>, worst: usize) -> Out {
    let mut read_hist = new_hist();
    let mut write_hist = new_hist();
    let mut reader_stats = Stats::default();
    let mut writer_stats = Stats::default();
    let mut reader_rmw = Some(0);
    let mut writer_rmw = Some(0);
    for r in &rs {
        read_hist.add(&r.hist).expect("same bounds");
        if let Some(s) = &r.stats {
            add_stats(&mut reader_stats, s);
        }
        reader_rmw = reader_rmw.zip(r.rmw).map(|(a, b)| a + b);
    }
    for w in &ws {
        writer_rmw = writer_rmw.zip(w.rmw).map(|(a, b)| a + b);
        write_hist.add(&w.hist).expect("same bounds");
        if let Some(s) = &w.stats {
            add_stats(&mut writer_stats, s);
        }
    }
    let has_stats = rs.iter().chain(&ws).any(|t| t.stats.is_some());
    let cpu = |ts: &[ThreadOut]| -> Option<u64> {
        let mut sum = Some(0u64);
        for t in ts {
            sum = sum.zip(t.cpu_ns).map(|(a, b)| a + b);
        }
        sum.filter(|_| !ts.is_empty())
    };
    let (reader_cpu_ns, writer_cpu_ns) = (cpu(&rs), cpu(&ws));
    Out {
        seconds,
        warmup: WarmedUp::default(),
        reader_txns: rs.iter().map(|r| r.txns).sum(),
        writer_txns: ws.iter().map(|w| w.txns).sum(),
        writer_aborts: ws.iter().map(|w| w.aborts).sum(),
        reader_read_ts_retries: rs.iter().map(|r| r.aborts).sum(),
        reader_rmw: if rs.is_empty() { None } else { reader_rmw },
        writer_rmw: if ws.is_empty() { None } else { writer_rmw },
        reader_cpu_ns,
        writer_cpu_ns,
        timekeeper: None,
        runnable: None,
        sched: None,
        reader_stats: has_stats.then_some(reader_stats),
        writer_stats: has_stats.then_some(writer_stats),
        read_hist,
        write_hist,
        worst: WorstList::merge(rs.into_iter().chain(ws).map(|t| t.worst), worst),
    }
}

/// Builds an [`Out`] for a peer engine from its threads' results.
#[allow(dead_code)]
pub(crate) fn merge_peer(
    seconds: f64,
    readers: Vec<PeerThread>,
    writers: Vec<PeerThread>,
    worst: usize,
) -> Out {
    let to = |(txns, hist, worst, cpu_ns): PeerThread| ThreadOut {
        txns,
        aborts: 0,
        cpu_ns,
        rmw: None,
        stats: None,
        hist,
        worst,
    };
    merge(
        seconds,
        readers.into_iter().map(to).collect(),
        writers.into_iter().map(to).collect(),
        worst,
    )
}
