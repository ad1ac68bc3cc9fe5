//! The machinery layer under the example's storage (a `RwLock<BTreeMap>`
//! of version lists): the bank-transfer invariant with concurrent writers
//! (one of them two-phase), snapshot readers, timestamped readers,
//! read-at-stable readers and a timekeeper that prunes; and pruning under a
//! long reader. `cargo test --example own_storage` runs them (and so does
//! `cargo test`).

use super::{Tx, VersionedMap};
use snapshot_engine::machinery::TxnManager;
use snapshot_engine::{CommitOptions, Error, Timestamp, TimestampUpdate, TxnOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 8;
const START: i64 = 1_000;

fn key(a: u64) -> [u8; 8] {
    a.to_be_bytes()
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

fn set(mgr: &TxnManager, oldest: u64, stable: u64) {
    mgr.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(oldest)),
        stable: Some(Timestamp::new(stable)),
        ..TimestampUpdate::default()
    })
    .unwrap();
}

fn load(mgr: &TxnManager, map: &VersionedMap, keys: u64, ts: u64) {
    let mut s = mgr.session().unwrap();
    let mut t = Tx::new(s.begin(&TxnOptions::default()).unwrap());
    for a in 0..keys {
        map.put(&mut t, &key(a), Some(&START.to_le_bytes()))
            .unwrap();
    }
    map.commit(&mut t, CommitOptions::at(ts)).unwrap();
}

#[test]
fn readers_of_a_user_owned_map_always_see_the_same_total() {
    let mgr = TxnManager::new(16).unwrap();
    let map = VersionedMap::default();
    load(&mgr, &map, ACCOUNTS, 1);
    set(&mgr, 1, 1);
    let clock = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let (transfers, checks, prepared) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let dropped = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for w in 0..3u64 {
            let (mgr, map, clock, stop) = (&mgr, &map, &clock, &stop);
            let (transfers, prepared, dropped) = (&transfers, &prepared, &dropped);
            sc.spawn(move || {
                let mut s = mgr.session().unwrap();
                let mut x = 0x9E37_79B9 + w;
                while !stop.load(Ordering::Relaxed) {
                    let from = next(&mut x) % ACCOUNTS;
                    let to = (from + 1 + next(&mut x) % (ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = (next(&mut x) % 50) as i64;
                    let mut t = Tx::new(s.begin(&TxnOptions::default()).unwrap());
                    let abandon = w == 0 && next(&mut x).is_multiple_of(4);
                    let mut abandoned = false;
                    let r = (|| -> snapshot_engine::Result<()> {
                        let f = num(&map.get(&mut t, &key(from))?.unwrap());
                        let g = num(&map.get(&mut t, &key(to))?.unwrap());
                        map.put(&mut t, &key(from), Some(&(f - amount).to_le_bytes()))?;
                        map.put(&mut t, &key(to), Some(&(g + amount).to_le_bytes()))?;
                        let ts = clock.fetch_add(1, Ordering::SeqCst) + 1;
                        if w == 0 {
                            // Two-phase: readers at or above `ts` meet the
                            // prepared update until it commits.
                            map.prepare(&mut t, ts)?;
                            prepared.fetch_add(1, Ordering::Relaxed);
                            if abandon {
                                // Dropped below, without rollback: the
                                // others settle its versions as aborted.
                                abandoned = true;
                                return Ok(());
                            }
                            // Stable may pass `ts` meanwhile: the durable
                            // timestamp must be after it, so take fresh ones
                            // until one is (a refused commit stays open).
                            loop {
                                let durable = clock.fetch_add(1, Ordering::SeqCst) + 1;
                                let opts = CommitOptions {
                                    commit_ts: Some(Timestamp::new(ts)),
                                    durable_ts: Some(Timestamp::new(durable)),
                                };
                                match map.commit(&mut t, opts) {
                                    Err(Error::DurableTimestampNotAfterStable { .. }) => {}
                                    r => return r,
                                }
                            }
                        }
                        map.commit(&mut t, CommitOptions::at(ts))
                    })();
                    match r {
                        Ok(()) if abandoned => {
                            drop(t);
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(()) => {
                            transfers.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::WriteConflict { .. })
                        | Err(Error::PrepareConflict { .. })
                        | Err(Error::MustRollBack)
                        | Err(Error::PrepareTimestampNotAfterStable { .. })
                        | Err(Error::PrepareTimestampBeforeOldest { .. })
                        | Err(Error::PrepareTimestampBeforeActiveRead { .. })
                        | Err(Error::CommitTimestampNotAfterStable { .. })
                        | Err(Error::CommitTimestampBeforeOldest { .. }) => {
                            // Lost a race (or fell behind the timekeeper):
                            // roll back and retry.
                            map.rollback(&mut t).unwrap();
                        }
                        Err(e) => panic!("transfer failed: {e}"),
                    }
                }
            });
        }
        for path in 0..3u64 {
            let (mgr, map, clock, stop, checks) = (&mgr, &map, &clock, &stop, &checks);
            sc.spawn(move || {
                let mut s = mgr.session().unwrap();
                let mut x = 77 + path;
                while !stop.load(Ordering::Relaxed) {
                    let opts = TxnOptions {
                        read_at_stable: path == 2,
                        roundup_read: true,
                        ..TxnOptions::default()
                    };
                    let mut t = Tx::new(s.begin(&opts).unwrap());
                    if path == 1 {
                        let r = 1 + next(&mut x) % clock.load(Ordering::SeqCst);
                        t.txn.set_read_timestamp(Timestamp::new(r)).unwrap();
                    }
                    let mut sum = 0;
                    let mut retry = false;
                    for a in 0..ACCOUNTS {
                        match map.get(&mut t, &key(a)) {
                            Ok(v) => sum += num(&v.expect("account exists")),
                            Err(Error::PrepareConflict { .. }) => {
                                retry = true;
                                break;
                            }
                            Err(e) => panic!("read failed: {e}"),
                        }
                    }
                    if !retry {
                        assert_eq!(sum, START * ACCOUNTS as i64, "path {path} saw a torn total");
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        // Timekeeper: stable trails the clock, oldest trails stable; prune.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1000) {
            std::thread::sleep(Duration::from_millis(1));
            let stable = clock.load(Ordering::SeqCst).saturating_sub(20).max(1);
            set(&mgr, stable.saturating_sub(50).max(1), stable);
            map.prune(&mgr);
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        transfers.load(Ordering::Relaxed) > 0,
        "no transfer committed"
    );
    assert!(prepared.load(Ordering::Relaxed) > 0, "no transfer prepared");
    assert!(
        dropped.load(Ordering::Relaxed) > 0,
        "no prepared transfer dropped"
    );
    assert!(checks.load(Ordering::Relaxed) > 0, "no check ran");
    let mut s = mgr.session().unwrap();
    let mut t = Tx::new(s.begin(&TxnOptions::default()).unwrap());
    let total: i64 = (0..ACCOUNTS)
        .map(|a| num(&map.get(&mut t, &key(a)).unwrap().unwrap()))
        .sum();
    assert_eq!(total, START * ACCOUNTS as i64);
}

#[test]
fn pruning_keeps_what_a_long_reader_sees_and_frees_it_after() {
    const KEYS: u64 = 4;
    const COMMITS: u64 = 200;
    let mgr = TxnManager::new(4).unwrap();
    let map = VersionedMap::default();
    load(&mgr, &map, KEYS, 10);
    set(&mgr, 10, 10);
    let mut rs = mgr.session().unwrap();
    let mut reader = Tx::new(
        rs.begin(&TxnOptions {
            read_timestamp: Some(Timestamp::new(10)),
            ..TxnOptions::default()
        })
        .unwrap(),
    );
    let mut ws = mgr.session().unwrap();
    for i in 0..COMMITS {
        let ts = 11 + i;
        let mut t = Tx::new(ws.begin(&TxnOptions::default()).unwrap());
        let a = i % KEYS;
        map.put(&mut t, &key(a), Some(&(i as i64).to_le_bytes()))
            .unwrap();
        map.commit(&mut t, CommitOptions::at(ts)).unwrap();
        drop(t);
        set(&mgr, ts, ts);
        map.prune(&mgr);
        // The reader still sees the load, every time.
        assert_eq!(
            num(&map.get(&mut reader, &key(a)).unwrap().unwrap()),
            START,
            "the long reader lost its version"
        );
    }
    // It pins its versions and everything newer: nothing was freed.
    assert_eq!(map.versions() as u64, KEYS + COMMITS);
    let pins = mgr.pins();
    assert!(
        pins.iter().any(|p| p.read_ts == Some(Timestamp::new(10))),
        "{pins:?}"
    );
    map.commit(&mut reader, CommitOptions::default()).unwrap();
    drop(reader);
    let freed = map.prune(&mgr);
    assert_eq!(freed as u64, COMMITS, "pruning after the reader ended");
    assert_eq!(map.versions() as u64, KEYS, "one version per key is left");
}

#[test]
fn a_prepared_transaction_dropped_without_rollback_is_rolled_back() {
    let mgr = TxnManager::new(4).unwrap();
    let map = VersionedMap::default();
    load(&mgr, &map, 3, 10);
    set(&mgr, 10, 10);
    let mut s = mgr.session().unwrap();
    {
        let mut t = Tx::new(s.begin(&TxnOptions::default()).unwrap());
        map.put(&mut t, &key(0), Some(&7i64.to_le_bytes())).unwrap();
        map.put(&mut t, &key(1), Some(&8i64.to_le_bytes())).unwrap();
        map.put(&mut t, &key(2), Some(&9i64.to_le_bytes())).unwrap();
        map.prepare(&mut t, 20).unwrap();
        // Dropped here: no `map.rollback`, no completion.
    }
    let at = |ts: u64| TxnOptions {
        read_timestamp: Some(Timestamp::new(ts)),
        ..TxnOptions::default()
    };
    // A reader at 25 reads the pre-image of key 0 (and settles it)...
    let mut r = Tx::new(s.begin(&at(25)).unwrap());
    assert_eq!(num(&map.get(&mut r, &key(0)).unwrap().unwrap()), START);
    drop(r);
    // ...a writer writes key 1 over the other dropped version...
    let mut w = Tx::new(s.begin(&TxnOptions::default()).unwrap());
    map.put(&mut w, &key(1), Some(&9i64.to_le_bytes())).unwrap();
    map.commit(&mut w, CommitOptions::at(30)).unwrap();
    drop(w);
    let mut r = Tx::new(s.begin(&at(35)).unwrap());
    assert_eq!(num(&map.get(&mut r, &key(0)).unwrap().unwrap()), START);
    assert_eq!(num(&map.get(&mut r, &key(1)).unwrap().unwrap()), 9);
    drop(r);
    // ...stable may pass the prepare (its claim went with the drop), and
    // pruning drops the three dropped versions (key 2's met by nobody
    // before: the manager settles it) and the one under key 1's write.
    set(&mgr, 40, 40);
    assert_eq!(map.versions(), 7);
    assert_eq!(map.prune(&mgr), 4);
    assert_eq!(map.versions(), 3);
}
