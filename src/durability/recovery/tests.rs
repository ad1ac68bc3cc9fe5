//! Named tables through the log, its checkpoints and recovery: what a
//! crash or a power cut between a create or drop and the records after it
//! leaves, directories of the formats before tables, and damaged table
//! records.

use super::*;
use crate::durability::catalog::TableDef;
use crate::durability::commit::CommitMode;
use crate::durability::record::{
    Commit, CHECKPOINT_MAGIC_V1, KIND_SEGMENT, SEGMENT_MAGIC, SEGMENT_MAGIC_V2,
};
use crate::durability::{MemFs, WriteBack};
use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;

const DIR: &str = "/db";

fn options(fs: &MemFs) -> DurabilityOptions {
    DurabilityOptions {
        durability: Durability::None,
        segment_bytes: 4096,
        fs: Arc::new(fs.clone()),
        ..DurabilityOptions::default()
    }
}

fn recover(fs: &MemFs) -> Result<Recovery> {
    Recovery::open(Path::new(DIR), &options(fs))
}

fn start(fs: &MemFs) -> Opened {
    recover(fs).unwrap().start(0).unwrap()
}

/// Tables by name ("" the default table), each its keys and values.
type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn default_model() -> Model {
    Model::from([(String::new(), BTreeMap::new())])
}

/// What the KV layer rebuilds from `rec`, replaying it as
/// [`Recovery`] says.
fn replayed(rec: &Recovery) -> Model {
    let st = &rec.checkpoint;
    let mut names: HashMap<u32, String> = HashMap::from([(0, String::new())]);
    let mut m = default_model();
    for d in st.catalog.tables() {
        names.insert(d.id(), d.name().to_owned());
        m.insert(d.name().to_owned(), BTreeMap::new());
    }
    for (t, entries) in &st.base {
        let table = m.get_mut(&names[t]).expect("a base table is live");
        for (k, e) in entries {
            if let Some(v) = &e.value {
                table.insert(k.clone(), v.clone());
            }
        }
    }
    let apply = |m: &mut Model, names: &HashMap<u32, String>, c: &Commit| {
        for w in &c.writes {
            if st
                .base_entry(w.table, &w.key)
                .is_some_and(|e| e.lsn > c.lsn)
            {
                continue;
            }
            let t = m
                .get_mut(&names[&w.table])
                .expect("a written table is live");
            match &w.value {
                Some(v) => t.insert(w.key.clone(), v.clone()),
                None => t.remove(&w.key),
            };
        }
    };
    for c in &st.carried {
        apply(&mut m, &names, c);
    }
    for r in &rec.records {
        match r {
            Record::Commit(c) => apply(&mut m, &names, c),
            Record::CreateTable { def, .. } => {
                names.insert(def.id(), def.name().to_owned());
                m.entry(def.name().to_owned()).or_default();
            }
            Record::DropTable { id, .. } => {
                if let Some(n) = names.remove(id) {
                    m.remove(&n);
                }
            }
        }
    }
    m
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Create(u32, &'static str),
    Drop(u32),
    Put(u32, &'static str, &'static str),
    Del(u32, &'static str),
    Checkpoint,
}

/// Runs `op` on `log` (`sync`: waits for its sync) and on the model.
fn run(log: &CommitLog, m: &mut Model, names: &mut HashMap<u32, String>, op: Op, sync: bool) {
    let mode = Some(CommitMode::Durability(if sync {
        Durability::Sync
    } else {
        Durability::None
    }));
    match op {
        Op::Create(id, name) => {
            let def = TableDef::new(id, name.into(), 64, 1024).unwrap();
            log.log_create_table(&def, mode).unwrap();
            names.insert(id, name.into());
            m.insert(name.into(), BTreeMap::new());
        }
        Op::Drop(id) => {
            log.log_drop_table(NonZeroU32::new(id).unwrap(), mode)
                .unwrap();
            m.remove(&names.remove(&id).unwrap());
        }
        Op::Put(t, k, v) => {
            let w = [(t, k.as_bytes(), Some(v.as_bytes()))];
            log.log_commit(
                w.into_iter(),
                Timestamp::NONE,
                Timestamp::NONE,
                false,
                mode,
                || {},
            )
            .unwrap();
            let table = m.get_mut(&names[&t]).unwrap();
            table.insert(k.into(), v.into());
        }
        Op::Del(t, k) => {
            let w = [(t, k.as_bytes(), None)];
            log.log_commit(
                w.into_iter(),
                Timestamp::NONE,
                Timestamp::NONE,
                false,
                mode,
                || {},
            )
            .unwrap();
            m.get_mut(&names[&t]).unwrap().remove(k.as_bytes());
        }
        Op::Checkpoint => {
            log.checkpoint().unwrap();
        }
    }
}

/// Create, write, drop, create again under the same name (a new id),
/// across three tables, with checkpoints between.
const OPS: &[Op] = &[
    Op::Put(0, "d", "0"),
    Op::Create(1, "users"),
    Op::Put(1, "u1", "a"),
    Op::Create(2, "orders"),
    Op::Put(2, "o1", "x"),
    Op::Put(1, "u2", "b"),
    Op::Checkpoint,
    Op::Del(1, "u1"),
    Op::Create(3, "index"),
    Op::Put(3, "i1", "u2"),
    Op::Drop(1),
    Op::Put(0, "d", "1"),
    Op::Create(4, "users"),
    Op::Put(4, "u1", "new"),
    Op::Checkpoint,
    Op::Drop(2),
    Op::Put(3, "i2", "u1"),
    Op::Create(5, "orders"),
];

/// After every prefix of [`OPS`] and a power cut (sampled images, any
/// pages written back), recovery rebuilds the model after some prefix at
/// least as long as the last synced one: a create, a drop and the writes
/// after them are all there or all gone in log order, whatever the
/// checkpoints took.
#[test]
fn a_power_cut_at_any_point_keeps_a_prefix_of_creates_drops_and_writes() {
    for len in 1..=OPS.len() {
        let fs = MemFs::new();
        let opened = start(&fs);
        let mut m = default_model();
        let mut names = HashMap::from([(0, String::new())]);
        let mut states = vec![m.clone()];
        let mut synced = 0;
        for (i, &op) in OPS[..len].iter().enumerate() {
            // Every third op synced; the rest written to the OS only.
            let sync = i % 3 == 2;
            run(&opened, &mut m, &mut names, op, sync);
            states.push(m.clone());
            if sync || matches!(op, Op::Checkpoint) {
                synced = i + 1;
            }
        }
        for seed in 0..24 {
            let what = format!("{len} ops, power cut {seed}");
            let img = fs.power_cut(seed, WriteBack::AnyPages);
            let rec = recover(&img).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = replayed(&rec);
            let at = states[synced..].iter().position(|s| *s == got);
            assert!(at.is_some(), "{what}: {got:?}");
        }
        // Nothing lost when the process is killed: every op is there.
        let rec = recover(&fs.fork()).unwrap();
        assert_eq!(replayed(&rec), m, "{len} ops, killed");
        drop(opened);
    }
}

/// A synced create with no write after it survives a crash: the table is
/// there, empty, and its id is never given again; one only written to the
/// OS is gone, and with it every record after it.
#[test]
fn a_crash_between_a_create_and_the_first_write() {
    let fs = MemFs::new();
    let opened = start(&fs);
    let mut m = default_model();
    let mut names = HashMap::from([(0, String::new())]);
    run(&opened, &mut m, &mut names, Op::Create(1, "users"), true);
    let rec = recover(&fs.crash()).unwrap();
    assert_eq!(replayed(&rec), m);
    assert_eq!(rec.next_table_id(), 2);
    run(&opened, &mut m, &mut names, Op::Create(2, "orders"), false);
    run(&opened, &mut m, &mut names, Op::Put(0, "k", "v"), false);
    let rec = recover(&fs.crash()).unwrap();
    let lost = replayed(&rec);
    assert!(!lost.contains_key("orders") && lost["users"].is_empty());
    assert!(lost[""].is_empty());
    assert_eq!(rec.next_table_id(), 2);
    // A later synced write makes the create durable with it.
    run(&opened, &mut m, &mut names, Op::Put(2, "o", "1"), true);
    let rec = recover(&fs.crash()).unwrap();
    assert_eq!(replayed(&rec), m);
    assert_eq!(rec.next_table_id(), 3);
    drop(opened);
}

/// A synced drop after a checkpoint that holds the table: recovery finds
/// the table in the checkpoint and the drop in the log, and the next
/// checkpoint holds neither the table nor its keys (nor its writes
/// carried above stable), while its id stays used.
#[test]
fn a_crash_between_a_drop_and_the_next_checkpoint() {
    let fs = MemFs::new();
    let opened = start(&fs);
    let mut m = default_model();
    let mut names = HashMap::from([(0, String::new())]);
    for op in [
        Op::Create(1, "users"),
        Op::Put(1, "u1", "a"),
        Op::Put(0, "d", "0"),
    ] {
        run(&opened, &mut m, &mut names, op, false);
    }
    // A write to the table above stable: carried by the checkpoint.
    let w = [(1, &b"late"[..], Some(&b"x"[..]))];
    let sync = Some(CommitMode::Durability(Durability::Sync));
    let ts = Timestamp::new(50);
    opened
        .log_commit(w.into_iter(), ts, ts, false, sync, || {})
        .unwrap();
    opened.note_stable(Timestamp::new(10));
    let r = opened.checkpoint().unwrap();
    assert_eq!((r.keys, r.carried), (2, 1));
    run(&opened, &mut m, &mut names, Op::Drop(1), true);
    let img = fs.crash();
    let rec = recover(&img).unwrap();
    assert_eq!(rec.checkpoint.catalog.tables().len(), 1);
    assert_eq!(rec.checkpoint.carried.len(), 1);
    assert!(matches!(rec.records[..], [Record::DropTable { id: 1, .. }]));
    assert_eq!(replayed(&rec), m);
    let reopened = rec.start(1).unwrap();
    let r = reopened.checkpoint().unwrap();
    assert_eq!((r.keys, r.carried), (1, 0));
    let rec = recover(&img.crash()).unwrap();
    assert_eq!(rec.checkpoint.catalog.tables().len(), 0);
    assert_eq!(rec.checkpoint.catalog.next_id(), 2);
    assert!(rec.records.is_empty());
    assert_eq!(replayed(&rec), m);
    drop(reopened);
    drop(opened);
}

/// A commit logged after its table's drop (it raced the drop) loses its
/// writes to that table at recovery and at the checkpoint that folds it;
/// its other writes stay.
#[test]
fn a_write_logged_after_its_tables_drop_is_skipped() {
    let fs = MemFs::new();
    let opened = start(&fs);
    let mut m = default_model();
    let mut names = HashMap::from([(0, String::new())]);
    for op in [Op::Create(1, "users"), Op::Put(1, "u", "a"), Op::Drop(1)] {
        run(&opened, &mut m, &mut names, op, false);
    }
    let w = [
        (1, &b"u"[..], Some(&b"raced"[..])),
        (0, &b"d"[..], Some(&b"1"[..])),
    ];
    let sync = Some(CommitMode::Durability(Durability::Sync));
    let none = Timestamp::NONE;
    opened
        .log_commit(w.into_iter(), none, none, false, sync, || {})
        .unwrap();
    m.get_mut("").unwrap().insert(b"d".to_vec(), b"1".to_vec());
    let img = fs.crash();
    let rec = recover(&img).unwrap();
    match &rec.records[..] {
        [.., Record::DropTable { id: 1, .. }, Record::Commit(c)] => {
            assert_eq!(c.writes.len(), 1);
            assert_eq!(c.writes[0].table, 0);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(replayed(&rec), m);
    let reopened = rec.start(4).unwrap();
    let r = reopened.checkpoint().unwrap();
    assert_eq!(r.keys, 1);
    let rec = recover(&img.crash()).unwrap();
    assert!(rec.records.is_empty());
    assert_eq!(replayed(&rec), m);
    drop(reopened);
    drop(opened);
}

/// Rollback to stable at open keeps every create and drop (they carry no
/// timestamp) and drops the writes above stable, in every table.
#[test]
fn rollback_to_stable_keeps_creates_and_drops() {
    let fs = MemFs::new();
    let opened = start(&fs);
    let mut m = default_model();
    let mut names = HashMap::from([(0, String::new())]);
    run(&opened, &mut m, &mut names, Op::Create(1, "users"), false);
    run(&opened, &mut m, &mut names, Op::Put(1, "u", "a"), false);
    opened.note_stable(Timestamp::new(10));
    opened.checkpoint().unwrap();
    let at = |t: u32, k: &'static [u8], ts: u64| {
        let w = [(t, k, Some(&b"late"[..]))];
        let ts = Timestamp::new(ts);
        opened
            .log_commit(w.into_iter(), ts, ts, false, None, || {})
            .unwrap();
    };
    at(1, b"u", 20);
    run(&opened, &mut m, &mut names, Op::Create(2, "orders"), false);
    at(2, b"o", 30);
    at(0, b"d", 40);
    run(&opened, &mut m, &mut names, Op::Drop(1), true);
    let img = fs.crash();
    let opts = DurabilityOptions {
        rollback_to_stable: true,
        ..options(&img)
    };
    let rec = Recovery::open(Path::new(DIR), &opts).unwrap();
    assert_eq!(rec.report.rolled_back, 3);
    assert!(rec.records.is_empty() && rec.checkpoint.carried.is_empty());
    let names: Vec<&str> = rec
        .checkpoint
        .catalog
        .tables()
        .map(TableDef::name)
        .collect();
    assert_eq!(names, ["orders"]);
    assert_eq!(replayed(&rec), m);
    drop(rec);
    drop(opened);
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    record::frame_into(&mut out, payload);
    out
}

/// A segment file of `magic` numbered `seq`, first lsn `first`, holding
/// `payloads`.
fn segment(magic: &[u8; 8], seq: u64, first: u64, payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut b = record::file_header(magic, seq).to_vec();
    b.extend(frame(&record::anchor(KIND_SEGMENT, seq, first)));
    for p in payloads {
        b.extend(frame(p));
    }
    b
}

fn put_payload(lsn: u64, table: u32, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    record::begin_commit(&mut p, 0, 0, false, 1);
    record::push_write(&mut p, table, key, Some(value));
    p[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
    p
}

fn create_payload(lsn: u64, id: u32, name: &str) -> Vec<u8> {
    let mut p = Vec::new();
    let def = TableDef::new(id, name.into(), 8, 8).unwrap();
    record::begin_create(&mut p, &def);
    p[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
    p
}

/// A directory written before tables (a version-1 checkpoint, a
/// version-2 segment after it) opens with its keys in the default table;
/// the log goes on in version-3 segments, tables and all, and the next
/// checkpoint is of version 2.
#[test]
fn a_directory_from_before_tables_opens_and_goes_on() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    // Checkpoint: stable 0, first segment 2, next lsn 5; one key.
    let mut ckpt = record::file_header(CHECKPOINT_MAGIC_V1, 0).to_vec();
    let mut meta = vec![record::KIND_META];
    for v in [0u64, 2, 5] {
        meta.extend_from_slice(&v.to_le_bytes());
    }
    ckpt.extend(frame(&meta));
    let mut base = vec![record::KIND_BASE];
    base.extend_from_slice(&1u32.to_le_bytes());
    base.extend_from_slice(&3u64.to_le_bytes());
    base.extend_from_slice(&0u64.to_le_bytes());
    record::push_write(&mut base, 0, b"old", Some(b"1"));
    ckpt.extend(frame(&base));
    let mut end = vec![record::KIND_END];
    end.extend_from_slice(&2u64.to_le_bytes());
    ckpt.extend(frame(&end));
    fs.put_file(&dir.join(checkpoint::checkpoint_name(2)), &ckpt);
    let seg2 = dir.join(segment_name(2));
    fs.put_file(
        &seg2,
        &segment(SEGMENT_MAGIC_V2, 2, 5, &[put_payload(5, 0, b"log", b"2")]),
    );
    let rec = recover(&fs).unwrap();
    let mut want = default_model();
    let keys = want.get_mut("").unwrap();
    keys.insert(b"old".to_vec(), b"1".to_vec());
    keys.insert(b"log".to_vec(), b"2".to_vec());
    assert_eq!(replayed(&rec), want);
    assert_eq!(rec.next_table_id(), 1);
    let opened = rec.start(1).unwrap();
    let mut names = HashMap::from([(0, String::new())]);
    run(&opened, &mut want, &mut names, Op::Create(1, "t"), false);
    run(&opened, &mut want, &mut names, Op::Put(1, "k", "v"), true);
    drop(opened);
    let seg3 = fs.contents(&dir.join(segment_name(3))).unwrap();
    assert_eq!(&seg3[..8], SEGMENT_MAGIC);
    // The version-2 segment, now ended by a roll-over record, still reads.
    let rec = recover(&fs).unwrap();
    assert_eq!(replayed(&rec), want);
    let opened = rec.start(3).unwrap();
    let r = opened.checkpoint().unwrap();
    assert_eq!(
        &fs.contents(&r.path).unwrap()[..8],
        record::CHECKPOINT_MAGIC
    );
    drop(opened);
    let rec = recover(&fs).unwrap();
    assert_eq!(replayed(&rec), want);
    assert_eq!(rec.checkpoint.catalog.tables().len(), 1);
}

/// Damaged table records: a table record in a version-2 segment, a name
/// that is not UTF-8, a write to a table never created and a drop of one
/// are `Corrupt` where they are, naming what is wrong; a torn create at
/// the end of the log is a torn tail, cut and reported.
#[test]
fn damaged_table_records_are_typed_errors() {
    let dir = Path::new(DIR);
    let seg1 = dir.join(segment_name(1));
    let corrupt_at = |payloads: &[Vec<u8>], magic: &[u8; 8]| {
        let fs = MemFs::new();
        let bytes = segment(magic, 1, 1, payloads);
        fs.put_file(&seg1, &bytes);
        match recover(&fs) {
            Err(Error::Corrupt {
                file,
                offset,
                reason,
            }) => {
                assert_eq!(file, seg1);
                assert!(offset >= SEGMENT_HEADER as u64, "{offset}");
                assert_eq!(fs.contents(&seg1).unwrap(), bytes, "left as it was");
                reason
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    };
    let create = create_payload(1, 1, "users");
    assert_eq!(
        corrupt_at(std::slice::from_ref(&create), SEGMENT_MAGIC_V2),
        "table record in a file of a format without tables"
    );
    let mut bad_name = create.clone();
    *bad_name.last_mut().unwrap() = 0xFF;
    assert_eq!(
        corrupt_at(&[bad_name], SEGMENT_MAGIC),
        "table name is not UTF-8"
    );
    assert_eq!(
        corrupt_at(&[put_payload(1, 7, b"k", b"v")], SEGMENT_MAGIC),
        "write to a table never created"
    );
    let mut drop7 = Vec::new();
    record::begin_drop(&mut drop7, 7);
    drop7[record::LSN_AT..record::LSN_AT + 8].copy_from_slice(&2u64.to_le_bytes());
    assert_eq!(
        corrupt_at(&[create.clone(), drop7], SEGMENT_MAGIC),
        "drop of a table never created"
    );
    // Torn inside the create that ends the log: cut there, reported.
    let fs = MemFs::new();
    let whole = segment(SEGMENT_MAGIC, 1, 1, &[put_payload(1, 0, b"k", b"v")]);
    let mut torn = whole.clone();
    torn.extend(&frame(&create_payload(2, 1, "users"))[..20]);
    fs.put_file(&seg1, &torn);
    let rec = recover(&fs).unwrap();
    let t = rec.report.torn_tail.clone().expect("reported");
    assert_eq!(t.offset, whole.len() as u64);
    assert_eq!(rec.records.len(), 1);
    assert_eq!(rec.next_table_id(), 1);
}
