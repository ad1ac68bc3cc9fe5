//! Checkpoints: the state at a stable timestamp, folded from the previous
//! checkpoint and the log segments it did not cover, written to a new file
//! (synced, renamed into place, directory synced) before the segments it
//! covers are removed.
//!
//! A checkpoint at stable `S` with cut `(first_seq, next_lsn)` holds
//! * the *base*: for every key, the newest write (by lsn: for one key, log
//!   order is commit order, since a writer conflicts with any unfinished or
//!   newer version of the key) among the records below `next_lsn` that are
//!   covered at `S` (untimestamped, or durable at or below `S`), with that
//!   record's lsn and commit timestamp;
//! * the *carried* records: every record below `next_lsn` not covered at
//!   `S` (timestamped above stable, or prepared and durable above it),
//!   whole and in log order, so that removing the segments loses none.
//!
//! Recovery loads the base, then replays the carried records and the
//! segments from `first_seq` in lsn order, skipping a write to a key whose
//! base entry has a higher lsn (that write was older in the key's chain and
//! is shadowed for every read at or above `S`, where oldest starts).

use super::fs::Fs;
use super::log::io_error;
use super::record::{self, corrupt, Commit, Reader, Write, CHECKPOINT_MAGIC, FILE_HEADER};
use crate::error::Result;
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

/// A checkpoint's contents.
#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub(crate) stable: Timestamp,
    /// The first segment the checkpoint does not cover.
    pub(crate) first_seq: u64,
    /// The first lsn the checkpoint does not cover (the first record in
    /// segment `first_seq`).
    pub(crate) next_lsn: u64,
    pub(crate) base: HashMap<Vec<u8>, BaseEntry>,
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

    /// Folds `records` (in lsn order, all at or above `self.next_lsn`) and
    /// the carried records into a checkpoint at `stable` cut at
    /// `(first_seq, next_lsn)`.
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
        records: Vec<Commit>,
        stable: Timestamp,
        first_seq: u64,
        next_lsn: u64,
    ) {
        let cover_all = stable.is_none();
        let stable = stable.max(self.stable);
        let mut newest = stable;
        let carried = std::mem::take(&mut self.carried);
        for r in carried.into_iter().chain(records) {
            if !cover_all && !r.covered_by(stable.get()) {
                self.carried.push(r);
                continue;
            }
            newest = newest.max(Timestamp::new(r.durable_ts));
            for w in r.writes {
                // `<=`: a later write of the same record wins.
                let newer = self.base.get(&w.key).is_none_or(|e| e.lsn <= r.lsn);
                if newer {
                    self.base.insert(
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
        self.base
            .retain(|_, e| e.value.is_some() || e.lsn > min_carried);
        self.stable = newest;
        self.first_seq = first_seq;
        self.next_lsn = next_lsn;
    }
}

const BASE_BATCH: usize = 4096;

/// Loads a checkpoint file; any damage is [`Error::Corrupt`] (a checkpoint
/// is complete once renamed into place, so a damaged one is never torn).
pub(crate) fn load(fs: &dyn Fs, path: &Path) -> Result<State> {
    let buf = fs.read(path).map_err(|e| io_error("read", path, &e))?;
    if buf.len() < FILE_HEADER
        || &buf[..8] != CHECKPOINT_MAGIC
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
    for (i, (offset, range)) in frames.iter().enumerate() {
        let p = &buf[range.clone()];
        let bad = || corrupt(path, *offset, "malformed checkpoint record");
        if saw_end {
            return Err(corrupt(path, *offset, "record after the checkpoint's end"));
        }
        match p.first().copied() {
            Some(record::KIND_META) if i == 0 => {
                let mut r = Reader::new(&p[1..]);
                st.stable = Timestamp::new(r.u64().ok_or_else(bad)?);
                st.first_seq = r.u64().ok_or_else(bad)?;
                st.next_lsn = r.u64().ok_or_else(bad)?;
                saw_meta = true;
            }
            Some(record::KIND_BASE) if saw_meta => {
                let mut r = Reader::new(&p[1..]);
                let n = r.u32().ok_or_else(bad)?;
                for _ in 0..n {
                    let lsn = r.u64().ok_or_else(bad)?;
                    let commit_ts = Timestamp::new(r.u64().ok_or_else(bad)?);
                    let Write { key, value } = r.write().ok_or_else(bad)?;
                    st.base.insert(
                        key,
                        BaseEntry {
                            lsn,
                            commit_ts,
                            value,
                        },
                    );
                }
                if !r.done() {
                    return Err(bad());
                }
            }
            Some(record::KIND_COMMIT) if saw_meta => {
                st.carried.push(record::decode_commit(p).ok_or_else(bad)?);
            }
            Some(record::KIND_END) if saw_meta => {
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
    let mut entries = st.base.iter().peekable();
    while entries.peek().is_some() {
        payload.clear();
        payload.push(record::KIND_BASE);
        payload.extend_from_slice(&0u32.to_le_bytes());
        let mut n = 0u32;
        for (k, e) in entries.by_ref().take(BASE_BATCH) {
            payload.extend_from_slice(&e.lsn.to_le_bytes());
            payload.extend_from_slice(&e.commit_ts.get().to_le_bytes());
            record::push_write(&mut payload, k, e.value.as_deref());
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

    fn rec(lsn: u64, ts: u64, durable: u64, key: &str, v: Option<&str>) -> Commit {
        Commit {
            lsn,
            commit_ts: ts,
            durable_ts: durable,
            prepared: durable != ts,
            writes: vec![Write {
                key: key.into(),
                value: v.map(Into::into),
            }],
        }
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
        assert_eq!(st.base[&b"a"[..]].value.as_deref(), Some(&b"1"[..]));
        assert_eq!(st.base[&b"b"[..]].lsn, 3);
        assert!(!st.base.contains_key(&b"c"[..]));
        // The deletion at lsn 5 is newer than a carried record (lsn 2):
        // kept, to shadow an older write that record might make.
        assert_eq!(st.base[&b"d"[..]].value, None);
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
        assert!(!st.base.contains_key(&b"d"[..]));
        // lsn 2 ("late") is older in b's chain than lsn 3: lsn 3 stays.
        assert_eq!(st.base[&b"b"[..]].value.as_deref(), Some(&b"early"[..]));
        assert_eq!(st.base[&b"c"[..]].value.as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn a_written_checkpoint_loads_back_and_any_flip_is_corrupt() {
        let fs = super::super::MemFs::new();
        let dir = Path::new("/db");
        let mut st = State::empty();
        st.fold(
            vec![rec(1, 0, 0, "a", Some("1")), rec(2, 50, 50, "b", Some("x"))],
            Timestamp::new(20),
            2,
            3,
        );
        let (path, _) = write(&fs, dir, &st).unwrap();
        let back = load(&fs, &path).unwrap();
        assert_eq!(back.base, st.base);
        assert_eq!(back.carried, st.carried);
        assert_eq!(
            (back.stable, back.first_seq, back.next_lsn),
            (Timestamp::new(20), 2, 3)
        );
        let bytes = fs.contents(&path).unwrap();
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
}
