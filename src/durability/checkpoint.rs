//! Checkpoints: the state at a stable timestamp, folded from the previous
//! checkpoint and the log segments it did not cover, written to a new file
//! (synced, renamed into place, directory synced) before the segments it
//! covers are removed.
//!
//! A checkpoint at stable `S` with cut `(first_seq, next_lsn)` holds
//! * the *catalog*: the tables every `create` and `drop` below `next_lsn`
//!   leaves, in log order (`catalog.rs`), whatever `S` is (they carry no
//!   timestamp), and the next table id;
//! * the *base*: for every (table, key) of a live table, the newest write
//!   (by lsn: for one key, log order is commit order, since a writer
//!   conflicts with any unfinished or newer version of the key) among the
//!   records below `next_lsn` that are covered at `S` (untimestamped, or
//!   durable at or below `S`), with that record's lsn and commit timestamp;
//! * the *carried* records: every commit below `next_lsn` not covered at
//!   `S` (timestamped above stable, or prepared and durable above it),
//!   whole and in log order (less its writes to tables dropped since), so
//!   that removing the segments loses none.
//!
//! A `drop` removes its table's base entries and its writes in the carried
//! records (a carried record left with none goes): the table is gone at
//! every timestamp, and its id is never used again.
//!
//! Recovery loads the catalog and the base, then replays the carried
//! records and the segments from `first_seq` in lsn order, skipping a write
//! to a key whose base entry has a higher lsn (that write was older in the
//! key's chain and is shadowed for every read at or above `S`, where oldest
//! starts).

use super::catalog::{Catalog, TableDef};
use super::fs::Fs;
use super::log::io_error;
use super::record::{
    self, corrupt, Commit, Reader, Record, Write, CHECKPOINT_MAGIC, CHECKPOINT_MAGIC_STEM,
    CHECKPOINT_MAGIC_V1, CHECKPOINT_VERSION, FILE_HEADER,
};
use crate::error::{Error, Result};
use crate::ts::Timestamp;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A checkpoint's file name: `ckpt-` and its first segment in 16 hex digits.
pub(crate) fn checkpoint_name(seq: u64) -> String {
    record::numbered_name("ckpt-", seq, ".ckpt")
}

/// The first-segment number in a checkpoint's file name.
pub(crate) fn parse_checkpoint(name: &str) -> Option<u64> {
    record::parse_numbered(name, "ckpt-", ".ckpt")
}

/// One key's newest covered write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BaseEntry {
    pub(crate) lsn: u64,
    pub(crate) commit_ts: Timestamp,
    /// `None`: deleted (kept while an older carried record may write it).
    pub(crate) value: Option<Vec<u8>>,
}

/// A base: per table id (0: the default table), each key's entry. A table
/// with no entry has no map.
pub(crate) type Base = HashMap<u32, HashMap<Vec<u8>, BaseEntry>>;

/// A checkpoint's contents.
#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub(crate) stable: Timestamp,
    /// The first segment the checkpoint does not cover.
    pub(crate) first_seq: u64,
    /// The first lsn the checkpoint does not cover (the first record in
    /// segment `first_seq`).
    pub(crate) next_lsn: u64,
    pub(crate) catalog: Catalog,
    pub(crate) base: Base,
    pub(crate) carried: Vec<Commit>,
}

impl State {
    /// The empty state of a new directory.
    pub(crate) fn empty() -> State {
        State {
            next_lsn: 1,
            ..State::default()
        }
    }

    /// Table `table`'s base entry for `key`.
    #[inline]
    pub(crate) fn base_entry(&self, table: u32, key: &[u8]) -> Option<&BaseEntry> {
        self.base.get(&table)?.get(key)
    }

    /// The base's keys with a value, in every table.
    pub(crate) fn base_keys(&self) -> u64 {
        let live =
            |m: &HashMap<Vec<u8>, BaseEntry>| m.values().filter(|e| e.value.is_some()).count();
        self.base.values().map(live).sum::<usize>() as u64
    }

    /// Folds `records` (in lsn order, all at or above `self.next_lsn`, each
    /// admitted by a catalog equal to `self.catalog` as it stood before
    /// them: `Catalog::admit`) and the carried records into a checkpoint at
    /// `stable` cut at `(first_seq, next_lsn)`.
    ///
    /// A checkpoint never holds less than the one before it (invariant D11):
    /// it folds at the higher of `stable` and the previous checkpoint's
    /// stable, and one taken with no stable set (`NONE`) covers every record
    /// and takes as its stable the newest durable timestamp it covered. So a
    /// base never holds a version above its checkpoint's stable, which is
    /// where a recovered engine's stable and oldest start: a later, lower
    /// stable cannot claim a base folded past it.
    pub(crate) fn fold(
        &mut self,
        records: Vec<Record>,
        stable: Timestamp,
        first_seq: u64,
        next_lsn: u64,
    ) {
        let cover_all = stable.is_none();
        let stable = stable.max(self.stable);
        let mut newest = stable;
        let carried = std::mem::take(&mut self.carried);
        for mut r in carried.into_iter().map(Record::Commit).chain(records) {
            if self.catalog.admit(&mut r).is_err() {
                // Unreachable for admitted records; one refused changes
                // nothing but losing its writes to tables not live.
                if let Record::Commit(c) = &mut r {
                    c.writes.retain(|w| self.catalog.is_live(w.table));
                } else {
                    continue;
                }
            }
            let r = match r {
                Record::Commit(c) => c,
                Record::CreateTable { .. } => continue,
                Record::DropTable { id, .. } => {
                    self.base.remove(&id);
                    for c in &mut self.carried {
                        c.writes.retain(|w| w.table != id);
                    }
                    self.carried.retain(|c| !c.writes.is_empty());
                    continue;
                }
            };
            if !cover_all && !r.covered_by(stable.get()) {
                self.carried.push(r);
                continue;
            }
            newest = newest.max(Timestamp::new(r.durable_ts));
            for w in r.writes {
                let table = self.base.entry(w.table).or_default();
                // `<=`: a later write of the same record wins.
                let newer = table.get(&w.key).is_none_or(|e| e.lsn <= r.lsn);
                if newer {
                    table.insert(
                        w.key,
                        BaseEntry {
                            lsn: r.lsn,
                            commit_ts: Timestamp::new(r.commit_ts),
                            value: w.value,
                        },
                    );
                }
            }
        }
        // A deletion matters only to skip an older carried write of its key.
        let min_carried = self.carried.first().map_or(u64::MAX, |c| c.lsn);
        for table in self.base.values_mut() {
            table.retain(|_, e| e.value.is_some() || e.lsn > min_carried);
        }
        self.base.retain(|_, t| !t.is_empty());
        self.stable = newest;
        self.first_seq = first_seq;
        self.next_lsn = next_lsn;
    }
}

const BASE_BATCH: usize = 4096;

/// Loads a checkpoint file of format version 2 or 1 (`record.rs`); any
/// damage is [`Error::Corrupt`] (a checkpoint is complete once renamed into
/// place, so a damaged one is never torn).
///
/// # Errors
/// [`Error::Corrupt`]; [`Error::UnsupportedFormat`] for a version above
/// this build's; [`Error::Io`].
pub(crate) fn load(fs: &dyn Fs, path: &Path) -> Result<State> {
    let buf = fs.read(path).map_err(|e| io_error("read", path, &e))?;
    if buf.len() >= FILE_HEADER && buf[8..FILE_HEADER].iter().all(|&b| b == 0) {
        match record::magic_version(&buf[..8], CHECKPOINT_MAGIC_STEM) {
            Some(v) if v > CHECKPOINT_VERSION => {
                return Err(Error::UnsupportedFormat {
                    file: path.to_path_buf(),
                    version: v,
                    supported: CHECKPOINT_VERSION,
                });
            }
            _ => {}
        }
    }
    let tables = buf.get(..8) == Some(&CHECKPOINT_MAGIC[..]);
    if buf.len() < FILE_HEADER
        || !(tables || buf[..8] == CHECKPOINT_MAGIC_V1[..])
        || buf[8..FILE_HEADER].iter().any(|&b| b != 0)
    {
        return Err(corrupt(path, 0, "not a checkpoint file"));
    }
    let (frames, end) = record::scan(&buf, FILE_HEADER);
    match end {
        record::End::Clean => {}
        record::End::Torn { offset } => return Err(corrupt(path, offset, "checkpoint ends early")),
        record::End::Corrupt { offset, reason } => return Err(corrupt(path, offset, reason)),
    }
    let mut st = State::default();
    let mut saw_meta = false;
    let mut saw_end = false;
    // The catalog's records (version 2), before any base or carried one.
    let mut defs: Vec<TableDef> = Vec::new();
    let mut next_id: Option<u64> = None;
    let mut catalog_done = !tables;
    for (i, (offset, range)) in frames.iter().enumerate() {
        let p = &buf[range.clone()];
        let at = |reason: &'static str| corrupt(path, *offset, reason);
        let bad = || at("malformed checkpoint record");
        if saw_end {
            return Err(at("record after the checkpoint's end"));
        }
        let kind = p.first().copied();
        if !catalog_done && kind != Some(record::KIND_CATALOG) && saw_meta {
            let Some(next) = next_id else {
                return Err(at("checkpoint has no catalog record"));
            };
            st.catalog = Catalog::from_parts(std::mem::take(&mut defs), next).map_err(at)?;
            catalog_done = true;
        }
        match kind {
            Some(record::KIND_META) if i == 0 => {
                let mut r = Reader::new(&p[1..]);
                st.stable = Timestamp::new(r.u64().ok_or_else(bad)?);
                st.first_seq = r.u64().ok_or_else(bad)?;
                st.next_lsn = r.u64().ok_or_else(bad)?;
                if !r.done() {
                    return Err(bad());
                }
                saw_meta = true;
            }
            Some(record::KIND_CATALOG) if saw_meta && !catalog_done => {
                let mut r = Reader::new(&p[1..]);
                let next = r.u64().ok_or_else(bad)?;
                if next_id.is_some_and(|n| n != next) {
                    return Err(at("catalog records disagree on the next table id"));
                }
                next_id = Some(next);
                let n = r.u32().ok_or_else(bad)?;
                for _ in 0..n {
                    defs.push(r.table().map_err(at)?);
                }
                if !r.done() {
                    return Err(bad());
                }
            }
            Some(record::KIND_BASE) if saw_meta => {
                let mut r = Reader::new(&p[1..]);
                let n = r.u32().ok_or_else(bad)?;
                for _ in 0..n {
                    let lsn = r.u64().ok_or_else(bad)?;
                    let commit_ts = Timestamp::new(r.u64().ok_or_else(bad)?);
                    let Write { table, key, value } = r.write(tables).map_err(at)?;
                    if !st.catalog.is_live(table) {
                        return Err(at("base entry in a table not in the catalog"));
                    }
                    let e = BaseEntry {
                        lsn,
                        commit_ts,
                        value,
                    };
                    st.base.entry(table).or_default().insert(key, e);
                }
                if !r.done() {
                    return Err(bad());
                }
            }
            Some(record::KIND_COMMIT) if saw_meta => match record::decode_record(p, tables) {
                Ok(Record::Commit(c)) => {
                    if c.writes.iter().any(|w| !st.catalog.is_live(w.table)) {
                        return Err(at("carried write in a table not in the catalog"));
                    }
                    st.carried.push(c);
                }
                Ok(_) => return Err(bad()),
                Err(reason) => return Err(at(reason)),
            },
            Some(record::KIND_END) if saw_meta && catalog_done => {
                let mut r = Reader::new(&p[1..]);
                let n = r.u64().ok_or_else(bad)?;
                if n != i as u64 || !r.done() {
                    return Err(bad());
                }
                saw_end = true;
            }
            _ => return Err(bad()),
        }
    }
    if !saw_end {
        return Err(corrupt(
            path,
            buf.len() as u64,
            "checkpoint has no end record",
        ));
    }
    Ok(st)
}

/// Writes `st` as the checkpoint for its `first_seq`: to a temporary file,
/// synced, renamed into place, directory synced. Returns its path and size.
///
/// A failure before the rename removes the temporary file (if that fails
/// too, the next checkpoint or open removes it) and returns the failure.
pub(crate) fn write(fs: &dyn Fs, dir: &Path, st: &State) -> Result<(PathBuf, u64)> {
    let name = checkpoint_name(st.first_seq);
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let size = match write_tmp(fs, &tmp, st).and_then(|size| {
        fs.rename(&tmp, &path)
            .map_err(|e| io_error("rename", &tmp, &e))?;
        Ok(size)
    }) {
        Ok(size) => size,
        Err(e) => {
            // Not to hold the space it took (a full disk is the usual
            // cause); the error returned is the cause, not this one.
            let _ = fs.remove(&tmp);
            return Err(e);
        }
    };
    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))?;
    Ok((path, size))
}

/// Tables in one `catalog` record (at most about 1 MiB of payload).
const CATALOG_BATCH: usize = 4096;

/// Writes `st` to the new file `tmp` and syncs it; returns its size.
fn write_tmp(fs: &dyn Fs, tmp: &Path, st: &State) -> Result<u64> {
    let mut f = fs.create(tmp).map_err(|e| io_error("create", tmp, &e))?;
    let mut out = Vec::with_capacity(1 << 20);
    out.extend_from_slice(&record::file_header(CHECKPOINT_MAGIC, 0));
    let mut payload = Vec::new();
    payload.push(record::KIND_META);
    for v in [st.stable.get(), st.first_seq, st.next_lsn] {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    record::frame_into(&mut out, &payload);
    let mut frames = 1u64;
    let mut size = 0u64;
    let mut flush = |out: &mut Vec<u8>, force: bool| -> Result<()> {
        if force || out.len() >= 1 << 20 {
            f.append(out).map_err(|e| io_error("write", tmp, &e))?;
            size += out.len() as u64;
            out.clear();
        }
        Ok(())
    };
    let mut defs = st.catalog.tables().peekable();
    loop {
        // At least one, empty with no table.
        payload.clear();
        payload.push(record::KIND_CATALOG);
        payload.extend_from_slice(&st.catalog.next_id().to_le_bytes());
        payload.extend_from_slice(&0u32.to_le_bytes());
        let mut n = 0u32;
        for def in defs.by_ref().take(CATALOG_BATCH) {
            record::push_table(&mut payload, def);
            n += 1;
        }
        payload[9..13].copy_from_slice(&n.to_le_bytes());
        record::frame_into(&mut out, &payload);
        frames += 1;
        flush(&mut out, false)?;
        if defs.peek().is_none() {
            break;
        }
    }
    let mut entries = st
        .base
        .iter()
        .flat_map(|(&t, m)| m.iter().map(move |(k, e)| (t, k, e)))
        .peekable();
    while entries.peek().is_some() {
        payload.clear();
        payload.push(record::KIND_BASE);
        payload.extend_from_slice(&0u32.to_le_bytes());
        let mut n = 0u32;
        for (t, k, e) in entries.by_ref().take(BASE_BATCH) {
            payload.extend_from_slice(&e.lsn.to_le_bytes());
            payload.extend_from_slice(&e.commit_ts.get().to_le_bytes());
            record::push_write(&mut payload, t, k, e.value.as_deref());
            n += 1;
        }
        payload[1..5].copy_from_slice(&n.to_le_bytes());
        record::frame_into(&mut out, &payload);
        frames += 1;
        flush(&mut out, false)?;
    }
    for c in &st.carried {
        record::encode_commit(c, &mut payload);
        record::frame_into(&mut out, &payload);
        frames += 1;
        flush(&mut out, false)?;
    }
    payload.clear();
    payload.push(record::KIND_END);
    payload.extend_from_slice(&frames.to_le_bytes());
    record::frame_into(&mut out, &payload);
    flush(&mut out, true)?;
    f.sync().map_err(|e| io_error("sync", tmp, &e))?;
    Ok(size)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::error::Error;

    fn rec_in(table: u32, lsn: u64, ts: u64, durable: u64, key: &str, v: Option<&str>) -> Record {
        Record::Commit(Commit {
            lsn,
            commit_ts: ts,
            durable_ts: durable,
            prepared: durable != ts,
            writes: vec![Write {
                table,
                key: key.into(),
                value: v.map(Into::into),
            }],
        })
    }

    fn rec(lsn: u64, ts: u64, durable: u64, key: &str, v: Option<&str>) -> Record {
        rec_in(0, lsn, ts, durable, key, v)
    }

    fn create(lsn: u64, id: u32, name: &str) -> Record {
        Record::CreateTable {
            lsn,
            def: TableDef::new(id, name.into(), 32, 64).unwrap(),
        }
    }

    fn value<'a>(st: &'a State, table: u32, key: &str) -> Option<&'a [u8]> {
        st.base_entry(table, key.as_bytes())?.value.as_deref()
    }

    #[test]
    fn fold_keeps_the_newest_covered_write_and_carries_the_rest() {
        let mut st = State::empty();
        st.fold(
            vec![
                rec(1, 0, 0, "a", Some("1")),
                rec(2, 50, 50, "b", Some("late")),
                rec(3, 10, 10, "b", Some("early")),
                // Prepared: committed at 15, durable at 40, above stable 20.
                rec(4, 15, 40, "c", Some("prepared")),
                rec(5, 5, 5, "d", None),
            ],
            Timestamp::new(20),
            2,
            6,
        );
        assert_eq!(value(&st, 0, "a"), Some(&b"1"[..]));
        assert_eq!(st.base_entry(0, b"b").unwrap().lsn, 3);
        assert!(st.base_entry(0, b"c").is_none());
        // The deletion at lsn 5 is newer than a carried record (lsn 2):
        // kept, to shadow an older write that record might make.
        assert_eq!(st.base_entry(0, b"d").unwrap().value, None);
        let carried: Vec<u64> = st.carried.iter().map(|c| c.lsn).collect();
        assert_eq!(carried, [2, 4]);
        // Stable passes both: the carried writes fold in, by lsn.
        st.fold(
            vec![rec(6, 60, 60, "c", Some("new"))],
            Timestamp::new(100),
            3,
            7,
        );
        assert!(st.carried.is_empty());
        // Nothing carried: the deletion has nothing left to shadow.
        assert!(st.base_entry(0, b"d").is_none());
        // lsn 2 ("late") is older in b's chain than lsn 3: lsn 3 stays.
        assert_eq!(value(&st, 0, "b"), Some(&b"early"[..]));
        assert_eq!(value(&st, 0, "c"), Some(&b"new"[..]));
    }

    /// Create, write, drop, create again under the same name (a new id):
    /// the drop takes the table's base entries and its carried writes, the
    /// new table starts empty, and the next id never goes back.
    #[test]
    fn fold_creates_drops_and_creates_again() {
        let mut st = State::empty();
        let two_tables = Record::Commit(Commit {
            lsn: 4,
            commit_ts: 50,
            durable_ts: 50,
            prepared: false,
            writes: vec![
                Write {
                    table: 1,
                    key: b"x".to_vec(),
                    value: Some(b"t1".to_vec()),
                },
                Write {
                    table: 2,
                    key: b"x".to_vec(),
                    value: Some(b"t2".to_vec()),
                },
            ],
        });
        st.fold(
            vec![
                create(1, 1, "users"),
                rec_in(1, 2, 5, 5, "a", Some("1")),
                create(3, 2, "orders"),
                two_tables,
                rec_in(1, 5, 60, 60, "only", Some("late")),
                rec_in(0, 6, 5, 5, "a", Some("default")),
            ],
            Timestamp::new(20),
            2,
            7,
        );
        assert_eq!(value(&st, 1, "a"), Some(&b"1"[..]));
        assert_eq!(value(&st, 0, "a"), Some(&b"default"[..]));
        assert_eq!(st.carried.len(), 2);
        assert_eq!(st.catalog.tables().len(), 2);
        st.fold(
            vec![
                Record::DropTable { lsn: 7, id: 1 },
                create(8, 3, "users"),
                rec_in(3, 9, 5, 5, "b", Some("2")),
            ],
            Timestamp::new(20),
            3,
            10,
        );
        assert!(st.base_entry(1, b"a").is_none() && !st.base.contains_key(&1));
        // The carried record with writes to both keeps table 2's; the one
        // writing only table 1 is gone.
        assert_eq!(st.carried.len(), 1);
        assert_eq!(st.carried[0].lsn, 4);
        assert_eq!(st.carried[0].writes.len(), 1);
        assert_eq!(st.carried[0].writes[0].table, 2);
        assert_eq!(value(&st, 3, "b"), Some(&b"2"[..]));
        let names: Vec<(u32, &str)> = st.catalog.tables().map(|d| (d.id(), d.name())).collect();
        assert_eq!(names, [(2, "orders"), (3, "users")]);
        assert_eq!(st.catalog.next_id(), 4);
        // Stable passes the carried record: table 2's write folds in.
        st.fold(
            vec![Record::DropTable { lsn: 10, id: 3 }],
            Timestamp::new(100),
            4,
            11,
        );
        assert!(st.carried.is_empty());
        assert_eq!(value(&st, 2, "x"), Some(&b"t2"[..]));
        assert!(!st.base.contains_key(&3));
        assert_eq!(st.catalog.next_id(), 4);
    }

    fn several_tables() -> State {
        let mut st = State::empty();
        let mut records = vec![
            create(1, 1, "users"),
            create(2, 2, "orders"),
            create(3, 3, "idx"),
        ];
        let mut lsn = 4;
        for t in 0..4u32 {
            for k in 0..3 {
                let key = format!("k{k}");
                let v = (k != 1).then(|| format!("{t}/{k}"));
                records.push(rec_in(t, lsn, 10, 10, &key, v.as_deref()));
                lsn += 1;
            }
        }
        records.push(rec_in(2, lsn, 90, 90, "late", Some("c")));
        records.push(rec_in(0, lsn + 1, 5, 5, "z", Some("d")));
        records.push(Record::DropTable {
            lsn: lsn + 2,
            id: 3,
        });
        st.fold(records, Timestamp::new(20), 2, lsn + 3);
        st
    }

    #[test]
    fn a_written_checkpoint_loads_back_and_any_flip_is_corrupt() {
        let fs = super::super::MemFs::new();
        let dir = Path::new("/db");
        let st = several_tables();
        // A deletion older than every carried record is gone; the dropped
        // table is.
        assert!(st.base_entry(1, b"k1").is_none());
        assert!(!st.base.contains_key(&3));
        let (path, _) = write(&fs, dir, &st).unwrap();
        let back = load(&fs, &path).unwrap();
        assert_eq!(back.base, st.base);
        assert_eq!(back.carried, st.carried);
        assert_eq!(back.catalog, st.catalog);
        assert_eq!(back.catalog.tables().len(), 2);
        assert_eq!(back.catalog.next_id(), 4);
        assert_eq!(back.base_keys(), 7);
        assert_eq!(
            (back.stable, back.first_seq, back.next_lsn),
            (Timestamp::new(20), 2, st.next_lsn)
        );
        let bytes = fs.contents(&path).unwrap();
        assert_eq!(&bytes[..8], CHECKPOINT_MAGIC);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            fs.put_file(&path, &b);
            assert!(
                matches!(load(&fs, &path), Err(Error::Corrupt { .. })),
                "byte {i}"
            );
        }
        for cut in 0..bytes.len() {
            fs.put_file(&path, &bytes[..cut]);
            assert!(
                matches!(load(&fs, &path), Err(Error::Corrupt { .. })),
                "cut {cut}"
            );
        }
    }

    /// A checkpoint whose catalog spans several records, written and read
    /// back; an empty one still has its catalog record (the next id).
    #[test]
    fn a_catalog_of_many_tables_round_trips() {
        let fs = super::super::MemFs::new();
        let dir = Path::new("/db");
        let mut st = State::empty();
        let n = CATALOG_BATCH as u32 * 2 + 5;
        let creates = (1..=n)
            .map(|i| create(u64::from(i), i, &format!("t{i}")))
            .collect();
        st.fold(creates, Timestamp::NONE, 2, u64::from(n) + 1);
        let (path, _) = write(&fs, dir, &st).unwrap();
        assert_eq!(load(&fs, &path).unwrap().catalog, st.catalog);
        let drops = (1..=n)
            .map(|i| Record::DropTable {
                lsn: u64::from(n + i),
                id: i,
            })
            .collect();
        st.fold(drops, Timestamp::NONE, 3, u64::from(2 * n) + 1);
        let (path, _) = write(&fs, dir, &st).unwrap();
        let back = load(&fs, &path).unwrap();
        assert_eq!(back.catalog.tables().len(), 0);
        assert_eq!(back.catalog.next_id(), u64::from(n) + 1);
    }

    /// Frames `payloads` into a checkpoint file of `magic`.
    fn file(magic: &[u8; 8], payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut b = record::file_header(magic, 0).to_vec();
        for p in payloads {
            record::frame_into(&mut b, p);
        }
        b
    }

    fn meta(first_seq: u64, next_lsn: u64) -> Vec<u8> {
        let mut p = vec![record::KIND_META];
        for v in [7u64, first_seq, next_lsn] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p
    }

    fn end(frames: u64) -> Vec<u8> {
        let mut p = vec![record::KIND_END];
        p.extend_from_slice(&frames.to_le_bytes());
        p
    }

    fn base(table: u32, key: &[u8]) -> Vec<u8> {
        let mut p = vec![record::KIND_BASE];
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&3u64.to_le_bytes());
        p.extend_from_slice(&7u64.to_le_bytes());
        record::push_write(&mut p, table, key, Some(b"v"));
        p
    }

    fn catalog(next: u64, defs: &[TableDef]) -> Vec<u8> {
        let mut p = vec![record::KIND_CATALOG];
        p.extend_from_slice(&next.to_le_bytes());
        p.extend_from_slice(&(defs.len() as u32).to_le_bytes());
        for d in defs {
            record::push_table(&mut p, d);
        }
        p
    }

    /// A version-1 checkpoint (no catalog, default-table keys) loads; a
    /// table write or a catalog record in one is corrupt, and so is a
    /// version-2 one without a catalog, with a base entry or carried write
    /// in a table its catalog lacks, or with a bad table in its catalog. A
    /// version above this build's is refused by name.
    #[test]
    fn checkpoints_of_each_version_load_or_fail_by_name() {
        let fs = super::super::MemFs::new();
        let path = Path::new("/db/ckpt-0000000000000002.ckpt");
        let load_bytes = |b: &[u8]| {
            fs.put_file(path, b);
            load(&fs, path)
        };
        let v1 = file(CHECKPOINT_MAGIC_V1, &[meta(2, 9), base(0, b"old"), end(2)]);
        let st = load_bytes(&v1).unwrap();
        assert_eq!(st.base_entry(0, b"old").unwrap().lsn, 3);
        assert_eq!(
            (st.stable, st.first_seq, st.next_lsn),
            (Timestamp::new(7), 2, 9)
        );
        assert_eq!(st.catalog, Catalog::default());
        let reason = |r: Result<State>| match r {
            Err(Error::Corrupt { reason, .. }) => reason,
            other => panic!("{:?}", other.map(|s| s.base)),
        };
        let v1_table = file(CHECKPOINT_MAGIC_V1, &[meta(2, 9), base(1, b"t"), end(2)]);
        assert_eq!(
            reason(load_bytes(&v1_table)),
            "table write in a file of a format without tables"
        );
        let v1_catalog = file(CHECKPOINT_MAGIC_V1, &[meta(2, 9), catalog(1, &[]), end(2)]);
        reason(load_bytes(&v1_catalog));
        let users = [TableDef::new(1, "users".into(), 8, 8).unwrap()];
        let v2 = file(
            CHECKPOINT_MAGIC,
            &[meta(2, 9), catalog(2, &users), base(1, b"t"), end(3)],
        );
        assert_eq!(load_bytes(&v2).unwrap().base_entry(1, b"t").unwrap().lsn, 3);
        let no_catalog = file(CHECKPOINT_MAGIC, &[meta(2, 9), base(0, b"t"), end(2)]);
        assert_eq!(
            reason(load_bytes(&no_catalog)),
            "checkpoint has no catalog record"
        );
        let missing = file(
            CHECKPOINT_MAGIC,
            &[meta(2, 9), catalog(3, &users), base(2, b"t"), end(3)],
        );
        assert_eq!(
            reason(load_bytes(&missing)),
            "base entry in a table not in the catalog"
        );
        let mut carried = Vec::new();
        let c = Commit {
            lsn: 8,
            commit_ts: 30,
            durable_ts: 30,
            prepared: false,
            writes: vec![Write {
                table: 2,
                key: b"k".to_vec(),
                value: None,
            }],
        };
        record::encode_commit(&c, &mut carried);
        let carried = file(
            CHECKPOINT_MAGIC,
            &[meta(2, 9), catalog(3, &users), carried, end(3)],
        );
        assert_eq!(
            reason(load_bytes(&carried)),
            "carried write in a table not in the catalog"
        );
        let above = file(CHECKPOINT_MAGIC, &[meta(2, 9), catalog(1, &users), end(2)]);
        assert_eq!(
            reason(load_bytes(&above)),
            "catalog table id at or above the next table id"
        );
        let mut bad_name = catalog(2, &users);
        *bad_name.last_mut().unwrap() = 0xC0;
        let bad_name = file(CHECKPOINT_MAGIC, &[meta(2, 9), bad_name, end(2)]);
        assert_eq!(reason(load_bytes(&bad_name)), "table name is not UTF-8");
        let future = file(b"SNAPCKP3", &[meta(2, 9), end(1)]);
        assert!(matches!(
            load_bytes(&future),
            Err(Error::UnsupportedFormat {
                version: 3,
                supported: 2,
                ..
            })
        ));
    }
}
