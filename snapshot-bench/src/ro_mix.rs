//! The `ro-mix` workload: 90% read-only transactions shaped like TPC-C
//! OrderStatus (three point reads and a ten-key range) and 10% read-write
//! transactions shaped like NewOrder (read and update five keys, insert five
//! new ones), run on the normal snapshot path (begin, read timestamp = stable)
//! and on the read-only fast path at the stable watermark (`read_at_stable`:
//! no descriptor, no validation).
//!
//! The timekeeper keeps stable one tick (1 ms) behind the newest commit
//! timestamp handed out, the watermark delay Mako reported.

use crate::keys::{key, load, Rng};
use crate::measure::{new_hist, Pct};
use crate::phases::{run_phases, Ctl, MEASURE, STOP};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::Serialize;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{CommitOptions, EngineConfig, Error, Timestamp, TimestampUpdate, TxnOptions};
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Params {
    pub keys: u64,
    pub value_size: usize,
    pub threads: usize,
    pub warmup: crate::phases::Warmup,
    pub seconds: f64,
    pub fast_path: bool,
}

#[derive(Serialize, Clone, Debug)]
pub struct RoundOut {
    pub round: usize,
    pub seconds: f64,
    pub ro_txn_per_s: f64,
    pub rw_txn_per_s: f64,
    pub total_txn_per_s: f64,
    pub rw_conflicts: u64,
    pub ro_latency_ns: Pct,
    pub rw_latency_ns: Pct,
}

struct ThreadOut {
    ro: u64,
    rw: u64,
    conflicts: u64,
    ro_hist: Histogram<u64>,
    rw_hist: Histogram<u64>,
}

fn worker<M: Machinery>(e: &Engine<M>, ctl: &Ctl, p: &Params, id: usize) -> ThreadOut {
    let mut s = e.session().expect("session");
    let mut rng = Rng::new(0x3000 + id as u64);
    let (mut ro_hist, mut rw_hist) = (new_hist(), new_hist());
    let (mut ro, mut rw, mut conflicts, mut measuring) = (0u64, 0u64, 0u64, false);
    let mut value = vec![0x3cu8; p.value_size];
    let mut inserted = 0u64;
    let ro_opts = TxnOptions {
        read_at_stable: p.fast_path,
        ..TxnOptions::default()
    };
    let rw_opts = TxnOptions::default();
    loop {
        let ph = ctl.phase();
        if ph == STOP {
            break;
        }
        if ph == MEASURE && !measuring {
            measuring = true;
        }
        let t0 = Instant::now();
        let read_only = rng.below(10) != 0;
        let mut ok = true;
        if read_only {
            // OrderStatus: the customer, the last order, a line; then a
            // ten-key range of order lines.
            let mut t = s.begin(&ro_opts).expect("begin");
            if !p.fast_path {
                // As the read-ts readers: a reader preempted between loading
                // stable and setting it, long enough for oldest to pass it,
                // takes the newer stable (the transaction stays usable).
                loop {
                    let stable = ctl.stable.load(Ordering::Relaxed);
                    match t.set_read_timestamp(Timestamp::new(stable)) {
                        Ok(_) => break,
                        Err(Error::ReadTimestampTooOld { .. }) => continue,
                        Err(e) => panic!("set_read_timestamp: {e}"),
                    }
                }
            }
            let mut acc = 0u64;
            for _ in 0..3 {
                let k = key(rng.below(p.keys));
                acc += t
                    .get_with(k, |v| v.map_or(0, |v| v[0] as u64))
                    .expect("get");
            }
            let start = rng.below(p.keys.saturating_sub(10).max(1));
            let mut n = 0;
            t.scan(key(start)..key(start + 10), |_, v| {
                acc += v[0] as u64;
                n += 1;
                true
            })
            .expect("scan");
            black_box((acc, n));
            t.commit(CommitOptions::default())
                .expect("read-only commit");
        } else {
            // NewOrder: read and update five stock rows, insert five order
            // lines.
            let mut t = s.begin(&rw_opts).expect("begin");
            for _ in 0..5 {
                let k = key(rng.below(p.keys));
                let old = t.get_with(k, |v| v.map_or(0, |v| v[0])).expect("get");
                value[0] = old.wrapping_add(1);
                if let Err(err) = t.put(k, &value) {
                    assert!(matches!(err, Error::WriteConflict { .. }), "{err}");
                    ok = false;
                    break;
                }
            }
            if ok {
                for _ in 0..5 {
                    inserted += 1;
                    let k = key((1 << 40) + ((id as u64) << 32) + inserted);
                    t.put(k, &value).expect("insert");
                }
                ctl.commit_at_next_ts(t);
            } else {
                t.rollback();
            }
        }
        if measuring {
            let ns = t0.elapsed().as_nanos() as u64;
            if read_only {
                ro += 1;
                ro_hist.saturating_record(ns.max(1));
            } else if ok {
                rw += 1;
                rw_hist.saturating_record(ns.max(1));
            } else {
                conflicts += 1;
            }
        }
    }
    ThreadOut {
        ro,
        rw,
        conflicts,
        ro_hist,
        rw_hist,
    }
}

/// Stable trails the newest handed-out commit timestamp by one 1 ms tick.
pub(crate) fn watermark<M: Machinery>(e: &Engine<M>, ctl: &Ctl) {
    let mut prev = ctl.ts.load(Ordering::Relaxed);
    let mut cur = ctl.stable.load(Ordering::Relaxed);
    while ctl.phase() != STOP {
        std::thread::sleep(Duration::from_millis(1));
        let now = ctl.ts.load(Ordering::Relaxed);
        let stable = prev.max(1);
        prev = now;
        if stable <= cur {
            continue;
        }
        e.set_timestamps(TimestampUpdate {
            oldest: Some(Timestamp::new(stable.saturating_sub(100_000).max(1))),
            stable: Some(Timestamp::new(stable)),
            durable: None,
        })
        .expect("forward only");
        cur = stable;
        ctl.stable.store(stable, Ordering::Relaxed);
    }
}

pub fn run<M: Machinery>(p: &Params, round: usize, pb: &ProgressBar) -> RoundOut {
    let e = Engine::<M>::with_machinery(EngineConfig {
        max_sessions: p.threads + 8,
        ..EngineConfig::default()
    })
    .expect("the CLI bounds the threads (MAX_THREADS) well below EngineConfig::MAX_SESSIONS");
    load(&e, p.keys, crate::keys::MIN_KEY_SIZE, p.value_size, pb);
    let ctl = Ctl::new(1);
    let (outs, secs) = std::thread::scope(|sc| {
        let (e, ctl) = (&e, &ctl);
        let tk = sc.spawn(move || watermark(e, ctl));
        let hs: Vec<_> = (0..p.threads)
            .map(|i| sc.spawn(move || worker(e, ctl, p, i)))
            .collect();
        let secs = run_phases(ctl, p.warmup, p.seconds, pb);
        let outs: Vec<ThreadOut> = hs.into_iter().map(|h| h.join().expect("worker")).collect();
        tk.join().expect("watermark");
        (outs, secs)
    });
    let (mut roh, mut rwh) = (new_hist(), new_hist());
    for o in &outs {
        roh.add(&o.ro_hist).expect("bounds");
        rwh.add(&o.rw_hist).expect("bounds");
    }
    let ro: u64 = outs.iter().map(|o| o.ro).sum();
    let rw: u64 = outs.iter().map(|o| o.rw).sum();
    RoundOut {
        round,
        seconds: secs,
        ro_txn_per_s: ro as f64 / secs,
        rw_txn_per_s: rw as f64 / secs,
        total_txn_per_s: (ro + rw) as f64 / secs,
        rw_conflicts: outs.iter().map(|o| o.conflicts).sum(),
        ro_latency_ns: Pct::of(&roh),
        rw_latency_ns: Pct::of(&rwh),
    }
}
