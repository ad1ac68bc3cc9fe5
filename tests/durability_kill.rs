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
//! With tables, the child keeps the bank in three named tables (balances
//! in `accounts`, a marker per transfer in `ledger`, an entry per transfer
//! in `index`, all written by one transaction) while a fourth thread
//! creates, writes and drops tables from a pool of three names; the parent
//! checks every table: each acknowledged transfer is in `ledger` and
//! `index`, the two hold the same transfers and the balances are exactly
//! theirs (nothing half there), an acknowledged drop is not undone and an
//! acknowledged create (and its acknowledged row) is there.
//!
//! `SNAPSHOT_KILL_ROUNDS` sets the number of rounds (default 50);
//! `SNAPSHOT_KILL_SEED` the random seed (printed on failure).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snapshot_engine::{
    DurabilityOptions, Engine, EngineConfig, Error, Table, TableOptions, TxnOptions,
};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "SNAPSHOT_KILL_CHILD_DIR";
const BACKUPS_ENV: &str = "SNAPSHOT_KILL_BACKUPS_DIR";
const TABLES_ENV: &str = "SNAPSHOT_KILL_TABLES";
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
    check_transfers(&balances, &markers, acked, base, what);
    Some((balances, markers))
}

/// The tag a transfer's marker key (`t/` or a table's two-byte prefix,
/// then hex) names.
fn tag_of(key: &[u8]) -> u64 {
    u64::from_str_radix(std::str::from_utf8(&key[2..]).unwrap(), 16).unwrap()
}

/// The bank's rules over `balances` and the transfer `markers` read with
/// them: the total holds, every acknowledged transfer's marker is there,
/// and the balances are `base` (the initial ones while it is all zero)
/// plus the transfers whose markers are there. Returns the markers'
/// transfers by tag.
fn check_transfers(
    balances: &[u64],
    markers: &Markers,
    acked: &Acked,
    base: &[u64],
    what: &str,
) -> Acked {
    let total: u64 = balances.iter().sum();
    assert_eq!(total, INITIAL * u64::from(ACCOUNTS), "{what}: bank total");
    let mut want: Vec<i128> = if base.iter().all(|&b| b == 0) {
        vec![i128::from(INITIAL); ACCOUNTS as usize]
    } else {
        base.iter().map(|&b| i128::from(b)).collect()
    };
    let mut present = HashMap::new();
    for (k, v) in markers {
        let (from, to, amount) = unmarker(v);
        want[from as usize] -= i128::from(amount);
        want[to as usize] += i128::from(amount);
        present.insert(tag_of(k), (from, to, amount));
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
    present
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

/// One test's rounds at a time: a child spawned by one holds a copy of the
/// other's open directory lock from fork to exec.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `SNAPSHOT_KILL_ROUNDS` (default 50) and `SNAPSHOT_KILL_SEED` (default:
/// the clock).
fn rounds_and_seed() -> (usize, u64) {
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
    (rounds, seed)
}

/// Runs the child (as test `name` of this binary), kills it, verifies;
/// `SNAPSHOT_KILL_ROUNDS` times. With `backups`, the child backs up too.
fn kill_rounds(name: &str, backups: bool) {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        if std::env::var_os(TABLES_ENV).is_some() {
            tables::child(Path::new(&dir));
        }
        child(
            Path::new(&dir),
            std::env::var_os(BACKUPS_ENV).map(PathBuf::from),
        );
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (rounds, seed) = rounds_and_seed();
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
        let mut envs = vec![(CHILD_ENV, dir.clone())];
        if backups {
            envs.push((BACKUPS_ENV, backup_dir.clone()));
        }
        let (lines, early) = run_and_kill(&exe, name, &envs, backups, &mut rng, round, seed);
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

/// Runs this binary's test `name` as a child with `envs` set and SIGKILLs
/// it at a random moment: now and then before it is ready (during its
/// recovery), mostly after; with `wait_backup`, every other round once a
/// backup completed. Returns every line it printed and whether it was
/// killed without waiting for it to be ready.
fn run_and_kill(
    exe: &Path,
    name: &str,
    envs: &[(&str, PathBuf)],
    wait_backup: bool,
    rng: &mut SmallRng,
    round: usize,
    seed: u64,
) -> (Vec<String>, bool) {
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
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
    if wait_backup && !early && rng.gen_ratio(1, 2) {
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
    (lines, early)
}

#[test]
fn killed_mid_cross_table_transfer_keeps_every_table_whole() {
    tables::kill_rounds("killed_mid_cross_table_transfer_keeps_every_table_whole");
}

/// The bank across three named tables, with tables created and dropped
/// beside it.
mod tables {
    use super::*;

    /// The names the churn thread creates and drops, in turn.
    const CHURN: [&str; 3] = ["churn.0", "churn.1", "churn.2"];

    fn table(engine: &Engine, name: &str) -> Table {
        match engine.open_table(name) {
            Ok(t) => t,
            Err(Error::TableNotFound { .. }) => engine
                .create_table(name, TableOptions::default())
                .expect("child create"),
            Err(e) => panic!("child open_table {name}: {e}"),
        }
    }

    fn say(out: &std::io::Stdout, line: std::fmt::Arguments<'_>) {
        let mut o = out.lock();
        writeln!(o, "{line}").unwrap();
        o.flush().unwrap();
    }

    /// The child: cross-table transfers on four threads, checkpoints, and
    /// one thread that, name by name from [`CHURN`], drops the table if it
    /// is there, creates it, and commits one row to it (`n` is unique per
    /// create), reporting each step before and after.
    pub(super) fn child(dir: &Path) -> ! {
        let engine = Engine::open(dir, EngineConfig::default(), DurabilityOptions::default())
            .expect("child open");
        let accounts = table(&engine, "accounts");
        let ledger = table(&engine, "ledger");
        let index = table(&engine, "index");
        {
            let mut s = engine.session().unwrap();
            s.transaction(&TxnOptions::default(), |t| {
                let mut a = t.table(&accounts)?;
                if a.get(account(0))?.is_none() {
                    for i in 0..ACCOUNTS {
                        a.put(account(i), INITIAL.to_le_bytes())?;
                    }
                }
                Ok(())
            })
            .expect("child setup");
        }
        let out = std::io::stdout();
        say(&out, format_args!("ready"));
        std::thread::scope(|sc| {
            for th in 0..4u64 {
                let (engine, out) = (&engine, &out);
                let (accounts, ledger, index) = (&accounts, &ledger, &index);
                sc.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(std::process::id() as u64 * 31 + th);
                    let mut s = engine.session().unwrap();
                    loop {
                        let tag: u64 = rng.gen();
                        let from = rng.gen_range(0..ACCOUNTS);
                        let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                        let want: u64 = rng.gen_range(1..50);
                        let r = s.transaction(&TxnOptions::default(), |t| {
                            let mut a = t.table(accounts)?;
                            let x = balance(a.get(account(from))?);
                            let y = balance(a.get(account(to))?);
                            let amount = want.min(x);
                            a.put(account(from), (x - amount).to_le_bytes())?;
                            a.put(account(to), (y + amount).to_le_bytes())?;
                            t.table(ledger)?
                                .put(format!("t/{tag:016x}"), marker(from, to, amount))?;
                            t.table(index)?
                                .put(format!("i/{tag:016x}"), amount.to_le_bytes())?;
                            Ok(amount)
                        });
                        if let Ok(amount) = r {
                            say(out, format_args!("ack {tag:016x} {from} {to} {amount}"));
                        }
                    }
                });
            }
            sc.spawn(|| loop {
                std::thread::sleep(Duration::from_millis(7));
                engine.checkpoint().expect("child checkpoint");
            });
            let (engine, out) = (&engine, &out);
            sc.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(std::process::id() as u64 * 37);
                let mut s = engine.session().unwrap();
                for round in 0usize.. {
                    let name = CHURN[round % CHURN.len()];
                    if engine.open_table(name).is_ok() {
                        say(out, format_args!("drop-start {name}"));
                        engine.drop_table(name).expect("child drop");
                        say(out, format_args!("dropped {name}"));
                    }
                    let n: u64 = rng.gen();
                    say(out, format_args!("create-start {name} {n:016x}"));
                    let t = engine
                        .create_table(name, TableOptions::default())
                        .expect("child create");
                    say(out, format_args!("created {name} {n:016x}"));
                    s.transaction(&TxnOptions::default(), |x| {
                        x.table(&t)?.put("n", n.to_le_bytes())
                    })
                    .expect("child churn write");
                    say(out, format_args!("wrote {name} {n:016x}"));
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        });
        unreachable!("the transfer threads never end")
    }

    /// What the parent knows of a churn table from acknowledged steps.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Churn {
        /// A step on it was in flight at the kill: either outcome.
        Unknown,
        /// Dropped (acknowledged), not created again.
        Absent,
        /// Created as `n` (acknowledged); `wrote`: its row acknowledged.
        Present { n: u64, wrote: bool },
    }

    /// Updates `churn` from the child's `lines`.
    fn read_churn(lines: &[String], churn: &mut [Churn; 3]) {
        for l in lines {
            let mut p = l.split(' ');
            let step = p.next();
            let Some(i) = p
                .next()
                .and_then(|name| CHURN.iter().position(|c| *c == name))
            else {
                continue;
            };
            let n = p.next().map(|n| u64::from_str_radix(n, 16).unwrap());
            churn[i] = match step {
                Some("drop-start" | "create-start") => Churn::Unknown,
                Some("dropped") => Churn::Absent,
                Some("created") => Churn::Present {
                    n: n.unwrap(),
                    wrote: false,
                },
                Some("wrote") => Churn::Present {
                    n: n.unwrap(),
                    wrote: true,
                },
                _ => continue,
            };
        }
    }

    /// Checks the churn tables against what was acknowledged; returns what
    /// they are now.
    fn check_churn(engine: &Engine, churn: &[Churn; 3], what: &str) -> [Churn; 3] {
        let mut now = [Churn::Unknown; 3];
        let mut s = engine.session().unwrap();
        for (i, name) in CHURN.iter().enumerate() {
            let found = match engine.open_table(name) {
                Err(Error::TableNotFound { .. }) => Churn::Absent,
                Err(e) => panic!("{what}: open_table {name}: {e}"),
                Ok(t) => {
                    let mut x = s.begin(&TxnOptions::default()).unwrap();
                    let rows = x.table(&t).unwrap().range(..).unwrap();
                    match &rows[..] {
                        [] => Churn::Present { n: 0, wrote: false },
                        [(k, v)] if k == b"n" => Churn::Present {
                            n: u64::from_le_bytes(v[..].try_into().unwrap()),
                            wrote: true,
                        },
                        _ => panic!("{what}: {name} holds {rows:?}"),
                    }
                }
            };
            match (churn[i], found) {
                (Churn::Unknown, _) => {}
                (Churn::Absent, f) => assert_eq!(
                    f,
                    Churn::Absent,
                    "{what}: acknowledged drop of {name} undone"
                ),
                (Churn::Present { n, wrote: true }, f) => assert_eq!(
                    f,
                    Churn::Present { n, wrote: true },
                    "{what}: {name}'s acknowledged create or row lost"
                ),
                (Churn::Present { wrote: false, .. }, f) => assert!(
                    matches!(f, Churn::Present { .. }),
                    "{what}: acknowledged create of {name} lost: {f:?}"
                ),
            }
            now[i] = found;
        }
        now
    }

    /// Checks the bank across `accounts`, `ledger` and `index` against
    /// `acked` and the balances `base` verified last round; deletes the
    /// ledger and index entries it accounted for and returns the balances.
    fn check_bank(engine: &Engine, acked: &mut Acked, base: &[u64], what: &str) -> Vec<u64> {
        let open = |name| match engine.open_table(name) {
            Ok(t) => Some(t),
            Err(Error::TableNotFound { .. }) => None,
            Err(e) => panic!("{what}: open_table {name}: {e}"),
        };
        let (Some(accounts), Some(ledger), Some(index)) =
            (open("accounts"), open("ledger"), open("index"))
        else {
            // Killed before the child created all three (its first round).
            assert!(acked.is_empty(), "{what}: acknowledged transfers, no bank");
            return base.to_vec();
        };
        let mut s = engine.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let balances: Vec<u64> = (0..ACCOUNTS)
            .map(|i| balance(t.table(&accounts).unwrap().get(account(i)).unwrap()))
            .collect();
        let markers = t.table(&ledger).unwrap().range(..).unwrap();
        let entries = t.table(&index).unwrap().range(..).unwrap();
        drop(t);
        if balances.iter().all(|&b| b == 0) {
            // Killed before the setup commit.
            assert!(
                markers.is_empty() && entries.is_empty() && acked.is_empty(),
                "{what}: transfers without accounts"
            );
            return base.to_vec();
        }
        let present = check_transfers(&balances, &markers, acked, base, what);
        let indexed: HashMap<u64, u64> = entries
            .iter()
            .map(|(k, v)| (tag_of(k), u64::from_le_bytes(v[..].try_into().unwrap())))
            .collect();
        let ledgered: HashMap<u64, u64> = present.iter().map(|(&t, m)| (t, m.2)).collect();
        assert_eq!(
            indexed, ledgered,
            "{what}: the index and the ledger hold different transfers"
        );
        let mut s = engine.session().unwrap();
        s.transaction(&TxnOptions::default(), |t| {
            for (k, _) in &markers {
                t.table(&ledger)?.delete(k)?;
            }
            for (k, _) in &entries {
                t.table(&index)?.delete(k)?;
            }
            Ok(())
        })
        .unwrap();
        acked.clear();
        balances
    }

    pub(super) fn kill_rounds(name: &str) {
        if let Some(dir) = std::env::var_os(CHILD_ENV) {
            child(Path::new(&dir));
        }
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let (rounds, seed) = rounds_and_seed();
        let mut rng = SmallRng::seed_from_u64(seed);
        let dir = std::env::temp_dir().join(format!(
            "snapshot-kill-{}-{seed}-tables",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let exe = std::env::current_exe().unwrap();
        let envs = [(CHILD_ENV, dir.clone()), (TABLES_ENV, PathBuf::from("1"))];
        let mut acked = Acked::new();
        let mut base = vec![0u64; ACCOUNTS as usize];
        let mut churn = [Churn::Absent; 3];
        let (mut total_acks, mut churn_acks) = (0usize, 0usize);
        for round in 0..rounds {
            let (lines, _) = run_and_kill(&exe, name, &envs, false, &mut rng, round, seed);
            for l in &lines {
                let mut p = l.split(' ');
                if p.next() != Some("ack") {
                    churn_acks += usize::from(l.starts_with("dropped") || l.starts_with("created"));
                    continue;
                }
                let tag = u64::from_str_radix(p.next().unwrap(), 16).unwrap();
                let from: u32 = p.next().unwrap().parse().unwrap();
                let to: u32 = p.next().unwrap().parse().unwrap();
                let amount: u64 = p.next().unwrap().parse().unwrap();
                acked.insert(tag, (from, to, amount));
                total_acks += 1;
            }
            read_churn(&lines, &mut churn);
            let what = format!("round {round} (seed {seed})");
            let engine = Engine::open(&dir, EngineConfig::default(), DurabilityOptions::default())
                .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
            churn = check_churn(&engine, &churn, &what);
            base = check_bank(&engine, &mut acked, &base, &what);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        eprintln!(
            "{rounds} kill-and-recover rounds, {total_acks} acknowledged cross-table \
             transfers and {churn_acks} creates and drops checked (seed {seed})"
        );
        assert!(total_acks > 0, "no transfer was ever acknowledged");
        assert!(churn_acks > 0, "no create or drop was ever acknowledged");
    }
}
