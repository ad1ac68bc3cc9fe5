//! Kill the process: this test re-executes its own binary as a child that
//! runs bank transfers on a durable engine (`Durability::Sync`, four
//! threads, checkpoints now and then) and reports each acknowledged commit
//! on stdout; the parent SIGKILLs it at a random moment (during recovery,
//! mid-transfer, mid-checkpoint), reopens the directory and checks that the
//! bank total holds, that every acknowledged transfer is there, and that
//! the balances are exactly the initial ones plus the transfers present
//! (nothing half there).
//!
//! With backups, the child also backs the engine up, one backup after
//! another, into a directory beside it; the kill then mostly lands in the
//! middle of one. Besides the checks above, each backup begun must open
//! holding every transfer acknowledged before it began (and the bank
//! consistent), or be refused as `IncompleteBackup`, or be empty (killed
//! before it wrote anything); one the child reported done must open.
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
use snapshot_engine::{DurabilityOptions, Engine, EngineConfig, Error, TxnOptions};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "SNAPSHOT_KILL_CHILD_DIR";
const BACKUPS_ENV: &str = "SNAPSHOT_KILL_BACKUPS_DIR";
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

/// The child: transfers (and, given `backups`, backs up) until killed.
fn child(dir: &Path, backups: Option<PathBuf>) -> ! {
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
        if let Some(backups) = &backups {
            let (engine, out) = (&engine, &out);
            sc.spawn(move || {
                for n in 0u64.. {
                    // Every "ack" line before this one is a commit that
                    // returned before the backup began.
                    let mut o = out.lock();
                    writeln!(o, "backup-start {n}").unwrap();
                    o.flush().unwrap();
                    drop(o);
                    engine
                        .backup(backups.join(n.to_string()))
                        .expect("child backup");
                    let mut o = out.lock();
                    writeln!(o, "backup-done {n}").unwrap();
                    o.flush().unwrap();
                }
            });
        }
    });
    unreachable!("the transfer threads never end")
}

type Markers = Vec<(Vec<u8>, Vec<u8>)>;

/// Acknowledged transfers by tag: (from, to, amount).
type Acked = HashMap<u64, (u32, u32, u64)>;

/// Checks an engine against the transfers `acked` and the balances `base`
/// verified last round: the bank total holds, every acknowledged transfer's
/// marker is there, and the balances are `base` plus the transfers whose
/// markers are there. Returns the balances and the markers, or `None` when
/// the engine is empty and may be (`may_be_empty`: the first child may be
/// killed before its setup commit).
fn check_bank(
    engine: &Engine,
    acked: &Acked,
    base: &[u64],
    may_be_empty: bool,
    what: &str,
) -> Option<(Vec<u64>, Markers)> {
    let mut s = engine.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let balances: Vec<u64> = (0..ACCOUNTS)
        .map(|i| balance(t.get(account(i)).unwrap()))
        .collect();
    let markers = t.range(b"t/".to_vec()..b"t0".to_vec()).unwrap();
    drop(t);
    if may_be_empty && balances.iter().all(|&b| b == 0) && base.iter().all(|&b| b == 0) {
        // The first child was killed before its setup commit.
        assert!(markers.is_empty() && acked.is_empty(), "{what}");
        return None;
    }
    let total: u64 = balances.iter().sum();
    assert_eq!(total, INITIAL * u64::from(ACCOUNTS), "{what}: bank total");
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
            "{what}: acknowledged transfer {tag:016x} lost"
        );
    }
    let got: Vec<i128> = balances.iter().map(|&b| i128::from(b)).collect();
    assert_eq!(got, want, "{what}: balances are not the transfers present");
    Some((balances, markers))
}

/// Verifies the directory against everything acknowledged so far and the
/// balances verified last round; returns the new verified balances, having
/// deleted the markers it accounted for.
fn verify(dir: &Path, acked: &mut Acked, base: &[u64], round: usize, seed: u64) -> Vec<u64> {
    let what = format!("round {round} (seed {seed})");
    let engine = Engine::open(dir, EngineConfig::default(), DurabilityOptions::default())
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let Some((balances, markers)) = check_bank(&engine, acked, base, true, &what) else {
        return base.to_vec();
    };
    // Accounted for: delete the markers so the next round checks only its own.
    let mut s = engine.session().unwrap();
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

/// What a backup the child began was found to be.
#[derive(Default)]
struct BackupOutcomes {
    complete: usize,
    refused: usize,
    not_begun: usize,
}

/// One backup the child began: `acked` were acknowledged before it began,
/// `done` says the child reported it complete.
fn check_backup(
    dir: &Path,
    acked: &Acked,
    done: bool,
    base: &[u64],
    what: &str,
    outcomes: &mut BackupOutcomes,
) {
    let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
    if empty {
        assert!(!done, "{what}: a completed backup is missing");
        outcomes.not_begun += 1;
        return;
    }
    match Engine::open(dir, EngineConfig::default(), DurabilityOptions::default()) {
        Err(Error::IncompleteBackup { .. }) => {
            assert!(!done, "{what}: a completed backup is refused");
            outcomes.refused += 1;
        }
        Ok(engine) => {
            // Begun after the setup commit was acknowledged: never empty.
            check_bank(&engine, acked, base, false, what);
            outcomes.complete += 1;
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn killed_mid_transfer_recovers_every_acknowledged_commit() {
    kill_rounds(
        "killed_mid_transfer_recovers_every_acknowledged_commit",
        false,
    );
}

#[test]
fn killed_mid_backup_leaves_the_source_whole_and_the_backup_refused_or_complete() {
    kill_rounds(
        "killed_mid_backup_leaves_the_source_whole_and_the_backup_refused_or_complete",
        true,
    );
}

/// Runs the child (as test `name` of this binary), kills it, verifies;
/// `SNAPSHOT_KILL_ROUNDS` times. With `backups`, the child backs up too.
fn kill_rounds(name: &str, backups: bool) {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(
            Path::new(&dir),
            std::env::var_os(BACKUPS_ENV).map(PathBuf::from),
        );
    }
    // One test's rounds at a time: a child spawned by one holds a copy of
    // the other's open directory lock from fork to exec.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
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
    let dir = std::env::temp_dir().join(format!(
        "snapshot-kill-{}-{seed}-{}",
        std::process::id(),
        u8::from(backups)
    ));
    let backup_dir = dir.with_extension("backups");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&backup_dir);
    let exe = std::env::current_exe().unwrap();
    let mut acked = HashMap::new();
    let mut base = vec![0u64; ACCOUNTS as usize];
    let (mut total_acks, mut killed_before_ready) = (0usize, 0usize);
    let mut outcomes = BackupOutcomes::default();
    for round in 0..rounds {
        let mut cmd = Command::new(&exe);
        cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if backups {
            cmd.env(BACKUPS_ENV, &backup_dir);
        }
        let mut child = cmd.spawn().unwrap();
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
        // With backups, every other round first lets one complete, so
        // that both kinds of backup are checked.
        if backups && !early && rng.gen_ratio(1, 2) {
            loop {
                match rx.recv_timeout(Duration::from_secs(20)) {
                    Ok(l) => {
                        let done = l.starts_with("backup-done");
                        lines.push(l);
                        if done {
                            break;
                        }
                    }
                    Err(_) => panic!("round {round} (seed {seed}): no backup completed"),
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
        // Per backup begun: the transfers acknowledged before it, and
        // whether it was reported done.
        let mut begun: Vec<(Acked, bool)> = Vec::new();
        for l in &lines {
            ready |= l.ends_with("ready");
            let mut p = l.split(' ');
            match p.next() {
                Some("ack") => {}
                Some("backup-start") => {
                    begun.push((acked.clone(), false));
                    continue;
                }
                Some("backup-done") => {
                    let n: usize = p.next().unwrap().parse().unwrap();
                    begun[n].1 = true;
                    continue;
                }
                _ => continue,
            }
            let tag = u64::from_str_radix(p.next().unwrap(), 16).unwrap();
            let from: u32 = p.next().unwrap().parse().unwrap();
            let to: u32 = p.next().unwrap().parse().unwrap();
            let amount: u64 = p.next().unwrap().parse().unwrap();
            acked.insert(tag, (from, to, amount));
            total_acks += 1;
        }
        killed_before_ready += usize::from(!ready);
        // The backups first: they share this round's base with the source.
        for (n, (before, done)) in begun.iter().enumerate() {
            let what = format!("round {round} (seed {seed}) backup {n}");
            let target = backup_dir.join(n.to_string());
            check_backup(&target, before, *done, &base, &what, &mut outcomes);
        }
        let _ = std::fs::remove_dir_all(&backup_dir);
        base = verify(&dir, &mut acked, &base, round, seed);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!(
        "{rounds} kill-and-recover rounds, {total_acks} acknowledged transfers checked, \
         {killed_before_ready} kills before the child was ready; backups: {} complete, \
         {} refused as incomplete, {} not begun (seed {seed})",
        outcomes.complete, outcomes.refused, outcomes.not_begun
    );
    assert!(total_acks > 0, "no transfer was ever acknowledged");
    // Coverage, not correctness: with enough rounds (each waits for a
    // completed backup with probability 7/16, and nearly every kill lands
    // inside a backup) both kinds were checked.
    if backups && rounds >= 20 {
        assert!(
            outcomes.complete > 0 && outcomes.refused > 0,
            "no kill landed both after and inside a backup"
        );
    }
}
