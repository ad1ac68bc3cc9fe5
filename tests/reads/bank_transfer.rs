//! Money moves between accounts while snapshot readers sum them: every
//! reader, on every path (newest snapshot, read timestamp set after begin,
//! read-only fast path at stable, read-committed excluded), sees the same
//! total. Checks consistent cut and no torn commits under real threads.

use snapshot_engine::with_machinery::{Engine, Machinery, Txn};
use snapshot_engine::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 16;
const START: i64 = 1_000;

fn key(a: u64) -> [u8; 8] {
    a.to_be_bytes()
}

fn val(x: i64) -> [u8; 8] {
    x.to_le_bytes()
}

fn num(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().unwrap())
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[derive(Clone, Copy, Debug)]
enum ReadPath {
    Newest,
    ReadTsAfterBegin,
    Stable,
    ScanAtStable,
}

fn total<M: Machinery>(t: &mut Txn<'_, '_, M>, path: ReadPath) -> Result<i64> {
    match path {
        ReadPath::ScanAtStable => {
            let mut sum = 0;
            let mut n = 0;
            t.scan(.., |_, v| {
                sum += num(v);
                n += 1;
                true
            })?;
            assert_eq!(n, ACCOUNTS);
            Ok(sum)
        }
        _ => {
            let mut sum = 0;
            for a in 0..ACCOUNTS {
                sum += t.get_with(key(a), |v| num(v.expect("account exists")))?;
            }
            Ok(sum)
        }
    }
}

fn run_bank<M: Machinery>(engine: &Engine<M>) {
    {
        let mut s = engine.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for a in 0..ACCOUNTS {
            t.put(key(a), val(START)).unwrap();
        }
        t.commit(CommitOptions::at(1)).unwrap();
    }
    engine
        .set_timestamps(TimestampUpdate {
            oldest: Some(Timestamp::new(1)),
            stable: Some(Timestamp::new(1)),
            ..Default::default()
        })
        .unwrap();
    let clock = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let checks = AtomicU64::new(0);
    let transfers = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for w in 0..3u64 {
            let (engine, clock, stop, transfers) = (engine, &clock, &stop, &transfers);
            sc.spawn(move || {
                let mut s = engine.session().unwrap();
                let mut x = 0x9E37_79B9 + w;
                while !stop.load(Ordering::Relaxed) {
                    let from = next(&mut x) % ACCOUNTS;
                    let to = (from + 1 + next(&mut x) % (ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = (next(&mut x) % 50) as i64;
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    // Dropping the transaction after an error rolls it back.
                    let r = (move || -> Result<()> {
                        let f = t.get_with(key(from), |v| num(v.unwrap()))?;
                        let g = t.get_with(key(to), |v| num(v.unwrap()))?;
                        t.put(key(from), val(f - amount))?;
                        t.put(key(to), val(g + amount))?;
                        let ts = clock.fetch_add(1, Ordering::SeqCst) + 1;
                        t.commit(CommitOptions::at(ts))
                    })();
                    match r {
                        Ok(()) => {
                            transfers.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::WriteConflict { .. })
                        | Err(Error::MustRollBack)
                        | Err(Error::CommitTimestampNotAfterStable { .. })
                        | Err(Error::CommitTimestampBeforeOldest { .. }) => {
                            // A writer descheduled between taking its
                            // timestamp and committing can fall behind the
                            // timekeeper: the engine refuses, we retry.
                        }
                        Err(e) => panic!("transfer failed: {e}"),
                    }
                }
            });
        }
        for (i, path) in [
            ReadPath::Newest,
            ReadPath::ReadTsAfterBegin,
            ReadPath::Stable,
            ReadPath::ScanAtStable,
        ]
        .into_iter()
        .enumerate()
        {
            let (engine, clock, stop, checks) = (engine, &clock, &stop, &checks);
            sc.spawn(move || {
                let mut s = engine.session().unwrap();
                let mut x = 77 + i as u64;
                while !stop.load(Ordering::Relaxed) {
                    let opts = TxnOptions {
                        read_at_stable: matches!(path, ReadPath::Stable | ReadPath::ScanAtStable),
                        roundup_read: true,
                        ..Default::default()
                    };
                    let mut t = s.begin(&opts).unwrap();
                    if let ReadPath::ReadTsAfterBegin = path {
                        // Somewhere between oldest and the newest commit.
                        let hi = clock.load(Ordering::SeqCst);
                        let r = 1 + next(&mut x) % hi;
                        t.set_read_timestamp(Timestamp::new(r)).unwrap();
                    }
                    let sum = total(&mut t, path).unwrap();
                    assert_eq!(sum, START * ACCOUNTS as i64, "{path:?} saw a torn total");
                    t.commit(CommitOptions::default()).unwrap();
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // Timekeeper: stable trails the clock, oldest trails stable.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1500) {
            std::thread::sleep(Duration::from_millis(1));
            let c = clock.load(Ordering::SeqCst);
            let stable = c.saturating_sub(20).max(1);
            let oldest = stable.saturating_sub(50).max(1);
            engine
                .set_timestamps(TimestampUpdate {
                    oldest: Some(Timestamp::new(oldest)),
                    stable: Some(Timestamp::new(stable)),
                    ..Default::default()
                })
                .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        transfers.load(Ordering::Relaxed) > 0,
        "no transfer committed"
    );
    assert!(checks.load(Ordering::Relaxed) > 0, "no check ran");
    // Final state: still consistent, and pruning kept chains short.
    let mut s = engine.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        total(&mut t, ReadPath::Newest).unwrap(),
        START * ACCOUNTS as i64
    );
}

#[test]
fn concurrent_snapshot_readers_always_see_the_same_total() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    run_bank(&engine);
    let st = engine.stats();
    assert!(st.versions_pruned > 0, "writers pruned nothing: {st:?}");
}
