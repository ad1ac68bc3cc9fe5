//! The snapshot format a state machine builds and installs:
//!
//! "SESNAP02", watermark u64, max_ts u64, the next table id u32; the
//! table catalog: count u32, then per named table its id u32, name (u32
//! length + bytes), longest key u64 and longest value u64; the contents:
//! section count u32, then per table (the default table, id 0, first) its
//! id u32, pair count u64, and per pair key (u32 length + bytes) and value
//! (u32 length + bytes); tail count u64, then per commit: commit ts u64,
//! durable ts u64, origin node u64, origin seq u64, write count u32, and
//! per write the table id u32, the key, a tag byte (0 tombstone, 1 value)
//! and the value. Integers little-endian. A snapshot of format 1
//! ("SESNAP01": no tables) is refused by name.

use std::io::Cursor;

use super::entry::{CommitRecord, Origin, TableDef, Write};
use super::error::ReplicaError;
use crate::Timestamp;

/// The snapshot format's data, shared by the builder and the installer.
pub(crate) type SnapshotBytes = Cursor<Vec<u8>>;

const MAGIC: &[u8; 8] = b"SESNAP02";
/// Format 1's magic (no tables), refused by name.
const MAGIC_V1: &[u8; 8] = b"SESNAP01";

/// The key-value pairs of one table.
pub(super) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A snapshot's contents.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Contents {
    /// The watermark its contents were read at (`Timestamp::NONE`: none).
    pub(super) watermark: Timestamp,
    /// The newest timestamp the node had applied.
    pub(super) max_ts: Timestamp,
    /// The id the next replicated create may take (`Shared::next_table`).
    pub(super) next_table: u32,
    /// The live named tables, in id order.
    pub(super) tables: Vec<TableDef>,
    /// Each table's contents at the watermark, by table id (the default
    /// table, 0, first; a table with no pairs may be left out).
    pub(super) base: Vec<(u32, Pairs)>,
    /// The applied commits above the watermark, in apply order.
    pub(super) tail: Vec<CommitRecord>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Encodes a snapshot.
pub(super) fn encode(c: &Contents) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&c.watermark.get().to_le_bytes());
    out.extend_from_slice(&c.max_ts.get().to_le_bytes());
    out.extend_from_slice(&c.next_table.to_le_bytes());
    out.extend_from_slice(&(c.tables.len() as u32).to_le_bytes());
    for t in &c.tables {
        out.extend_from_slice(&t.id.to_le_bytes());
        put_bytes(&mut out, t.name.as_bytes());
        out.extend_from_slice(&t.max_key_len.to_le_bytes());
        out.extend_from_slice(&t.max_value_len.to_le_bytes());
    }
    out.extend_from_slice(&(c.base.len() as u32).to_le_bytes());
    for (table, pairs) in &c.base {
        out.extend_from_slice(&table.to_le_bytes());
        out.extend_from_slice(&(pairs.len() as u64).to_le_bytes());
        for (k, v) in pairs {
            put_bytes(&mut out, k);
            put_bytes(&mut out, v);
        }
    }
    out.extend_from_slice(&(c.tail.len() as u64).to_le_bytes());
    for r in &c.tail {
        out.extend_from_slice(&r.commit_ts.get().to_le_bytes());
        out.extend_from_slice(&r.durable_ts.get().to_le_bytes());
        out.extend_from_slice(&r.origin.node.to_le_bytes());
        out.extend_from_slice(&r.origin.seq.to_le_bytes());
        out.extend_from_slice(&(r.writes.len() as u32).to_le_bytes());
        for w in &r.writes {
            out.extend_from_slice(&w.table.to_le_bytes());
            put_bytes(&mut out, &w.key);
            match &w.value {
                None => out.push(0),
                Some(v) => {
                    out.push(1);
                    put_bytes(&mut out, v);
                }
            }
        }
    }
    out
}

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ReplicaError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| ReplicaError::BadSnapshot {
                what: format!(
                    "truncated: needs {n} bytes at offset {} of {}",
                    self.at,
                    self.b.len()
                ),
            })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64, ReplicaError> {
        let s = self.take(8)?;
        Ok(u64::from_le_bytes(s.try_into().expect("8 bytes")))
    }
    fn u32(&mut self) -> Result<u32, ReplicaError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes(s.try_into().expect("4 bytes")))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, ReplicaError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn ts(&mut self) -> Result<Timestamp, ReplicaError> {
        let v = self.u64()?;
        if v > Timestamp::MAX.get() {
            return Err(ReplicaError::BadSnapshot {
                what: format!("timestamp {v} above the maximum {}", Timestamp::MAX.get()),
            });
        }
        Ok(Timestamp::new(v))
    }
}

/// Decodes a snapshot [`encode`] made.
///
/// # Errors
/// [`ReplicaError::BadSnapshot`] naming what was wrong: a snapshot of
/// format 1, a bad magic, a truncation, a timestamp above the maximum, a
/// table name that is not UTF-8, a bad tag, trailing bytes.
pub(super) fn decode(b: &[u8]) -> Result<Contents, ReplicaError> {
    let mut c = Cur { b, at: 0 };
    let magic = c.take(8)?;
    if magic == MAGIC_V1 {
        return Err(ReplicaError::BadSnapshot {
            what: "a snapshot of format 1 (no tables); this build reads only format 2".to_string(),
        });
    }
    if magic != MAGIC {
        return Err(ReplicaError::BadSnapshot {
            what: "not a snapshot-engine snapshot (bad magic)".to_string(),
        });
    }
    let watermark = c.ts()?;
    let max_ts = c.ts()?;
    let next_table = c.u32()?;
    let n = c.u32()?;
    let mut tables = Vec::new();
    for _ in 0..n {
        let id = c.u32()?;
        let name = String::from_utf8(c.bytes()?).map_err(|e| ReplicaError::BadSnapshot {
            what: format!("table {id}'s name is not UTF-8: {e}"),
        })?;
        let max_key_len = c.u64()?;
        let max_value_len = c.u64()?;
        tables.push(TableDef {
            id,
            name,
            max_key_len,
            max_value_len,
        });
    }
    let n = c.u32()?;
    let mut base = Vec::new();
    for _ in 0..n {
        let table = c.u32()?;
        let pairs = c.u64()?;
        let mut section = Vec::new();
        for _ in 0..pairs {
            let k = c.bytes()?;
            let v = c.bytes()?;
            section.push((k, v));
        }
        base.push((table, section));
    }
    let n = c.u64()?;
    let mut tail = Vec::new();
    for _ in 0..n {
        let commit_ts = c.ts()?;
        let durable_ts = c.ts()?;
        let node = c.u64()?;
        let seq = c.u64()?;
        let nw = c.u32()?;
        let mut writes = Vec::new();
        for _ in 0..nw {
            let table = c.u32()?;
            let key = c.bytes()?;
            let value = match c.take(1)?[0] {
                0 => None,
                1 => Some(c.bytes()?),
                t => {
                    return Err(ReplicaError::BadSnapshot {
                        what: format!("write tag {t} (expected 0 or 1)"),
                    })
                }
            };
            writes.push(Write { table, key, value });
        }
        tail.push(CommitRecord {
            commit_ts,
            durable_ts,
            origin: Origin { node, seq },
            writes,
        });
    }
    if c.at != b.len() {
        return Err(ReplicaError::BadSnapshot {
            what: format!("{} trailing bytes", b.len() - c.at),
        });
    }
    Ok(Contents {
        watermark,
        max_ts,
        next_table,
        tables,
        base,
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_format_round_trips_tables_and_rejects_damage() {
        let tail = vec![CommitRecord {
            commit_ts: Timestamp::new(12),
            durable_ts: Timestamp::new(12),
            origin: Origin { node: 1, seq: 3 },
            writes: vec![
                Write {
                    table: 0,
                    key: b"a".to_vec(),
                    value: Some(b"x".to_vec()),
                },
                Write {
                    table: 4,
                    key: b"b".to_vec(),
                    value: None,
                },
            ],
        }];
        let contents = Contents {
            watermark: Timestamp::new(10),
            max_ts: Timestamp::new(12),
            next_table: 6,
            tables: vec![TableDef {
                id: 4,
                name: "orders".to_string(),
                max_key_len: 64,
                max_value_len: 1 << 20,
            }],
            base: vec![
                (0, vec![(b"k".to_vec(), b"v".to_vec())]),
                (4, vec![(b"o1".to_vec(), b"u1".to_vec())]),
            ],
            tail,
        };
        let data = encode(&contents);
        assert_eq!(decode(&data).unwrap(), contents);
        for cut in [0, 7, 8, 20, 30, data.len() - 1] {
            assert!(matches!(
                decode(&data[..cut]),
                Err(ReplicaError::BadSnapshot { .. })
            ));
        }
        let mut extra = data.clone();
        extra.push(0);
        assert!(matches!(
            decode(&extra),
            Err(ReplicaError::BadSnapshot { .. })
        ));
        let mut v1 = data.clone();
        v1[..8].copy_from_slice(MAGIC_V1);
        match decode(&v1) {
            Err(ReplicaError::BadSnapshot { what }) => assert!(what.contains("format 1"), "{what}"),
            _ => panic!("a format-1 snapshot decoded"),
        }
    }
}
