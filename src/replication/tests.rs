//! The replication layer's unit tests: the ones that need a switch the
//! public API does not have (the watermark-with-holes mutant, through the
//! crate's mutant switch, which a `LocalCluster`'s threads take over from
//! the test's thread) or a crate-private part (`admit_batch`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{LocalCluster, NodeId, Replica, ReplicaConfig, WriteOptions};
use crate::sync::mutant;
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

/// A one-node TCP cluster in a fresh directory named after `test`, started
/// with `tcp` and waited for until it leads; its directory, for removal.
fn tcp_leader(test: &str, tcp: super::TcpConfig) -> (super::TcpNode, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("se-{test}-{}", std::process::id()));
    let node = tcp_start(&dir, tcp).unwrap();
    let t = Instant::now();
    while !node.replica().is_leader_ready() {
        assert!(t.elapsed() < LONG, "a one-node cluster elects itself");
        std::thread::sleep(Duration::from_millis(5));
    }
    (node, dir)
}

/// Starts (or restarts) node 1 alone on `dir`, initializing its cluster.
fn tcp_start(
    dir: &std::path::Path,
    tcp: super::TcpConfig,
) -> Result<super::TcpNode, super::ReplicaError> {
    super::TcpNode::start(super::NodeConfig {
        id: 1,
        addr: "127.0.0.1:0".parse().unwrap(),
        peers: Default::default(),
        data_dir: dir.to_path_buf(),
        init: true,
        replica: config(),
        tcp,
    })
}

fn leader(c: &LocalCluster) -> &Replica {
    let id = c.wait_for_leader(LONG).expect("a leader");
    c.node(id).unwrap()
}

fn followers(c: &LocalCluster) -> Vec<NodeId> {
    let l = c.wait_for_leader(LONG).unwrap();
    c.ids().into_iter().filter(|&id| id != l).collect()
}

/// Turns the thread's mutant off again, also when the twin unwinds.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        mutant::set_for_thread(mutant::NONE);
    }
}

/// The leader commits out of timestamp order: transaction A takes its
/// timestamp first and holds it (delayed before its log append) while B
/// commits with a later timestamp. No follower may expose B without A.
/// With `broken`, every node's state machine sets stable to the newest
/// commit it applied (`mutant::STABLE_FOLLOWS_NEWEST_COMMIT`).
fn out_of_order_commit(broken: bool) {
    let _reset = Reset;
    if broken {
        // Before the cluster starts: its nodes' threads take it over.
        mutant::set_for_thread(mutant::STABLE_FOLLOWS_NEWEST_COMMIT);
    }
    let c = LocalCluster::start(3, config()).unwrap();
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

/// `CommitRecord::encoded_len` is the size the replication encoding gives
/// the record, for puts, tombstones, empty keys and values, and integers of
/// every varint width; the bound taken before the timestamps are known is
/// never below it.
#[test]
fn a_records_encoded_len_is_its_encoded_size() {
    use super::{CommitRecord, Origin, Write};
    let mut writes = Vec::new();
    for i in 0..40usize {
        let wide = 1u64 << (i * 7 % 63);
        let rec = CommitRecord {
            commit_ts: Timestamp::new((7 + i as u64).max(wide.min(Timestamp::MAX.get()))),
            durable_ts: Timestamp::new(7 + i as u64),
            origin: Origin {
                node: wide,
                seq: if i % 2 == 0 { u64::MAX } else { i as u64 },
            },
            writes: writes.clone(),
        };
        let encoded = super::codec::encode_after(Vec::new(), &rec).unwrap();
        assert_eq!(rec.encoded_len(), encoded.len(), "{} writes", writes.len());
        let bound = CommitRecord::encoded_len_bound(
            rec.writes
                .iter()
                .map(|w| (w.table, &w.key[..], w.value.as_deref())),
        );
        assert!(
            (rec.encoded_len()..=rec.encoded_len() + 36).contains(&bound),
            "bound {bound}, encoded {}",
            rec.encoded_len()
        );
        assert_eq!(super::codec::decode::<CommitRecord>(&encoded).unwrap(), rec);
        writes.push(Write {
            // Table ids of one to five varint bytes.
            table: [0, 1, 200, 70_000, u32::MAX][i % 5],
            key: vec![b'k'; i % 7 * 40],
            value: (i % 3 != 0).then(|| vec![b'v'; i * 13 % 200]),
        });
    }
}

/// A transaction whose record could never fit one log entry is refused at
/// submit with its size and the bound, and nothing of it commits, on the
/// leader or anywhere; the cluster goes on taking writes.
#[test]
fn a_commit_above_the_entry_bound_is_refused_and_leaves_nothing() {
    let c = LocalCluster::start(
        3,
        ReplicaConfig {
            max_batch_bytes: 1024,
            ..config()
        },
    )
    .unwrap();
    let l = leader(&c);
    let big = vec![7u8; 2000];
    match l.write(|t| {
        t.put(b"small", b"1")?;
        t.put(b"big", &big)
    }) {
        Err(super::ReplicaError::CommitTooLarge { size, bound }) => {
            assert_eq!(bound, 1024);
            assert!(size > 2000, "{size}");
        }
        other => panic!("want CommitTooLarge, got {other:?}"),
    }
    let (_, ts) = l.write(|t| t.put(b"after", b"1")).expect("the next write");
    for id in c.ids() {
        c.wait_watermark(id, ts, LONG).unwrap();
        let node = c.node(id).unwrap();
        let reader = node.reader();
        let mut sess = reader.engine().session().unwrap();
        let mut txn = reader.begin(&mut sess, ts, LONG).unwrap();
        assert_eq!(txn.get(b"after").unwrap(), Some(b"1".to_vec()));
        assert_eq!(txn.get(b"small").unwrap(), None, "node {id}");
        assert_eq!(txn.get(b"big").unwrap(), None, "node {id}");
    }
    let reader = l.reader();
    let mut s = reader.engine().session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        txn.get(b"small").unwrap(),
        None,
        "the leader kept none of it"
    );
}

/// Queued commits are split across entries so that none carries more than
/// `max_batch_bytes` of them, and every one is acknowledged.
#[test]
fn batches_stay_under_the_byte_bound() {
    const BOUND: usize = 4096;
    let c = LocalCluster::start(
        3,
        ReplicaConfig {
            max_batch_bytes: BOUND,
            ..config()
        },
    )
    .unwrap();
    let l = leader(&c);
    let value = vec![1u8; 900];
    let pending: Vec<_> = (0..120u32)
        .map(|i| {
            l.submit(|t| t.put(&i.to_be_bytes(), &value))
                .expect("submitted")
        })
        .collect();
    let mut last = Timestamp::NONE;
    for p in pending {
        let ((), ts) = p.wait().expect("acknowledged");
        last = last.max(ts);
    }
    let s = l.stats();
    assert!(
        s.largest_batch_bytes as usize <= BOUND,
        "an entry carried {} bytes of commits, above {BOUND}",
        s.largest_batch_bytes
    );
    assert!(s.largest_batch_bytes > 0);
    // 120 commits of about 950 bytes cannot go in fewer than 30 entries.
    assert!(s.batches_proposed >= 30, "{s:?}");
    for id in c.ids() {
        c.wait_watermark(id, last, LONG).unwrap();
    }
}

/// A TCP node lowers the batch bound to what its frames can carry, so a
/// transaction too large for one frame is refused at submit, naming the
/// lowered bound, and a small one replicates.
#[test]
fn a_tcp_node_bounds_its_batches_by_its_frames() {
    use super::{ReplicaError, TcpConfig, BATCH_FRAME_SLACK};
    let frame = 4096;
    let tcp = TcpConfig {
        max_frame_bytes: frame,
        ..TcpConfig::default()
    };
    let (node, dir) = tcp_leader("batch-bound", tcp);
    let r = node.replica();
    let big = vec![1u8; 3500];
    match r.write(|t| t.put(b"big", &big)) {
        Err(ReplicaError::CommitTooLarge { size, bound }) => {
            assert_eq!(bound, frame - BATCH_FRAME_SLACK);
            assert!(size > 3500, "{size}");
        }
        other => panic!("want CommitTooLarge, got {other:?}"),
    }
    r.write(|t| t.put(b"small", &big[..1000]))
        .expect("a commit under the bound");
    drop(node);
    let _ = std::fs::remove_dir_all(dir);
}

/// A scan's page stays within the frame bound: over a table whose pairs
/// fill several frames, every page comes back (no transport error), holds
/// more than one pair and less than all, and the pages together are the
/// table in key order.
#[test]
fn a_tcp_scan_pages_within_the_frame_bound() {
    use super::{ClientRequest, ClientResponse, Op, TableOps, TcpClient, TcpConfig};
    let tcp = TcpConfig {
        max_frame_bytes: 4096,
        ..TcpConfig::default()
    };
    let (node, dir) = tcp_leader("scan-pages", tcp.clone());
    let mut client = TcpClient::new(node.addr(), tcp).unwrap();
    let created = client.call(ClientRequest::CreateTable {
        name: "t".into(),
        max_key_len: Some(16),
        max_value_len: None,
    });
    assert!(
        matches!(created, Ok(ClientResponse::TableCreated(_))),
        "{created:?}"
    );
    let key = |i: u32| format!("k{i:03}").into_bytes();
    let mut ts = 0;
    for batch in 0..5 {
        let ops = (batch * 8..batch * 8 + 8)
            .map(|i| Op::Put {
                key: key(i),
                value: vec![i as u8; 300],
            })
            .collect();
        match client.call(ClientRequest::WriteTables {
            writes: vec![TableOps {
                table: Some("t".into()),
                ops,
            }],
        }) {
            Ok(ClientResponse::Written { ts: w }) => ts = w,
            other => panic!("write: {other:?}"),
        }
    }
    let (mut start, mut got, mut pages) = (Vec::new(), Vec::new(), 0);
    loop {
        let page = client.call(ClientRequest::Scan {
            table: Some("t".into()),
            start: start.clone(),
            end: None,
            limit: 1000,
            at_least: ts,
            wait_ms: LONG.as_millis() as u64,
        });
        let Ok(ClientResponse::Scanned { pairs, next, .. }) = page else {
            panic!("scan page {pages}: {page:?}");
        };
        pages += 1;
        assert!(pairs.len() > 1 && pairs.len() < 40, "{} pairs", pairs.len());
        got.extend(pairs);
        match next {
            Some(k) => start = k,
            None => break,
        }
    }
    assert!(pages > 2, "{pages} pages");
    let want: Vec<_> = (0..40).map(|i| (key(i), vec![i as u8; 300])).collect();
    assert_eq!(got, want);
    drop(node);
    let _ = std::fs::remove_dir_all(dir);
}

/// A node answers a frame of another wire version (version 1's, an
/// untagged bincode 1.3 message laid out by hand, and versions 3's and
/// 4's, a postcard status request without the cluster's name) with a
/// refusal naming that version, and goes on answering frames of its own.
#[test]
fn a_tcp_node_refuses_a_frame_of_another_wire_version_by_name() {
    use super::{ClientRequest, ClientResponse, Response, TcpClient, TcpConfig};
    use std::io::{Read, Write};
    let (node, dir) = tcp_leader("wire-version", TcpConfig::default());
    let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(LONG)).unwrap();
    // Version 1: `Request::Client` (u32 variant 3), `ClientRequest::Status`
    // (0). Version 3: the tag, the version, then the same two variants as
    // postcard varints.
    let v1 = vec![3u8, 0, 0, 0, 0, 0, 0, 0];
    let v3 = vec![b'R', 3, 3, 0];
    let v4 = vec![b'R', 4, 3, 0];
    for (version, frame) in [(1, v1), (3, v3), (4, v4)] {
        s.write_all(&(frame.len() as u32).to_be_bytes()).unwrap();
        s.write_all(&frame).unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).unwrap();
        assert_eq!(
            body[..2],
            [b'R', super::WIRE_VERSION],
            "answered in its own"
        );
        match super::codec::decode::<(String, Response)>(&body[2..]) {
            Ok((cluster, Response::Refused(what))) => {
                assert_eq!(cluster, "default", "it names its cluster");
                assert!(what.contains(&format!("wire version {version}")), "{what}")
            }
            Ok(_) => panic!("a version-{version} frame was answered"),
            Err(e) => panic!("the answer does not decode: {e}"),
        }
    }
    let mut client = TcpClient::new(node.addr(), TcpConfig::default()).unwrap();
    assert!(matches!(
        client.call(ClientRequest::Status),
        Ok(ClientResponse::Status { id: 1, .. })
    ));
    drop(node);
    let _ = std::fs::remove_dir_all(dir);
}

/// A node of one cluster acts on no frame of another: a client named for
/// another cluster is refused with `ForeignCluster` (and its write is not
/// applied), a raft vote from a node of another cluster is refused too,
/// and a node does not start on a data directory of another cluster; the
/// node goes on serving its own.
#[test]
fn a_tcp_node_acts_on_no_frame_of_another_cluster() {
    use super::TransportError;
    use super::{ClientRequest, ClientResponse, Op, ReplicaError, TcpClient, TcpConfig};
    use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
    let ours = TcpConfig {
        cluster: "east-1".to_string(),
        ..TcpConfig::default()
    };
    let theirs = TcpConfig {
        cluster: "west-1".to_string(),
        ..TcpConfig::default()
    };
    let (node, dir) = tcp_leader("foreign-cluster", ours.clone());
    let put = |value: &[u8]| ClientRequest::Write {
        ops: vec![Op::Put {
            key: b"k".to_vec(),
            value: value.to_vec(),
        }],
    };
    let mut own = TcpClient::new(node.addr(), ours.clone()).unwrap();
    let Ok(ClientResponse::Written { ts }) = own.call(put(b"east")) else {
        panic!("a write of the node's own cluster");
    };
    let mut foreign = TcpClient::new(node.addr(), theirs.clone()).unwrap();
    assert_eq!(
        foreign.call(put(b"west")).err(),
        Some(TransportError::ForeignCluster {
            ours: "west-1".to_string(),
            theirs: "east-1".to_string(),
        })
    );
    // A vote request of a node of the other cluster, at a term far above
    // this one's: refused, so the node's term and leadership stand.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut factory = super::TcpNetworkFactory::new(theirs.clone()).unwrap();
    let voted = rt.block_on(async {
        let mut net = factory
            .new_client(1, &openraft::BasicNode::new(node.addr().to_string()))
            .await;
        let vote = openraft::Vote::new(1_000, 2);
        net.vote(
            openraft::raft::VoteRequest::new(vote, None),
            RPCOption::new(LONG),
        )
        .await
    });
    let err = voted.expect_err("a foreign vote is not answered");
    assert!(err.to_string().contains("cluster"), "{err}");
    assert!(node.replica().is_leader_ready(), "the node is still leader");
    match own.call(ClientRequest::Read {
        keys: vec![b"k".to_vec()],
        at_least: ts,
        wait_ms: 10_000,
    }) {
        Ok(ClientResponse::Read { values, .. }) => assert_eq!(
            values,
            [Some(b"east".to_vec())],
            "the foreign write was not applied"
        ),
        other => panic!("read: {other:?}"),
    }
    drop(node);
    // The directory is east-1's now.
    match tcp_start(&dir, theirs) {
        Err(ReplicaError::BadConfig { what }) => assert!(
            what.contains("belongs to cluster `east-1`, not `west-1`"),
            "{what}"
        ),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a node of west-1 started on east-1's directory"),
    }
    let again = tcp_start(&dir, ours).expect("east-1 restarts on its directory");
    drop(again);
    let _ = std::fs::remove_dir_all(dir);
}

/// R5: a log store admits an own batch of this run only after every earlier
/// one and while the node is not fenced; a batch seen before, another
/// node's and an earlier run's pass.
#[test]
fn an_own_batch_is_admitted_only_after_its_predecessors() {
    use super::shared::admit_batch;
    use super::Proposer;
    let c = LocalCluster::start(3, config()).unwrap();
    let sh = &leader(&c).shared;
    let own = |batch| Proposer {
        node: sh.id,
        run: sh.run,
        batch,
    };
    let last = parking_lot::Mutex::new(0);
    for b in [1, 2, 2, 1, 3] {
        admit_batch(sh, &last, &own(b)).unwrap_or_else(|e| panic!("batch {b}: {e}"));
    }
    assert_eq!(*last.lock(), 3);
    let e = admit_batch(sh, &last, &own(5)).unwrap_err();
    assert!(e.contains("own batch 5 after batch 3"), "{e}");
    assert_eq!(*last.lock(), 3, "a refused batch is not recorded");
    let other_node = Proposer {
        node: sh.id + 10,
        ..own(9)
    };
    let other_run = Proposer {
        run: sh.run.wrapping_add(1),
        ..own(9)
    };
    admit_batch(sh, &last, &other_node).expect("another node's batch");
    admit_batch(sh, &last, &other_run).expect("an earlier run's batch");
    assert_eq!(*last.lock(), 3);
    sh.fence();
    let e = admit_batch(sh, &last, &own(4)).unwrap_err();
    assert!(e.contains("fenced: true"), "{e}");
}
