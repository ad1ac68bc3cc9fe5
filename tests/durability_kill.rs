//! Kill the process: this test re-executes its own binary as a child that
//! runs bank transfers on a durable engine (`Durability::Sync`, four
//! threads, checkpoints now and then) and reports each acknowledged commit
//! on stdout; the parent SIGKILLs it at a random moment (during recovery,
//! mid-transfer, mid-checkpoint), reopens the directory and checks that the
//! bank total holds, that every acknowledged transfer is there, and that
//! the balances are exactly the initial ones plus the transfers present
//! (nothing half there).
//!
//! Its own binary, apart from `tests/durability/`: every child is spawned
//! from this process and holds a copy of the process's file descriptors from
//! fork to exec, the directory lock of any engine open then included, so a
//! test beside it that drops an engine and reopens the directory at once
//! could find it still locked.
//!
//! `SNAPSHOT_KILL_ROUNDS` sets the number of rounds (default 50);
//! `SNAPSHOT_KILL_SEED` the random seed (printed on failure).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snapshot_engine::{DurabilityOptions, Engine, EngineConfig, TxnOptions};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "SNAPSHOT_KILL_CHILD_DIR";
const ACCOUNTS: u32 = 16;
const INITIAL: u64 = 1_000;

fn account(i: u32) -> String {
    format!("acct/{i:03}")
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |b| {
        u64::from_le_bytes(b[..].try_into().expect("8-byte balance"))
    })
}

/// A transfer's marker value: from, to, amount.
fn marker(from: u32, to: u32, amount: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&from.to_le_bytes());
    v.extend_from_slice(&to.to_le_bytes());
    v.extend_from_slice(&amount.to_le_bytes());
    v
}

fn unmarker(v: &[u8]) -> (u32, u32, u64) {
    (
        u32::from_le_bytes(v[0..4].try_into().unwrap()),
        u32::from_le_bytes(v[4..8].try_into().unwrap()),
        u64::from_le_bytes(v[8..16].try_into().unwrap()),
    )
}

/// The child: transfers until killed.
fn child(dir: &Path) -> ! {
    let engine = Engine::open(dir, EngineConfig::default(), DurabilityOptions::default())
        .expect("child open");
    {
        let mut s = engine.session().unwrap();
        s.transaction(&TxnOptions::default(), |t| {
            if t.get(account(0))?.is_none() {
                for i in 0..ACCOUNTS {
                    t.put(account(i), INITIAL.to_le_bytes())?;
                }
            }
            Ok(())
        })
        .expect("child setup");
    }
    let out = std::io::stdout();
    writeln!(out.lock(), "ready").unwrap();
    out.lock().flush().unwrap();
    std::thread::scope(|sc| {
        for th in 0..4u64 {
            let (engine, out) = (&engine, &out);
            sc.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(std::process::id() as u64 * 31 + th);
                let mut s = engine.session().unwrap();
                loop {
                    let tag: u64 = rng.gen();
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let want: u64 = rng.gen_range(1..50);
                    let r = s.transaction(&TxnOptions::default(), |t| {
                        let a = balance(t.get(account(from))?);
                        let b = balance(t.get(account(to))?);
                        let amount = want.min(a);
                        t.put(account(from), (a - amount).to_le_bytes())?;
                        t.put(account(to), (b + amount).to_le_bytes())?;
                        t.put(format!("t/{tag:016x}"), marker(from, to, amount))?;
                        Ok(amount)
                    });
                    if let Ok(amount) = r {
                        let mut o = out.lock();
                        writeln!(o, "ack {tag:016x} {from} {to} {amount}").unwrap();
                        o.flush().unwrap();
                    }
                }
            });
        }
        sc.spawn(|| loop {
            std::thread::sleep(Duration::from_millis(7));
            engine.checkpoint().expect("child checkpoint");
        });
    });
    unreachable!("the transfer threads never end")
}

/// Verifies the directory against everything acknowledged so far and the
/// balances verified last round; returns the new verified balances, having
/// deleted the markers it accounted for.
fn verify(
    dir: &Path,
    acked: &mut HashMap<u64, (u32, u32, u64)>,
    base: &[u64],
    round: usize,
    seed: u64,
) -> Vec<u64> {
    let engine = Engine::open(dir, EngineConfig::default(), DurabilityOptions::default())
        .unwrap_or_else(|e| panic!("round {round} (seed {seed}): reopen failed: {e}"));
    let mut s = engine.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let balances: Vec<u64> = (0..ACCOUNTS)
        .map(|i| balance(t.get(account(i)).unwrap()))
        .collect();
    let markers = t.range(b"t/".to_vec()..b"t0".to_vec()).unwrap();
    drop(t);
    if balances.iter().all(|&b| b == 0) && base.iter().all(|&b| b == 0) {
        // The first child was killed before its setup commit.
        assert!(
            markers.is_empty() && acked.is_empty(),
            "round {round} (seed {seed})"
        );
        return base.to_vec();
    }
    let total: u64 = balances.iter().sum();
    assert_eq!(
        total,
        INITIAL * u64::from(ACCOUNTS),
        "round {round} (seed {seed}): bank total"
    );
    let mut want: Vec<i128> = if base.iter().all(|&b| b == 0) {
        vec![i128::from(INITIAL); ACCOUNTS as usize]
    } else {
        base.iter().map(|&b| i128::from(b)).collect()
    };
    let mut present = HashMap::new();
    for (k, v) in &markers {
        let tag = u64::from_str_radix(std::str::from_utf8(&k[2..]).unwrap(), 16).unwrap();
        let (from, to, amount) = unmarker(v);
        want[from as usize] -= i128::from(amount);
        want[to as usize] += i128::from(amount);
        present.insert(tag, (from, to, amount));
    }
    for (tag, m) in acked.iter() {
        assert_eq!(
            present.get(tag),
            Some(m),
            "round {round} (seed {seed}): acknowledged transfer {tag:016x} lost"
        );
    }
    let got: Vec<i128> = balances.iter().map(|&b| i128::from(b)).collect();
    assert_eq!(
        got, want,
        "round {round} (seed {seed}): balances are not the transfers present"
    );
    // Accounted for: delete the markers so the next round checks only its own.
    s.transaction(&TxnOptions::default(), |t| {
        for (k, _) in &markers {
            t.delete(k)?;
        }
        Ok(())
    })
    .unwrap();
    acked.clear();
    balances
}

#[test]
fn killed_mid_transfer_recovers_every_acknowledged_commit() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&dir));
    }
    let rounds: usize = std::env::var("SNAPSHOT_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let seed: u64 = std::env::var("SNAPSHOT_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = std::env::temp_dir().join(format!("snapshot-kill-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let exe = std::env::current_exe().unwrap();
    let mut acked = HashMap::new();
    let mut base = vec![0u64; ACCOUNTS as usize];
    let (mut total_acks, mut killed_before_ready) = (0usize, 0usize);
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args([
                "killed_mid_transfer_recovers_every_acknowledged_commit",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Kill at a random moment: now and then before the child is ready
        // (during its recovery), mostly while it transfers.
        let early = rng.gen_ratio(1, 8);
        let mut lines = Vec::new();
        if !early {
            loop {
                match rx.recv_timeout(Duration::from_secs(20)) {
                    // The harness prints "test NAME ... " before the
                    // child's first line, on the same line.
                    Ok(l) if l.ends_with("ready") => break,
                    Ok(l) => lines.push(l),
                    Err(_) => panic!("round {round} (seed {seed}): the child never got ready"),
                }
            }
        }
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..30_000)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        assert!(
            !status.success(),
            "round {round}: the child exited by itself"
        );
        let mut ready = !early;
        for l in &lines {
            ready |= l.ends_with("ready");
            let mut p = l.split(' ');
            if p.next() != Some("ack") {
                continue;
            }
            let tag = u64::from_str_radix(p.next().unwrap(), 16).unwrap();
            let from: u32 = p.next().unwrap().parse().unwrap();
            let to: u32 = p.next().unwrap().parse().unwrap();
            let amount: u64 = p.next().unwrap().parse().unwrap();
            acked.insert(tag, (from, to, amount));
            total_acks += 1;
        }
        killed_before_ready += usize::from(!ready);
        base = verify(&dir, &mut acked, &base, round, seed);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!(
        "{rounds} kill-and-recover rounds, {total_acks} acknowledged transfers checked, \
         {killed_before_ready} kills before the child was ready (seed {seed})"
    );
    assert!(total_acks > 0, "no transfer was ever acknowledged");
}
