//! Transactions across named tables: one snapshot and one read timestamp
//! cover every table (a bank whose accounts, ledger and index live in
//! three tables keeps its invariants at every read), a commit and a
//! prepared commit are atomic across tables, conflicts are per (table,
//! key), and serializable validation tells tables apart.

use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, Isolation, Table, TableOptions, Txn, TxnOptions,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ACCOUNTS: u64 = 8;
/// Large enough that no transfer below (at most 50) ever lacks funds.
const INITIAL: u64 = 1_000_000;

struct Bank {
    accounts: Table,
    ledger: Table,
    index: Table,
}

fn acct(i: u64) -> String {
    format!("acct{i:02}")
}

fn num(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

fn open_bank(e: &Engine) -> Bank {
    let bank = Bank {
        accounts: e.create_table("accounts", TableOptions::default()).unwrap(),
        ledger: e.create_table("ledger", TableOptions::default()).unwrap(),
        index: e.create_table("index", TableOptions::default()).unwrap(),
    };
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    for i in 0..ACCOUNTS {
        txn.table(&bank.accounts)
            .unwrap()
            .put(acct(i), INITIAL.to_string())
            .unwrap();
        txn.table(&bank.index).unwrap().put(acct(i), "0").unwrap();
    }
    txn.commit(CommitOptions::at(1)).unwrap();
    bank
}

/// One transfer of `amount` from `from` to `to`, entry `entry` of the
/// ledger: balances in `accounts`, the entry in `ledger`, each account's
/// entry count in `index`.
fn transfer(
    txn: &mut Txn<'_, '_>,
    b: &Bank,
    (from, to, amount): (u64, u64, u64),
    entry: &str,
) -> snapshot_engine::Result<()> {
    let keys = [acct(from), acct(to)];
    let bal = txn.table(&b.accounts)?.get_many(&keys)?;
    let (fb, tb) = (num(bal[0].as_ref().unwrap()), num(bal[1].as_ref().unwrap()));
    assert!(fb >= amount, "INITIAL covers every transfer");
    let mut a = txn.table(&b.accounts)?;
    a.put(&keys[0], (fb - amount).to_string())?;
    a.put(&keys[1], (tb + amount).to_string())?;
    txn.table(&b.ledger)?
        .put(entry, format!("{from} {to} {amount}"))?;
    let mut ix = txn.table(&b.index)?;
    for k in &keys {
        let n = num(&ix.get(k)?.unwrap());
        ix.put(k, (n + 1).to_string())?;
    }
    Ok(())
}

/// Reads all three tables in `txn` and checks the bank's invariants across
/// them: the balances add up, each balance is what the ledger says, each
/// account's index count is its ledger entries. Returns the ledger's size.
fn check(txn: &mut Txn<'_, '_>, b: &Bank) -> usize {
    let accounts: BTreeMap<Vec<u8>, u64> = txn
        .table(&b.accounts)
        .unwrap()
        .range(..)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, num(&v)))
        .collect();
    let mut want: BTreeMap<Vec<u8>, u64> = (0..ACCOUNTS)
        .map(|i| (acct(i).into_bytes(), INITIAL))
        .collect();
    let mut count: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut entries = 0;
    for r in txn.table(&b.ledger).unwrap().iter(..) {
        let (_, v) = r.unwrap();
        entries += 1;
        let f: Vec<u64> = std::str::from_utf8(&v)
            .unwrap()
            .split(' ')
            .map(|x| x.parse().unwrap())
            .collect();
        *want.get_mut(acct(f[0]).as_bytes()).unwrap() -= f[2];
        *want.get_mut(acct(f[1]).as_bytes()).unwrap() += f[2];
        *count.entry(acct(f[0]).into_bytes()).or_default() += 1;
        *count.entry(acct(f[1]).into_bytes()).or_default() += 1;
    }
    assert_eq!(accounts.values().sum::<u64>(), ACCOUNTS * INITIAL);
    assert_eq!(accounts, want, "balances disagree with the ledger");
    let mut ix = txn.table(&b.index).unwrap();
    for i in 0..ACCOUNTS {
        let k = acct(i);
        let n = num(&ix.get(&k).unwrap().unwrap());
        assert_eq!(
            n,
            count.get(k.as_bytes()).copied().unwrap_or(0),
            "index of {k}"
        );
    }
    entries
}

#[test]
fn a_bank_across_three_tables_keeps_its_invariants_at_every_snapshot_and_read_timestamp() {
    const WRITERS: u64 = 3;
    const TRANSFERS: u64 = 150;
    let e = Engine::new(EngineConfig::default()).unwrap();
    let bank = open_bank(&e);
    // Commit timestamps: drawn after a transfer's reads, so a transfer
    // that read another's writes commits at a later timestamp.
    let clock = AtomicU64::new(1);
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|sc| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (e, bank, clock) = (&e, &bank, &clock);
                sc.spawn(move || {
                    let mut s = e.session().unwrap();
                    let mut x = w * 7 + 1;
                    for n in 0..TRANSFERS {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let from = (x >> 33) % ACCOUNTS;
                        let to = (from + 1 + (x >> 40) % (ACCOUNTS - 1)) % ACCOUNTS;
                        let amount = 1 + (x >> 50) % 50;
                        let entry = format!("w{w}-{n:05}");
                        s.transaction(&TxnOptions::default(), |txn| {
                            transfer(txn, bank, (from, to, amount), &entry)?;
                            let ts = clock.fetch_add(1, Ordering::SeqCst) + 1;
                            txn.set_commit_timestamp(ts)?;
                            Ok(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for r in 0..2 {
            let (e, bank, clock, done, reads) = (&e, &bank, &clock, &done, &reads);
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                let mut last = 0;
                while !done.load(Ordering::SeqCst) {
                    let opts = if r == 0 {
                        TxnOptions::default()
                    } else {
                        TxnOptions::at(clock.load(Ordering::SeqCst))
                    };
                    let mut txn = s.begin(&opts).unwrap();
                    let n = check(&mut txn, bank);
                    if r == 0 {
                        // Snapshots follow real time: the ledger never shrinks.
                        assert!(n >= last, "ledger went from {last} to {n} entries");
                        last = n;
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
    });
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(check(&mut txn, &bank), (WRITERS * TRANSFERS) as usize);
    drop(txn);
    // Every past read timestamp still reads a consistent bank.
    for ts in [1, 2, 50, 200, WRITERS * TRANSFERS / 2] {
        let mut txn = s.begin(&TxnOptions::at(ts)).unwrap();
        assert_eq!(check(&mut txn, &bank), ts as usize - 1);
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
}

#[test]
fn a_prepared_commit_across_tables_is_seen_whole_or_not_at_all() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let t: Vec<Table> = ["a", "b", "c"]
        .iter()
        .map(|n| e.create_table(n, TableOptions::default()).unwrap())
        .collect();
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    for tb in &t {
        txn.table(tb).unwrap().put("k", "v").unwrap();
    }
    txn.prepare(10).unwrap();
    // Each table's key: a prepare conflict at or above 10, absent below.
    let visible = |ts: u64| -> Vec<Result<Option<Vec<u8>>, Error>> {
        let mut s = e.session().unwrap();
        let mut r = s.begin(&TxnOptions::at(ts)).unwrap();
        t.iter().map(|tb| r.table(tb).unwrap().get("k")).collect()
    };
    assert_eq!(visible(9), [Ok(None), Ok(None), Ok(None)]);
    for v in visible(12) {
        assert_eq!(v, Err(Error::PrepareConflict { key: b"k".to_vec() }));
    }
    // Readers in another thread while it commits: every read sees all three
    // writes, none, or the prepare conflict, never a mix.
    let done = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut s = e.session().unwrap();
            let mut rounds = 0u64;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let mut r = s.begin(&TxnOptions::at(15)).unwrap();
                let seen: Vec<_> = t.iter().map(|tb| r.table(tb).unwrap().get("k")).collect();
                let whole = seen.iter().all(|v| *v == Ok(Some(b"v".to_vec())));
                let conflict = seen.iter().any(|v| v.is_err());
                let none = seen.iter().all(|v| *v == Ok(None));
                assert!(whole || conflict, "partial view at 15: {seen:?}");
                assert!(!none, "at 15 the prepared writes are never absent");
                rounds += 1;
                if finished && whole {
                    break;
                }
                assert!(rounds < 10_000_000, "the commit never became visible");
            }
        });
        txn.commit(CommitOptions::at(14)).unwrap();
        done.store(true, Ordering::SeqCst);
    });
    drop(s);
    assert_eq!(visible(13), [Ok(None), Ok(None), Ok(None)]);
    let whole = Ok(Some(b"v".to_vec()));
    assert_eq!(visible(14), [whole.clone(), whole.clone(), whole]);
}

#[test]
fn a_rollback_undoes_every_table_at_once() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let a = e.create_table("a", TableOptions::default()).unwrap();
    let b = e.create_table("b", TableOptions::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.table(&a).unwrap().put("k", "1").unwrap();
    txn.table(&b).unwrap().put("k", "1").unwrap();
    txn.rollback();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(txn.table(&a).unwrap().get("k").unwrap(), None);
    assert_eq!(txn.table(&b).unwrap().get("k").unwrap(), None);
    // A write conflict in one table dooms the whole transaction.
    let mut s2 = e.session().unwrap();
    let mut other = s2.begin(&TxnOptions::default()).unwrap();
    other.table(&b).unwrap().put("k", "other").unwrap();
    txn.table(&a).unwrap().put("k", "2").unwrap();
    assert_eq!(
        txn.table(&b).unwrap().put("k", "2").unwrap_err(),
        Error::WriteConflict { key: b"k".to_vec() }
    );
    assert_eq!(
        txn.commit(CommitOptions::default()).unwrap_err(),
        Error::MustRollBack
    );
    other.commit(CommitOptions::default()).unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(txn.table(&a).unwrap().get("k").unwrap(), None);
    assert_eq!(
        txn.table(&b).unwrap().get("k").unwrap().as_deref(),
        Some(&b"other"[..])
    );
}

#[test]
fn write_conflicts_are_per_table_and_key() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let a = e.create_table("a", TableOptions::default()).unwrap();
    let b = e.create_table("b", TableOptions::default()).unwrap();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    // The same key in three keyspaces: no conflict.
    t1.table(&a).unwrap().put("k", "1").unwrap();
    t2.table(&b).unwrap().put("k", "2").unwrap();
    t2.put("k", "2").unwrap();
    // The same key in the same table: the second writer loses.
    assert_eq!(
        t2.table(&a).unwrap().put("k", "2").unwrap_err(),
        Error::WriteConflict { key: b"k".to_vec() }
    );
    t1.commit(CommitOptions::default()).unwrap();
    drop(t2);
    let mut t = s1.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        t.table(&a).unwrap().get("k").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(t.table(&b).unwrap().get("k").unwrap(), None);
}

fn serializable() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::Serializable,
        ..TxnOptions::default()
    }
}

#[test]
fn serializable_write_skew_across_two_tables_is_refused() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let x = e.create_table("x", TableOptions::default()).unwrap();
    let y = e.create_table("y", TableOptions::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.table(&x).unwrap().put("on", "1").unwrap();
    t.table(&y).unwrap().put("on", "1").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    // Each turns one off if the other is still on: at most one may commit.
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&serializable()).unwrap();
    let mut t2 = s2.begin(&serializable()).unwrap();
    assert!(t1.table(&y).unwrap().get("on").unwrap().is_some());
    assert!(t2.table(&x).unwrap().get("on").unwrap().is_some());
    t1.table(&x).unwrap().delete("on").unwrap();
    t2.table(&y).unwrap().delete("on").unwrap();
    t1.commit(CommitOptions::default()).unwrap();
    assert_eq!(
        t2.commit(CommitOptions::default()).unwrap_err(),
        Error::SerializationConflict {
            key: b"on".to_vec()
        }
    );
    // The same through scans (range tracking) across the two tables: x on,
    // y off; each flips its own if it saw the other's state.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.table(&x).unwrap().put("on", "1").unwrap();
    t.table(&y).unwrap().delete("on").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    let mut t1 = s1.begin(&serializable()).unwrap();
    let mut t2 = s2.begin(&serializable()).unwrap();
    assert_eq!(t1.table(&y).unwrap().range(..).unwrap().len(), 0);
    assert_eq!(t2.table(&x).unwrap().range(..).unwrap().len(), 1);
    t1.table(&x).unwrap().delete("on").unwrap();
    t2.table(&y).unwrap().put("on", "1").unwrap();
    t1.commit(CommitOptions::default()).unwrap();
    assert!(matches!(
        t2.commit(CommitOptions::default()).unwrap_err(),
        Error::RangeConflict { .. }
    ));
}

#[test]
fn serializable_reads_of_one_table_are_not_confused_with_the_same_key_in_another() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let a = e.create_table("a", TableOptions::default()).unwrap();
    let b = e.create_table("b", TableOptions::default()).unwrap();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&serializable()).unwrap();
    assert_eq!(t1.table(&a).unwrap().get("k").unwrap(), None);
    assert_eq!(t1.table(&a).unwrap().range(.."z").unwrap(), []);
    assert_eq!(t1.get("k").unwrap(), None);
    // Another transaction writes "k" in table b: not what t1 read.
    let mut t2 = s2.begin(&serializable()).unwrap();
    t2.table(&b).unwrap().put("k", "v").unwrap();
    t2.commit(CommitOptions::default()).unwrap();
    t1.table(&a).unwrap().put("w", "1").unwrap();
    t1.commit(CommitOptions::default()).unwrap();
    // get_for_update in a snapshot transaction: tracked per table too.
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t1.table(&b).unwrap().get_for_update("x").unwrap(), None);
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    t2.table(&a).unwrap().put("x", "v").unwrap();
    t2.commit(CommitOptions::default()).unwrap();
    t1.table(&b).unwrap().put("y", "1").unwrap();
    t1.commit(CommitOptions::default()).unwrap();
    // And the same key in the same table does conflict.
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t1.table(&b).unwrap().get_for_update("x").unwrap(), None);
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    t2.table(&b).unwrap().put("x", "v").unwrap();
    t2.commit(CommitOptions::default()).unwrap();
    t1.table(&b).unwrap().put("y", "2").unwrap();
    assert_eq!(
        t1.commit(CommitOptions::default()).unwrap_err(),
        Error::SerializationConflict { key: b"x".to_vec() }
    );
}

#[test]
fn a_serializable_prepared_read_set_names_its_table() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let a = e.create_table("a", TableOptions::default()).unwrap();
    let b = e.create_table("b", TableOptions::default()).unwrap();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut p = s1.begin(&serializable()).unwrap();
    assert_eq!(p.table(&a).unwrap().get("k").unwrap(), None);
    p.table(&a).unwrap().put("w", "1").unwrap();
    p.prepare(10).unwrap();
    // A serializable writer of "k" in table b: not in p's read set.
    let mut t = s2.begin(&serializable()).unwrap();
    t.table(&b).unwrap().put("k", "v").unwrap();
    t.commit(CommitOptions::at(20)).unwrap();
    // Of "k" in table a: it is.
    let mut t = s2.begin(&serializable()).unwrap();
    t.table(&a).unwrap().put("k", "v").unwrap();
    assert_eq!(
        t.commit(CommitOptions::at(21)).unwrap_err(),
        Error::PreparedReadConflict { key: b"k".to_vec() }
    );
    p.commit(CommitOptions::at(25)).unwrap();
}
