//! Three `replica_node` processes on 127.0.0.1, talking over TCP: bank
//! transfers through the leader; readers on both followers see the total at
//! every read; the leader is SIGKILLed mid-write: a new leader is elected,
//! every acknowledged write is on both survivors, and a write whose outcome
//! the client never learned is on both or on neither. Bounded: every wait
//! has a deadline, and the processes are killed when the test ends.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use snapshot_engine::replication::{
    ClientError, ClientRequest, ClientResponse, NodeConfig, Op, TcpClient, TcpConfig, TcpNode,
    TransportError,
};

const ACCOUNTS: u64 = 8;
const START: i64 = 1_000;
const LONG: Duration = Duration::from_secs(30);

struct Node {
    id: u64,
    addr: SocketAddr,
    child: Child,
    _stdin: ChildStdin,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port of 127.0.0.1 below Linux's ephemeral range (32768 and up by
/// default). A port `bind(0)` hands out comes from that range, which every
/// `connect` also draws its local port from, so a test running beside this
/// one could take it between this probe and the node's bind ("Address
/// already in use"). Each call in this process gets a port no earlier call
/// got.
fn free_addr() -> SocketAddr {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = u64::from(std::process::id()) * 7_919;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((start + n * 4_999) % 12_000) as u16;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            return l.local_addr().unwrap();
        }
    }
    panic!("no free port of 127.0.0.1 in 20000..32000");
}

/// This test process's cluster: its nodes and clients refuse every frame
/// of a cluster another test process runs, should one of its nodes take a
/// port this process's nodes were told of (the probe in `free_addr` and
/// the node's bind are not one step).
fn cluster_name() -> String {
    format!("replica-processes-{}", std::process::id())
}

fn tcp_config() -> TcpConfig {
    TcpConfig {
        cluster: cluster_name(),
        ..TcpConfig::default()
    }
}

/// A test's own directory for its nodes (removed when dropped).
struct TestDir(PathBuf);

impl TestDir {
    fn new(test: &str) -> TestDir {
        let d =
            std::env::temp_dir().join(format!("replica-processes-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts node `id` on its directory under `dir` (a restart when it ran
/// there before).
fn start(dir: &TestDir, id: u64, addrs: &BTreeMap<u64, SocketAddr>, init: bool) -> Node {
    let dir = &dir.0;
    let mut cfg = format!(
        "id = {id}\naddr = {}\ndata_dir = {}\ninit = {init}\ncluster = {}\n",
        addrs[&id],
        dir.join(format!("n{id}")).display(),
        cluster_name()
    );
    for (&p, a) in addrs {
        if p != id {
            cfg.push_str(&format!("peer = {p}@{a}\n"));
        }
    }
    let path = dir.join(format!("n{id}.conf"));
    std::fs::write(&path, cfg).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_replica_node"))
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start replica_node");
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready "), "node {id} says {line:?}");
    Node {
        id,
        addr: addrs[&id],
        child,
        _stdin: stdin,
    }
}

/// Sets its flag when dropped, on a panic too, so that the threads of a
/// scope end and the panic reaches the test.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn client(addr: SocketAddr) -> TcpClient {
    TcpClient::new(addr, tcp_config()).unwrap()
}

fn status(addr: SocketAddr) -> Option<(u64, Option<u64>, bool)> {
    match client(addr).call(ClientRequest::Status) {
        Ok(ClientResponse::Status {
            id,
            leader,
            leader_ready,
            ..
        }) => Some((id, leader, leader_ready)),
        _ => None,
    }
}

fn wait_leader(nodes: &[&Node]) -> u64 {
    let t = Instant::now();
    loop {
        for n in nodes {
            if let Some((id, _, true)) = status(n.addr) {
                return id;
            }
        }
        assert!(t.elapsed() < LONG, "no leader within {LONG:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn account(i: u64) -> Vec<u8> {
    format!("acct/{i}").into_bytes()
}

/// Reads every account (and `extra` keys) at the node's watermark, at least
/// `at_least`.
fn read(c: &mut TcpClient, at_least: u64, extra: &[Vec<u8>]) -> (u64, i64, Vec<bool>) {
    let mut keys: Vec<Vec<u8>> = (0..ACCOUNTS).map(account).collect();
    keys.extend(extra.iter().cloned());
    match c.call(ClientRequest::Read {
        keys,
        at_least,
        wait_ms: 10_000,
    }) {
        Ok(ClientResponse::Read { ts, values }) => {
            let sum = values[..ACCOUNTS as usize]
                .iter()
                .map(|v| i64::from_le_bytes(v.as_deref().unwrap().try_into().unwrap()))
                .sum();
            let present = values[ACCOUNTS as usize..]
                .iter()
                .map(Option::is_some)
                .collect();
            (ts, sum, present)
        }
        other => panic!("read: {other:?}"),
    }
}

const TOTAL: i64 = START * ACCOUNTS as i64;

/// Puts every account at its starting balance through the leader at
/// `laddr`; the commit timestamp.
fn load(laddr: SocketAddr) -> u64 {
    let ops = (0..ACCOUNTS)
        .map(|i| Op::Put {
            key: account(i),
            value: START.to_le_bytes().to_vec(),
        })
        .collect();
    match client(laddr).call(ClientRequest::Write { ops }).unwrap() {
        ClientResponse::Written { ts } => ts,
        other => panic!("load: {other:?}"),
    }
}

/// Bank transfers through the leader at `laddr` until `stop`, each also
/// writing its own key `<prefix>/<n>`: (commit ts, key) of every
/// acknowledged one go to `acked`; the key of one whose outcome is unknown
/// (the connection broke or the node fenced) goes to `unknown`, and the
/// loop ends there.
fn transfers(
    laddr: SocketAddr,
    prefix: &str,
    stop: &AtomicBool,
    acked: &Mutex<Vec<(u64, Vec<u8>)>>,
    unknown: &Mutex<Vec<Vec<u8>>>,
) {
    let mut c = client(laddr);
    for i in 0u64.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let key = format!("{prefix}/{i:06}").into_bytes();
        let (a, b) = (i % ACCOUNTS, (i * 3 + 1) % ACCOUNTS);
        let ops = vec![
            Op::Add {
                key: account(a),
                delta: -3,
            },
            Op::Add {
                key: account(b),
                delta: 3,
            },
            Op::Put {
                key: key.clone(),
                value: b"v".to_vec(),
            },
        ];
        match c.call(ClientRequest::Write { ops }) {
            Ok(ClientResponse::Written { ts }) => acked.lock().unwrap().push((ts, key)),
            Ok(ClientResponse::Failed(ClientError::Conflict)) => {}
            Ok(other) => {
                unknown.lock().unwrap().push(key);
                eprintln!("writer: {other:?}");
                break;
            }
            Err(e) => {
                unknown.lock().unwrap().push(key);
                eprintln!("writer: {e}");
                break;
            }
        }
    }
}

/// Waits until `acked` holds at least `n` writes.
fn until_acked(acked: &Mutex<Vec<(u64, Vec<u8>)>>, n: usize) {
    let t = Instant::now();
    while acked.lock().unwrap().len() < n {
        assert!(t.elapsed() < LONG, "the leader acknowledges writes");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every node in `nodes`, read at a watermark of at least `last`, holds the
/// bank's total and every acknowledged write, and each write of unknown
/// outcome on all of them or on none.
fn hold_every_acknowledged_write(
    nodes: &[&Node],
    last: u64,
    acked: &[(u64, Vec<u8>)],
    unknown: &[Vec<u8>],
) {
    assert!(acked.iter().all(|&(ts, _)| ts < last));
    let keys: Vec<Vec<u8>> = acked
        .iter()
        .map(|(_, k)| k.clone())
        .chain(unknown.iter().cloned())
        .collect();
    let mut seen = Vec::new();
    for n in nodes {
        let (ts, sum, present) = read(&mut client(n.addr), last, &keys);
        assert!(ts >= last);
        assert_eq!(sum, TOTAL, "node {}: the bank's total", n.id);
        for (i, (ts, k)) in acked.iter().enumerate() {
            assert!(
                present[i],
                "node {} lost acknowledged write {} at {ts}",
                n.id,
                String::from_utf8_lossy(k)
            );
        }
        seen.push(present[acked.len()..].to_vec());
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "a write of unknown outcome is on every node or on none"
    );
}

/// A write through the leader among `nodes` after everything before it;
/// its commit timestamp.
fn write_after(nodes: &[&Node]) -> u64 {
    let new = wait_leader(nodes);
    let mut nc = client(nodes.iter().find(|n| n.id == new).unwrap().addr);
    loop {
        match nc.call(ClientRequest::Write {
            ops: vec![Op::Put {
                key: b"after".to_vec(),
                value: b"1".to_vec(),
            }],
        }) {
            Ok(ClientResponse::Written { ts }) => return ts,
            Ok(ClientResponse::Failed(ClientError::Conflict)) => continue,
            other => panic!("write on the new leader: {other:?}"),
        }
    }
}

/// Three node processes on free ports of 127.0.0.1, their directories under
/// `dir`, node 1 initializing: the addresses, the nodes and the leader.
fn cluster(dir: &TestDir) -> (BTreeMap<u64, SocketAddr>, Vec<Node>, u64) {
    let addrs: BTreeMap<u64, SocketAddr> = (1..=3).map(|id| (id, free_addr())).collect();
    let nodes: Vec<Node> = (1..=3).map(|id| start(dir, id, &addrs, id == 1)).collect();
    let leader = wait_leader(&nodes.iter().collect::<Vec<_>>());
    (addrs, nodes, leader)
}

#[test]
fn three_processes_on_loopback_keep_every_acknowledged_write_across_a_leader_kill() {
    let dir = TestDir::new("leader-kill");
    let (addrs, mut nodes, leader) = cluster(&dir);
    let laddr = addrs[&leader];
    let loaded = load(laddr);

    // (commit ts, key) of every acknowledged write; keys of writes whose
    // outcome is unknown (the connection broke or the node fenced).
    let acked: Mutex<Vec<(u64, Vec<u8>)>> = Mutex::default();
    let unknown: Mutex<Vec<Vec<u8>>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        let (acked, unknown, stop, reads) = (&acked, &unknown, &stop, &reads);
        let _stop = StopOnDrop(stop);
        let writer = s.spawn(move || transfers(laddr, "w", stop, acked, unknown));
        for f in addrs.keys().copied().filter(|&id| id != leader) {
            let a = addrs[&f];
            s.spawn(move || {
                let mut c = client(a);
                while !stop.load(Ordering::Relaxed) {
                    match c.call(ClientRequest::Read {
                        keys: (0..ACCOUNTS).map(account).collect(),
                        at_least: loaded,
                        wait_ms: 10_000,
                    }) {
                        Ok(ClientResponse::Read { ts, values }) => {
                            let sum: i64 = values
                                .iter()
                                .map(|v| {
                                    i64::from_le_bytes(v.as_deref().unwrap().try_into().unwrap())
                                })
                                .sum();
                            assert_eq!(sum, TOTAL, "node {f} at {ts}: the bank's total");
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("node {f} read: {other:?}"),
                    }
                }
            });
        }
        // Writes flow; then the leader dies mid-write.
        until_acked(acked, 100);
        let idx = nodes.iter().position(|n| n.id == leader).unwrap();
        nodes[idx].child.kill().unwrap();
        let _ = nodes[idx].child.wait();
        writer.join().unwrap();
        // The followers' readers keep reading through the election.
        let survivors: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
        let new = wait_leader(&survivors);
        assert_ne!(new, leader);
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        reads.load(Ordering::Relaxed) > 0,
        "the followers served reads"
    );

    // The new leader takes writes; both survivors then hold every
    // acknowledged write, and each unknown one on both or neither.
    let survivors: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
    let new = wait_leader(&survivors);
    let last = write_after(&survivors);
    let acked = acked.into_inner().unwrap();
    let unknown = unknown.into_inner().unwrap();
    hold_every_acknowledged_write(&survivors, last, &acked, &unknown);
    eprintln!(
        "processes: {} acknowledged, {} unknown, leader {leader} -> {new}",
        acked.len(),
        unknown.len()
    );
}

/// What node `n` says of its start: (log entries recovered from its
/// directory, snapshots installed from a leader since).
fn recovered(n: &Node) -> (u64, u64) {
    match client(n.addr).call(ClientRequest::Status) {
        Ok(ClientResponse::Status {
            recovered_entries,
            snapshots_installed,
            ..
        }) => (recovered_entries, snapshots_installed),
        other => panic!("status of node {}: {other:?}", n.id),
    }
}

#[test]
fn killed_processes_restart_from_their_own_directories_with_every_acknowledged_write() {
    let dir = TestDir::new("restarts");
    let (addrs, mut nodes, leader) = cluster(&dir);
    let laddr = addrs[&leader];
    load(laddr);
    let acked: Mutex<Vec<(u64, Vec<u8>)>> = Mutex::default();
    let unknown: Mutex<Vec<Vec<u8>>> = Mutex::default();

    // A follower is SIGKILLed mid-write and restarted from its directory
    // while the other two go on.
    let f = *addrs.keys().find(|&&id| id != leader).unwrap();
    let fi = nodes.iter().position(|n| n.id == f).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (acked, unknown, stop) = (&acked, &unknown, &stop);
        let _stop = StopOnDrop(stop);
        s.spawn(move || transfers(laddr, "a", stop, acked, unknown));
        until_acked(acked, 50);
        nodes[fi].child.kill().unwrap();
        let _ = nodes[fi].child.wait();
        until_acked(acked, 100);
        nodes[fi] = start(&dir, f, &addrs, f == 1);
        until_acked(acked, 150);
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        unknown.lock().unwrap().is_empty(),
        "the leader kept running"
    );
    let last = write_after(&nodes.iter().collect::<Vec<_>>());
    hold_every_acknowledged_write(&[&nodes[fi]], last, &acked.lock().unwrap(), &[]);
    let (entries, snapshots) = recovered(&nodes[fi]);
    assert!(entries > 0, "node {f} recovered its log from its directory");
    assert_eq!(
        snapshots, 0,
        "node {f} caught up from the log, not a snapshot"
    );

    // Every process is SIGKILLed mid-write, then all restart from their
    // directories: every acknowledged write is on each of them.
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (acked, unknown, stop) = (&acked, &unknown, &stop);
        let _stop = StopOnDrop(stop);
        let writer = s.spawn(move || transfers(laddr, "b", stop, acked, unknown));
        until_acked(acked, 250);
        for n in &mut nodes {
            n.child.kill().unwrap();
        }
        for n in &mut nodes {
            let _ = n.child.wait();
        }
        writer.join().unwrap();
    });
    drop(nodes);
    let nodes: Vec<Node> = (1..=3).map(|id| start(&dir, id, &addrs, id == 1)).collect();
    let all: Vec<&Node> = nodes.iter().collect();
    let last = write_after(&all);
    let (acked, unknown) = (acked.into_inner().unwrap(), unknown.into_inner().unwrap());
    hold_every_acknowledged_write(&all, last, &acked, &unknown);
    for n in &nodes {
        assert!(recovered(n).0 > 0, "node {} recovered its log", n.id);
    }
    eprintln!(
        "restarts: {} acknowledged, {} unknown",
        acked.len(),
        unknown.len()
    );
}

#[test]
fn bad_configs_and_unreachable_peers_are_typed_errors() {
    for (text, want) in [
        ("addr = 127.0.0.1:1\ndata_dir = /tmp/x\n", "missing `id"),
        ("id = 0\n", "want 1 to"),
        ("id = 1\naddr = nowhere\n", "address `nowhere`"),
        (
            "id = 1\npeer = 1@127.0.0.1:2\naddr = 127.0.0.1:1\ndata_dir = /tmp/x",
            "own id",
        ),
        ("id = 1\ncolour = blue\n", "unknown key `colour`"),
        ("id = 1\ncluster = a b\n", "line 2: cluster name `a b`"),
        (
            "id = 1\npeer = 2@127.0.0.1:2\npeer = 2@127.0.0.1:3\n",
            "listed twice",
        ),
    ] {
        match NodeConfig::parse(text) {
            Err(e) => assert!(e.to_string().contains(want), "{text:?}: {e}"),
            Ok(c) => panic!("{text:?} parsed: {c:?}"),
        }
    }
    let bad = TcpConfig {
        max_frame_bytes: 10,
        ..tcp_config()
    };
    let e = TcpClient::new(free_addr(), bad).err().expect("refused");
    assert!(e.to_string().contains("max_frame_bytes 10"), "{e}");

    // Nobody listens there: a typed error, at once.
    let mut c = client(free_addr());
    match c.call(ClientRequest::Status) {
        Err(TransportError::Unreachable { .. }) => {}
        other => panic!("expected Unreachable, got {other:?}"),
    }
    // A message above the frame bound is refused before it is sent, with
    // its size and the bound.
    let small = TcpConfig {
        max_frame_bytes: 4096,
        ..tcp_config()
    };
    let mut c = TcpClient::new(free_addr(), small.clone()).unwrap();
    match c.call(ClientRequest::Write {
        ops: vec![Op::Put {
            key: b"k".to_vec(),
            value: vec![0; 10_000],
        }],
    }) {
        Err(TransportError::FrameTooLarge { size, bound }) => {
            assert_eq!(bound, 4096);
            assert!(size > 10_000);
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
    // A node with a small bound refuses a larger frame, naming the bound,
    // and stays up for the next connection.
    let small_dir = TestDir::new("small");
    // Port 0: the node binds a port of its own and reports it.
    let mut cfg = NodeConfig::parse(&format!(
        "id = 1\naddr = 127.0.0.1:0\ndata_dir = {}\ninit = true\n",
        small_dir.0.display()
    ))
    .unwrap();
    cfg.tcp = small;
    let node = TcpNode::start(cfg).unwrap();
    let mut big = client(node.addr());
    match big.call(ClientRequest::Write {
        ops: vec![Op::Put {
            key: b"k".to_vec(),
            value: vec![0; 10_000],
        }],
    }) {
        Err(TransportError::BadMessage { what }) => {
            assert!(what.contains("bound 4096 bytes"), "{what}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(
        client(node.addr()).call(ClientRequest::Status),
        Ok(ClientResponse::Status { id: 1, .. })
    ));
}
