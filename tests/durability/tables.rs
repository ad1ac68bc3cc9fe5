//! Named tables on a durable engine: creates, drops and writes across
//! tables survive a reopen, with checkpoints taken between them, and a
//! crash or power cut after any acknowledged step keeps every table as
//! that step left it (creates and drops are logged under the engine's
//! durability, in the order the catalog changed).

use snapshot_engine::durability::{MemFs, WriteBack};
use snapshot_engine::{CommitOptions, Durability, Engine, EngineConfig, TableOptions, TxnOptions};
use std::collections::BTreeMap;

use super::{opts, DIR};

/// What the engine should hold: table name ("" for the default table) to
/// its keys and values.
type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn open(fs: &MemFs) -> Engine {
    Engine::open(DIR, EngineConfig::default(), opts(fs, Durability::Sync)).unwrap()
}

/// Every table's contents, read in one transaction.
fn contents(e: &Engine) -> Model {
    let mut out = Model::new();
    let tables: Vec<_> = e
        .table_names()
        .into_iter()
        .map(|n| e.open_table(&n).unwrap())
        .collect();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let all = Vec::new()..vec![0xff];
    out.insert(
        String::new(),
        t.range(all.clone()).unwrap().into_iter().collect(),
    );
    for table in &tables {
        let rows = t.table(table).unwrap().range(all.clone()).unwrap();
        out.insert(table.name().to_string(), rows.into_iter().collect());
    }
    out
}

/// One step of the script.
enum Step {
    Create(&'static str),
    Drop(&'static str),
    /// One transaction writing `(table, key, value)`s (`None`: a delete).
    Commit(Vec<(&'static str, &'static str, Option<&'static str>)>),
    Checkpoint,
}

fn script() -> Vec<Step> {
    use Step::*;
    vec![
        Create("accounts"),
        Create("ledger"),
        Commit(vec![
            ("accounts", "alice", Some("100")),
            ("", "meta", Some("1")),
        ]),
        Create("index"),
        Commit(vec![
            ("accounts", "alice", Some("90")),
            ("accounts", "bob", Some("10")),
            ("ledger", "t1", Some("alice->bob 10")),
            ("index", "bob", Some("accounts/bob")),
        ]),
        Checkpoint,
        Drop("ledger"),
        Commit(vec![
            ("index", "alice", Some("accounts/alice")),
            ("", "meta", None),
        ]),
        Create("ledger"),
        Commit(vec![
            ("ledger", "t2", Some("bob->alice 5")),
            ("accounts", "bob", Some("5")),
        ]),
        Drop("index"),
        Checkpoint,
        Commit(vec![("accounts", "carol", Some("0"))]),
        Create("index"),
        Commit(vec![("index", "carol", Some("accounts/carol"))]),
    ]
}

/// Applies `step` to the engine and the model.
fn apply(e: &Engine, model: &mut Model, step: &Step) {
    match step {
        Step::Create(name) => {
            e.create_table(name, TableOptions::default()).unwrap();
            model.insert(name.to_string(), BTreeMap::new());
        }
        Step::Drop(name) => {
            e.drop_table(name).unwrap();
            model.remove(*name);
        }
        Step::Commit(writes) => {
            let handles: BTreeMap<_, _> = writes
                .iter()
                .filter(|w| !w.0.is_empty())
                .map(|w| (w.0, e.open_table(w.0).unwrap()))
                .collect();
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            for &(table, k, v) in writes {
                let rows = model.get_mut(table).unwrap();
                match (table, v) {
                    ("", Some(v)) => t.put(k, v).unwrap(),
                    ("", None) => t.delete(k).unwrap(),
                    (_, Some(v)) => t.table(&handles[table]).unwrap().put(k, v).unwrap(),
                    (_, None) => t.table(&handles[table]).unwrap().delete(k).unwrap(),
                }
                match v {
                    Some(v) => rows.insert(k.into(), v.into()),
                    None => rows.remove(k.as_bytes()),
                };
            }
            t.commit(CommitOptions::default()).unwrap();
        }
        Step::Checkpoint => {
            e.checkpoint().unwrap();
        }
    }
}

fn empty_model() -> Model {
    Model::from([(String::new(), BTreeMap::new())])
}

#[test]
fn tables_written_created_and_dropped_survive_reopens() {
    let fs = MemFs::new();
    let mut model = empty_model();
    for (i, step) in script().iter().enumerate() {
        let e = open(&fs);
        assert_eq!(contents(&e), model, "reopened before step {i}");
        apply(&e, &mut model, step);
        assert_eq!(contents(&e), model, "after step {i}");
    }
    let e = open(&fs);
    assert_eq!(contents(&e), model);
    // A name dropped and created again is a new table with a new id.
    let index = e.open_table("index").unwrap();
    assert!(index.id().get() > 3, "{:?}", index.id());
}

#[test]
fn a_crash_or_power_cut_after_any_step_keeps_every_table_as_it_left_them() {
    let fs = MemFs::new();
    let e = open(&fs);
    let mut model = empty_model();
    let mut images = vec![(fs.crash(), model.clone())];
    for step in &script() {
        apply(&e, &mut model, step);
        images.push((fs.crash(), model.clone()));
        for seed in 0..4 {
            images.push((fs.power_cut(seed, WriteBack::TornTail), model.clone()));
        }
    }
    drop(e);
    for (i, (image, want)) in images.iter().enumerate() {
        let e = open(image);
        assert_eq!(&contents(&e), want, "image {i}");
    }
}
