//! Named tables' rules at the API: names, duplicates, missing tables, use
//! after drop, handles from another engine and per-table bounds are typed
//! errors that leave the engine usable and lose nothing; ids are never
//! reused; each table is its own keyspace.

use snapshot_engine::{
    CommitOptions, DurabilityOptions, Engine, EngineConfig, Error, Table, TableId,
    TableNameProblem, TableOptions, TxnOptions, MAX_TABLE_NAME_LEN,
};

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).unwrap()
}

fn put(e: &Engine, t: &Table, k: &str, v: &str) {
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.table(t).unwrap().put(k, v).unwrap();
    txn.commit(CommitOptions::default()).unwrap();
}

fn get(e: &Engine, t: &Table, k: &str) -> Option<Vec<u8>> {
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    let v = txn.table(t).unwrap().get(k).unwrap();
    v
}

/// The state every error test checks it did not lose: a table "keep" with
/// one key, and one key in the default table.
fn with_data() -> (Engine, Table) {
    let e = engine();
    let keep = e.create_table("keep", TableOptions::default()).unwrap();
    put(&e, &keep, "k", "kept");
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.put("d", "default").unwrap();
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    (e, keep)
}

fn nothing_lost(e: &Engine, keep: &Table) {
    assert_eq!(get(e, keep, "k").as_deref(), Some(&b"kept"[..]));
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(txn.get("d").unwrap().as_deref(), Some(&b"default"[..]));
    drop(txn);
    drop(s);
    // Usable: a new table, written and read.
    let t = e
        .create_table(
            &format!("after-{}", e.table_names().len()),
            TableOptions::default(),
        )
        .unwrap();
    put(e, &t, "x", "y");
    assert_eq!(get(e, &t, "x").as_deref(), Some(&b"y"[..]));
}

#[test]
fn every_malformed_name_is_a_typed_error_and_the_engine_stays_usable() {
    let (e, keep) = with_data();
    let long = "n".repeat(MAX_TABLE_NAME_LEN + 1);
    // 128 two-byte characters: 256 bytes, though 128 characters.
    let wide = "é".repeat(128);
    let cases: [(&str, TableNameProblem); 5] = [
        ("", TableNameProblem::Empty),
        (&long, TableNameProblem::TooLong { len: 256, max: 255 }),
        (&wide, TableNameProblem::TooLong { len: 256, max: 255 }),
        ("a\0b", TableNameProblem::Nul { at: 1 }),
        ("\0", TableNameProblem::Nul { at: 0 }),
    ];
    for (name, problem) in cases {
        let want = Error::InvalidTableName {
            name: name.to_string(),
            problem,
        };
        assert_eq!(
            e.create_table(name, TableOptions::default()).unwrap_err(),
            want
        );
        assert_eq!(e.open_table(name).unwrap_err(), want);
        assert_eq!(e.drop_table(name).unwrap_err(), want);
    }
    let msg = e
        .create_table("", TableOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(msg, "table name 0x is empty");
    let msg = e
        .create_table(&long, TableOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.ends_with("is 256 bytes long, above the limit 255"),
        "{msg}"
    );
    // The bound itself is accepted, and so is any other UTF-8.
    let max = "m".repeat(MAX_TABLE_NAME_LEN);
    e.create_table(&max, TableOptions::default()).unwrap();
    e.create_table("données/2024 ✓", TableOptions::default())
        .unwrap();
    assert_eq!(e.table_names().len(), 3);
    nothing_lost(&e, &keep);
}

#[test]
fn duplicate_and_missing_names_are_typed_errors() {
    let (e, keep) = with_data();
    assert_eq!(
        e.create_table("keep", TableOptions::default()).unwrap_err(),
        Error::TableExists {
            name: "keep".into()
        }
    );
    assert_eq!(
        e.open_table("nope").unwrap_err(),
        Error::TableNotFound {
            name: "nope".into()
        }
    );
    assert_eq!(
        e.drop_table("nope").unwrap_err(),
        Error::TableNotFound {
            name: "nope".into()
        }
    );
    // The duplicate create changed nothing: the old handle and a fresh
    // open name the same table.
    let again = e.open_table("keep").unwrap();
    assert_eq!(again, keep);
    assert_eq!(again.id(), keep.id());
    nothing_lost(&e, &keep);
}

#[test]
fn ids_are_never_reused_and_a_stale_handle_never_reaches_a_new_table() {
    let e = engine();
    let a = e.create_table("t", TableOptions::default()).unwrap();
    assert_ne!(a.id(), TableId::DEFAULT);
    put(&e, &a, "k", "old");
    e.drop_table("t").unwrap();
    assert!(a.is_dropped());
    assert_eq!(e.table_names(), Vec::<String>::new());
    assert_eq!(
        e.open_table("t").unwrap_err(),
        Error::TableNotFound { name: "t".into() }
    );
    let b = e.create_table("t", TableOptions::default()).unwrap();
    assert!(b.id() > a.id(), "{:?} after {:?}", b.id(), a.id());
    assert_ne!(a, b);
    // The new table starts empty; the old handle reaches neither table.
    assert_eq!(get(&e, &b, "k"), None);
    put(&e, &b, "k", "new");
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        txn.table(&a).err(),
        Some(Error::TableDropped { name: "t".into() })
    );
    assert_eq!(
        txn.table(&b).unwrap().get("k").unwrap().as_deref(),
        Some(&b"new"[..])
    );
}

#[test]
fn use_after_drop_reads_writes_and_commits_are_typed_errors_and_nothing_else_is_lost() {
    let (e, keep) = with_data();
    let gone = e.create_table("gone", TableOptions::default()).unwrap();
    put(&e, &gone, "g", "1");
    let mut s = e.session().unwrap();

    // A transaction that wrote to both tables and to the default one, then
    // the drop: its commit fails and rolls back all of it.
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.table(&keep).unwrap().put("k", "lost").unwrap();
    txn.table(&gone).unwrap().put("g", "2").unwrap();
    txn.put("d", "lost").unwrap();
    let mut view = txn.table(&gone).unwrap();
    e.drop_table("gone").unwrap();
    assert_eq!(
        view.get("g").unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );
    assert_eq!(
        view.put("h", "x").unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );
    assert_eq!(
        view.delete("g").unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );
    assert_eq!(
        view.get_many(&["g"]).unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );
    assert_eq!(
        view.range(..).unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );
    assert_eq!(
        view.cursor().next().unwrap().unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );
    assert_eq!(
        txn.commit(CommitOptions::default()).unwrap_err(),
        Error::TableDropped {
            name: "gone".into()
        }
    );

    // The same through try_commit: no transaction comes back (rolled back).
    let gone2 = e.create_table("gone2", TableOptions::default()).unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.table(&gone2).unwrap().put("g", "1").unwrap();
    txn.table(&keep).unwrap().put("k", "lost").unwrap();
    e.drop_table("gone2").unwrap();
    let err = txn.try_commit(CommitOptions::default()).unwrap_err();
    assert_eq!(
        *err.error(),
        Error::TableDropped {
            name: "gone2".into()
        }
    );
    assert!(err.into_txn().is_none());

    // And a prepare.
    let gone3 = e.create_table("gone3", TableOptions::default()).unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.table(&gone3).unwrap().put("g", "1").unwrap();
    txn.table(&keep).unwrap().put("k", "lost").unwrap();
    e.drop_table("gone3").unwrap();
    assert_eq!(
        txn.prepare(5).unwrap_err(),
        Error::TableDropped {
            name: "gone3".into()
        }
    );
    drop(txn);

    // A transaction that only read the dropped table commits.
    let gone4 = e.create_table("gone4", TableOptions::default()).unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(txn.table(&gone4).unwrap().get("x").unwrap(), None);
    txn.table(&keep).unwrap().put("k2", "v").unwrap();
    e.drop_table("gone4").unwrap();
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    assert_eq!(get(&e, &keep, "k2").as_deref(), Some(&b"v"[..]));
    nothing_lost(&e, &keep);
}

#[test]
fn a_handle_from_another_engine_is_refused() {
    let (e, keep) = with_data();
    let other = engine();
    let theirs = other.create_table("keep", TableOptions::default()).unwrap();
    put(&other, &theirs, "k", "theirs");
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        txn.table(&theirs).err(),
        Some(Error::ForeignTable {
            name: "keep".into()
        })
    );
    // The transaction is still usable.
    txn.table(&keep).unwrap().put("k2", "v").unwrap();
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    assert_eq!(get(&other, &theirs, "k").as_deref(), Some(&b"theirs"[..]));
    nothing_lost(&e, &keep);
}

#[test]
fn each_table_has_its_own_bounds_checked_with_the_usual_errors() {
    let e = Engine::new(EngineConfig {
        max_key_len: 16,
        max_value_len: 32,
        ..EngineConfig::default()
    })
    .unwrap();
    let small = e
        .create_table(
            "small",
            TableOptions {
                max_key_len: Some(4),
                max_value_len: Some(8),
            },
        )
        .unwrap();
    let inherit = e.create_table("inherit", TableOptions::default()).unwrap();
    assert_eq!((small.max_key_len(), small.max_value_len()), (4, 8));
    assert_eq!((inherit.max_key_len(), inherit.max_value_len()), (16, 32));
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    let mut t = txn.table(&small).unwrap();
    assert_eq!(
        t.put("12345", "v").unwrap_err(),
        Error::KeyTooLarge { len: 5, max: 4 }
    );
    assert_eq!(
        t.put("k", "123456789").unwrap_err(),
        Error::ValueTooLarge { len: 9, max: 8 }
    );
    assert_eq!(
        t.get("12345").unwrap_err(),
        Error::KeyTooLarge { len: 5, max: 4 }
    );
    assert_eq!(
        t.delete("12345").unwrap_err(),
        Error::KeyTooLarge { len: 5, max: 4 }
    );
    assert_eq!(
        t.get_many(&["k", "12345"]).unwrap_err(),
        Error::KeyTooLarge { len: 5, max: 4 }
    );
    t.put("1234", "12345678").unwrap();
    // The same key and value fit the default table and the other table.
    txn.put("12345", "123456789").unwrap();
    txn.table(&inherit)
        .unwrap()
        .put("12345", "123456789")
        .unwrap();
    assert_eq!(
        txn.table(&inherit)
            .unwrap()
            .put("k", [0u8; 33])
            .unwrap_err(),
        Error::ValueTooLarge { len: 33, max: 32 }
    );
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    assert_eq!(get(&e, &small, "1234").as_deref(), Some(&b"12345678"[..]));

    // Options out of bounds: typed, nothing created.
    let err = e
        .create_table(
            "big",
            TableOptions {
                max_key_len: Some(EngineConfig::MAX_KEY_LEN + 1),
                max_value_len: None,
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::TableOptionOutOfRange {
            field: "max_key_len",
            value: EngineConfig::MAX_KEY_LEN + 1,
            max: EngineConfig::MAX_KEY_LEN,
        }
    );
    let err = e
        .create_table(
            "big",
            TableOptions {
                max_key_len: None,
                max_value_len: Some(EngineConfig::MAX_VALUE_LEN + 1),
            },
        )
        .unwrap_err();
    assert!(matches!(
        err,
        Error::TableOptionOutOfRange {
            field: "max_value_len",
            ..
        }
    ));
    assert_eq!(e.table_names(), ["inherit", "small"]);
}

#[test]
fn tables_are_separate_keyspaces_listed_by_name() {
    let e = engine();
    let b = e.create_table("b", TableOptions::default()).unwrap();
    let a = e.create_table("a", TableOptions::default()).unwrap();
    assert_eq!(e.table_names(), ["a", "b"]);
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.put("k", "default").unwrap();
    txn.table(&a).unwrap().put("k", "a").unwrap();
    txn.table(&b).unwrap().put("k", "b").unwrap();
    txn.table(&b).unwrap().put("l", "b2").unwrap();
    txn.commit(CommitOptions::default()).unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        txn.range(..).unwrap(),
        [(b"k".to_vec(), b"default".to_vec())]
    );
    assert_eq!(
        txn.table(&a).unwrap().range(..).unwrap(),
        [(b"k".to_vec(), b"a".to_vec())]
    );
    let keys: Vec<Vec<u8>> = txn
        .table(&b)
        .unwrap()
        .iter(..)
        .map(|r| r.map(|(k, _)| k.to_vec()))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys, [b"k".to_vec(), b"l".to_vec()]);
    let mut got = Vec::new();
    txn.table(&b)
        .unwrap()
        .get_many_with(&["l", "k", "z"], |i, v| {
            got.push((i, v.map(<[u8]>::to_vec)))
        })
        .unwrap();
    assert_eq!(
        got,
        [
            (0, Some(b"b2".to_vec())),
            (1, Some(b"b".to_vec())),
            (2, None)
        ]
    );
}

#[test]
fn savepoints_roll_back_writes_in_every_table() {
    let e = engine();
    let a = e.create_table("a", TableOptions::default()).unwrap();
    let b = e.create_table("b", TableOptions::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.table(&a).unwrap().put("k", "1").unwrap();
    let sp = txn.savepoint().unwrap();
    txn.table(&a).unwrap().put("k", "2").unwrap();
    txn.table(&b).unwrap().put("k", "2").unwrap();
    txn.put("k", "2").unwrap();
    txn.rollback_to(&sp).unwrap();
    assert_eq!(txn.table(&b).unwrap().get("k").unwrap(), None);
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    assert_eq!(get(&e, &a, "k").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&e, &b, "k"), None);
}

#[test]
fn a_durable_engine_refuses_named_tables_with_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("snapshot-tables-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let e = Engine::open(&dir, EngineConfig::default(), DurabilityOptions::default()).unwrap();
    let err = e.create_table("t", TableOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    assert_eq!(e.table_names(), Vec::<String>::new());
    // Still usable.
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.put("k", "v").unwrap();
    txn.commit(CommitOptions::default()).unwrap();
    drop(s);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_table_handle_is_send_sync_and_cheap_to_clone() {
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Table>();
    let e = engine();
    let t = e.create_table("t", TableOptions::default()).unwrap();
    let t2 = t.clone();
    std::thread::scope(|sc| {
        sc.spawn(|| put(&e, &t2, "k", "v"));
    });
    assert_eq!(get(&e, &t, "k").as_deref(), Some(&b"v"[..]));
    assert_eq!(
        format!("{t:?}"),
        format!("Table {{ id: {}, name: \"t\", dropped: false }}", t.id())
    );
}
