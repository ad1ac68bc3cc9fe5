//! One replicated node over TCP (`snapshot_engine::replication::TcpNode`),
//! started from a config file:
//!
//! ```text
//! id = 1
//! addr = 127.0.0.1:7001
//! peer = 2@127.0.0.1:7002
//! peer = 3@127.0.0.1:7003
//! data_dir = /tmp/node1
//! init = true      # exactly one node of a new cluster
//! cluster = bank   # the same on every node and client of the cluster
//! ```
//!
//! `replica_node CONFIG` prints `ready ADDR` once it listens, then serves
//! until its standard input closes (or it is killed). Exit status 2: bad
//! usage or config; 1: the node could not start.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use snapshot_engine::replication::{NodeConfig, TcpNode};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!(
            "usage: replica_node CONFIG (id, addr, peer = ID@ADDR lines, data_dir, init, cluster)"
        );
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("replica_node: cannot read {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let cfg = match NodeConfig::parse(&text) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("replica_node: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let node = match TcpNode::start(cfg) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("replica_node: {e}");
            return ExitCode::from(1);
        }
    };
    println!("ready {}", node.addr());
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    while matches!(lock.read_line(&mut line), Ok(n) if n > 0) {
        line.clear();
    }
    drop(node);
    ExitCode::SUCCESS
}
