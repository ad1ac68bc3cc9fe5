//! Handshake 1 (pin versus horizon) on both fence pairs (DESIGN.md "The
//! asymmetric fence"): the engine reports the pair it was built with, and
//! snapshot readers racing writers and horizon advances read what their
//! snapshot says on either pair. The asymmetric pair is the default where
//! the process can register for `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`;
//! `asymmetric_fences: false` (or `SNAPSHOT_ENGINE_FENCES=symmetric` in the
//! environment) gives the symmetric fallback, SeqCst fences on both sides
//! (`SNAPSHOT_ENGINE_FENCES=asymmetric` turns the pair on for every engine,
//! so the "symmetric" runs here then run it too).
//! The fence pair itself is tested in `src/sync/fences.rs` (a
//! store-buffering litmus test on each pair);
//! `tests/timestamps/reads_at_a_timestamp_repeat_while_writers_prune.rs`
//! runs its timestamped race on both pairs too. Bounded by operation counts.

#[cfg(feature = "baseline")]
use snapshot_engine::with_machinery::{self, RwLockBaseline};
use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Timestamp, TimestampUpdate, TxnOptions,
};
use std::sync::atomic::{AtomicBool, Ordering};

const KEYS: u64 = 16;
const WRITES_PER_WRITER: u64 = 20_000;
const SNAPSHOTS_PER_READER: u64 = 2_000;

fn engine(asymmetric_fences: bool) -> Engine {
    Engine::new(EngineConfig {
        max_sessions: 8,
        horizon_refresh_commits: 4,
        asymmetric_fences,
        ..EngineConfig::default()
    })
    .unwrap()
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

#[test]
fn an_engine_reports_the_fence_pair_it_was_built_with() {
    // `SNAPSHOT_ENGINE_FENCES` overrides the config for the whole process.
    let env = std::env::var("SNAPSHOT_ENGINE_FENCES");
    let forced = match env.as_deref() {
        Ok("symmetric") => Some(false),
        Ok("asymmetric") => Some(true),
        _ => None,
    };
    let expect = |want: bool| cfg!(target_os = "linux") && forced.unwrap_or(want);
    // Both pairs in one process, one engine each: the mode is per engine.
    let (on, off) = (engine(true), engine(false));
    assert_eq!(
        on.asymmetric_fences(),
        expect(true),
        "the process could not register for membarrier (Linux 4.14+, no seccomp filter)"
    );
    assert_eq!(off.asymmetric_fences(), expect(false));
    // The lock baselines have no handshake and report none.
    #[cfg(feature = "baseline")]
    {
        let lock = with_machinery::Engine::<RwLockBaseline>::with_machinery(EngineConfig {
            asymmetric_fences: true,
            ..EngineConfig::default()
        })
        .unwrap();
        assert!(!lock.asymmetric_fences());
    }
}

/// Untimestamped writers overwrite every key (each commit prunes the chains
/// it wrote by the id horizon, and refreshes that horizon every 4 commits),
/// a thread calls `collect()` (an advance and a prune of every key) in a
/// loop, and readers take snapshots, lazily at their first read: the
/// `publish_xmin` side of handshake 1. A reader reads every key twice in
/// one snapshot; if an advance passed its pin without seeing it, pruning
/// could cut the version it read first, and the second read would differ.
fn snapshots_hold_while_writers_prune(asymmetric_fences: bool) {
    let e = engine(asymmetric_fences);
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in 0..KEYS {
            t.put(key(k), 0u64.to_be_bytes()).unwrap();
        }
        t.commit(CommitOptions::default()).unwrap();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let e = &e;
                sc.spawn(move || {
                    let mut s = e.session().unwrap();
                    for i in 0..WRITES_PER_WRITER {
                        // Writer `w` owns the keys with `k % 2 == w`.
                        let k = i % (KEYS / 2) * 2 + w;
                        let mut t = s.begin(&TxnOptions::default()).unwrap();
                        t.put(key(k), (i + 1).to_be_bytes()).unwrap();
                        t.commit(CommitOptions::default()).unwrap();
                    }
                })
            })
            .collect();
        let collector = sc.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                e.collect();
                std::thread::yield_now();
            }
        });
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let e = &e;
                sc.spawn(move || {
                    let mut s = e.session().unwrap();
                    for _ in 0..SNAPSHOTS_PER_READER {
                        let mut t = s.begin(&TxnOptions::default()).unwrap();
                        let read = |t: &mut snapshot_engine::Txn<'_, '_>| -> Vec<Vec<u8>> {
                            (0..KEYS)
                                .map(|k| t.get(key(k)).unwrap().expect("every key is loaded"))
                                .collect()
                        };
                        let first = read(&mut t);
                        std::thread::yield_now();
                        let second = read(&mut t);
                        assert_eq!(first, second, "a snapshot changed under its reader");
                        t.commit(CommitOptions::default()).unwrap();
                    }
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        collector.join().unwrap();
    });
    // Everything the readers held is prunable now: one version per key.
    e.collect();
    for k in 0..KEYS {
        assert_eq!(e.chain_len(&key(k)), 1, "key {k} kept history nobody pins");
    }
}

#[test]
fn snapshots_hold_while_writers_prune_on_the_asymmetric_fences() {
    snapshots_hold_while_writers_prune(true);
}

#[test]
fn snapshots_hold_while_writers_prune_on_the_symmetric_fences() {
    snapshots_hold_while_writers_prune(false);
}

/// The read-only fast path (`read_at_stable`: both pins in one handshake)
/// and a read timestamp set after begin (`begin_at_read_ts`), while a
/// timekeeper moves oldest and stable up behind timestamped writers, on
/// both pairs: every read at its timestamp finds every key, at or below it.
#[test]
fn timestamped_readers_hold_while_oldest_moves_on_both_pairs() {
    for asymmetric_fences in [true, false] {
        let e = engine(asymmetric_fences);
        let set = |v: u64| TimestampUpdate {
            oldest: Some(Timestamp::new(v)),
            stable: Some(Timestamp::new(v)),
            durable: None,
        };
        {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            for k in 0..KEYS {
                t.put(key(k), 1u64.to_be_bytes()).unwrap();
            }
            t.commit(CommitOptions::at(1)).unwrap();
        }
        e.set_timestamps(set(1)).unwrap();
        std::thread::scope(|sc| {
            let writer = sc.spawn(|| {
                let mut s = e.session().unwrap();
                for c in 2..2 + WRITES_PER_WRITER {
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(key(c % KEYS), c.to_be_bytes()).unwrap();
                    t.commit(CommitOptions::at(c)).unwrap();
                    if c % 8 == 0 {
                        // Stable and oldest trail the last commit: every
                        // commit at or below them has returned.
                        e.set_timestamps(set(c - 4)).unwrap();
                    }
                }
            });
            for fast in [true, false] {
                let e = &e;
                sc.spawn(move || {
                    let mut s = e.session().unwrap();
                    for _ in 0..SNAPSHOTS_PER_READER {
                        let (mut t, r) = if fast {
                            let opts = TxnOptions {
                                read_at_stable: true,
                                ..TxnOptions::default()
                            };
                            let t = s.begin(&opts).unwrap();
                            let r = t.read_timestamp().get();
                            (t, r)
                        } else {
                            let mut t = s.begin(&TxnOptions::default()).unwrap();
                            let r = e
                                .query_timestamp(snapshot_engine::TimestampKind::Stable)
                                .unwrap();
                            match t.set_read_timestamp(r) {
                                Ok(got) => (t, got.get()),
                                // Oldest passed `r` meanwhile: refused.
                                Err(_) => continue,
                            }
                        };
                        for _ in 0..2 {
                            for k in 0..KEYS {
                                let v = t.get(key(k)).unwrap().expect("every key is loaded");
                                let at = u64::from_be_bytes(v.try_into().unwrap());
                                assert!(at <= r, "a read at {r} saw a commit at {at}");
                            }
                            std::thread::yield_now();
                        }
                        t.commit(CommitOptions::default()).unwrap();
                    }
                });
            }
            writer.join().unwrap();
        });
    }
}
