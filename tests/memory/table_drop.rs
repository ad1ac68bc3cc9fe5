//! Dropping a table frees its keys and versions through the epoch: not
//! while a reader still holds an epoch guard that could have loaded its
//! index, nor while a transaction that holds the index (a cursor on the
//! table, or writes to it) is open, and then, once they are gone, every
//! version the table held (`stats().versions_freed`). A handle left over
//! keeps nothing alive; other tables are read meanwhile.

use crate::one_at_a_time;
use snapshot_engine::machinery::epoch::Collector;
use snapshot_engine::{CommitOptions, Engine, EngineConfig, Error, TableOptions, TxnOptions};

const KEYS: u64 = 500;

/// Runs `collect` (each call tries to move the global epoch on and runs
/// what is due) until `versions_freed` reaches `want`, at most `rounds`
/// times; returns what it reached.
fn collect_until(e: &Engine, want: u64, rounds: u32) -> u64 {
    for _ in 0..rounds {
        e.collect();
        if e.stats().versions_freed >= want {
            break;
        }
    }
    e.stats().versions_freed
}

/// An engine with table "t" holding `KEYS` keys of one version each, and
/// table "other" with one key.
fn setup() -> Engine {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let t = e.create_table("t", TableOptions::default()).unwrap();
    let other = e.create_table("other", TableOptions::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    for i in 0..KEYS {
        txn.table(&t).unwrap().put(i.to_be_bytes(), "v").unwrap();
    }
    txn.table(&other).unwrap().put("k", "v").unwrap();
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    e
}

/// Collects until nothing more is freed: the baseline a drop's frees add
/// to.
fn settle(e: &Engine) -> u64 {
    let mut last = e.stats().versions_freed;
    loop {
        let now = collect_until(e, u64::MAX, 200);
        if now == last {
            return now;
        }
        last = now;
    }
}

#[test]
fn a_dropped_tables_versions_are_freed_only_after_an_epoch_guard_that_could_see_them_drops() {
    let _serial = one_at_a_time();
    let e = setup();
    let base = settle(&e);
    let handle = e.open_table("t").unwrap();
    let other = e.open_table("other").unwrap();
    // An old reader mid-read: an epoch guard pinned before the drop.
    let guard = Collector::new().pin();
    e.drop_table("t").unwrap();
    assert_eq!(collect_until(&e, base + KEYS, 2_000), base);
    // Readers of another table are not held up meanwhile.
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        txn.table(&other).unwrap().get("k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    drop(txn);
    drop(guard);
    assert_eq!(collect_until(&e, base + KEYS, 100_000), base + KEYS);
    // The handle left over reaches nothing, and kept nothing.
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        txn.table(&handle).err(),
        Some(Error::TableDropped { name: "t".into() })
    );
}

#[test]
fn a_dropped_tables_versions_wait_for_a_transaction_holding_its_index() {
    let _serial = one_at_a_time();
    let e = setup();
    let base = settle(&e);
    let t = e.open_table("t").unwrap();
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    // A cursor lends the index's keys for the transaction's life.
    let mut view = txn.table(&t).unwrap();
    let mut cursor = view.cursor();
    let (first, _) = cursor.next().unwrap().unwrap();
    assert_eq!(first, 0u64.to_be_bytes());
    e.drop_table("t").unwrap();
    assert_eq!(collect_until(&e, base + KEYS, 2_000), base);
    // The key it lent is still readable; the cursor's next read-ahead
    // says the table is gone.
    assert_eq!(first, 0u64.to_be_bytes());
    let mut err = None;
    for r in cursor.by_ref() {
        if let Err(e) = r {
            err = Some(e);
            break;
        }
    }
    assert_eq!(err, Some(Error::TableDropped { name: "t".into() }));
    drop(cursor);
    assert_eq!(collect_until(&e, base + KEYS, 2_000), base);
    txn.commit(CommitOptions::default()).unwrap();
    assert_eq!(collect_until(&e, base + KEYS, 100_000), base + KEYS);
}

#[test]
fn creating_and_dropping_many_tables_frees_every_version() {
    let _serial = one_at_a_time();
    let e = Engine::new(EngineConfig::default()).unwrap();
    let base = settle(&e);
    let mut s = e.session().unwrap();
    const TABLES: u64 = 200;
    for n in 0..TABLES {
        let t = e
            .create_table(&format!("t{n}"), TableOptions::default())
            .unwrap();
        let mut txn = s.begin(&TxnOptions::default()).unwrap();
        for i in 0..10u64 {
            txn.table(&t).unwrap().put(i.to_be_bytes(), "v").unwrap();
        }
        txn.commit(CommitOptions::default()).unwrap();
        e.drop_table(&format!("t{n}")).unwrap();
    }
    assert!(e.table_names().is_empty());
    assert_eq!(
        collect_until(&e, base + TABLES * 10, 100_000),
        base + TABLES * 10
    );
}
