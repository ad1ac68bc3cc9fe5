//! A key that exists at every timestamp is never read as absent by a reader
//! that ignores prepared updates, while two-phase writers resolve on top of
//! it and pruning cuts its chain under the reader (invariants 3 safe point
//! and 10 prepared state).
//!
//! Four keys `p0..p3` are loaded at the start (round 0) and never deleted.
//! Two competing two-phase writers, per round, read the round in `p0`,
//! write round + 1 to all four keys, prepare at `p`, and commit at some
//! `c >= p` (half the time `c = p`, which by then may be at or below stable
//! and oldest) with a durable timestamp `d >= c` (announced beforehand half
//! the time); one round in eight is rolled back after prepare instead. Half
//! the rounds stay prepared until oldest reaches `p`. A timekeeper moves
//! the clock, stable and oldest continuously: it pushes stable to the
//! newest timestamp, past any prepared transaction, and falls back below an
//! announced durable timestamp it is refused at; oldest trails stable by
//! two. Readers that ignore prepared updates (two at a read timestamp
//! between oldest and stable, one on the read-only fast path) and two that
//! enforce prepare conflicts read the four keys pass after pass, with no
//! yield, until oldest has passed their read timestamp: the scheduler
//! preempts them, often inside a read, and their last passes come when only
//! their own pin holds the history they read. A thread spins beside them.
//! Every commit refreshes the horizon and prunes the keys.
//!
//! Checked: no read of a key returns nothing; every value read is a round a
//! writer committed (never one it rolled back) at a commit timestamp at or
//! below the reader's timestamp; an ignoring reader never reads a key at an
//! older round than in an earlier pass (a skipped prepared update may have
//! resolved meanwhile); an enforcing reader reads one round in every key
//! and pass (keys that conflicted aside). Bounded by time: 2 s, or
//! `IGNORING_READERS_MS` milliseconds.
//!
//! ```sh
//! IGNORING_READERS_MS=60000 cargo test --release --test timestamps ignoring_readers
//! ```

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, PrepareConflicts, Session, Timestamp,
    TimestampKind, TimestampUpdate, Txn, TxnOptions,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEYS: [&[u8]; 4] = [b"p0", b"p1", b"p2", b"p3"];
/// Oldest trails stable by this much.
const OLDEST_LAG: u64 = 2;
/// The load's tag (round 0, committed at 1).
const LOAD: u64 = 0;

fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

/// A value: the round and the tag of the transaction that wrote it.
fn value(round: u64, tag: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&round.to_be_bytes());
    v[8..].copy_from_slice(&tag.to_be_bytes());
    v
}

fn decode(v: &[u8]) -> (u64, u64) {
    let v: [u8; 16] = v.try_into().expect("16-byte values");
    (
        u64::from_be_bytes(v[..8].try_into().unwrap()),
        u64::from_be_bytes(v[8..].try_into().unwrap()),
    )
}

/// What became of a tagged write.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// About to commit (recorded before `commit` is called, so before any
    /// reader can see it): its round and commit timestamp.
    Committing { round: u64, commit: u64 },
    /// Rolled back after prepare (recorded before `rollback`).
    RolledBack,
}

struct World {
    e: Engine,
    /// The next timestamp to hand out.
    clock: AtomicU64,
    ledger: Mutex<HashMap<u64, Fate>>,
    stop: AtomicBool,
    deadline: Instant,
    violations: Mutex<Vec<String>>,
    /// Reads by ignoring readers, rounds committed, rolled back (reported).
    ignoring_reads: AtomicU64,
    commits: AtomicU64,
    rollbacks: AtomicU64,
}

impl World {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }

    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
        self.stop.store(true, Ordering::Relaxed);
    }

    fn globals(&self) -> String {
        let q = |k| self.e.query_timestamp(k).map_or(0, Timestamp::get);
        format!(
            "oldest {} stable {}; chain lengths {:?}",
            q(TimestampKind::Oldest),
            q(TimestampKind::Stable),
            KEYS.map(|k| self.e.chain_len(k))
        )
    }

    /// Checks one value read at `r` (the reader's timestamp): a committed
    /// round at or below `r`. Returns its round.
    fn check_value(&self, who: &str, key: &[u8], r: u64, v: &[u8]) -> Option<u64> {
        let (round, tag) = decode(v);
        let fate = self.ledger.lock().unwrap().get(&tag).copied();
        let bad = match fate {
            Some(Fate::Committing {
                round: want,
                commit,
            }) if want == round && commit <= r => {
                return Some(round);
            }
            Some(Fate::Committing {
                round: want,
                commit,
            }) => {
                format!("round {round} of tag {tag:#x}, which committed round {want} at {commit}")
            }
            Some(Fate::RolledBack) => format!("round {round} of tag {tag:#x}, rolled back"),
            None => format!("round {round} of tag {tag:#x}, which no writer committed"),
        };
        self.violation(format!(
            "{who} get({}) at {r}: {bad}; {}",
            String::from_utf8_lossy(key),
            self.globals()
        ));
        None
    }
}

fn writer(w: &World, id: u64) {
    let mut s = w.e.session().unwrap();
    let mut rng = SmallRng::seed_from_u64(id);
    let mut attempt = 0u64;
    while w.running() {
        attempt += 1;
        let tag = (id << 40) | attempt;
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let round = match t.get(KEYS[0]) {
            Ok(Some(v)) => decode(&v).0,
            Ok(None) => {
                w.violation(format!("writer {id}: p0 read as absent; {}", w.globals()));
                return;
            }
            // The other writer's round is prepared: wait for it.
            Err(Error::PrepareConflict { .. }) => {
                t.rollback();
                std::hint::spin_loop();
                continue;
            }
            Err(e) => panic!("writer {id}: get(p0): {e:?}"),
        };
        let wrote = KEYS
            .iter()
            .try_for_each(|k| t.put(k, value(round + 1, tag)));
        match wrote {
            Ok(()) => {}
            // The other writer got there first.
            Err(Error::WriteConflict { .. }) => {
                t.rollback();
                std::hint::spin_loop();
                continue;
            }
            Err(e) => panic!("writer {id}: put: {e:?}"),
        }
        let p = match t.prepare(ts(w.clock.fetch_add(1, Ordering::Relaxed))) {
            Ok(p) => p.get(),
            // Stable, or a reader's read timestamp, passed the prepare
            // timestamp while we wrote.
            Err(
                Error::PrepareTimestampNotAfterStable { .. }
                | Error::PrepareTimestampBeforeActiveRead { .. },
            ) => {
                t.rollback();
                continue;
            }
            Err(e) => panic!("writer {id}: prepare: {e:?}"),
        };
        // Stay prepared a while now and then: stable, and oldest with it,
        // can pass `p` meanwhile, so a commit at `p` lands at or below the
        // horizon.
        if rng.gen_bool(0.5) {
            wait_for_oldest_past(w, p - 1);
        }
        if rng.gen_ratio(1, 8) {
            w.ledger.lock().unwrap().insert(tag, Fate::RolledBack);
            t.rollback();
            w.rollbacks.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let now = w.clock.load(Ordering::Relaxed).max(p);
        let c = if rng.gen_bool(0.5) {
            p
        } else {
            rng.gen_range(p..=now)
        };
        w.ledger.lock().unwrap().insert(
            tag,
            Fate::Committing {
                round: round + 1,
                commit: c,
            },
        );
        let announce = rng.gen_bool(0.5);
        loop {
            let d = w.clock.fetch_add(1, Ordering::Relaxed).max(c);
            if announce {
                match t.set_durable_timestamp(ts(d)) {
                    Ok(()) => {}
                    // Stable passed `d` before we announced it: a later one.
                    Err(Error::DurableTimestampNotAfterStable { .. }) => continue,
                    Err(e) => panic!("writer {id}: set_durable_timestamp({d}): {e:?}"),
                }
            }
            let opts = CommitOptions {
                commit_ts: Some(ts(c)),
                durable_ts: Some(ts(d)),
            };
            match t.try_commit(opts) {
                Ok(()) => break,
                // Stable passed `d` (not announced): still prepared, commit
                // with a later one.
                Err(err) if matches!(err.error(), Error::DurableTimestampNotAfterStable { .. }) => {
                    t = err.into_txn().expect("a refused commit stays prepared");
                }
                Err(err) => panic!("writer {id}: commit at {c} durable {d}: {err:?}"),
            }
        }
        w.commits.fetch_add(1, Ordering::Relaxed);
    }
}

fn timekeeper(w: &World) {
    while w.running() {
        // Time passes: take the newest timestamp and push stable there,
        // past any prepared transaction; an announced durable timestamp
        // refuses it, then go just below that.
        let now = w.clock.fetch_add(1, Ordering::Relaxed);
        let stable = |v| TimestampUpdate {
            stable: Some(ts(v)),
            ..TimestampUpdate::default()
        };
        match w.e.set_timestamps(stable(now)) {
            Ok(()) => {}
            Err(Error::StablePastPreparedDurable { durable, .. }) => {
                // May be refused in turn (another durable timestamp, or no
                // higher than stable now): try again next time.
                let _ = w.e.set_timestamps(stable(durable.get() - 1));
            }
            Err(e) => panic!("timekeeper: stable {now}: {e:?}"),
        }
        let st = w.e.query_timestamp(TimestampKind::Stable).unwrap().get();
        let oldest = ts(st.saturating_sub(OLDEST_LAG).max(1));
        w.e.set_timestamps(TimestampUpdate {
            oldest: Some(oldest),
            ..TimestampUpdate::default()
        })
        .unwrap_or_else(|e| panic!("timekeeper: oldest {oldest}: {e:?}"));
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Waits, spinning, until oldest has passed `r` (bounded).
fn wait_for_oldest_past(w: &World, r: u64) {
    for _ in 0..10_000 {
        if !w.running() || oldest(w) > r {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Reads the four keys at the transaction's timestamp `r`: the rounds
/// (`None` for a key that conflicted with a prepared update, enforcing
/// readers only), or `None` after a violation.
fn read_four(w: &World, t: &mut Txn<'_, '_>, who: &str, r: u64) -> Option<[Option<u64>; 4]> {
    let mut out = [None; 4];
    for (i, k) in KEYS.iter().enumerate() {
        match t.get(k) {
            Ok(Some(v)) => out[i] = Some(w.check_value(who, k, r, &v)?),
            Ok(None) => {
                let again = match t.get(k) {
                    Ok(Some(v)) => {
                        let (round, tag) = decode(&v);
                        format!("round {round} (tag {tag:#x})")
                    }
                    other => format!("{other:?}"),
                };
                w.violation(format!(
                    "{who} get({}) at read ts {r}: Ok(None); again in the same txn: {again}; {}",
                    String::from_utf8_lossy(k),
                    w.globals()
                ));
                return None;
            }
            Err(Error::PrepareConflict { .. })
                if t.options().prepare_conflicts == PrepareConflicts::Enforce => {}
            Err(e) => panic!("{who} get at {r}: {e:?}"),
        }
    }
    Some(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// Ignores prepared updates, reads at a timestamp.
    Ignoring,
    /// Ignores prepared updates, reads at stable (the fast path).
    IgnoringAtStable,
    /// Enforces prepare conflicts, reads at a timestamp.
    Enforcing,
}

fn reader(w: &World, kind: Reader, id: u64) {
    let who = match kind {
        Reader::Ignoring => format!("ignoring reader {id}"),
        Reader::IgnoringAtStable => format!("ignoring fast-path reader {id}"),
        Reader::Enforcing => format!("enforcing reader {id}"),
    };
    let mut s: Session<'_> = w.e.session().unwrap();
    let mut rng = SmallRng::seed_from_u64(100 + id);
    while w.running() {
        let opts = TxnOptions {
            prepare_conflicts: if kind == Reader::Enforcing {
                PrepareConflicts::Enforce
            } else {
                PrepareConflicts::Ignore
            },
            read_at_stable: kind == Reader::IgnoringAtStable,
            ..TxnOptions::default()
        };
        let mut t = s.begin(&opts).unwrap();
        let r = if kind == Reader::IgnoringAtStable {
            t.read_timestamp().get()
        } else {
            // Between oldest and stable: at or above the prepare timestamp
            // of a round prepared before stable passed it, and never above
            // one prepared later (those are after stable).
            let st = w.e.query_timestamp(TimestampKind::Stable).unwrap().get();
            let r = st.saturating_sub(rng.gen_range(0..=OLDEST_LAG)).max(1);
            match t.set_read_timestamp(ts(r)) {
                Ok(r) => r.get(),
                Err(Error::ReadTimestampTooOld { .. }) => continue,
                Err(e) => panic!("{who}: set_read_timestamp({r}): {e:?}"),
            }
        };
        // Pass after pass over the four keys, with no yield, until oldest
        // has passed `r` (bounded): the reader is preempted by the
        // scheduler, often inside a read, and its last passes come when
        // only its own pin holds the history it reads.
        let mut last: Option<[Option<u64>; 4]> = None;
        for pass in 0..MAX_PASSES {
            let Some(now) = read_four(w, &mut t, &who, r) else {
                return;
            };
            if let Some(before) = last {
                if let Some(what) = inconsistent(kind, &before, &now) {
                    w.violation(format!("{who} at {r}: {what}"));
                    return;
                }
            }
            if kind != Reader::Enforcing {
                w.ignoring_reads.fetch_add(4, Ordering::Relaxed);
            }
            last = Some(now);
            if pass > 0 && (oldest(w) > r || !w.running()) {
                break;
            }
        }
    }
}

/// Passes over the four keys per reader transaction, at most.
const MAX_PASSES: usize = 4096;

fn oldest(w: &World) -> u64 {
    w.e.query_timestamp(TimestampKind::Oldest)
        .map_or(0, Timestamp::get)
}

/// What is wrong with a reader's pass `now` after its pass `before` at the
/// same timestamp, if anything: an enforcing reader reads one round in all
/// four keys and the same in every pass (keys that conflicted aside); an
/// ignoring one never reads a key at an older round than before.
fn inconsistent(kind: Reader, before: &[Option<u64>; 4], now: &[Option<u64>; 4]) -> Option<String> {
    if kind == Reader::Enforcing {
        let seen: Vec<u64> = before.iter().chain(now).flatten().copied().collect();
        return seen
            .windows(2)
            .any(|p| p[0] != p[1])
            .then(|| format!("rounds differ across keys or reads: {before:?} then {now:?}"));
    }
    (0..4).find(|&i| now[i] < before[i]).map(|i| {
        format!(
            "{} went back from round {:?} to {:?}",
            String::from_utf8_lossy(KEYS[i]),
            before[i],
            now[i]
        )
    })
}

#[test]
fn a_key_that_always_exists_is_never_read_as_absent() {
    let ms = std::env::var("IGNORING_READERS_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let w = World {
        e: Engine::new(EngineConfig {
            max_sessions: 16,
            // Every commit refreshes the horizon, so every commit's prune
            // cuts as far as the pins allow.
            horizon_refresh_commits: 1,
            ..EngineConfig::default()
        })
        .unwrap(),
        clock: AtomicU64::new(2),
        ledger: Mutex::new(HashMap::from([(
            LOAD,
            Fate::Committing {
                round: 0,
                commit: 1,
            },
        )])),
        stop: AtomicBool::new(false),
        deadline: Instant::now() + Duration::from_millis(ms),
        violations: Mutex::new(Vec::new()),
        ignoring_reads: AtomicU64::new(0),
        commits: AtomicU64::new(0),
        rollbacks: AtomicU64::new(0),
    };
    {
        let mut s = w.e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in KEYS {
            t.put(k, value(0, LOAD)).unwrap();
        }
        t.commit(CommitOptions::at(1)).unwrap();
    }
    w.e.set_timestamps(TimestampUpdate {
        oldest: Some(ts(1)),
        stable: Some(ts(1)),
        durable: None,
    })
    .unwrap();
    std::thread::scope(|sc| {
        let w = &w;
        for id in 1..=2 {
            sc.spawn(move || writer(w, id));
        }
        sc.spawn(move || timekeeper(w));
        sc.spawn(move || reader(w, Reader::Ignoring, 1));
        sc.spawn(move || reader(w, Reader::Ignoring, 2));
        sc.spawn(move || reader(w, Reader::IgnoringAtStable, 3));
        sc.spawn(move || reader(w, Reader::Enforcing, 4));
        sc.spawn(move || reader(w, Reader::Enforcing, 5));
        sc.spawn(move || {
            while w.running() {
                std::hint::spin_loop();
            }
        });
    });
    let violations = w.violations.into_inner().unwrap();
    eprintln!(
        "ignoring readers: {} reads, {} rounds committed, {} rolled back after prepare, {} violations",
        w.ignoring_reads.load(Ordering::Relaxed),
        w.commits.load(Ordering::Relaxed),
        w.rollbacks.load(Ordering::Relaxed),
        violations.len()
    );
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    assert!(
        w.commits.load(Ordering::Relaxed) > 0,
        "no round committed: the test checked nothing"
    );
}
