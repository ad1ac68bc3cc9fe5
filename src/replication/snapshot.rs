//! The snapshot format a state machine builds and installs:
//!
//! "SESNAP01", watermark u64, max_ts u64, base count u64, then per pair
//! key (u32 length + bytes) and value (u32 length + bytes); tail count u64,
//! then per commit: commit ts u64, durable ts u64, origin node u64, origin
//! seq u64, write count u32, and per write the key, a tag byte (0 tombstone,
//! 1 value) and the value. Integers little-endian.

use std::io::Cursor;

use super::entry::{CommitRecord, Origin, Write};
use super::error::ReplicaError;
use crate::Timestamp;

/// The snapshot format's data, shared by the builder and the installer.
pub(crate) type SnapshotBytes = Cursor<Vec<u8>>;

const MAGIC: &[u8; 8] = b"SESNAP01";

/// A decoded snapshot.
pub(super) struct Decoded {
    /// The watermark its contents were read at (`Timestamp::NONE`: none).
    pub(super) watermark: Timestamp,
    /// The newest timestamp the node had applied.
    pub(super) max_ts: Timestamp,
    /// The contents at the watermark.
    pub(super) base: Vec<(Vec<u8>, Vec<u8>)>,
    /// The applied commits above the watermark, in apply order.
    pub(super) tail: Vec<CommitRecord>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Encodes a snapshot: contents `base` at watermark `w`, the newest
/// applied timestamp `max_ts`, and the commits above `w`.
pub(super) fn encode(
    w: Timestamp,
    max_ts: Timestamp,
    base: &[(Vec<u8>, Vec<u8>)],
    tail: &[CommitRecord],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&w.get().to_le_bytes());
    out.extend_from_slice(&max_ts.get().to_le_bytes());
    out.extend_from_slice(&(base.len() as u64).to_le_bytes());
    for (k, v) in base {
        put_bytes(&mut out, k);
        put_bytes(&mut out, v);
    }
    out.extend_from_slice(&(tail.len() as u64).to_le_bytes());
    for r in tail {
        out.extend_from_slice(&r.commit_ts.get().to_le_bytes());
        out.extend_from_slice(&r.durable_ts.get().to_le_bytes());
        out.extend_from_slice(&r.origin.node.to_le_bytes());
        out.extend_from_slice(&r.origin.seq.to_le_bytes());
        out.extend_from_slice(&(r.writes.len() as u32).to_le_bytes());
        for w in &r.writes {
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
/// [`ReplicaError::BadSnapshot`] naming what was wrong: a bad magic, a
/// truncation, a timestamp above the maximum, a bad tag, trailing bytes.
pub(super) fn decode(b: &[u8]) -> Result<Decoded, ReplicaError> {
    let mut c = Cur { b, at: 0 };
    if c.take(8)? != MAGIC {
        return Err(ReplicaError::BadSnapshot {
            what: "not a snapshot-engine snapshot (bad magic)".to_string(),
        });
    }
    let watermark = c.ts()?;
    let max_ts = c.ts()?;
    let n = c.u64()?;
    let mut base = Vec::new();
    for _ in 0..n {
        let k = c.bytes()?;
        let v = c.bytes()?;
        base.push((k, v));
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
            writes.push(Write { key, value });
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
    Ok(Decoded {
        watermark,
        max_ts,
        base,
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_format_round_trips_and_rejects_damage() {
        let tail = vec![CommitRecord {
            commit_ts: Timestamp::new(12),
            durable_ts: Timestamp::new(12),
            origin: Origin { node: 1, seq: 3 },
            writes: vec![
                Write {
                    key: b"a".to_vec(),
                    value: Some(b"x".to_vec()),
                },
                Write {
                    key: b"b".to_vec(),
                    value: None,
                },
            ],
        }];
        let base = vec![(b"k".to_vec(), b"v".to_vec())];
        let data = encode(Timestamp::new(10), Timestamp::new(12), &base, &tail);
        let d = decode(&data).unwrap();
        assert_eq!(d.watermark, Timestamp::new(10));
        assert_eq!(d.max_ts, Timestamp::new(12));
        assert_eq!(d.base, base);
        assert_eq!(d.tail, tail);
        for cut in [0, 7, 8, 20, data.len() - 1] {
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
    }
}
