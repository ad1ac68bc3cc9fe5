//! Follower replicas on openraft (feature `replication`): an in-process
//! 3-node cluster. Every test is bounded (a few seconds).

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snapshot_engine::replication::{
    ClientError, ClientRequest, ClientResponse, LocalCluster, NodeConfig, NodeId, Op, Replica,
    ReplicaConfig, ReplicaError, TableKeys, TableOps, TcpClient, TcpConfig, TcpNode, WriteOptions,
};
use snapshot_engine::{EngineConfig, Error, TableNameProblem, Timestamp, TxnOptions};

const ACCOUNTS: u64 = 16;
const START_BALANCE: u64 = 100;
const LONG: Duration = Duration::from_secs(10);

fn config() -> ReplicaConfig {
    ReplicaConfig {
        // A write that times out fences its node; be generous on a loaded
        // machine (the failover test does not wait for it: the crashed
        // leader's raft answers at once).
        write_timeout: Duration::from_secs(10),
        ..ReplicaConfig::default()
    }
}

/// Sets its flag when dropped, on a panic too.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn account(i: u64) -> Vec<u8> {
    format!("acct/{i:04}").into_bytes()
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.expect("account exists").try_into().expect("8 bytes"))
}

fn leader(c: &LocalCluster) -> &Replica {
    let id = c.wait_for_leader(LONG).expect("a leader");
    c.node(id).unwrap()
}

fn followers(c: &LocalCluster) -> Vec<NodeId> {
    let l = c.wait_for_leader(LONG).unwrap();
    c.ids().into_iter().filter(|&id| id != l).collect()
}

fn load_accounts(node: &Replica) -> Timestamp {
    let (_, ts) = node
        .write(|t| {
            for i in 0..ACCOUNTS {
                t.put(&account(i), &START_BALANCE.to_le_bytes())?;
            }
            Ok(())
        })
        .expect("load");
    ts
}

/// One random transfer; `Ok(None)` on a write conflict (retry).
fn transfer(node: &Replica, rng: &mut SmallRng) -> Result<Option<Timestamp>, ReplicaError> {
    transfer_and_put(node, rng, None)
}

/// One random transfer that also writes `put` (key, value), if given;
/// `Ok(None)` on a write conflict (retry).
fn transfer_and_put(
    node: &Replica,
    rng: &mut SmallRng,
    put: Option<(&[u8], &[u8])>,
) -> Result<Option<Timestamp>, ReplicaError> {
    let a = rng.gen_range(0..ACCOUNTS);
    let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
    let amount = rng.gen_range(1..10u64);
    match node.write(|t| {
        let x = balance(t.get(&account(a))?);
        let y = balance(t.get(&account(b))?);
        let m = amount.min(x);
        t.put(&account(a), &(x - m).to_le_bytes())?;
        t.put(&account(b), &(y + m).to_le_bytes())?;
        put.map_or(Ok(()), |(k, v)| t.put(k, v))
    }) {
        Ok((_, ts)) => Ok(Some(ts)),
        Err(ReplicaError::Engine(Error::WriteConflict { .. })) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sums every account at the node's watermark; returns (sum, watermark).
fn sum_at_watermark(node: &Replica) -> (u64, Timestamp) {
    let reader = node.reader();
    let mut s = reader.engine().session().unwrap();
    let mut txn = reader
        .begin(&mut s, Timestamp::NONE, LONG)
        .expect("read at watermark");
    let w = txn.read_timestamp();
    let mut sum = 0;
    let mut n = 0;
    txn.scan("acct/".as_bytes().."acct0".as_bytes(), |_, v| {
        sum += u64::from_le_bytes(v.try_into().unwrap());
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, ACCOUNTS, "every account present at watermark {w:?}");
    (sum, w)
}

/// Everything in `node`'s engine as of timestamp `ts` (an ordinary
/// snapshot with a read timestamp).
fn contents_at(node: &Replica, ts: Timestamp) -> Vec<(Vec<u8>, Vec<u8>)> {
    let engine = node.engine();
    let mut s = engine.session().unwrap();
    let mut txn = s
        .begin(&TxnOptions {
            read_timestamp: Some(ts),
            read_only: true,
            ..TxnOptions::default()
        })
        .unwrap();
    txn.range(..).unwrap()
}

#[test]
fn bank_invariant_holds_on_every_follower_at_its_watermark() {
    let c = LocalCluster::start(3, config()).unwrap();
    let l = leader(&c);
    load_accounts(l);
    let stop = AtomicBool::new(false);
    let total = ACCOUNTS * START_BALANCE;
    let fs = followers(&c);
    let (commits, reads) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let stop = &stop;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(w);
                    let mut n = 0u64;
                    let mut last = Timestamp::NONE;
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(ts) = transfer(l, &mut rng).expect("transfer") {
                            assert!(ts > last, "one writer's commits get rising timestamps");
                            last = ts;
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        let readers: Vec<_> = fs
            .iter()
            .map(|&f| {
                let (stop, node) = (&stop, c.node(f).unwrap());
                s.spawn(move || {
                    let mut prev = Timestamp::NONE;
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let (sum, w) = sum_at_watermark(node);
                        assert_eq!(sum, total, "node {f}: money created or lost at {w:?}");
                        assert!(w >= prev, "node {f}: watermark went back {prev:?} -> {w:?}");
                        prev = w;
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        let commits: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
        let reads: Vec<u64> = readers.into_iter().map(|h| h.join().unwrap()).collect();
        (commits, reads)
    });
    assert!(commits > 0, "transfers committed");
    assert!(
        reads.iter().all(|&r| r > 0),
        "every follower served reads: {reads:?}"
    );
    // Every follower catches up to the leader's newest commit and holds the
    // same contents there.
    let last = {
        let (_, ts) = l.write(|t| t.put(b"marker", b"1")).unwrap();
        ts
    };
    for &f in &fs {
        c.wait_watermark(f, last, LONG).unwrap();
        assert_eq!(
            contents_at(c.node(f).unwrap(), last),
            contents_at(l, last),
            "node {f} equals the leader at {last:?}"
        );
        assert_eq!(sum_at_watermark(c.node(f).unwrap()).0, total);
    }
}

#[test]
fn the_watermark_only_moves_forward_and_never_passes_what_is_applied() {
    let c = LocalCluster::start(3, config()).unwrap();
    let l = leader(&c);
    let acked: Mutex<Vec<(Timestamp, Vec<u8>)>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let fs = followers(&c);
    let checked = std::thread::scope(|s| {
        for w in 0..2u64 {
            let (stop, acked) = (&stop, &acked);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("u/{w}/{i:06}").into_bytes();
                    let (_, ts) = l.write(|t| t.put(&key, b"v")).expect("write");
                    acked.lock().unwrap().push((ts, key));
                    i += 1;
                }
            });
        }
        let checkers: Vec<_> = fs
            .iter()
            .map(|&f| {
                let (stop, acked, node) = (&stop, &acked, c.node(f).unwrap());
                s.spawn(move || {
                    let mut verified: HashSet<Vec<u8>> = HashSet::new();
                    let mut prev = Timestamp::NONE;
                    let mut max_applied = Timestamp::NONE;
                    while !stop.load(Ordering::Relaxed) {
                        let reader = node.reader();
                        let mut sess = reader.engine().session().unwrap();
                        let mut txn = reader.begin(&mut sess, Timestamp::NONE, LONG).unwrap();
                        let w = txn.read_timestamp();
                        assert!(w >= prev, "node {f}: watermark went back {prev:?} -> {w:?}");
                        prev = w;
                        let todo: Vec<_> = acked
                            .lock()
                            .unwrap()
                            .iter()
                            .filter(|(ts, k)| *ts <= w && !verified.contains(k))
                            .cloned()
                            .collect();
                        for (ts, k) in todo {
                            assert!(
                                txn.get(&k).unwrap().is_some(),
                                "node {f}: watermark {w:?} passed acknowledged commit {ts:?} that it has not applied"
                            );
                            max_applied = max_applied.max(ts);
                            verified.insert(k);
                        }
                    }
                    assert!(max_applied <= prev);
                    verified.len()
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1200));
        stop.store(true, Ordering::Relaxed);
        checkers
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(
        checked.iter().all(|&n| n > 0),
        "every follower verified acknowledged commits: {checked:?}"
    );
}

#[test]
fn leader_failover_with_writes_in_flight_loses_no_acknowledged_write() {
    let c = LocalCluster::start(3, config()).unwrap();
    let old = c.wait_for_leader(LONG).unwrap();
    load_accounts(c.node(old).unwrap());
    // (leader that acknowledged it, commit ts, key)
    let acked: Mutex<Vec<(NodeId, Timestamp, Vec<u8>)>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let failed = std::thread::scope(|s| {
        // A failed check below ends the writers too (the scope joins them
        // before it reports the panic).
        let _stop_writers = StopOnDrop(&stop);
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let (stop, acked, c) = (&stop, &acked, &c);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(w);
                    let mut failed = 0u64;
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let Some(id) = c.leader() else {
                            std::thread::sleep(Duration::from_millis(2));
                            continue;
                        };
                        let node = c.node(id).unwrap();
                        let key = format!("f/{w}/{i:06}").into_bytes();
                        i += 1;
                        let a = rng.gen_range(0..ACCOUNTS);
                        let b = (a + 1) % ACCOUNTS;
                        let r = node.write(|t| {
                            let x = balance(t.get(&account(a))?);
                            let y = balance(t.get(&account(b))?);
                            let m = x.min(3);
                            t.put(&account(a), &(x - m).to_le_bytes())?;
                            t.put(&account(b), &(y + m).to_le_bytes())?;
                            t.put(&key, b"v")
                        });
                        match r {
                            Ok((_, ts)) => acked.lock().unwrap().push((id, ts, key)),
                            Err(ReplicaError::Engine(Error::WriteConflict { .. })) => {}
                            Err(
                                ReplicaError::Fenced { .. }
                                | ReplicaError::NotLeader { .. }
                                | ReplicaError::Raft { .. },
                            ) => failed += 1,
                            Err(e) => panic!("unexpected write error {e}"),
                        }
                    }
                    failed
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        // One write certainly in flight at the crash: it holds its commit
        // timestamp, delayed before its log append.
        let held = s.spawn(|| {
            let opts = WriteOptions {
                delay_before_append: Duration::from_millis(300),
            };
            c.node(old)
                .unwrap()
                .write_with(&opts, |t| t.put(b"held", b"1"))
        });
        std::thread::sleep(Duration::from_millis(50));
        c.crash(old);
        assert!(
            matches!(held.join().unwrap(), Err(ReplicaError::Fenced { .. })),
            "the write in flight at the crash failed, and fenced the old leader"
        );
        assert!(c.node(old).unwrap().is_fenced());
        let new = c.wait_for_leader(LONG).expect("a new leader");
        assert_ne!(new, old);
        let t = Instant::now();
        while acked.lock().unwrap().iter().filter(|a| a.0 == new).count() < 20 {
            assert!(t.elapsed() < LONG, "the new leader takes writes");
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    let new = c.leader().unwrap();
    let acked = acked.into_inner().unwrap();
    let before: Vec<_> = acked.iter().filter(|a| a.0 == old).collect();
    let after: Vec<_> = acked.iter().filter(|a| a.0 == new).collect();
    assert!(!before.is_empty() && !after.is_empty());
    let max_before = before.iter().map(|a| a.1).max().unwrap();
    let min_after = after.iter().map(|a| a.1).min().unwrap();
    assert!(
        min_after > max_before,
        "the new leader continues above every replicated timestamp: {min_after:?} > {max_before:?}"
    );
    let max_all = acked.iter().map(|a| a.1).max().unwrap();
    let survivors: Vec<NodeId> = c.ids().into_iter().filter(|&id| id != old).collect();
    for &id in &survivors {
        c.wait_watermark(id, max_all, LONG).unwrap();
        let node = c.node(id).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = contents_at(node, max_all).into_iter().collect();
        for (by, ts, key) in &acked {
            assert!(
                got.contains_key(key),
                "node {id} lost a write acknowledged by node {by} at {ts:?}"
            );
        }
        assert_eq!(sum_at_watermark(node).0, ACCOUNTS * START_BALANCE);
        assert!(
            !got.contains_key(&b"held"[..]),
            "a failed write is not applied"
        );
    }
    eprintln!("failover: {failed} writes failed around the crash");
}

#[test]
fn a_follower_restored_from_a_snapshot_catches_up() {
    let mut cfg = config();
    cfg.raft.max_in_snapshot_log_to_keep = 0;
    cfg.raft.purge_batch_size = 1;
    let mut c = LocalCluster::start(3, cfg).unwrap();
    let lid = c.wait_for_leader(LONG).unwrap();
    let l = c.node(lid).unwrap();
    for i in 0..200u64 {
        l.write(|t| {
            t.put(format!("k/{i:04}").as_bytes(), &i.to_le_bytes())?;
            if i % 7 == 0 && i > 0 {
                t.delete(format!("k/{:04}", i - 1).as_bytes())?;
            }
            Ok(())
        })
        .unwrap();
    }
    let (_, before_snapshot) = l.write(|t| t.put(b"k/0000", b"overwritten")).unwrap();
    c.wait_watermark(lid, before_snapshot, LONG).unwrap();
    c.snapshot(lid, LONG).unwrap();

    // A new node: only a snapshot can bring it up, the log is purged.
    c.add_learner(4, LONG).unwrap();
    c.wait_watermark(4, before_snapshot, LONG).unwrap();
    let n4 = c.node(4).unwrap();
    assert!(n4.stats().snapshots_installed >= 1, "{:?}", n4.stats());
    let l = c.node(lid).unwrap();
    let mut last = before_snapshot;
    for i in 200..300u64 {
        (_, last) = l
            .write(|t| t.put(format!("k/{i:04}").as_bytes(), &i.to_le_bytes()))
            .unwrap();
    }
    c.wait_watermark(4, last, LONG).unwrap();
    c.wait_watermark(lid, last, LONG).unwrap();
    assert_eq!(contents_at(n4, last), contents_at(l, last));
    assert_eq!(contents_at(n4, last).len(), contents_at(l, last).len());

    // A lagging follower: cut off while the leader writes and purges its log,
    // then reconnected: it installs a snapshot into a new engine; an old
    // reader learns it must take a new one.
    let f = c
        .ids()
        .into_iter()
        .find(|&id| id != lid && id != 4)
        .unwrap();
    let old_reader = c.node(f).unwrap().reader();
    c.router().set_cut(f, true);
    for i in 300..350u64 {
        (_, last) = l
            .write(|t| t.put(format!("k/{i:04}").as_bytes(), &i.to_le_bytes()))
            .unwrap();
    }
    c.wait_watermark(lid, last, LONG).unwrap();
    c.snapshot(lid, LONG).unwrap();
    c.router().set_cut(f, false);
    c.wait_watermark(f, last, LONG).unwrap();
    let nf = c.node(f).unwrap();
    assert!(nf.stats().snapshots_installed >= 1, "{:?}", nf.stats());
    let mut sess = old_reader.engine().session().unwrap();
    assert!(matches!(
        old_reader.begin(&mut sess, Timestamp::NONE, Duration::ZERO),
        Err(ReplicaError::EngineReplaced)
    ));
    let now_leader = c.wait_for_leader(LONG).unwrap();
    let (_, fin) = c
        .node(now_leader)
        .unwrap()
        .write(|t| t.put(b"final", b"1"))
        .unwrap();
    for id in c.ids() {
        c.wait_watermark(id, fin, LONG).unwrap();
    }
    let want = contents_at(c.node(now_leader).unwrap(), fin);
    for id in c.ids() {
        assert_eq!(contents_at(c.node(id).unwrap(), fin), want, "node {id}");
    }
}

#[test]
fn a_read_above_the_watermark_waits_within_its_bound_or_gets_a_typed_error() {
    let c = LocalCluster::start(3, config()).unwrap();
    let l = leader(&c);
    let f = c.node(followers(&c)[0]).unwrap();
    let (_, ts) = l.write(|t| t.put(b"k", b"v")).unwrap();

    // Far above anything the leader has committed: the typed error, after
    // waiting its bound.
    let reader = f.reader();
    let mut sess = reader.engine().session().unwrap();
    let want = Timestamp::new(ts.get() + 1_000_000);
    let t = Instant::now();
    match reader.begin(&mut sess, want, Duration::from_millis(30)) {
        Err(ReplicaError::WatermarkBehind {
            requested,
            watermark,
            waited,
        }) => {
            assert_eq!(requested, want);
            assert!(watermark < want);
            assert!(waited >= Duration::from_millis(30));
        }
        other => panic!("expected WatermarkBehind, got {:?}", other.map(|_| ())),
    }
    assert!(t.elapsed() < Duration::from_secs(5));
    // The session and reader stay usable; read-your-writes: wait for `ts`.
    let mut txn = reader.begin(&mut sess, ts, LONG).unwrap();
    assert!(txn.read_timestamp() >= ts);
    assert_eq!(txn.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(txn);

    // Writes on a follower are refused with the leader's id; a session of
    // another engine is refused.
    match f.write(|t| t.put(b"x", b"y")) {
        Err(ReplicaError::NotLeader { node, leader }) => {
            assert_eq!(node, f.id());
            assert_eq!(leader, Some(l.id()));
        }
        other => panic!("expected NotLeader, got {other:?}"),
    }
    let other = l.reader();
    let mut other_sess = other.engine().session().unwrap();
    assert!(matches!(
        reader.begin(&mut other_sess, Timestamp::NONE, Duration::ZERO),
        Err(ReplicaError::WrongEngine)
    ));
}

/// Pipelined writes: while no entry can commit (both followers cut off),
/// writes keep committing on the leader and queue; when the followers come
/// back, the queued commits go out together, in one entry or few, and every
/// write is acknowledged. Each write reads the counter the one before it
/// wrote (speculatively, before that one was acknowledged), so every
/// follower must hold the counter's versions in timestamp order.
#[test]
fn pipelined_writes_share_log_entries_and_keep_each_keys_order() {
    const N: u64 = 60;
    let c = LocalCluster::start(3, config()).unwrap();
    let l = leader(&c);
    let fs = followers(&c);
    let (_, seed) = l.write(|t| t.put(b"ctr", &0u64.to_le_bytes())).unwrap();
    let before = l.stats();
    for &f in &fs {
        c.router().set_cut(f, true);
    }
    let mut pending = Vec::new();
    for i in 1..=N {
        let w = l
            .submit(|t| {
                let v = balance(t.get(b"ctr")?);
                assert_eq!(v, i - 1, "write {i} reads the previous write's counter");
                t.put(b"ctr", &i.to_le_bytes())?;
                t.put(format!("p/{i:03}").as_bytes(), b"v")
            })
            .expect("commits on the leader while the followers are cut off");
        pending.push(w);
    }
    // Nothing is acknowledged while no majority has the entries, and the
    // leader's own watermark has not passed them either.
    assert!(
        pending.iter().all(|w| !w.is_done()),
        "acknowledged without a majority"
    );
    assert!(l.watermark().unwrap_or(Timestamp::NONE) <= seed);
    for &f in &fs {
        c.router().set_cut(f, false);
    }
    let acked: Vec<Timestamp> = pending
        .into_iter()
        .map(|w| {
            w.wait()
                .expect("acknowledged once the followers are back")
                .1
        })
        .collect();
    assert!(acked.windows(2).all(|p| p[0] < p[1]));
    let after = l.stats();
    let commits = after.commits_proposed - before.commits_proposed;
    let entries = after.batches_proposed - before.batches_proposed;
    assert_eq!(commits, N);
    assert!(
        entries < N / 2,
        "{N} queued commits went out in {entries} entries (group commit)"
    );
    for &f in &fs {
        let node = c.node(f).unwrap();
        for (i, &ts) in acked.iter().enumerate() {
            c.wait_watermark(f, ts, LONG).unwrap();
            let got: BTreeMap<_, _> = contents_at(node, ts).into_iter().collect();
            assert_eq!(
                got.get(&b"ctr"[..]).map(|v| v.as_slice()),
                Some(&(i as u64 + 1).to_le_bytes()[..]),
                "node {f} at {ts:?}"
            );
        }
    }
}

// ---- durable nodes: restarts from their own directories -------------------

/// A fresh directory for one test's cluster, removed when dropped.
struct TestDir(std::path::PathBuf);

impl TestDir {
    fn new(name: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!("replication-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TestDir(d)
    }

    /// Node `id`'s log segments, oldest first.
    fn segments(&self, id: NodeId) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(self.0.join(format!("n{id}")))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        v.sort();
        v
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` acknowledged transfers, each also writing its own key `w/<seq>`; the
/// keys and timestamps acknowledged are added to `acked`.
fn acked_writes(node: &Replica, rng: &mut SmallRng, n: usize, acked: &mut Vec<(Vec<u8>, u64)>) {
    let end = acked.len() + n;
    while acked.len() < end {
        let seq = acked.len() as u64;
        let key = format!("w/{seq:06}").into_bytes();
        let put = Some((&key[..], &seq.to_le_bytes()[..]));
        if let Some(ts) = transfer_and_put(node, rng, put).expect("write") {
            acked.push((key, ts.get()));
        }
    }
}

/// Node `id` holds every write in `acked`, and the bank's total, once its
/// watermark reaches `ts`.
fn holds_every_acked_write(c: &LocalCluster, id: NodeId, ts: Timestamp, acked: &[(Vec<u8>, u64)]) {
    c.wait_watermark(id, ts, LONG).unwrap();
    let node = c.node(id).unwrap();
    let (sum, _) = sum_at_watermark(node);
    assert_eq!(sum, START_BALANCE * ACCOUNTS, "node {id}: the bank's total");
    let got: BTreeMap<Vec<u8>, Vec<u8>> = contents_at(node, ts).into_iter().collect();
    for (seq, (k, at)) in acked.iter().enumerate() {
        assert_eq!(
            got.get(k).map(|v| v.as_slice()),
            Some(&(seq as u64).to_le_bytes()[..]),
            "node {id} lost acknowledged write {} at {at}",
            String::from_utf8_lossy(k)
        );
    }
}

#[test]
fn a_durable_cluster_restarted_whole_keeps_every_acknowledged_write() {
    let d = TestDir::new("whole");
    let mut rng = SmallRng::seed_from_u64(11);
    let mut acked = Vec::new();
    let snapped;
    // Small segments, so that the log spans many and a purge removes some.
    let mut cfg = config();
    cfg.log.segment_bytes = 4096;
    {
        let c = LocalCluster::open(&d.0, 3, cfg.clone()).unwrap();
        for id in c.ids() {
            assert!(c.node(id).unwrap().recovery().unwrap().fresh);
        }
        let l = leader(&c);
        load_accounts(l);
        acked_writes(l, &mut rng, 100, &mut acked);
        // One follower takes a snapshot and purges its log, so that its
        // restart goes through its snapshot file and the log after it.
        snapped = followers(&c)[0];
        let ts = Timestamp::new(acked.last().unwrap().1);
        c.wait_watermark(snapped, ts, LONG).unwrap();
        let before = d.segments(snapped).len();
        assert!(before > 2, "the log spans {before} segments");
        c.snapshot(snapped, LONG).unwrap();
        // The purge after the snapshot removes the segments it empties.
        let t = Instant::now();
        while d.segments(snapped).len() >= before {
            assert!(t.elapsed() < LONG, "purged segments are removed");
            std::thread::sleep(Duration::from_millis(5));
        }
        acked_writes(l, &mut rng, 100, &mut acked);
    }
    // Every node stopped. They come back from their directories alone.
    let c = LocalCluster::open(&d.0, 3, cfg).unwrap();
    for id in c.ids() {
        let r = c.node(id).unwrap().recovery().unwrap().clone();
        assert!(!r.fresh, "node {id} found its files");
        assert!(r.entries > 0, "node {id} recovered its log: {r:?}");
        assert_eq!(
            r.snapshot_index.is_some(),
            id == snapped,
            "node {id}: {r:?}"
        );
        assert_eq!(r.torn_tail, None);
    }
    let l = leader(&c);
    let (_, last) = l.write(|t| t.put(b"after", b"1")).unwrap();
    for id in c.ids() {
        holds_every_acked_write(&c, id, last, &acked);
        assert_eq!(c.node(id).unwrap().stats().snapshots_installed, 0);
    }
}

#[test]
fn a_stopped_follower_restarts_from_its_own_directory_and_catches_up() {
    let d = TestDir::new("follower");
    let mut rng = SmallRng::seed_from_u64(12);
    let mut acked = Vec::new();
    let mut c = LocalCluster::open(&d.0, 3, config()).unwrap();
    let l = c.wait_for_leader(LONG).unwrap();
    load_accounts(c.node(l).unwrap());
    acked_writes(c.node(l).unwrap(), &mut rng, 50, &mut acked);
    let f = followers(&c)[0];
    let ts = Timestamp::new(acked.last().unwrap().1);
    c.wait_watermark(f, ts, LONG).unwrap();
    assert!(c.stop(f));
    // The other two go on without it.
    acked_writes(c.node(l).unwrap(), &mut rng, 50, &mut acked);
    let r = c.spawn_node(f).unwrap().recovery().unwrap().clone();
    assert!(!r.fresh && r.entries > 0, "{r:?}");
    let (_, last) = c.node(l).unwrap().write(|t| t.put(b"after", b"1")).unwrap();
    holds_every_acked_write(&c, f, last, &acked);
    let node = c.node(f).unwrap();
    let stats = node.stats();
    assert_eq!(
        stats.snapshots_installed, 0,
        "it caught up from the log, not a snapshot"
    );
    assert!(
        stats.log_syncs > 0 && stats.log_syncs <= stats.log_writes,
        "{stats:?}"
    );
    assert_eq!(
        contents_at(node, last),
        contents_at(c.node(l).unwrap(), last)
    );
}

#[test]
fn a_torn_raft_log_is_cut_and_reported_and_damage_inside_is_a_typed_error() {
    let d = TestDir::new("damage");
    let mut rng = SmallRng::seed_from_u64(13);
    let mut acked = Vec::new();
    {
        let c = LocalCluster::open(&d.0, 3, config()).unwrap();
        let l = leader(&c);
        load_accounts(l);
        acked_writes(l, &mut rng, 30, &mut acked);
        let ts = Timestamp::new(acked.last().unwrap().1);
        for id in c.ids() {
            c.wait_watermark(id, ts, LONG).unwrap();
        }
    }
    // A crash in the middle of node 2's last write: the tail is cut off and
    // reported, and the node serves everything before it.
    let seg = d.segments(2).pop().unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, &[7, 0, 0, 0, 9]).unwrap();
    drop(f);
    {
        let c = LocalCluster::open(&d.0, 3, config()).unwrap();
        let torn = c.node(2).unwrap().recovery().unwrap().torn_tail.clone();
        let torn = torn.expect("a torn tail reported");
        assert_eq!((torn.file, torn.offset, torn.bytes_dropped), (seg, len, 5));
        let (_, last) = leader(&c).write(|t| t.put(b"after", b"1")).unwrap();
        for id in c.ids() {
            holds_every_acked_write(&c, id, last, &acked);
        }
    }
    // A flipped bit inside node 3's first segment is corruption: the node
    // refuses to start, naming the file and the offset.
    let seg = d.segments(3).remove(0);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();
    match LocalCluster::open(&d.0, 3, config()) {
        Err(ReplicaError::Engine(Error::Corrupt { file, offset, .. })) => {
            assert_eq!(file, seg);
            assert!(offset as usize <= at, "offset {offset}, flipped byte {at}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a corrupt raft log opened"),
    }
    bytes[at] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();
    // The same for a damaged snapshot file.
    {
        let c = LocalCluster::open(&d.0, 3, config()).unwrap();
        c.snapshot(1, LONG).unwrap();
        // A second open of a running node's directory is refused.
        match LocalCluster::open(&d.0, 3, config()) {
            Err(ReplicaError::Engine(Error::DirectoryLocked { path })) => {
                assert_eq!(path, d.0.join("n1"))
            }
            Err(e) => panic!("expected DirectoryLocked, got {e}"),
            Ok(_) => panic!("a node directory opened twice"),
        }
    }
    let snap = d.0.join("n1").join("snapshot");
    let mut bytes = std::fs::read(&snap).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 1;
    std::fs::write(&snap, &bytes).unwrap();
    match LocalCluster::open(&d.0, 3, config()) {
        Err(ReplicaError::Engine(Error::Corrupt { file, .. })) => assert_eq!(file, snap),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a corrupt snapshot opened"),
    }
}

// Named tables. Creates and drops are log entries applied in log order on
// every node, with the leader's ids; a commit across tables is one record.

/// `node`'s live named tables: name and id.
fn catalog(node: &Replica) -> Vec<(String, u32)> {
    node.table_names()
        .into_iter()
        .map(|n| {
            let id = node.open_table(&n).unwrap().id().get();
            (n, id)
        })
        .collect()
}

/// The contents of table `name` (`None`: the default table) in `node`'s
/// engine as of timestamp `ts`.
fn table_at(node: &Replica, name: Option<&str>, ts: Timestamp) -> Vec<(Vec<u8>, Vec<u8>)> {
    let engine = node.engine();
    let table = name.map(|n| engine.open_table(n).unwrap());
    let mut s = engine.session().unwrap();
    let mut txn = s
        .begin(&TxnOptions {
            read_timestamp: Some(ts),
            read_only: true,
            ..TxnOptions::default()
        })
        .unwrap();
    match &table {
        None => txn.range(..).unwrap(),
        Some(t) => txn.table(t).unwrap().range(..).unwrap(),
    }
}

/// Every node of `c` at `ts` has the catalog `want` and, table by table
/// (the default one too), the leader's contents.
fn tables_agree(c: &LocalCluster, lid: NodeId, ts: Timestamp, want: &[(&str, u32)]) {
    let want: Vec<(String, u32)> = want.iter().map(|&(n, id)| (n.to_string(), id)).collect();
    let l = c.node(lid).unwrap();
    for id in c.ids() {
        c.wait_watermark(id, ts, LONG).unwrap();
        let node = c.node(id).unwrap();
        assert_eq!(catalog(node), want, "node {id}'s tables");
        assert_eq!(table_at(node, None, ts), table_at(l, None, ts), "node {id}");
        for (name, _) in &want {
            assert_eq!(
                table_at(node, Some(name), ts),
                table_at(l, Some(name), ts),
                "node {id}, table {name}"
            );
        }
    }
}

/// Moves `amount` from user `from` to user `to` (table `users`), appends
/// the transfer to `ledger` under the next sequence number, and counts it
/// in the default table: one transaction over three tables.
fn table_transfer(
    node: &Replica,
    users: &snapshot_engine::Table,
    ledger: &snapshot_engine::Table,
    from: u64,
    to: u64,
) -> Result<Timestamp, ReplicaError> {
    let (_, ts) = node.write(|t| {
        let n = t.get(b"transfers")?.map_or(0, |v| balance(Some(v)));
        t.put(b"transfers", &(n + 1).to_le_bytes())?;
        let mut u = t.table(users)?;
        let a = balance(u.get(&account(from))?);
        let b = balance(u.get(&account(to))?);
        let amount = a.min(7);
        u.put(&account(from), &(a - amount).to_le_bytes())?;
        u.put(&account(to), &(b + amount).to_le_bytes())?;
        t.table(ledger)?.put(
            format!("t/{n:06}").as_bytes(),
            format!("{from}->{to}:{amount}").as_bytes(),
        )?;
        Ok(())
    })?;
    Ok(ts)
}

/// At `node`'s watermark, through its reader: the users' balances sum to
/// the start, and the ledger holds exactly as many transfers as the
/// default table's count.
fn bank_holds_across_tables(node: &Replica) {
    let reader = node.reader();
    let users = reader.table("users").unwrap();
    let ledger = reader.table("ledger").unwrap();
    let mut s = reader.engine().session().unwrap();
    let mut txn = reader.begin(&mut s, Timestamp::NONE, LONG).unwrap();
    let count = txn
        .get(b"transfers")
        .unwrap()
        .map_or(0, |v| balance(Some(v)));
    let mut sum = 0;
    txn.table(&users)
        .unwrap()
        .scan(.., |_, v| {
            sum += u64::from_le_bytes(v.try_into().unwrap());
            true
        })
        .unwrap();
    assert_eq!(
        sum,
        ACCOUNTS * START_BALANCE,
        "at {:?}",
        txn.read_timestamp()
    );
    let logged = txn.table(&ledger).unwrap().range(..).unwrap().len() as u64;
    assert_eq!(logged, count, "at {:?}", txn.read_timestamp());
}

#[test]
fn tables_created_written_and_dropped_on_the_leader_agree_on_every_follower() {
    let c = LocalCluster::start(3, config()).unwrap();
    let lid = c.wait_for_leader(LONG).unwrap();
    let l = c.node(lid).unwrap();
    let users = l
        .create_table("users", snapshot_engine::TableOptions::default())
        .unwrap();
    let ledger = l
        .create_table("ledger", snapshot_engine::TableOptions::default())
        .unwrap();
    let scratch = l
        .create_table(
            "scratch",
            snapshot_engine::TableOptions {
                max_key_len: Some(8),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (users.id().get(), ledger.id().get(), scratch.id().get()),
        (1, 2, 3)
    );
    assert!(matches!(
        l.create_table("users", snapshot_engine::TableOptions::default()),
        Err(ReplicaError::Engine(Error::TableExists { .. }))
    ));
    let f = followers(&c)[0];
    assert!(matches!(
        c.node(f)
            .unwrap()
            .create_table("other", snapshot_engine::TableOptions::default()),
        Err(ReplicaError::NotLeader { .. })
    ));
    let (_, loaded) = l
        .write(|t| {
            let mut u = t.table(&users)?;
            for i in 0..ACCOUNTS {
                u.put(&account(i), &START_BALANCE.to_le_bytes())?;
            }
            t.table(&scratch)?.put(b"s1", b"gone soon")
        })
        .unwrap();
    // The bound is the table's, on the leader and (from the entry) on
    // every node.
    assert!(matches!(
        l.write(|t| t.table(&scratch)?.put(b"nine-byte", b"x")),
        Err(ReplicaError::Engine(Error::KeyTooLarge { .. }))
    ));

    // One transaction over three tables is one record: one commit, its
    // writes installed together, on every follower.
    for id in followers(&c) {
        c.wait_watermark(id, loaded, LONG).unwrap();
    }
    let before: Vec<_> = followers(&c)
        .into_iter()
        .map(|id| c.node(id).unwrap().stats())
        .collect();
    let ts = table_transfer(l, &users, &ledger, 0, 1).unwrap();
    for (id, b) in followers(&c).into_iter().zip(before) {
        c.wait_watermark(id, ts, LONG).unwrap();
        let a = c.node(id).unwrap().stats();
        assert_eq!(a.applied_commits - b.applied_commits, 1, "node {id}");
        // The count, two balances and a ledger line.
        assert_eq!(a.applied_writes - b.applied_writes, 4, "node {id}");
    }

    // Readers at the watermark on every follower, while the leader moves
    // money: the invariants across tables hold at every read.
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for id in followers(&c) {
            let (c, stop) = (&c, &stop);
            s.spawn(move || {
                let node = c.node(id).unwrap();
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) || reads == 0 {
                    bank_holds_across_tables(node);
                    reads += 1;
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        let mut rng = SmallRng::seed_from_u64(21);
        for _ in 0..150 {
            let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
            table_transfer(l, &users, &ledger, a, b).unwrap();
        }
    });

    // A drop: gone on every node, with its contents; the old handle reads
    // nothing; the name's next table has a new id and is empty.
    l.drop_table("scratch").unwrap();
    assert!(matches!(
        l.write(|t| t.table(&scratch)?.put(b"s2", b"x")),
        Err(ReplicaError::Engine(Error::TableDropped { .. }))
    ));
    assert!(matches!(
        l.drop_table("scratch"),
        Err(ReplicaError::Engine(Error::TableNotFound { .. }))
    ));
    let scratch2 = l
        .create_table("scratch", snapshot_engine::TableOptions::default())
        .unwrap();
    assert_eq!(scratch2.id().get(), 4, "ids are never reused");
    let (_, last) = l.write(|t| t.table(&scratch2)?.put(b"s3", b"new")).unwrap();
    tables_agree(
        &c,
        lid,
        last,
        &[("ledger", 2), ("scratch", 4), ("users", 1)],
    );
    for id in followers(&c) {
        let node = c.node(id).unwrap();
        assert_eq!(
            table_at(node, Some("scratch"), last),
            vec![(b"s3".to_vec(), b"new".to_vec())],
            "node {id}"
        );
        assert_eq!(node.stats().tables_created, 4, "node {id}");
        assert_eq!(node.stats().tables_dropped, 1, "node {id}");
        bank_holds_across_tables(node);
    }
}

/// A leader transaction that wrote a table dropped before it commits is
/// refused with `TableDropped` and rolled back whole (its default-table
/// write too), on every node; the leader is not fenced and goes on.
#[test]
fn a_leader_commit_racing_a_drop_of_its_table_is_refused_and_leaves_nothing() {
    let c = LocalCluster::start(3, config()).unwrap();
    let lid = c.wait_for_leader(LONG).unwrap();
    let l = c.node(lid).unwrap();
    let t1 = l
        .create_table("t1", snapshot_engine::TableOptions::default())
        .unwrap();
    let r = l.write(|t| {
        t.put(b"default", b"with t1")?;
        t.table(&t1)?.put(b"k", b"v")?;
        // The drop is committed and applied everywhere, this node too,
        // while the transaction is open.
        l.drop_table("t1").unwrap();
        Ok(())
    });
    assert!(
        matches!(r, Err(ReplicaError::Engine(Error::TableDropped { .. }))),
        "{r:?}"
    );
    assert!(!l.is_fenced(), "a refused commit fences nothing");
    let (_, last) = l.write(|t| t.put(b"after", b"1")).unwrap();
    tables_agree(&c, lid, last, &[]);
    for id in c.ids() {
        assert_eq!(
            table_at(c.node(id).unwrap(), None, last),
            vec![(b"after".to_vec(), b"1".to_vec())],
            "node {id}"
        );
    }
}

/// A three-node cluster that purges its log at each snapshot, with tables
/// `a` (id 1), `b` (2) and `gone` (3, the newest), `writes` made to them by
/// the leader, then `gone` dropped, a last write, a snapshot, and a node 4
/// that only the snapshot can bring up (the log is purged), checked to
/// have every table from it: the cluster, the leader, `a` and the last
/// write's timestamp.
fn tables_installed_on_a_new_node(
    writes: impl Fn(&Replica, [&snapshot_engine::Table; 3]),
) -> (LocalCluster, NodeId, snapshot_engine::Table, Timestamp) {
    let mut cfg = config();
    cfg.raft.max_in_snapshot_log_to_keep = 0;
    cfg.raft.purge_batch_size = 1;
    let mut c = LocalCluster::start(3, cfg).unwrap();
    let lid = c.wait_for_leader(LONG).unwrap();
    let l = c.node(lid).unwrap();
    let opts = snapshot_engine::TableOptions::default();
    let a = l.create_table("a", opts).unwrap();
    let b = l.create_table("b", opts).unwrap();
    // The newest id, dropped: the snapshot's catalog lacks it, and no node
    // may give its id to the next table.
    let gone = l.create_table("gone", opts).unwrap();
    writes(l, [&a, &b, &gone]);
    l.drop_table("gone").unwrap();
    let (_, at) = l.write(|t| t.table(&b)?.put(b"last", b"1")).unwrap();
    c.wait_watermark(lid, at, LONG).unwrap();
    c.snapshot(lid, LONG).unwrap();

    c.add_learner(4, LONG).unwrap();
    c.wait_watermark(4, at, LONG).unwrap();
    let n4 = c.node(4).unwrap();
    assert!(n4.stats().snapshots_installed >= 1, "{:?}", n4.stats());
    assert_eq!(
        n4.stats().tables_created,
        0,
        "the tables came in the snapshot"
    );
    assert_eq!(catalog(n4), [("a".to_string(), 1), ("b".to_string(), 2)]);
    (c, lid, a, at)
}

#[test]
fn a_snapshot_install_carries_every_table_with_its_id() {
    let (c, lid, a, at) = tables_installed_on_a_new_node(|l, [a, b, gone]| {
        for i in 0..100u64 {
            l.write(|t| {
                let k = format!("k/{i:04}");
                t.put(k.as_bytes(), b"d")?;
                t.table(a)?.put(k.as_bytes(), &i.to_le_bytes())?;
                t.table(gone)?.put(k.as_bytes(), b"g")?;
                if i % 3 == 0 {
                    t.table(b)?.put(k.as_bytes(), &(i * 2).to_le_bytes())?;
                }
                if i % 10 == 9 {
                    t.table(a)?.delete(format!("k/{:04}", i - 1).as_bytes())?;
                }
                Ok(())
            })
            .unwrap();
        }
    });
    let opts = snapshot_engine::TableOptions::default();
    let l = c.node(lid).unwrap();
    let n4 = c.node(4).unwrap();
    for name in [None, Some("a"), Some("b")] {
        assert_eq!(table_at(n4, name, at), table_at(l, name, at), "{name:?}");
    }
    assert_eq!(table_at(n4, Some("a"), at).len(), 90);
    // The log after the snapshot goes on from the same ids.
    let c2 = l.create_table("c", opts).unwrap();
    assert_eq!(c2.id().get(), 4);
    let (_, last) = l
        .write(|t| {
            t.table(&a)?.put(b"after", b"a")?;
            t.table(&c2)?.put(b"after", b"c")
        })
        .unwrap();
    c.wait_watermark(4, last, LONG).unwrap();
    let n4 = c.node(4).unwrap();
    let l = c.node(lid).unwrap();
    assert_eq!(catalog(n4), catalog(l));
    for name in [None, Some("a"), Some("b"), Some("c")] {
        assert_eq!(
            table_at(n4, name, last),
            table_at(l, name, last),
            "{name:?}"
        );
    }
}

/// A leader transaction reads many keys at once, ranges and cursors, in a
/// named table and in the default one, its own writes included; the
/// writes it makes around them replicate as usual.
#[test]
fn a_leader_write_reads_many_keys_ranges_and_cursors_of_each_table() {
    let c = LocalCluster::start(3, config()).unwrap();
    let lid = c.wait_for_leader(LONG).unwrap();
    let l = c.node(lid).unwrap();
    let users = l
        .create_table("users", snapshot_engine::TableOptions::default())
        .unwrap();
    let v = |s: &str| Some(s.as_bytes().to_vec());
    let pair = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
    l.write(|t| {
        for i in 1..=5 {
            t.put(format!("k{i}").as_bytes(), format!("d{i}").as_bytes())?;
            t.table(&users)?
                .put(format!("u{i}").as_bytes(), format!("v{i}").as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let (_, ts) = l
        .write(|t| {
            t.table(&users)?.put(b"u6", b"v6")?;
            t.delete(b"k1")?;
            // Each table's keys, none of the other's; own writes seen.
            assert_eq!(
                t.get_many(&["k1", "k2", "u2", "k9"])?,
                [None, v("d2"), None, None]
            );
            let mut seen = Vec::new();
            t.get_many_with(&["k3", "u3"], |i, val| {
                seen.push((i, val.map(<[u8]>::to_vec)))
            })?;
            assert_eq!(seen, [(0, v("d3")), (1, None)]);
            assert_eq!(t.range(&b"k4"[..]..)?, [pair("k4", "d4"), pair("k5", "d5")]);
            let last = t.cursor().next_back().unwrap()?;
            assert_eq!((last.0, &last.1[..]), (&b"k5"[..], &b"d5"[..]));
            let keys: Vec<Vec<u8>> = t
                .iter(..)
                .map(|r| r.map(|(k, _)| k.to_vec()))
                .collect::<Result<_, _>>()?;
            assert_eq!(keys, [b"k2", b"k3", b"k4", b"k5"]);

            let mut u = t.table(&users)?;
            assert_eq!(u.get_many(&["u1", "k2", "u6"])?, [v("v1"), None, v("v6")]);
            let mut seen = Vec::new();
            u.get_many_with(&["k3", "u3"], |i, val| {
                seen.push((i, val.map(<[u8]>::to_vec)))
            })?;
            assert_eq!(seen, [(0, None), (1, v("v3"))]);
            assert_eq!(
                u.range(&b"u2"[..]..&b"u4"[..])?,
                [pair("u2", "v2"), pair("u3", "v3")]
            );
            let mut cur = u.cursor();
            cur.seek("u5");
            let got: Vec<_> = cur
                .map(|r| r.map(|(k, v)| (k.to_vec(), v)))
                .collect::<Result<_, _>>()?;
            assert_eq!(got, [pair("u5", "v5"), pair("u6", "v6")]);
            let back: Vec<Vec<u8>> = u
                .iter(..&b"u3"[..])
                .rev()
                .map(|r| r.map(|(k, _)| k.to_vec()))
                .collect::<Result<_, _>>()?;
            assert_eq!(back, [b"u2", b"u1"]);
            // A write after the cursors is recorded as usual.
            u.delete(b"u1")
        })
        .unwrap();
    tables_agree(&c, lid, ts, &[("users", 1)]);
    let f = followers(&c)[0];
    let users_at = table_at(c.node(f).unwrap(), Some("users"), ts);
    let names: Vec<_> = users_at.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(names, [&b"u2"[..], b"u3", b"u4", b"u5", b"u6"]);
    assert_eq!(table_at(c.node(f).unwrap(), None, ts).len(), 4);
}

/// A node that got every table from a snapshot (none from create entries)
/// becomes the leader, then creates tables: their ids go on past the
/// newest id the installed catalog's cluster gave out (a dropped one
/// included), never reusing one, and every node agrees on the tables and
/// their contents.
#[test]
fn a_leader_whose_tables_came_in_a_snapshot_creates_tables_with_new_ids() {
    let (c, _, _, _) = tables_installed_on_a_new_node(|l, [a, b, gone]| {
        for i in 0..50u64 {
            l.write(|t| {
                let k = format!("k/{i:04}");
                t.put(k.as_bytes(), b"d")?;
                t.table(a)?.put(k.as_bytes(), &i.to_le_bytes())?;
                t.table(b)?.put(k.as_bytes(), b"b")?;
                t.table(gone)?.put(k.as_bytes(), b"g")
            })
            .unwrap();
        }
    });
    let opts = snapshot_engine::TableOptions::default();

    // Node 4 the only voter: the old leader steps down and node 4, the
    // only node that can, elects itself. Then the old voters join it
    // again, node 4 leading.
    c.change_voters(&[4], LONG).unwrap();
    let t = Instant::now();
    while c.leader() != Some(4) {
        assert!(t.elapsed() < LONG, "node 4 leads within {LONG:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    c.change_voters(&[1, 2, 3, 4], LONG).unwrap();
    assert_eq!(c.wait_for_leader(LONG).unwrap(), 4);

    let n4 = c.node(4).unwrap();
    let c4 = n4.create_table("c", opts).unwrap();
    assert_eq!(c4.id().get(), 4, "past the dropped id 3");
    let gone2 = n4.create_table("gone", opts).unwrap();
    assert_eq!(gone2.id().get(), 5);
    let (_, mid) = n4
        .write(|t| {
            let a = t.open_table("a")?;
            t.table(&a)?.put(b"after", b"a")?;
            t.table(&c4)?.put(b"after", b"c")?;
            t.table(&gone2)?.put(b"after", b"g")?;
            t.put(b"after", b"d")
        })
        .unwrap();
    tables_agree(&c, 4, mid, &[("a", 1), ("b", 2), ("c", 4), ("gone", 5)]);
    n4.drop_table("b").unwrap();
    let d4 = n4.create_table("d", opts).unwrap();
    assert_eq!(d4.id().get(), 6);
    let (_, last) = n4.write(|t| t.table(&d4)?.put(b"d", b"6")).unwrap();
    tables_agree(&c, 4, last, &[("a", 1), ("c", 4), ("d", 6), ("gone", 5)]);
    for id in c.ids() {
        let node = c.node(id).unwrap();
        assert_eq!(table_at(node, Some("a"), last).len(), 51, "node {id}");
        assert_eq!(
            table_at(node, Some("gone"), last),
            [(b"after".to_vec(), b"g".to_vec())],
            "node {id}: the new table of the name holds none of the old one's keys"
        );
    }
}

#[test]
fn a_durable_follower_restarted_from_its_directory_has_every_table() {
    let d = TestDir::new("tables");
    let mut c = LocalCluster::open(&d.0, 3, config()).unwrap();
    let lid = c.wait_for_leader(LONG).unwrap();
    let f = followers(&c)[0];
    let opts = snapshot_engine::TableOptions::default();
    let write_all = |l: &Replica, tables: &[&snapshot_engine::Table], from: u64| {
        let mut last = Timestamp::NONE;
        for i in from..from + 40 {
            (_, last) = l
                .write(|t| {
                    for table in tables {
                        t.table(table)?
                            .put(format!("k/{i:04}").as_bytes(), &i.to_le_bytes())?;
                    }
                    Ok(())
                })
                .unwrap();
        }
        last
    };
    let l = c.node(lid).unwrap();
    let x = l.create_table("x", opts).unwrap();
    let y = l.create_table("y", opts).unwrap();
    let ts = write_all(l, &[&x, &y], 0);
    // The follower's snapshot file holds x and y; its log after it, the
    // rest.
    c.wait_watermark(f, ts, LONG).unwrap();
    c.snapshot(f, LONG).unwrap();
    let l = c.node(lid).unwrap();
    let z = l.create_table("z", opts).unwrap();
    write_all(l, &[&x, &z], 40);
    l.drop_table("y").unwrap();
    let ts = write_all(l, &[&z], 80);
    c.wait_watermark(f, ts, LONG).unwrap();
    assert!(c.stop(f));
    // Written while it is down: it catches up from the leader's log.
    let l = c.node(lid).unwrap();
    let w = l.create_table("w", opts).unwrap();
    let last = write_all(l, &[&x, &w], 120);
    let r = c.spawn_node(f).unwrap().recovery().unwrap().clone();
    assert!(r.snapshot_index.is_some(), "{r:?}");
    tables_agree(&c, lid, last, &[("w", 4), ("x", 1), ("z", 3)]);
    assert_eq!(c.node(f).unwrap().stats().snapshots_installed, 0);
    assert_eq!(table_at(c.node(f).unwrap(), Some("x"), last).len(), 120);
}

// The TCP client's named tables. Three `TcpNode`s in this process on
// 127.0.0.1; every request goes through a `TcpClient`.

/// A free port of 127.0.0.1 below Linux's ephemeral range (32768 and up by
/// default), which every `connect` draws its local port from: a test
/// running beside this one cannot take it between this probe and the
/// node's bind. Each call in this process gets a port no earlier call got.
fn free_addr() -> SocketAddr {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = u64::from(std::process::id()) * 7_919 + 3_001;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((start + n * 4_999) % 12_000) as u16;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return l.local_addr().unwrap();
        }
    }
    panic!("no free port of 127.0.0.1 in 20000..32000");
}

/// This test process's cluster name: its nodes refuse every frame of a
/// cluster another test process runs on a port `free_addr` probed here.
fn tcp_config() -> TcpConfig {
    TcpConfig {
        cluster: format!("replication-tests-{}", std::process::id()),
        ..TcpConfig::default()
    }
}

/// Three `TcpNode`s on their directories under `dir`, node 1 initializing
/// the cluster.
fn tcp_cluster(dir: &TestDir) -> Vec<TcpNode> {
    let addrs: BTreeMap<NodeId, SocketAddr> = (1..=3).map(|id| (id, free_addr())).collect();
    addrs
        .keys()
        .map(|&id| {
            TcpNode::start(NodeConfig {
                id,
                addr: addrs[&id],
                peers: addrs
                    .iter()
                    .filter(|&(&p, _)| p != id)
                    .map(|(&p, &a)| (p, a))
                    .collect(),
                data_dir: dir.0.join(format!("n{id}")),
                init: id == 1,
                replica: config(),
                tcp: tcp_config(),
            })
            .unwrap()
        })
        .collect()
}

/// The node whose status says it is the ready leader (bounded wait).
fn tcp_leader(nodes: &[TcpNode]) -> &TcpNode {
    let t = Instant::now();
    loop {
        for n in nodes {
            if let Ok(ClientResponse::Status {
                leader_ready: true, ..
            }) = tcp_client(n).call(ClientRequest::Status)
            {
                return n;
            }
        }
        assert!(t.elapsed() < LONG, "no leader within {LONG:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn tcp_client(n: &TcpNode) -> TcpClient {
    TcpClient::new(n.addr(), tcp_config()).unwrap()
}

/// `req`'s answer, which must not be a transport error.
fn call(n: &TcpNode, req: ClientRequest) -> ClientResponse {
    tcp_client(n)
        .call(req.clone())
        .unwrap_or_else(|e| panic!("{req:?}: {e}"))
}

/// The error `req` gets from `n`.
fn failed(n: &TcpNode, req: ClientRequest) -> ClientError {
    match call(n, req.clone()) {
        ClientResponse::Failed(e) => e,
        other => panic!("{req:?} succeeded: {other:?}"),
    }
}

fn ops(table: Option<&str>, ops: Vec<Op>) -> TableOps {
    TableOps {
        table: table.map(str::to_string),
        ops,
    }
}

fn put(key: &str, value: &str) -> Op {
    Op::Put {
        key: key.into(),
        value: value.into(),
    }
}

/// `keys` of `table`, one group of a read.
fn keys(table: Option<&str>, keys: &[&str]) -> TableKeys {
    TableKeys {
        table: table.map(str::to_string),
        keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
    }
}

/// Reads `reads` at `n`'s watermark once it reaches `at_least`.
fn read_tables(n: &TcpNode, reads: Vec<TableKeys>, at_least: u64) -> Vec<Vec<Option<Vec<u8>>>> {
    match call(
        n,
        ClientRequest::ReadTables {
            reads,
            at_least,
            wait_ms: LONG.as_millis() as u64,
        },
    ) {
        ClientResponse::ReadTables { ts, values } => {
            assert!(ts >= at_least, "read at {ts}, below {at_least}");
            values
        }
        other => panic!("read: {other:?}"),
    }
}

fn write_tables(n: &TcpNode, writes: Vec<TableOps>) -> u64 {
    match call(n, ClientRequest::WriteTables { writes }) {
        ClientResponse::Written { ts } => ts,
        other => panic!("write: {other:?}"),
    }
}

fn table_infos(n: &TcpNode) -> Vec<(String, u32)> {
    match call(n, ClientRequest::ListTables) {
        ClientResponse::Tables(t) => t.into_iter().map(|t| (t.name, t.id)).collect(),
        other => panic!("list: {other:?}"),
    }
}

fn some(v: &str) -> Option<Vec<u8>> {
    Some(v.as_bytes().to_vec())
}

/// A client creates two tables on the leader, writes them and the default
/// table in one transaction, reads all three back at one watermark on the
/// leader and on each follower, scans a table by pages, drops one table
/// and gets `TableNotFound` for it everywhere after; a taken name, a bad
/// name, a bound broken and a create on a follower get their typed errors.
#[test]
fn a_tcp_client_creates_writes_reads_and_drops_named_tables() {
    let dir = TestDir::new("tcp-tables");
    let nodes = tcp_cluster(&dir);
    let l = tcp_leader(&nodes);
    let followers: Vec<&TcpNode> = nodes.iter().filter(|n| n.addr() != l.addr()).collect();
    let create = |name: &str, max_key_len| ClientRequest::CreateTable {
        name: name.to_string(),
        max_key_len,
        max_value_len: None,
    };
    match call(l, create("users", None)) {
        ClientResponse::TableCreated(t) => assert_eq!((t.name.as_str(), t.id), ("users", 1)),
        other => panic!("create: {other:?}"),
    }
    match call(l, create("orders", Some(8))) {
        ClientResponse::TableCreated(t) => {
            assert_eq!((t.name.as_str(), t.id, t.max_key_len), ("orders", 2, 8))
        }
        other => panic!("create: {other:?}"),
    }
    assert_eq!(
        failed(l, create("users", None)),
        ClientError::TableExists {
            name: "users".into()
        }
    );
    assert!(matches!(
        failed(followers[0], create("other", None)),
        ClientError::NotLeader { .. }
    ));
    let long = "x".repeat(256);
    for (name, problem) in [
        ("", TableNameProblem::Empty),
        ("a\0b", TableNameProblem::Nul { at: 1 }),
        (&long[..], TableNameProblem::TooLong { len: 256, max: 255 }),
    ] {
        let want = ClientError::InvalidTableName {
            name: name.to_string(),
            problem,
        };
        assert_eq!(failed(l, create(name, None)), want);
        let drop = ClientRequest::DropTable {
            name: name.to_string(),
        };
        assert_eq!(failed(l, drop), want);
        let w = ClientRequest::WriteTables {
            writes: vec![ops(Some(name), vec![put("k", "v")])],
        };
        assert_eq!(failed(l, w), want);
        let r = ClientRequest::ReadTables {
            reads: vec![keys(Some(name), &["k"])],
            at_least: 0,
            wait_ms: 0,
        };
        assert_eq!(failed(followers[0], r), want);
    }
    assert_eq!(
        failed(l, create("big", Some(u64::MAX))),
        ClientError::TableOptionOutOfRange {
            field: "max_key_len".into(),
            value: u64::MAX,
            max: EngineConfig::MAX_KEY_LEN as u64,
        }
    );

    // One transaction over three tables.
    let ts = write_tables(
        l,
        vec![
            ops(None, vec![put("orders", "1")]),
            ops(Some("users"), vec![put("u1", "ada"), put("u2", "bob")]),
            ops(Some("orders"), vec![put("o1", "u1")]),
            ops(
                Some("users"),
                vec![
                    Op::Add {
                        key: b"n".to_vec(),
                        delta: 2,
                    },
                    Op::Delete {
                        key: b"u2".to_vec(),
                    },
                ],
            ),
        ],
    );
    // A key above its table's bound fails the whole transaction: its
    // write to another table is not there either.
    assert_eq!(
        failed(
            l,
            ClientRequest::WriteTables {
                writes: vec![
                    ops(Some("users"), vec![put("u9", "lost")]),
                    ops(Some("orders"), vec![put("nine-byte", "x")]),
                ],
            }
        ),
        ClientError::KeyTooLarge { len: 9, max: 8 }
    );
    let reads = || {
        vec![
            keys(None, &["orders", "u1"]),
            keys(Some("users"), &["u1", "u2", "u9", "n"]),
            keys(Some("orders"), &["o1", "orders"]),
        ]
    };
    let want = vec![
        vec![some("1"), None],
        vec![some("ada"), None, None, Some(2i64.to_le_bytes().to_vec())],
        vec![some("u1"), None],
    ];
    for n in &nodes {
        assert_eq!(read_tables(n, reads(), ts), want, "node {:?}", n.addr());
        assert_eq!(
            table_infos(n),
            [("orders".to_string(), 2), ("users".to_string(), 1)]
        );
    }
    // The default table's request reads the default table.
    match call(
        followers[1],
        ClientRequest::Read {
            keys: vec![b"orders".to_vec(), b"u1".to_vec()],
            at_least: ts,
            wait_ms: LONG.as_millis() as u64,
        },
    ) {
        ClientResponse::Read { values, .. } => assert_eq!(values, [some("1"), None]),
        other => panic!("read: {other:?}"),
    }

    // A scan of one table in pages of two, on a follower.
    let ts = write_tables(
        l,
        vec![ops(
            Some("users"),
            vec![put("u3", "cy"), put("u4", "di"), put("u5", "ed")],
        )],
    );
    let mut start = b"u".to_vec();
    let mut got = Vec::new();
    loop {
        match call(
            followers[0],
            ClientRequest::Scan {
                table: Some("users".into()),
                start: start.clone(),
                end: Some(b"v".to_vec()),
                limit: 2,
                at_least: ts,
                wait_ms: LONG.as_millis() as u64,
            },
        ) {
            ClientResponse::Scanned { pairs, next, .. } => {
                assert!(pairs.len() <= 2);
                got.extend(pairs);
                match next {
                    Some(k) => start = k,
                    None => break,
                }
            }
            other => panic!("scan: {other:?}"),
        }
    }
    let names: Vec<_> = got.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(names, [&b"u1"[..], b"u3", b"u4", b"u5"]);
    // An empty range (its end before its start): nothing, and no next page.
    match call(
        followers[0],
        ClientRequest::Scan {
            table: Some("users".into()),
            start: b"v".to_vec(),
            end: Some(b"u".to_vec()),
            limit: 10,
            at_least: ts,
            wait_ms: LONG.as_millis() as u64,
        },
    ) {
        ClientResponse::Scanned { pairs, next, .. } => assert_eq!((pairs, next), (vec![], None)),
        other => panic!("scan: {other:?}"),
    }

    // The drop: on every node, the table is gone, by every request.
    assert_eq!(
        call(
            l,
            ClientRequest::DropTable {
                name: "orders".into()
            }
        ),
        ClientResponse::Dropped
    );
    let gone = ClientError::TableNotFound {
        name: "orders".into(),
    };
    let after = write_tables(l, vec![ops(None, vec![put("after", "drop")])]);
    assert_eq!(
        failed(
            l,
            ClientRequest::WriteTables {
                writes: vec![ops(Some("orders"), vec![put("o2", "u1")])],
            }
        ),
        gone
    );
    assert_eq!(
        failed(
            l,
            ClientRequest::DropTable {
                name: "orders".into()
            }
        ),
        gone
    );
    for n in &nodes {
        assert_eq!(
            read_tables(n, vec![keys(None, &["after"])], after),
            [[some("drop")]]
        );
        assert_eq!(table_infos(n), [("users".to_string(), 1)]);
        let r = ClientRequest::ReadTables {
            reads: vec![keys(Some("orders"), &["o1"])],
            at_least: after,
            wait_ms: 0,
        };
        assert_eq!(failed(n, r), gone);
        let s = ClientRequest::Scan {
            table: Some("orders".into()),
            start: Vec::new(),
            end: None,
            limit: 10,
            at_least: after,
            wait_ms: 0,
        };
        assert_eq!(failed(n, s), gone);
    }
    // The name's next table has a new id.
    match call(l, create("orders", None)) {
        ClientResponse::TableCreated(t) => assert_eq!(t.id, 3),
        other => panic!("create: {other:?}"),
    }
    drop(nodes);
}
