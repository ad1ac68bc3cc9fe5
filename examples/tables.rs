//! Named tables: a small bank whose accounts, ledger and per-account entry
//! counts live in three tables. Transfers commit to all three at once,
//! from several threads; a reader checks, at one snapshot, that the
//! balances add up and agree with the ledger. Then a table is dropped.
//!
//! `cargo run --release --example tables`

use snapshot_engine::{CommitOptions, Engine, EngineConfig, Error, TableOptions, TxnOptions};

const ACCOUNTS: u64 = 4;
const INITIAL: u64 = 1_000;

fn num(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineConfig::default())?;
    let accounts = engine.create_table("accounts", TableOptions::default())?;
    // Ledger entries are short: a tighter value bound than the engine's.
    let ledger = engine.create_table(
        "ledger",
        TableOptions {
            max_value_len: Some(64),
            ..TableOptions::default()
        },
    )?;
    let entries = engine.create_table("entries", TableOptions::default())?;
    println!("tables: {:?}", engine.table_names());

    let mut session = engine.session()?;
    let mut txn = session.begin(&TxnOptions::default())?;
    for a in 0..ACCOUNTS {
        txn.table(&accounts)?
            .put(format!("acct{a}"), INITIAL.to_string())?;
    }
    txn.commit(CommitOptions::default())?;

    std::thread::scope(|s| -> snapshot_engine::Result<()> {
        let workers: Vec<_> = (0..2u64)
            .map(|w| {
                let (engine, accounts, ledger, entries) = (&engine, &accounts, &ledger, &entries);
                s.spawn(move || -> snapshot_engine::Result<()> {
                    let mut session = engine.session()?;
                    for n in 0..100u64 {
                        let (from, to) = ((w + n) % ACCOUNTS, (w + 2 * n + 1) % ACCOUNTS);
                        if from == to {
                            continue;
                        }
                        // Retries write conflicts; every table commits or none.
                        session.transaction(&TxnOptions::default(), |txn| {
                            let keys = [format!("acct{from}"), format!("acct{to}")];
                            let bal = txn.table(accounts)?.get_many(&keys)?;
                            let (f, t) =
                                (num(bal[0].as_ref().unwrap()), num(bal[1].as_ref().unwrap()));
                            let mut acc = txn.table(accounts)?;
                            acc.put(&keys[0], (f - 1).to_string())?;
                            acc.put(&keys[1], (t + 1).to_string())?;
                            txn.table(ledger)?
                                .put(format!("w{w}-{n:03}"), format!("{from}>{to}"))?;
                            let mut cnt = txn.table(entries)?;
                            for k in &keys {
                                let c = cnt.get(k)?.map_or(0, |v| num(&v));
                                cnt.put(k, (c + 1).to_string())?;
                            }
                            Ok(())
                        })?;
                    }
                    Ok(())
                })
            })
            .collect();
        // A reader at one snapshot, while the transfers run.
        let mut reader = engine.session()?;
        for _ in 0..20 {
            let mut txn = reader.begin(&TxnOptions::default())?;
            let total: u64 = txn
                .table(&accounts)?
                .range(..)?
                .iter()
                .map(|(_, v)| num(v))
                .sum();
            let moves = txn.table(&ledger)?.range(..)?.len() as u64;
            let counted: u64 = txn
                .table(&entries)?
                .range(..)?
                .iter()
                .map(|(_, v)| num(v))
                .sum();
            assert_eq!(total, ACCOUNTS * INITIAL, "money is conserved");
            assert_eq!(counted, 2 * moves, "every ledger entry is counted twice");
        }
        for w in workers {
            w.join().expect("a worker panicked")?;
        }
        Ok(())
    })?;

    let mut txn = session.begin(&TxnOptions::default())?;
    let moves = txn.table(&ledger)?.range(..)?.len();
    println!("{moves} transfers in the ledger");
    drop(txn);

    // Dropping a table: at once, for every handle.
    engine.drop_table("ledger")?;
    let mut txn = session.begin(&TxnOptions::default())?;
    assert!(matches!(
        txn.table(&ledger),
        Err(Error::TableDropped { .. })
    ));
    println!("after the drop: {:?}", engine.table_names());
    Ok(())
}
