//! The `replicated` workload (Mako): a TPC-C-shaped mix over the KV store, 10%
//! NewOrder (read a district counter and bump it, insert an order and its
//! lines, update one stock row per line) and 90% OrderStatus (read-only: a
//! customer, then its newest order and that order's lines by range scans).
//!
//! Three modes, side by side in one run:
//! * `1 node, normal`: one engine, no replication; OrderStatus begins a
//!   snapshot and sets its read timestamp to stable.
//! * `1 node, fast`: the same, OrderStatus on the read-only fast path
//!   (`read_at_stable`).
//! * `leader + 2 followers`: a 3-node openraft cluster in this process
//!   (`snapshot_engine::replication`). Leader threads run the mix (NewOrder
//!   through the log, OrderStatus at the leader's watermark); follower
//!   threads run OrderStatus at their own replicated watermark.
//! * `leader + 2 followers, TCP`: the same three nodes in this process,
//!   joined over 127.0.0.1 by the TCP transport.
//! * `leader + 2 followers, processes`: each node a child process (this
//!   binary re-run with [`NODE_ARG`]) running its own workers, joined over
//!   127.0.0.1 by the TCP transport. The driver steers the children over
//!   their standard input and output ([`node_main`]) and computes staleness
//!   from the leader's acknowledgments and the followers' watermark
//!   histories, both on `CLOCK_MONOTONIC`, which every process on the
//!   machine shares.
//!
//! In the one-node modes a watermark thread sets stable to the newest
//! commit timestamp handed out one 1 ms tick earlier; in the cluster the
//! leader appends a watermark entry every 1 ms.
//!
//! Per node: threads' CPU time comes from `/proc/self/task/*/schedstat`
//! (nanoseconds on CPU), summed over threads named `n<id>-...` (workers
//! `n<id>-w<k>`, the node's raft runtime `n<id>-raft`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use snapshot_engine::replication::{
    LocalCluster, NodeConfig, PendingWrite, Replica, ReplicaConfig, ReplicaError, ReplicaStats,
    TcpConfig, TcpNode, WriteTxn,
};
use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, Timestamp, TimestampUpdate, Txn, TxnOptions,
};

use crate::cli::DurabilityArg;
use crate::keys::Rng;
use crate::measure::{new_hist, Pct};
use crate::phases::{MEASURE, STOP, WARMUP};
use crate::progress::{Budget, Progress};

pub const DISTRICTS: u64 = 10;
pub const CUSTOMERS: u64 = 300;
pub const ITEMS: u64 = 10_000;
const INITIAL_LINES: u64 = 10;

#[derive(Clone, Debug)]
pub struct Params {
    pub threads: usize,
    pub warmup: f64,
    pub seconds: f64,
    /// When a durable node's (TCP, processes) raft log entry counts as
    /// stored.
    pub raft_log: DurabilityArg,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    #[serde(rename = "1 node, normal")]
    OneNormal,
    #[serde(rename = "1 node, fast")]
    OneFast,
    #[serde(rename = "leader + 2 followers")]
    Cluster,
    #[serde(rename = "leader + 2 followers, TCP")]
    ClusterTcp,
    #[serde(rename = "leader + 2 followers, processes")]
    ClusterProcesses,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::OneNormal,
        Mode::OneFast,
        Mode::Cluster,
        Mode::ClusterTcp,
        Mode::ClusterProcesses,
    ];
    /// The modes with a leader and followers.
    const CLUSTERS: [Mode; 3] = [Mode::Cluster, Mode::ClusterTcp, Mode::ClusterProcesses];
    pub fn name(self) -> &'static str {
        match self {
            Mode::OneNormal => "1 node, normal",
            Mode::OneFast => "1 node, fast",
            Mode::Cluster => "leader + 2 followers",
            Mode::ClusterTcp => "leader + 2 followers, TCP",
            Mode::ClusterProcesses => "leader + 2 followers, processes",
        }
    }
}

/// One node's share of a run.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct NodeOut {
    /// `leader` or `follower` (owned when read back from a node process).
    pub role: Cow<'static, str>,
    pub id: u64,
    pub ops_per_s: f64,
    pub new_order_per_s: f64,
    pub order_status_per_s: f64,
    pub new_order_conflicts: u64,
    /// Seconds on CPU of the node's threads per second of wall time.
    pub cpu_per_s: f64,
    pub ops_per_cpu_s: f64,
    pub latency_mean_ns: f64,
    pub latency_ns: Pct,
    pub new_order_latency_ns: Pct,
    /// Followers: commit returned on the leader -> this node's watermark
    /// covers it.
    pub staleness_ns: Option<Pct>,
    pub apply_commits_per_s: Option<f64>,
    pub apply_writes_per_s: Option<f64>,
    /// Leader: commits per log entry it proposed (group commit).
    pub commits_per_entry: Option<f64>,
    /// Syncs of the node's raft log per second (durable nodes: TCP and
    /// processes; 0 in process, where the log is in memory).
    pub log_syncs_per_s: f64,
    /// Their mean duration in nanoseconds (0: none).
    pub log_sync_mean_ns: f64,
}

impl NodeOut {
    /// The replica counters over the window (`s0` at its start, `s1` at its
    /// end): a leader's commits per log entry, a follower's apply rates.
    fn add_replica_stats(&mut self, s0: &ReplicaStats, s1: &ReplicaStats, secs: f64) {
        let syncs = s1.log_syncs - s0.log_syncs;
        self.log_syncs_per_s = syncs as f64 / secs;
        self.log_sync_mean_ns = if syncs > 0 {
            (s1.log_sync_ns - s0.log_sync_ns) as f64 / syncs as f64
        } else {
            0.0
        };
        if self.role == "leader" {
            let entries = s1.batches_proposed - s0.batches_proposed;
            self.commits_per_entry = (entries > 0)
                .then(|| (s1.commits_proposed - s0.commits_proposed) as f64 / entries as f64);
        } else {
            self.apply_commits_per_s =
                Some((s1.applied_commits - s0.applied_commits) as f64 / secs);
            self.apply_writes_per_s = Some((s1.applied_writes - s0.applied_writes) as f64 / secs);
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct RoundOut {
    pub round: usize,
    pub mode: Mode,
    pub seconds: f64,
    pub nodes: Vec<NodeOut>,
    pub total_ops_per_s: f64,
}

// ---- keys ---------------------------------------------------------------

fn district_key(d: u64) -> [u8; 2] {
    [b'd', d as u8]
}
fn customer_key(d: u64, c: u64) -> [u8; 4] {
    let c = (c as u16).to_be_bytes();
    [b'c', d as u8, c[0], c[1]]
}
/// Newest order first: the order id is stored inverted.
fn order_key(d: u64, c: u64, o: u64) -> Vec<u8> {
    let mut k = vec![b'o', d as u8];
    k.extend_from_slice(&(c as u16).to_be_bytes());
    k.extend_from_slice(&(u64::MAX - o).to_be_bytes());
    k
}
fn order_prefix(d: u64, c: u64) -> (Vec<u8>, Vec<u8>) {
    let mut lo = vec![b'o', d as u8];
    lo.extend_from_slice(&(c as u16).to_be_bytes());
    let mut hi = vec![b'o', d as u8];
    hi.extend_from_slice(&(c as u16 + 1).to_be_bytes());
    (lo, hi)
}
fn line_key(d: u64, o: u64, ol: u64) -> Vec<u8> {
    let mut k = vec![b'l', d as u8];
    k.extend_from_slice(&o.to_be_bytes());
    k.push(ol as u8);
    k
}
fn stock_key(i: u64) -> [u8; 5] {
    let i = (i as u32).to_be_bytes();
    [b's', i[0], i[1], i[2], i[3]]
}

fn u64_of(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("8-byte prefix"))
}

fn value(n: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0x5a; len.max(8)];
    v[..8].copy_from_slice(&n.to_le_bytes());
    v
}

/// The reads and writes the two transactions need, on a plain `Txn` and on
/// the leader's `WriteTxn` alike.
trait Kv {
    fn get_u64(&mut self, k: &[u8]) -> Result<Option<u64>, Error>;
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<(), Error>;
    fn scan_range(
        &mut self,
        lo: &[u8],
        hi: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error>;
}

/// Both transaction kinds have the inherent methods `Kv` needs under the
/// same names; `<$t>::put` names the inherent method, not this trait's.
macro_rules! kv_by_inherent_methods {
    ($t:ty) => {
        impl Kv for $t {
            fn get_u64(&mut self, k: &[u8]) -> Result<Option<u64>, Error> {
                self.get_with(k, |v| v.map(u64_of))
            }
            fn put(&mut self, k: &[u8], v: &[u8]) -> Result<(), Error> {
                <$t>::put(self, k, v)
            }
            fn scan_range(
                &mut self,
                lo: &[u8],
                hi: &[u8],
                f: impl FnMut(&[u8], &[u8]) -> bool,
            ) -> Result<(), Error> {
                self.scan(lo..hi, f)
            }
        }
    };
}
kv_by_inherent_methods!(Txn<'_, '_>);
kv_by_inherent_methods!(WriteTxn<'_, '_, '_>);

/// NewOrder: bump district `d`'s next order id, insert the order for
/// customer `c` and its 5-15 lines, update each line's stock row.
fn new_order(t: &mut impl Kv, rng: &mut Rng) -> Result<(), Error> {
    let d = rng.below(DISTRICTS);
    let c = rng.below(CUSTOMERS);
    let o = t.get_u64(&district_key(d))?.expect("district row");
    t.put(&district_key(d), &value(o + 1, 8))?;
    let lines = 5 + rng.below(11);
    t.put(&order_key(d, c, o), &value(lines, 24))?;
    for ol in 0..lines {
        let item = rng.below(ITEMS);
        let q = t.get_u64(&stock_key(item))?.expect("stock row");
        let q = if q > 10 { q - 1 } else { q + 91 };
        t.put(&stock_key(item), &value(q, 50))?;
        t.put(&line_key(d, o, ol), &value(item, 50))?;
    }
    Ok(())
}

/// OrderStatus: the customer, its newest order (first key of its order
/// range), that order's lines.
fn order_status(t: &mut impl Kv, rng: &mut Rng) -> Result<u64, Error> {
    let d = rng.below(DISTRICTS);
    let c = rng.below(CUSTOMERS);
    let mut acc = t.get_u64(&customer_key(d, c))?.expect("customer row");
    let (lo, hi) = order_prefix(d, c);
    let mut newest = None;
    t.scan_range(&lo, &hi, |k, v| {
        newest = Some((
            u64::MAX - u64::from_be_bytes(k[4..12].try_into().unwrap()),
            u64_of(v),
        ));
        false
    })?;
    let (o, lines) = newest.expect("every customer has an order");
    let mut n = 0;
    t.scan_range(&line_key(d, o, 0), &line_key(d, o, 255), |_, v| {
        acc = acc.wrapping_add(u64_of(v));
        n += 1;
        true
    })?;
    debug_assert_eq!(n, lines);
    Ok(acc.wrapping_add(n))
}

/// The initial rows, in batches: districts, customers with one order of
/// ten lines each, stock.
fn initial_rows() -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut rows = Vec::new();
    for d in 0..DISTRICTS {
        rows.push((district_key(d).to_vec(), value(CUSTOMERS, 8)));
        for c in 0..CUSTOMERS {
            rows.push((customer_key(d, c).to_vec(), value(c, 100)));
            rows.push((order_key(d, c, c), value(INITIAL_LINES, 24)));
            for ol in 0..INITIAL_LINES {
                rows.push((line_key(d, c, ol), value(ol, 50)));
            }
        }
    }
    for i in 0..ITEMS {
        rows.push((stock_key(i).to_vec(), value(50, 50)));
    }
    rows.chunks(2000).map(<[_]>::to_vec).collect()
}

// ---- CPU time per node ----------------------------------------------------

/// Nanoseconds on CPU of every thread named `n<id>-...`, by id.
fn cpu_by_node() -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in dir.flatten() {
        let p = t.path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        let Some(id) = comm
            .trim()
            .strip_prefix('n')
            .and_then(|s| s.split_once('-'))
            .and_then(|(id, _)| id.parse::<u64>().ok())
        else {
            continue;
        };
        let ns = std::fs::read_to_string(p.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        *out.entry(id).or_default() += ns;
    }
    out
}

// ---- one run --------------------------------------------------------------

struct Phase(AtomicU8);

impl Phase {
    fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct ThreadOut {
    new_orders: u64,
    order_status: u64,
    conflicts: u64,
    lat: Option<Histogram<u64>>,
    no_lat: Option<Histogram<u64>>,
    lat_sum: u128,
    /// (commit ts, when the leader's write returned), NewOrder only.
    commits: Vec<(Timestamp, Instant)>,
}

impl ThreadOut {
    fn new() -> ThreadOut {
        ThreadOut {
            lat: Some(new_hist()),
            no_lat: Some(new_hist()),
            ..ThreadOut::default()
        }
    }
    fn record(&mut self, ns: u64, new_order: bool) {
        self.lat.as_mut().unwrap().saturating_record(ns.max(1));
        self.lat_sum += ns as u128;
        if new_order {
            self.new_orders += 1;
            self.no_lat.as_mut().unwrap().saturating_record(ns.max(1));
        } else {
            self.order_status += 1;
        }
    }
}

/// How much nicer than the rest of the process every worker thread runs (in
/// every mode alike): a node's raft runtime, its state machine and the
/// one-node modes' watermark thread go first when the machine's cores are
/// short, as a deployment would give replication its own cores.
pub const WORKER_NICE: i32 = 5;

/// Lowers the calling thread's priority by `by` nice levels (Linux; a no-op
/// where it fails).
fn lower_priority(by: i32) {
    // SAFETY: gettid/getpriority/setpriority take plain integers and touch
    // only the calling thread's scheduling attributes.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (now + by).min(19));
    }
}

/// Runs `body` on `threads` threads named `n<node>-w<k>` until STOP;
/// `body(k, out, measuring)`.
fn spawn_workers<'s, F>(
    sc: &'s std::thread::Scope<'s, '_>,
    node: u64,
    threads: usize,
    body: F,
) -> Vec<std::thread::ScopedJoinHandle<'s, ThreadOut>>
where
    F: Fn(usize) -> ThreadOut + Send + Sync + Copy + 's,
{
    (0..threads)
        .map(|k| {
            std::thread::Builder::new()
                .name(format!("n{node}-w{k}"))
                .spawn_scoped(sc, move || {
                    lower_priority(WORKER_NICE);
                    body(k)
                })
                .expect("spawn worker")
        })
        .collect()
}

/// Warm-up, then the measured window; CPU per node is sampled at both ends.
fn phases(
    phase: &Phase,
    p: &Params,
    pb: &ProgressBar,
    before: impl FnOnce(),
) -> (f64, HashMap<u64, u64>) {
    let sleep = |secs: f64| {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut last = Instant::now();
        let mut bar = Budget::new(pb, secs);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
            let now = Instant::now();
            bar.advance(now - last);
            last = now;
        }
    };
    sleep(p.warmup);
    before();
    let c0 = cpu_by_node();
    let t0 = Instant::now();
    phase.0.store(MEASURE, Ordering::Relaxed);
    sleep(p.seconds);
    // Sampled before STOP: a thread that has exited is gone from /proc.
    let c1 = cpu_by_node();
    let secs = t0.elapsed().as_secs_f64();
    phase.0.store(STOP, Ordering::Relaxed);
    let cpu = c1
        .into_iter()
        .map(|(id, ns)| (id, ns.saturating_sub(c0.get(&id).copied().unwrap_or(0))))
        .collect();
    (secs, cpu)
}

fn node_out(role: &'static str, id: u64, outs: &[ThreadOut], secs: f64, cpu_ns: u64) -> NodeOut {
    let (mut lat, mut no_lat) = (new_hist(), new_hist());
    let mut sum = 0u128;
    for o in outs {
        lat.add(o.lat.as_ref().unwrap()).expect("bounds");
        no_lat.add(o.no_lat.as_ref().unwrap()).expect("bounds");
        sum += o.lat_sum;
    }
    let no: u64 = outs.iter().map(|o| o.new_orders).sum();
    let os: u64 = outs.iter().map(|o| o.order_status).sum();
    let ops = (no + os) as f64;
    let cpu_s = cpu_ns as f64 / 1e9;
    NodeOut {
        role: Cow::Borrowed(role),
        id,
        ops_per_s: ops / secs,
        new_order_per_s: no as f64 / secs,
        order_status_per_s: os as f64 / secs,
        new_order_conflicts: outs.iter().map(|o| o.conflicts).sum(),
        cpu_per_s: cpu_s / secs,
        ops_per_cpu_s: if cpu_s > 0.0 { ops / cpu_s } else { 0.0 },
        latency_mean_ns: if no + os > 0 {
            sum as f64 / (no + os) as f64
        } else {
            0.0
        },
        latency_ns: Pct::of(&lat),
        new_order_latency_ns: Pct::of(&no_lat),
        staleness_ns: None,
        apply_commits_per_s: None,
        apply_writes_per_s: None,
        commits_per_entry: None,
        log_syncs_per_s: 0.0,
        log_sync_mean_ns: 0.0,
    }
}

/// One engine, no replication.
fn run_one(p: &Params, fast: bool, round: usize, pb: &ProgressBar) -> RoundOut {
    let e = Engine::new(EngineConfig {
        max_sessions: p.threads + 8,
        ..EngineConfig::default()
    })
    .expect("the CLI bounds the threads (MAX_THREADS) well below EngineConfig::MAX_SESSIONS");
    {
        let mut s = e.session().expect("session");
        for batch in initial_rows() {
            let mut t = s.begin(&TxnOptions::default()).expect("begin");
            for (k, v) in &batch {
                t.put(k, v).expect("load");
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
    let phase = Phase(AtomicU8::new(WARMUP));
    let ts = AtomicU64::new(1);
    let stable = AtomicU64::new(1);
    let (outs, secs, cpu) = std::thread::scope(|sc| {
        let (e, phase, ts, stable) = (&e, &phase, &ts, &stable);
        // The watermark: stable = the newest timestamp handed out one tick
        // ago (raising stable waits for commits at or below it).
        let tk = std::thread::Builder::new()
            .name("n0-tk".into())
            .spawn_scoped(sc, move || {
                let mut prev = 1;
                while phase.get() != STOP {
                    std::thread::sleep(Duration::from_millis(1));
                    let now = ts.load(Ordering::Relaxed);
                    if prev > stable.load(Ordering::Relaxed) {
                        e.set_timestamps(TimestampUpdate {
                            oldest: Some(Timestamp::new(prev.saturating_sub(1000).max(1))),
                            stable: Some(Timestamp::new(prev)),
                            durable: None,
                        })
                        .expect("forward only");
                        stable.store(prev, Ordering::Relaxed);
                    }
                    prev = now;
                }
            })
            .expect("spawn");
        let hs = spawn_workers(sc, 0, p.threads, move |k| {
            let mut s = e.session().expect("session");
            let mut rng = Rng::new(0x5000 + k as u64);
            let mut out = ThreadOut::new();
            let ro = TxnOptions {
                read_at_stable: fast,
                ..TxnOptions::default()
            };
            loop {
                let ph = phase.get();
                if ph == STOP {
                    break;
                }
                let t0 = Instant::now();
                let is_new_order = rng.below(10) == 0;
                if is_new_order {
                    let mut t = s.begin(&TxnOptions::default()).expect("begin");
                    match new_order(&mut t, &mut rng) {
                        Ok(()) => loop {
                            let c = ts.fetch_add(1, Ordering::Relaxed) + 1;
                            match t.try_commit(CommitOptions::at(c)) {
                                Ok(()) => break,
                                // Refused for a timestamp: handed back open.
                                Err(e)
                                    if matches!(
                                        e.error(),
                                        Error::CommitTimestampNotAfterStable { .. }
                                    ) =>
                                {
                                    t = e
                                        .into_txn()
                                        .expect("a timestamp error keeps the transaction");
                                }
                                Err(err) => panic!("commit: {err}"),
                            }
                        },
                        Err(Error::WriteConflict { .. }) => {
                            drop(t);
                            if ph == MEASURE {
                                out.conflicts += 1;
                            }
                            continue;
                        }
                        Err(err) => panic!("NewOrder: {err}"),
                    }
                } else {
                    let mut t = s.begin(&ro).expect("begin");
                    if !fast {
                        t.set_read_timestamp(Timestamp::new(stable.load(Ordering::Relaxed)))
                            .expect("read ts");
                    }
                    black_box(order_status(&mut t, &mut rng).expect("OrderStatus"));
                    t.commit(CommitOptions::default())
                        .expect("read-only commit");
                }
                if ph == MEASURE {
                    out.record(t0.elapsed().as_nanos() as u64, is_new_order);
                }
            }
            out
        });
        let (secs, cpu) = phases(phase, p, pb, || {});
        let outs: Vec<ThreadOut> = hs.into_iter().map(|h| h.join().expect("worker")).collect();
        tk.join().expect("watermark thread");
        (outs, secs, cpu)
    });
    let node = node_out("node", 0, &outs, secs, cpu.get(&0).copied().unwrap_or(0));
    RoundOut {
        round,
        mode: if fast { Mode::OneFast } else { Mode::OneNormal },
        seconds: secs,
        total_ops_per_s: node.ops_per_s,
        nodes: vec![node],
    }
}

/// How many NewOrders one leader worker keeps in flight (committed on the
/// leader, replication under way) before it waits for the oldest.
pub const PIPELINE: usize = 16;

/// One worker on a replica: OrderStatus at the replica's watermark, and on
/// the leader (`role` "leader") also NewOrder, one transaction in ten.
/// NewOrders are pipelined ([`Replica::submit`]): the worker goes on while up
/// to [`PIPELINE`] of its writes replicate, and counts a NewOrder (and its
/// latency, begin to acknowledgement) when its entry is committed.
fn replica_worker(r: &Replica, phase: &Phase, role: &str, seed: u64) -> ThreadOut {
    let writes = role == "leader";
    let reader = r.reader();
    let mut s = reader.engine().session().expect("session");
    let mut rng = Rng::new(seed);
    let mut out = ThreadOut::new();
    let mut inflight: VecDeque<(PendingWrite<()>, Instant, u8)> = VecDeque::new();
    // Waits for the oldest write in flight; counts it if it began and was
    // acknowledged while measuring.
    let settle = |out: &mut ThreadOut, (w, t0, ph0): (PendingWrite<()>, Instant, u8)| {
        let now_ph = phase.get();
        match w.wait_timed() {
            Ok(((), ts, at)) => {
                if ph0 == MEASURE && now_ph == MEASURE {
                    out.commits.push((ts, at));
                    out.record(at.duration_since(t0).as_nanos() as u64, true);
                }
            }
            Err(e) => panic!("NewOrder on the leader: {e}"),
        }
    };
    loop {
        let ph = phase.get();
        if ph == STOP {
            break;
        }
        while inflight.front().is_some_and(|f| f.0.is_done()) {
            settle(&mut out, inflight.pop_front().unwrap());
        }
        let t0 = Instant::now();
        // A follower draws nothing here, so its sequence of keys is the
        // same as when it had a loop of its own.
        let is_new_order = writes && rng.below(10) == 0;
        if is_new_order {
            if inflight.len() >= PIPELINE {
                settle(&mut out, inflight.pop_front().unwrap());
            }
            match r.submit(|t| new_order(t, &mut rng)) {
                Ok(w) => inflight.push_back((w, t0, ph)),
                Err(ReplicaError::Engine(Error::WriteConflict { .. })) => {
                    if ph == MEASURE {
                        out.conflicts += 1;
                    }
                }
                Err(e) => panic!("NewOrder on the leader: {e}"),
            }
        } else {
            let mut t = reader
                .begin(&mut s, Timestamp::NONE, Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("read at the {role}'s watermark: {e}"));
            black_box(order_status(&mut t, &mut rng).expect("OrderStatus"));
            t.commit(CommitOptions::default())
                .expect("read-only commit");
            if ph == MEASURE {
                out.record(t0.elapsed().as_nanos() as u64, false);
            }
        }
    }
    // Acknowledged after the window: not counted, but waited for.
    while let Some(w) = inflight.pop_front() {
        settle(&mut out, w);
    }
    out
}

/// Commit returned on the leader -> the follower's watermark covers it.
fn staleness(commits: &[(Timestamp, Instant)], history: &[(Timestamp, Instant)]) -> Pct {
    let mut h = new_hist();
    for &(ts, at) in commits {
        let i = history.partition_point(|&(w, _)| w < ts);
        if let Some(&(_, seen)) = history.get(i) {
            h.saturating_record(seen.saturating_duration_since(at).as_nanos().max(1) as u64);
        }
    }
    Pct::of(&h)
}

/// The three nodes of a cluster mode: in-process router or TCP on loopback.
enum Nodes {
    Local(Box<LocalCluster>),
    Tcp(Vec<TcpNode>),
}

impl Nodes {
    /// A cluster in process, or over TCP with the nodes' directories (their
    /// raft logs) under `dir`.
    fn start(cfg: ReplicaConfig, tcp: Option<&Path>) -> Nodes {
        let Some(dir) = tcp else {
            return Nodes::Local(Box::new(
                LocalCluster::start(3, cfg).expect("a 3-node cluster"),
            ));
        };
        let addrs = free_addrs();
        let nodes = addrs
            .keys()
            .map(|&id| {
                TcpNode::start(tcp_node_config(id, &addrs, dir, cfg.clone())).expect("a TCP node")
            })
            .collect();
        Nodes::Tcp(nodes)
    }

    fn replicas(&self) -> Vec<&Replica> {
        match self {
            Nodes::Local(c) => c.ids().into_iter().filter_map(|id| c.node(id)).collect(),
            Nodes::Tcp(v) => v.iter().map(TcpNode::replica).collect(),
        }
    }

    fn node(&self, id: u64) -> &Replica {
        self.replicas()
            .into_iter()
            .find(|r| r.id() == id)
            .expect("a running node")
    }

    fn wait_for_leader(&self) -> u64 {
        let t = Instant::now();
        loop {
            if let Some(r) = self.replicas().into_iter().find(|r| r.is_leader_ready()) {
                return r.id();
            }
            assert!(t.elapsed() < Duration::from_secs(20), "no leader in 20 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Node `id` of a TCP cluster at `addrs`, its files under `dir`.
fn tcp_node_config(
    id: u64,
    addrs: &BTreeMap<u64, SocketAddr>,
    dir: &Path,
    replica: ReplicaConfig,
) -> NodeConfig {
    NodeConfig {
        id,
        addr: addrs[&id],
        peers: addrs
            .iter()
            .filter(|(&p, _)| p != id)
            .map(|(&p, &a)| (p, a))
            .collect(),
        data_dir: dir.join(format!("n{id}")),
        init: id == 1,
        replica,
        // This run's own cluster, named after its directory (the driver's
        // pid and the round, the same in the node processes it spawns): a
        // node of another run that takes one of these ports
        // (`free_addrs`) acts on none of this run's frames.
        tcp: TcpConfig {
            cluster: dir
                .file_name()
                .and_then(|n| n.to_str())
                .filter(|n| n.len() <= 64)
                .unwrap_or("snapshot-bench")
                .to_string(),
            ..TcpConfig::default()
        },
    }
}

/// Three free ports on 127.0.0.1, by node id 1 to 3, below Linux's
/// ephemeral range (32768 and up by default): a port `bind(0)` hands out
/// comes from that range, which every `connect` also draws its local port
/// from, so another process's connection could take it between this probe
/// and the node's bind. Falls back to `bind(0)` if none is free there.
fn free_addrs() -> BTreeMap<u64, SocketAddr> {
    let start = u64::from(std::process::id()) * 7_919;
    let mut held = Vec::new();
    let mut n = 0u64;
    while held.len() < 3 && n < 12_000 {
        let port = 20_000 + ((start + n * 4_999) % 12_000) as u16;
        n += 1;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            held.push(l);
        }
    }
    while held.len() < 3 {
        held.push(std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"));
    }
    // The listeners are held until all three are chosen, so no two match.
    (1..=3u64)
        .zip(held)
        .map(|(id, l)| (id, l.local_addr().expect("its address")))
        .collect()
}

/// A `--raft-log` mode's name, as a node process is told it.
fn raft_log_name(m: DurabilityArg) -> String {
    m.to_possible_value()
        .expect("every mode has a name")
        .get_name()
        .to_string()
}

/// Every cluster mode's node configuration.
fn cluster_config(threads: usize, raft_log: DurabilityArg) -> ReplicaConfig {
    ReplicaConfig {
        log: snapshot_engine::replication::LogOptions {
            durability: raft_log.durability(),
            ..Default::default()
        },
        record_watermarks: true,
        engine: EngineConfig {
            max_sessions: threads + 16,
            ..EngineConfig::default()
        },
        ..ReplicaConfig::default()
    }
}

/// Loads the initial rows through the leader's log; the last commit's
/// timestamp.
fn load_through(l: &Replica) -> Timestamp {
    let mut last = Timestamp::NONE;
    for batch in initial_rows() {
        let (_, ts) = l
            .write(|t| {
                for (k, v) in &batch {
                    t.put(k, v)?;
                }
                Ok(())
            })
            .expect("load through the log");
        last = ts;
    }
    last
}

fn run_cluster(p: &Params, round: usize, pb: &ProgressBar, tcp: bool) -> RoundOut {
    // Over TCP the nodes are durable: a fresh directory per round.
    let dir = tcp.then(|| {
        TempDir(
            std::env::temp_dir().join(format!("snapshot-bench-{}-tcp-{round}", std::process::id())),
        )
    });
    let c = Nodes::start(
        cluster_config(p.threads, p.raft_log),
        dir.as_ref().map(|d| d.0.as_path()),
    );
    let lid = c.wait_for_leader();
    let l = c.node(lid);
    let last = load_through(l);
    let fids: Vec<u64> = c
        .replicas()
        .iter()
        .map(|r| r.id())
        .filter(|&id| id != lid)
        .collect();
    let t = Instant::now();
    for r in c.replicas() {
        while r.watermark().unwrap_or(Timestamp::NONE) < last {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "every node applied the load"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let phase = Phase(AtomicU8::new(WARMUP));
    let mut apply0 = HashMap::new();
    let (louts, fouts, secs, cpu) = std::thread::scope(|sc| {
        let phase = &phase;
        let lh = spawn_workers(sc, lid, p.threads, move |k| {
            replica_worker(l, phase, "leader", 0x6000 + k as u64)
        });
        let fh: Vec<_> = fids
            .iter()
            .map(|&f| {
                let node = c.node(f);
                spawn_workers(sc, f, p.threads, move |k| {
                    replica_worker(node, phase, "follower", 0x7000 + node.id() * 100 + k as u64)
                })
            })
            .collect();
        let (secs, cpu) = phases(phase, p, pb, || {
            for &f in &fids {
                apply0.insert(f, c.node(f).stats());
            }
            apply0.insert(lid, l.stats());
        });
        let louts: Vec<ThreadOut> = lh.into_iter().map(|h| h.join().expect("leader")).collect();
        let fouts: Vec<Vec<ThreadOut>> = fh
            .into_iter()
            .map(|hs| {
                hs.into_iter()
                    .map(|h| h.join().expect("follower"))
                    .collect()
            })
            .collect();
        (louts, fouts, secs, cpu)
    });
    let mut commits: Vec<(Timestamp, Instant)> = louts
        .iter()
        .flat_map(|o| o.commits.iter().copied())
        .collect();
    commits.sort();
    let mut leader = node_out(
        "leader",
        lid,
        &louts,
        secs,
        cpu.get(&lid).copied().unwrap_or(0),
    );
    leader.add_replica_stats(&apply0[&lid], &l.stats(), secs);
    let mut nodes = vec![leader];
    for (&f, outs) in fids.iter().zip(&fouts) {
        let node = c.node(f);
        let mut n = node_out("follower", f, outs, secs, cpu.get(&f).copied().unwrap_or(0));
        n.staleness_ns = Some(staleness(&commits, &node.watermark_history()));
        n.add_replica_stats(&apply0[&f], &node.stats(), secs);
        nodes.push(n);
    }
    drop(c);
    RoundOut {
        round,
        mode: if tcp { Mode::ClusterTcp } else { Mode::Cluster },
        seconds: secs,
        total_ops_per_s: nodes.iter().map(|n| n.ops_per_s).sum(),
        nodes,
    }
}

pub fn run(mode: Mode, p: &Params, round: usize, pb: &ProgressBar) -> RoundOut {
    match mode {
        Mode::OneNormal => run_one(p, false, round, pb),
        Mode::OneFast => run_one(p, true, round, pb),
        Mode::Cluster => run_cluster(p, round, pb, false),
        Mode::ClusterTcp => run_cluster(p, round, pb, true),
        Mode::ClusterProcesses => run_processes(p, round, pb),
    }
}

// ---- nodes as processes -----------------------------------------------------

/// The first argument that makes this binary one node of the `processes`
/// mode: `snapshot-bench __replicated-node ID THREADS ADDR,ADDR,ADDR DIR`
/// (node ids 1 to 3 in address order; node 1 initializes the cluster). Only
/// the driver passes it.
pub const NODE_ARG: &str = "__replicated-node";

/// Nanoseconds on `CLOCK_MONOTONIC`, the clock `Instant` reads on Linux and
/// every process on the machine shares.
fn monotonic_ns() -> u64 {
    crate::measure::clock_ns(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always readable")
}

/// Maps this process's `Instant`s to [`monotonic_ns`].
#[derive(Clone, Copy)]
struct Clock {
    at: Instant,
    ns: u64,
}

impl Clock {
    fn now() -> Clock {
        Clock {
            at: Instant::now(),
            ns: monotonic_ns(),
        }
    }
    fn ns(self, t: Instant) -> u64 {
        match t.checked_duration_since(self.at) {
            Some(d) => self.ns + d.as_nanos() as u64,
            None => self.ns - self.at.duration_since(t).as_nanos() as u64,
        }
    }
    fn instant(self, ns: u64) -> Instant {
        if ns >= self.ns {
            self.at + Duration::from_nanos(ns - self.ns)
        } else {
            self.at - Duration::from_nanos(self.ns - ns)
        }
    }
}

/// What a node process reports after `run`.
#[derive(Serialize, Deserialize)]
struct NodeReport {
    node: NodeOut,
    /// Leader: (commit timestamp, acknowledged at, monotonic ns).
    commits: Vec<(u64, u64)>,
    /// Follower: (watermark, applied at, monotonic ns).
    history: Vec<(u64, u64)>,
}

/// The child side of the `processes` mode: starts node `ID` and answers one
/// line per command on standard input (`status`: `status LEADER WATERMARK`;
/// `load`: `loaded TS`; `run WARMUP SECONDS`: `result JSON`), until its
/// standard input closes. Exit code 2 on bad arguments or a bad command.
pub fn node_main(args: &[String]) -> i32 {
    let usage = || {
        eprintln!("snapshot-bench {NODE_ARG}: want ID THREADS ADDR,ADDR,ADDR DIR sync|periodic|none (internal; the replicated workload's processes mode passes them)");
        2
    };
    let [id, threads, addrs, dir, raft_log] = args else {
        return usage();
    };
    let Ok(raft_log) = DurabilityArg::from_str(raft_log, false) else {
        return usage();
    };
    let (Ok(id), Ok(threads)) = (id.parse::<u64>(), threads.parse::<usize>()) else {
        return usage();
    };
    let Ok(addrs) = addrs
        .split(',')
        .map(str::parse::<SocketAddr>)
        .collect::<Result<Vec<_>, _>>()
    else {
        return usage();
    };
    if addrs.len() != 3 || !(1..=3).contains(&id) || !(1..=64).contains(&threads) {
        return usage();
    }
    let addrs: BTreeMap<u64, SocketAddr> = (1..).zip(addrs).collect();
    let cfg = tcp_node_config(
        id,
        &addrs,
        Path::new(dir),
        cluster_config(threads, raft_log),
    );
    let node = match TcpNode::start(cfg) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("snapshot-bench {NODE_ARG}: node {id}: {e}");
            return 1;
        }
    };
    let r = node.replica();
    let clock = Clock::now();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["status"] => format!(
                "status {} {}",
                u8::from(r.is_leader_ready()),
                r.watermark().unwrap_or(Timestamp::NONE).get()
            ),
            ["load"] => format!("loaded {}", load_through(r).get()),
            ["run", warmup, seconds] => {
                let (Ok(warmup), Ok(seconds)) = (warmup.parse(), seconds.parse()) else {
                    eprintln!("snapshot-bench {NODE_ARG}: bad command {line:?}");
                    return 2;
                };
                let p = Params {
                    threads,
                    warmup,
                    seconds,
                    raft_log,
                };
                let report = node_run(r, &p, clock);
                format!("result {}", serde_json::to_string(&report).expect("json"))
            }
            _ => {
                eprintln!("snapshot-bench {NODE_ARG}: bad command {line:?}");
                return 2;
            }
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    drop(node);
    0
}

/// One measured run of this node process's workers: the mix on the leader,
/// OrderStatus on a follower.
fn node_run(r: &Replica, p: &Params, clock: Clock) -> NodeReport {
    let id = r.id();
    let role = if r.is_leader_ready() {
        "leader"
    } else {
        "follower"
    };
    let phase = Phase(AtomicU8::new(WARMUP));
    let mut stats0 = None;
    let (outs, secs, cpu) = std::thread::scope(|sc| {
        let phase = &phase;
        let hs = spawn_workers(sc, id, p.threads, move |k| {
            replica_worker(r, phase, role, 0x8000 + id * 100 + k as u64)
        });
        let (secs, cpu) = phases(phase, p, &ProgressBar::hidden(), || {
            stats0 = Some(r.stats());
        });
        let outs: Vec<ThreadOut> = hs.into_iter().map(|h| h.join().expect("worker")).collect();
        (outs, secs, cpu)
    });
    let mut node = node_out(role, id, &outs, secs, cpu.get(&id).copied().unwrap_or(0));
    node.add_replica_stats(&stats0.expect("phases ran the hook"), &r.stats(), secs);
    let mut history = Vec::new();
    if role != "leader" {
        history = r
            .watermark_history()
            .into_iter()
            .map(|(ts, at)| (ts.get(), clock.ns(at)))
            .collect();
    }
    let commits = outs
        .iter()
        .flat_map(|o| o.commits.iter().map(|&(ts, at)| (ts.get(), clock.ns(at))))
        .collect();
    NodeReport {
        node,
        commits,
        history,
    }
}

/// One node process, driven over its standard input and output.
struct NodeProcess {
    child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
}

impl NodeProcess {
    fn spawn(
        id: u64,
        threads: usize,
        addrs: &BTreeMap<u64, SocketAddr>,
        dir: &Path,
        raft_log: DurabilityArg,
    ) -> Self {
        let list: Vec<String> = addrs.values().map(SocketAddr::to_string).collect();
        let mut child = Command::new(std::env::current_exe().expect("this binary's path"))
            .arg(NODE_ARG)
            .arg(id.to_string())
            .arg(threads.to_string())
            .arg(list.join(","))
            .arg(dir)
            .arg(raft_log_name(raft_log))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a node process");
        let to = child.stdin.take();
        let from = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut n = NodeProcess { child, to, from };
        let first = n.line();
        assert_eq!(first, "ready", "node process {id} said {first:?}");
        n
    }

    fn send(&mut self, cmd: &str) {
        let to = self.to.as_mut().expect("stdin open until drop");
        writeln!(to, "{cmd}")
            .and_then(|()| to.flush())
            .expect("a node process took a command");
    }

    fn line(&mut self) -> String {
        let mut s = String::new();
        let n = self
            .from
            .read_line(&mut s)
            .expect("a node process's output");
        assert!(n > 0, "a node process ended early (see its stderr above)");
        s.trim_end().to_string()
    }

    fn ask(&mut self, cmd: &str) -> String {
        self.send(cmd);
        self.line()
    }

    /// (leader ready, watermark).
    fn status(&mut self) -> (bool, u64) {
        let l = self.ask("status");
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["status", lead, wm] => (*lead == "1", wm.parse().expect("a watermark")),
            _ => panic!("node process status: {l:?}"),
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        // A closed standard input ends the node; one that does not end in
        // 10 s is killed.
        drop(self.to.take());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes a directory tree when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_processes(p: &Params, round: usize, pb: &ProgressBar) -> RoundOut {
    let dir = TempDir(std::env::temp_dir().join(format!(
        "snapshot-bench-{}-procs-{round}",
        std::process::id()
    )));
    let addrs = free_addrs();
    let mut nodes: Vec<NodeProcess> = addrs
        .keys()
        .map(|&id| NodeProcess::spawn(id, p.threads, &addrs, &dir.0, p.raft_log))
        .collect();
    let t = Instant::now();
    let lead = loop {
        if let Some(i) = (0..nodes.len()).find(|&i| nodes[i].status().0) {
            break i;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no leader in 20 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    let loaded = nodes[lead].ask("load");
    let last: u64 = loaded
        .strip_prefix("loaded ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("node process load: {loaded:?}"));
    let t = Instant::now();
    for n in &mut nodes {
        while n.status().1 < last {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "every node applied the load"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let cmd = format!("run {} {}", p.warmup, p.seconds);
    for n in &mut nodes {
        n.send(&cmd);
    }
    let reports: Vec<NodeReport> = nodes
        .iter_mut()
        .map(|n| {
            let l = n.line();
            let json = l
                .strip_prefix("result ")
                .unwrap_or_else(|| panic!("node process run: {l:?}"));
            serde_json::from_str(json).expect("a node process's report")
        })
        .collect();
    pb.inc(((p.warmup + p.seconds) * 1000.0) as u64);
    drop(nodes);
    let secs = p.seconds;
    let clock = Clock::now();
    let at = |ns: u64| clock.instant(ns);
    let mut commits: Vec<(Timestamp, Instant)> = reports[lead]
        .commits
        .iter()
        .map(|&(ts, ns)| (Timestamp::new(ts), at(ns)))
        .collect();
    commits.sort();
    let mut out = vec![reports[lead].node.clone()];
    for (i, r) in reports.iter().enumerate() {
        if i == lead {
            continue;
        }
        let history: Vec<(Timestamp, Instant)> = r
            .history
            .iter()
            .map(|&(ts, ns)| (Timestamp::new(ts), at(ns)))
            .collect();
        let mut n = r.node.clone();
        n.staleness_ns = Some(staleness(&commits, &history));
        out.push(n);
    }
    RoundOut {
        round,
        mode: Mode::ClusterProcesses,
        seconds: secs,
        total_ops_per_s: out.iter().map(|n| n.ops_per_s).sum(),
        nodes: out,
    }
}

// ---- the report -------------------------------------------------------------

/// `snapshot-bench replicated`: every mode once per round, the order
/// alternating between rounds; prints the table (or JSON).
pub fn main(p: &Params, rounds: usize, json: bool, progress: bool) {
    let per_run = (p.warmup + p.seconds) * 1000.0;
    let pg = Progress::new((rounds * Mode::ALL.len()) as u64 * per_run as u64, progress);
    let pb = &pg.bar;
    let mut res: Vec<RoundOut> = Vec::new();
    for r in 0..rounds {
        let mut modes = Mode::ALL.to_vec();
        if r % 2 == 1 {
            modes.reverse();
        }
        for m in modes {
            pb.set_message(format!("round {}/{rounds} {}", r + 1, m.name()));
            res.push(run(m, p, r, pb));
            pg.line(format_args!("round {}/{rounds} {} done", r + 1, m.name()));
        }
    }
    pb.finish_and_clear();
    if json {
        let v = serde_json::json!({
            "workload": "replicated",
            "threads_per_node": p.threads,
            "seconds": p.seconds,
            "warmup": p.warmup,
            "rounds": res,
        });
        crate::print_json(&v);
        return;
    }
    print_table(p, rounds, &res);
}

fn med_range(v: &[f64]) -> String {
    let (lo, hi) = crate::stats::min_max(v);
    format!(
        "{} ({}-{})",
        crate::fmt::fmt_int(crate::stats::median(v)),
        crate::fmt::fmt_int(lo),
        crate::fmt::fmt_int(hi)
    )
}

/// Nanoseconds as microseconds (every latency column of the table).
fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// Nanoseconds as milliseconds (every staleness figure).
fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

fn print_table(p: &Params, rounds: usize, res: &[RoundOut]) {
    use crate::fmt::{fmt_int, plural};
    use crate::stats::median;
    println!(
        "replicated (Mako): TPC-C-shaped mix over the KV store, 10% NewOrder / 90% OrderStatus; {} per node; {} s after {} s warm-up; {}, mode order alternating; medians (min-max) over rounds; latencies in microseconds",
        plural(p.threads as u64, "worker thread"),
        p.seconds,
        p.warmup,
        plural(rounds as u64, "round")
    );
    println!(
        "NOTE: the three nodes (workers and raft runtimes) share this machine's cores with each other and with other users, so per-node throughput here cannot add up the way it does on three machines; ops per CPU-second is the number to judge scaling by. Cluster modes: the leader's NewOrders are pipelined (up to {PIPELINE} in flight per worker) and counted when acknowledged (replicated to a majority); in process: raft logs in memory; TCP: three nodes in this process, joined over 127.0.0.1 by the TCP transport, each with its raft log on disk (synced before an entry counts as stored); processes: each node a child process of its own (its workers, its raft runtime and its log on disk), joined the same way."
    );
    println!(
        "{:<32} {:<10} {:>28} {:>11} {:>13} {:>7} {:>13} {:>12} {:>11} {:>11} {:>10} {:>8} {:>11} {:>12}",
        "mode",
        "node",
        "ops/s med (min-max)",
        "NewOrder/s",
        "OrderStatus/s",
        "CPU/s",
        "ops/CPU-s",
        "lat mean us",
        "lat p50 us",
        "lat p99 us",
        "NO p50 us",
        "txn/entry",
        "log syncs/s",
        "sync mean us",
    );
    for m in Mode::ALL {
        let runs: Vec<&RoundOut> = res.iter().filter(|r| r.mode == m).collect();
        let slots = runs.first().map_or(0, |r| r.nodes.len());
        for i in 0..slots {
            let ns: Vec<&NodeOut> = runs.iter().map(|r| &r.nodes[i]).collect();
            let col = |f: fn(&NodeOut) -> f64| ns.iter().map(|n| f(n)).collect::<Vec<f64>>();
            let label = match (ns[0].role.as_ref(), i) {
                ("follower", i) => format!("follower {i}"),
                (r, _) => r.to_string(),
            };
            println!(
                "{:<32} {:<10} {:>28} {:>11} {:>13} {:>7.2} {:>13} {:>12} {:>11} {:>11} {:>10} {:>8} {:>11} {:>12}",
                if i == 0 { m.name() } else { "" },
                label,
                med_range(&col(|n| n.ops_per_s)),
                fmt_int(median(&col(|n| n.new_order_per_s))),
                fmt_int(median(&col(|n| n.order_status_per_s))),
                median(&col(|n| n.cpu_per_s)),
                fmt_int(median(&col(|n| n.ops_per_cpu_s))),
                us(median(&col(|n| n.latency_mean_ns))),
                us(median(&col(|n| n.latency_ns.p50 as f64))),
                us(median(&col(|n| n.latency_ns.p99 as f64))),
                if ns[0].new_order_per_s > 0.0 {
                    us(median(&col(|n| n.new_order_latency_ns.p50 as f64)))
                } else {
                    "-".to_string()
                },
                if ns[0].commits_per_entry.is_some() {
                    format!("{:.1}", median(&col(|n| n.commits_per_entry.unwrap_or(0.0))))
                } else {
                    "-".to_string()
                },
                fmt_int(median(&col(|n| n.log_syncs_per_s))),
                if ns[0].log_syncs_per_s > 0.0 {
                    us(median(&col(|n| n.log_sync_mean_ns)))
                } else {
                    "-".to_string()
                },
            );
        }
        if slots > 1 {
            let tot: Vec<f64> = runs.iter().map(|r| r.total_ops_per_s).collect();
            println!("{:<32} {:<10} {:>28}", "", "total", med_range(&tot));
        }
    }
    println!("followers: staleness (ms) = leader's NewOrder acknowledged -> the follower's watermark covers it; apply = commit entries (and their writes) installed per second");
    let normal: Vec<&RoundOut> = res.iter().filter(|r| r.mode == Mode::OneNormal).collect();
    let single_no = median(
        &normal
            .iter()
            .map(|r| r.nodes[0].new_order_per_s)
            .collect::<Vec<_>>(),
    );
    let single_eff = median(
        &normal
            .iter()
            .map(|r| r.nodes[0].ops_per_cpu_s)
            .collect::<Vec<_>>(),
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    for m in Mode::CLUSTERS {
        let cluster: Vec<&RoundOut> = res.iter().filter(|r| r.mode == m).collect();
        let Some(first) = cluster.first() else {
            continue;
        };
        for i in 1..first.nodes.len() {
            let ns: Vec<&NodeOut> = cluster.iter().map(|r| &r.nodes[i]).collect();
            let st = |f: fn(&Pct) -> u64| {
                median(
                    &ns.iter()
                        .map(|n| n.staleness_ns.map_or(0, |s| f(&s)) as f64)
                        .collect::<Vec<_>>(),
                )
            };
            let eff = median(&ns.iter().map(|n| n.ops_per_cpu_s).collect::<Vec<_>>());
            println!(
                "  {}, follower {i}: staleness p50 {} ms, p99 {} ms, max {} ms; apply {} commits/s, {} writes/s",
                m.name(),
                ms(st(|s| s.p50)),
                ms(st(|s| s.p99)),
                ms(st(|s| s.max)),
                fmt_int(median(
                    &ns.iter()
                        .map(|n| n.apply_commits_per_s.unwrap_or(0.0))
                        .collect::<Vec<_>>()
                )),
                fmt_int(median(
                    &ns.iter()
                        .map(|n| n.apply_writes_per_s.unwrap_or(0.0))
                        .collect::<Vec<_>>()
                )),
            );
            println!(
                "  verdict {}, follower {i}: staleness p99 {} ms <= 5 ms: {}; p50 {} ms <= 2 ticks (2 ms): {}; ops per CPU-second {} >= the single node's {}: {}",
                m.name(),
                ms(st(|s| s.p99)),
                verdict(st(|s| s.p99) <= 5e6),
                ms(st(|s| s.p50)),
                verdict(st(|s| s.p50) <= 2e6),
                fmt_int(eff),
                fmt_int(single_eff),
                verdict(eff >= single_eff),
            );
        }
        let lno = median(
            &cluster
                .iter()
                .map(|r| r.nodes[0].new_order_per_s)
                .collect::<Vec<_>>(),
        );
        let ratio = if single_no > 0.0 {
            lno / single_no
        } else {
            0.0
        };
        println!(
            "  verdict {}: leader NewOrder/s {} vs the single node's (normal) {}: {:.2}x >= 0.66x: {}",
            m.name(),
            fmt_int(lno),
            fmt_int(single_no),
            ratio,
            verdict(ratio >= 0.66)
        );
    }
    let total = |m: Mode| -> Vec<f64> {
        res.iter()
            .filter(|r| r.mode == m)
            .map(|r| r.total_ops_per_s)
            .collect()
    };
    let normal = total(Mode::OneNormal);
    let mut cmps = Vec::new();
    for (m, what) in [
        (Mode::OneFast, "1 node fast path vs 1 node normal path"),
        (
            Mode::Cluster,
            "leader + 2 followers (total) vs 1 node normal path",
        ),
        (
            Mode::ClusterTcp,
            "leader + 2 followers over TCP (total) vs 1 node normal path",
        ),
        (
            Mode::ClusterProcesses,
            "leader + 2 followers as processes (total) vs 1 node normal path",
        ),
    ] {
        let c = crate::report::compare_values(
            "total ops/s",
            m.name(),
            Mode::OneNormal.name(),
            &total(m),
            &normal,
        );
        println!(
            "  {what}, total ops/s: {} -> {} ({:+.1}%, exact Mann-Whitney p = {:.3}, higher in {}/{} rounds)",
            fmt_int(c.b_median),
            fmt_int(c.a_median),
            c.difference * 100.0,
            c.p_value,
            c.a_higher_rounds,
            c.rounds
        );
        cmps.push(c);
    }
    for c in &cmps {
        println!("verdict: {}", crate::report::verdict(c));
    }
    println!();
}
