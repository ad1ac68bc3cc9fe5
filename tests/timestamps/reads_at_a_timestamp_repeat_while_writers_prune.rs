//! Reads at a timestamp at or below stable are repeatable (invariant 8)
//! while writers keep committing and pruning the same keys, so the finger
//! and floor a read starts from move under it (invariant 13).
//! Writers take commit timestamps from a shared counter, so commits land
//! out of timestamp order across keys. Each writer owns half the keys, so
//! a key's commits are in timestamp order and "the newest commit at or
//! below r" is one well-defined version: afterwards every read timestamp
//! from oldest up must see exactly that, for every key (checked against
//! the writers' logs). (With two writers on one key, a key can commit out
//! of timestamp order; a read then takes the newest version in commit
//! order that is at or below it, which the logs cannot tell apart: the
//! test once shared keys and failed about one run in five on that oracle,
//! not on the engine. Out-of-order keys are covered by the chain unit
//! tests and the fuzz replay's op lists.) Bounded by operation counts,
//! not time.

use crate::support::*;
use snapshot_engine::with_machinery::{Engine, LockFree, Machinery, Session};
use snapshot_engine::*;
use std::sync::atomic::{AtomicU64, Ordering};

const KEYS: u64 = 16;
const WRITES_PER_WRITER: u64 = 4_000;
const READS_PER_READER: u64 = 400;

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

fn ts_of(v: &[u8]) -> u64 {
    u64::from_be_bytes(v.try_into().expect("8-byte values"))
}

#[test]
fn reads_at_stable_repeat_across_transactions() {
    on_every_machinery!(repeat_on);
}

/// The same on the lock-free engine with handshake 1 on the asymmetric
/// fence pair (`asymmetric_fences: true`: a compiler fence for readers, a
/// membarrier per advance, where the process can register); the test above
/// runs the default, SeqCst fences on both sides.
#[test]
fn reads_at_stable_repeat_on_the_asymmetric_fences() {
    repeat_with::<LockFree>(true);
}

/// Reads every key at `r`; `None` if `r` fell below oldest meanwhile.
fn read_all<M: Machinery>(s: &mut Session<'_, M>, r: u64) -> Option<Vec<u64>> {
    let mut t = match s.begin(&read_at(r)) {
        Ok(t) => t,
        Err(Error::ReadTimestampTooOld { .. }) => return None,
        Err(e) => panic!("begin at {r}: {e:?}"),
    };
    let once: Vec<u64> = (0..KEYS)
        .map(|k| ts_of(&t.get(key(k)).unwrap().expect("every key is loaded")))
        .collect();
    let again: Vec<u64> = (0..KEYS)
        .map(|k| ts_of(&t.get(key(k)).unwrap().unwrap()))
        .collect();
    assert_eq!(once, again, "a read at {r} changed inside one transaction");
    Some(once)
}

fn repeat_on<M: Machinery>() {
    repeat_with::<M>(false);
}

fn repeat_with<M: Machinery>(asymmetric_fences: bool) {
    let e = Engine::<M>::with_machinery(EngineConfig {
        max_sessions: 8,
        horizon_refresh_commits: 8,
        asymmetric_fences,
        ..EngineConfig::default()
    })
    .unwrap();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in 0..KEYS {
            t.put(key(k), 1u64.to_be_bytes()).unwrap();
        }
        t.commit(CommitOptions::at(1)).unwrap();
    }
    e.set_timestamps(set(Some(1), Some(1), None)).unwrap();
    let next = AtomicU64::new(2);
    let mut log: Vec<(u64, u64)> = (0..KEYS).map(|k| (k, 1)).collect();
    std::thread::scope(|sc| {
        let mut writers = Vec::new();
        for w in 0..2u64 {
            let (e, next) = (&e, &next);
            writers.push(sc.spawn(move || {
                let mut done = Vec::new();
                let mut s = e.session().unwrap();
                for i in 0..WRITES_PER_WRITER {
                    // Writer `w` owns the keys with `k % 2 == w`.
                    let k = (i * 7) % (KEYS / 2) * 2 + w;
                    let c = next.fetch_add(1, Ordering::Relaxed);
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    if t.put(key(k), c.to_be_bytes()).is_err() {
                        continue; // write conflict: dropped, rolled back
                    }
                    let committed = t.commit(CommitOptions::at(c));
                    match committed {
                        Ok(()) => done.push((k, c)),
                        // The timekeeper (the other writer) moved stable,
                        // or oldest with it, past `c` while we wrote: skip
                        // it (the refused transaction rolls back as it
                        // drops). Which of the two is refused depends on
                        // how far it moved.
                        Err(
                            Error::CommitTimestampNotAfterStable { .. }
                            | Error::CommitTimestampBeforeOldest { .. },
                        ) => {}
                        Err(e) => panic!("commit at {c}: {e:?}"),
                    }
                    if w == 0 && i % 32 == 0 {
                        // Timekeeper: stable trails the counter, oldest
                        // trails stable.
                        let last = next.load(Ordering::Relaxed);
                        let stable = last.saturating_sub(64).max(1);
                        let oldest = stable.saturating_sub(64).max(1);
                        let _ = e.set_timestamps(set(Some(oldest), Some(stable), None));
                    }
                }
                done
            }));
        }
        for _ in 0..2 {
            let e = &e;
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                for _ in 0..READS_PER_READER {
                    let r = e.query_timestamp(TimestampKind::Stable).unwrap().get();
                    let Some(first) = read_all(&mut s, r) else {
                        continue;
                    };
                    assert!(
                        first.iter().all(|&v| v <= r),
                        "a read at {r} saw a version above it: {first:?}"
                    );
                    if let Some(second) = read_all(&mut s, r) {
                        assert_eq!(first, second, "two reads at stable {r} differ");
                    }
                }
            });
        }
        for w in writers {
            log.extend(w.join().unwrap());
        }
    });
    // Every read timestamp still readable: the newest commit at or below it.
    let oldest = e.query_timestamp(TimestampKind::Oldest).unwrap().get();
    let last = next.load(Ordering::Relaxed);
    let mut s = e.session().unwrap();
    for r in oldest..last {
        let want: Vec<u64> = (0..KEYS)
            .map(|k| {
                log.iter()
                    .filter(|&&(lk, c)| lk == k && c <= r)
                    .map(|&(_, c)| c)
                    .max()
                    .expect("the load is at 1")
            })
            .collect();
        let got = read_all(&mut s, r).expect("at or above oldest");
        assert_eq!(
            got, want,
            "a read at {r} missed the newest version at or below it"
        );
    }
}
