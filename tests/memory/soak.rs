//! Soak: read-ts (readers set read ts = stable after begin and read one random
//! key; writers update random keys with commit timestamps from a shared
//! counter; a timekeeper every 1 ms sets stable = last commit - lag and
//! oldest = stable - lag) with a bank-transfer invariant beside it (transfers
//! between accounts whose total must stay constant, checked by concurrent
//! snapshot readers at stable, at no timestamp and on the read-only fast
//! path). Samples resident memory (`/proc/self/statm`) and versions per key,
//! prints the curve and the transaction counts, and asserts that both stay
//! bounded: the peak of the last third of the run is within a generous
//! factor of the peak of the middle third (no timing thresholds).
//!
//! ```sh
//! SOAK_SECS=600 cargo test --release --test memory -- --ignored --nocapture soak
//! ```

use crate::one_at_a_time;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, Timestamp, TimestampKind, TimestampUpdate,
    TxnOptions,
};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;
const VALUE: usize = 100;
const ACCOUNTS: u64 = 16;
const BALANCE: u64 = 1_000;
const READERS: usize = 2;
const WRITERS: usize = 2;
/// The read-ts lags, scaled down (there 1,000,000 and 100,000 on a fast counter).
const STABLE_LAG: u64 = 1_000;
const OLDEST_LAG: u64 = 1_000;
/// Keys whose chains are sampled each period (plus every account).
const SAMPLED_KEYS: u64 = 2_000;

fn key(i: u64) -> Vec<u8> {
    format!("w1/{i:08}").into_bytes()
}

fn account(i: u64) -> Vec<u8> {
    format!("acct/{i:04}").into_bytes()
}

fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    secs: f64,
    rss: u64,
    mean_versions: f64,
    max_versions: usize,
    account_versions: usize,
}

struct Shared {
    engine: Engine,
    next_ts: AtomicU64,
    committed_max: AtomicU64,
    stop: AtomicBool,
    w1_reads: AtomicU64,
    w1_writes: AtomicU64,
    transfers: AtomicU64,
    checks: AtomicU64,
    conflicts: AtomicU64,
    /// Commits refused because stable or oldest passed their timestamp.
    late: AtomicU64,
}

impl Shared {
    /// Commits `t` at the next counter value; `false` if it lost a race
    /// with stable (then it rolls back on drop).
    fn commit(&self, t: snapshot_engine::Txn<'_, '_>) -> bool {
        let c = self.next_ts.fetch_add(1, Ordering::Relaxed);
        match t.try_commit(CommitOptions::at(c)) {
            Ok(()) => {
                self.committed_max.fetch_max(c, Ordering::Relaxed);
                true
            }
            // The thread was descheduled between taking its timestamp and
            // committing, and the timekeeper moved stable (or oldest) past
            // it: refused, handed back open, rolled back on drop.
            Err(e)
                if matches!(
                    e.error(),
                    Error::CommitTimestampNotAfterStable { .. }
                        | Error::CommitTimestampBeforeOldest { .. }
                ) =>
            {
                assert!(
                    e.into_txn().is_some(),
                    "a timestamp error keeps the transaction"
                );
                self.late.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(e) => panic!("commit: {e}"),
        }
    }
}

fn w1_reader(sh: &Shared, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut s = sh.engine.session().unwrap();
    while !sh.stop.load(Ordering::Relaxed) {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let stable = sh.engine.query_timestamp(TimestampKind::Stable).unwrap();
        match t.set_read_timestamp(stable) {
            Ok(_) => {}
            // Oldest passed the stable we loaded (the timekeeper moved both).
            Err(Error::ReadTimestampTooOld { .. }) => continue,
            Err(e) => panic!("w1 reader: {e}"),
        }
        let v = t.get(key(rng.gen_range(0..KEYS))).unwrap();
        assert_eq!(v.map(|v| v.len()), Some(VALUE));
        t.rollback();
        sh.w1_reads.fetch_add(1, Ordering::Relaxed);
    }
}

fn w1_writer(sh: &Shared, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut s = sh.engine.session().unwrap();
    let mut val = [0u8; VALUE];
    while !sh.stop.load(Ordering::Relaxed) {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        rng.fill(&mut val[..]);
        match t.put(key(rng.gen_range(0..KEYS)), val) {
            Ok(()) => {}
            Err(Error::WriteConflict { .. }) => {
                sh.conflicts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => panic!("w1 writer: {e}"),
        }
        if sh.commit(t) {
            sh.w1_writes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.expect("accounts always exist").try_into().unwrap())
}

fn transferer(sh: &Shared) {
    let mut rng = SmallRng::seed_from_u64(99);
    let mut s = sh.engine.session().unwrap();
    while !sh.stop.load(Ordering::Relaxed) {
        let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
        if a == b {
            continue;
        }
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let (ba, bb) = (
            balance(t.get(account(a)).unwrap()),
            balance(t.get(account(b)).unwrap()),
        );
        let amount = rng.gen_range(0..=ba.min(50));
        let r = t
            .put(account(a), (ba - amount).to_le_bytes())
            .and_then(|()| t.put(account(b), (bb + amount).to_le_bytes()));
        match r {
            Ok(()) => {}
            Err(Error::WriteConflict { .. }) => {
                sh.conflicts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => panic!("transfer: {e}"),
        }
        if sh.commit(t) {
            sh.transfers.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Checks the bank invariant three ways in turn: at read ts = stable, with
/// no read timestamp, and on the read-only fast path.
fn checker(sh: &Shared) {
    let mut s = sh.engine.session().unwrap();
    let mut round = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        round += 1;
        let opts = match round % 3 {
            0 => TxnOptions::default(),
            1 => TxnOptions {
                read_at_stable: true,
                ..TxnOptions::default()
            },
            _ => TxnOptions::default(),
        };
        let mut t = s.begin(&opts).unwrap();
        if round % 3 == 2 {
            let stable = sh.engine.query_timestamp(TimestampKind::Stable).unwrap();
            if t.set_read_timestamp(stable).is_err() {
                continue;
            }
        }
        let rows = t
            .range((
                Bound::Included(&b"acct/"[..]),
                Bound::Excluded(&b"acct0"[..]),
            ))
            .unwrap();
        assert_eq!(rows.len() as u64, ACCOUNTS);
        let total: u64 = rows.into_iter().map(|(_, v)| balance(Some(v))).sum();
        assert_eq!(
            total,
            ACCOUNTS * BALANCE,
            "bank invariant broken (round {round})"
        );
        sh.checks.fetch_add(1, Ordering::Relaxed);
    }
}

fn timekeeper(sh: &Shared, floor: u64) {
    while !sh.stop.load(Ordering::Relaxed) {
        let last = sh.committed_max.load(Ordering::Relaxed);
        let stable = last.saturating_sub(STABLE_LAG).max(floor);
        let oldest = stable.saturating_sub(OLDEST_LAG).max(floor);
        sh.engine
            .set_timestamps(TimestampUpdate {
                oldest: Some(ts(oldest)),
                stable: Some(ts(stable)),
                durable: None,
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn sample(sh: &Shared, start: Instant, rng: &mut SmallRng) -> Sample {
    let mut total = 0;
    let mut max = 0;
    for _ in 0..SAMPLED_KEYS {
        let n = sh.engine.chain_len(&key(rng.gen_range(0..KEYS)));
        total += n;
        max = max.max(n);
    }
    let account_versions = (0..ACCOUNTS)
        .map(|i| sh.engine.chain_len(&account(i)))
        .sum();
    Sample {
        secs: start.elapsed().as_secs_f64(),
        rss: rss_bytes(),
        mean_versions: total as f64 / SAMPLED_KEYS as f64,
        max_versions: max,
        account_versions,
    }
}

fn peak<T: PartialOrd + Copy>(xs: impl Iterator<Item = T>) -> T {
    xs.reduce(|a, b| if b > a { b } else { a })
        .expect("samples")
}

#[test]
#[ignore = "soak: minutes long; SOAK_SECS=600 cargo test --release --test memory -- --ignored --nocapture soak"]
fn w1_with_bank_transfers_stays_bounded() {
    let _serial = one_at_a_time();
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let run = Duration::from_secs(secs);
    let rss_start = rss_bytes();
    let sh = Shared {
        engine: Engine::new(EngineConfig::default()).unwrap(),
        next_ts: AtomicU64::new(0),
        committed_max: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        w1_reads: AtomicU64::new(0),
        w1_writes: AtomicU64::new(0),
        transfers: AtomicU64::new(0),
        checks: AtomicU64::new(0),
        conflicts: AtomicU64::new(0),
        late: AtomicU64::new(0),
    };
    // Load: 100,000 keys of 100 bytes and the accounts, at timestamp 1.
    {
        let mut s = sh.engine.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for i in 0..KEYS {
            t.put(key(i), [1; VALUE]).unwrap();
        }
        for i in 0..ACCOUNTS {
            t.put(account(i), BALANCE.to_le_bytes()).unwrap();
        }
        t.commit(CommitOptions::at(1)).unwrap();
    }
    sh.next_ts.store(2, Ordering::Relaxed);
    sh.committed_max.store(1, Ordering::Relaxed);
    sh.engine
        .set_timestamps(TimestampUpdate {
            oldest: Some(ts(1)),
            stable: Some(ts(1)),
            durable: None,
        })
        .unwrap();
    let rss_loaded = rss_bytes();

    let start = Instant::now();
    let period = (run / 60).max(Duration::from_millis(200));
    let mut samples = Vec::new();
    let mut rng = SmallRng::seed_from_u64(7);
    std::thread::scope(|sc| {
        let sh = &sh;
        for i in 0..READERS {
            sc.spawn(move || w1_reader(sh, 10 + i as u64));
        }
        for i in 0..WRITERS {
            sc.spawn(move || w1_writer(sh, 20 + i as u64));
        }
        sc.spawn(move || transferer(sh));
        sc.spawn(move || checker(sh));
        sc.spawn(move || timekeeper(sh, 1));
        while start.elapsed() < run {
            std::thread::sleep(period);
            samples.push(sample(sh, start, &mut rng));
        }
        sh.stop.store(true, Ordering::Relaxed);
    });
    let end = sample(&sh, start, &mut rng);
    let st = sh.engine.stats();

    println!("soak {secs} s: resident memory (MiB) and versions per key over time");
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>14}",
        "secs", "rss MiB", "mean vers", "max vers", "account vers"
    );
    for s in &samples {
        println!(
            "{:>8.1} {:>10.1} {:>12.3} {:>12} {:>14}",
            s.secs,
            s.rss as f64 / 1048576.0,
            s.mean_versions,
            s.max_versions,
            s.account_versions
        );
    }
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "memory curve: start {:.1} MiB (empty), after load {:.1} MiB, peak {:.1} MiB, end {:.1} MiB",
        mib(rss_start),
        mib(rss_loaded),
        mib(peak(samples.iter().map(|s| s.rss))),
        mib(end.rss)
    );
    println!(
        "transactions: w1 reads {}, w1 writes {}, transfers {}, invariant checks {}, write conflicts {}, late commits refused {}",
        sh.w1_reads.load(Ordering::Relaxed),
        sh.w1_writes.load(Ordering::Relaxed),
        sh.transfers.load(Ordering::Relaxed),
        sh.checks.load(Ordering::Relaxed),
        sh.conflicts.load(Ordering::Relaxed),
        sh.late.load(Ordering::Relaxed)
    );
    println!(
        "engine stats: begins {}, commits {}, rollbacks {}, versions pruned {}, freed {}, horizon advances {}",
        st.begins, st.commits, st.rollbacks, st.versions_pruned, st.versions_freed, st.horizon_advances
    );

    assert!(
        samples.len() >= 6,
        "too few samples ({}) to compare thirds",
        samples.len()
    );
    assert!(sh.checks.load(Ordering::Relaxed) > 0 && sh.transfers.load(Ordering::Relaxed) > 0);
    assert!(sh.w1_writes.load(Ordering::Relaxed) > 0 && sh.w1_reads.load(Ordering::Relaxed) > 0);
    let third = samples.len() / 3;
    let middle = &samples[third..2 * third];
    let last = &samples[2 * third..];
    let (mid_rss, last_rss) = (
        peak(middle.iter().map(|s| s.rss)),
        peak(last.iter().map(|s| s.rss)),
    );
    // Generous: allocator noise and epoch batching are not growth.
    assert!(
        last_rss <= mid_rss + mid_rss / 2 + (32 << 20),
        "resident memory keeps growing: middle-third peak {:.1} MiB, last-third peak {:.1} MiB",
        mib(mid_rss),
        mib(last_rss)
    );
    // Growth shows in the typical sample, not in one spike: the 16 hot
    // accounts' version count swings several-fold from sample to sample
    // (478 to 8,340 in a 10-minute run) with the horizon's lag, so the last
    // third's median is compared with the middle third's peak.
    let versions = |s: &Sample| s.max_versions.max(s.account_versions);
    let mid_v = peak(middle.iter().map(versions));
    let mut last_vs: Vec<usize> = last.iter().map(versions).collect();
    last_vs.sort_unstable();
    let last_v = last_vs[last_vs.len() / 2];
    assert!(
        last_v <= 2 * mid_v + 16,
        "versions per key keep growing: middle-third peak {mid_v}, last-third median {last_v}"
    );
}
