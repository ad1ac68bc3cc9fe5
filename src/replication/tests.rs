//! The replication layer's unit tests: the ones that need a switch the
//! public API does not have (the watermark-with-holes mutant).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{LocalCluster, NodeId, Replica, ReplicaConfig, WriteOptions};
use crate::{Timestamp, TxnOptions};

const LONG: Duration = Duration::from_secs(10);

fn config() -> ReplicaConfig {
    ReplicaConfig {
        // A write that times out fences its node; be generous on a loaded
        // machine.
        write_timeout: Duration::from_secs(10),
        ..ReplicaConfig::default()
    }
}

fn leader(c: &LocalCluster) -> &Replica {
    let id = c.wait_for_leader(LONG).expect("a leader");
    c.node(id).unwrap()
}

fn followers(c: &LocalCluster) -> Vec<NodeId> {
    let l = c.wait_for_leader(LONG).unwrap();
    c.ids().into_iter().filter(|&id| id != l).collect()
}

/// The leader commits out of timestamp order: transaction A takes its
/// timestamp first and holds it (delayed before its log append) while B
/// commits with a later timestamp. No follower may expose B without A.
fn out_of_order_commit(mutant: bool) {
    let cfg = ReplicaConfig {
        mutant_stable_follows_newest_commit: mutant,
        ..config()
    };
    let c = LocalCluster::start(3, cfg).unwrap();
    let l = leader(&c);
    let (_, seed) = l.write(|t| t.put(b"seed", b"1")).unwrap();
    let fs = followers(&c);
    for &f in &fs {
        c.wait_watermark(f, seed, LONG).unwrap();
    }
    let a_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let a = s.spawn(|| {
            let opts = WriteOptions {
                delay_before_append: Duration::from_millis(800),
            };
            let r = l.write_with(&opts, |t| t.put(b"a", b"1"));
            a_done.store(true, Ordering::SeqCst);
            r
        });
        std::thread::sleep(Duration::from_millis(80));
        let (_, ts_b) = l
            .write(|t| t.put(b"b", b"1"))
            .expect("B commits while A waits");
        // While A is still held, B is applied on the followers (an ordinary
        // snapshot sees it) but no follower's watermark passes A's hole.
        let mut hole_applied = vec![false; fs.len()];
        let window = Instant::now();
        while !a_done.load(Ordering::SeqCst) && window.elapsed() < LONG {
            for (i, &f) in fs.iter().enumerate() {
                let node = c.node(f).unwrap();
                let reader = node.reader();
                let mut sess = reader.engine().session().unwrap();
                {
                    let mut txn = reader.begin(&mut sess, Timestamp::NONE, LONG).unwrap();
                    let b = txn.get(b"b").unwrap();
                    let a = txn.get(b"a").unwrap();
                    assert!(
                        b.is_none() || a.is_some(),
                        "node {f} exposes B (ts {ts_b:?}) without A at watermark {:?}: a hole",
                        txn.read_timestamp()
                    );
                }
                let mut txn = sess.begin(&TxnOptions::default()).unwrap();
                hole_applied[i] |= txn.get(b"b").unwrap().is_some();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let (_, ts_a) = a.join().unwrap().expect("A commits");
        assert!(
            ts_a < ts_b,
            "A took its timestamp first: {ts_a:?} < {ts_b:?}"
        );
        assert!(
            hole_applied.iter().all(|&x| x),
            "B was applied on every follower while A was held: {hole_applied:?}"
        );
        for &f in &fs {
            c.wait_watermark(f, ts_b, LONG).unwrap();
            let node = c.node(f).unwrap();
            let reader = node.reader();
            let mut sess = reader.engine().session().unwrap();
            let mut txn = reader.begin(&mut sess, ts_b, LONG).unwrap();
            assert_eq!(txn.get(b"a").unwrap(), Some(b"1".to_vec()));
            assert_eq!(txn.get(b"b").unwrap(), Some(b"1".to_vec()));
        }
    });
}

#[test]
fn a_follower_never_exposes_a_commit_with_a_hole_below_it() {
    out_of_order_commit(false);
}

#[test]
#[should_panic(expected = "a hole")]
fn a_stable_that_follows_the_newest_applied_commit_exposes_a_hole() {
    out_of_order_commit(true);
}
