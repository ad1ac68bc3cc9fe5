//! What the replicated log carries: node ids, openraft's type
//! configuration, and the application data of a log entry ([`Command`]:
//! commit records, batches, watermarks, table creates and drops), with
//! their wire encoding.

use std::io::Cursor;

use crate::Timestamp;

/// A node's id in the cluster.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft's type configuration for replicated engines.
    pub TypeConfig:
        D = Command,
        R = Applied,
        NodeId = NodeId,
        Node = openraft::BasicNode,
);

/// One write of a replicated commit.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Write {
    /// The table's id ([`TableId::get`](crate::TableId::get); 0: the
    /// default table, one byte on the wire). A node that has no live table
    /// of this id (it was dropped before the entry) skips the write, as the
    /// leader's table dropped it.
    pub table: u32,
    /// The key.
    #[serde(with = "bytes_serde")]
    pub key: Vec<u8>,
    /// The new value, or `None` for a tombstone.
    #[serde(with = "opt_bytes_serde")]
    pub value: Option<Vec<u8>>,
}

/// Which leader transaction a commit entry came from: the proposing node and
/// its own sequence number. The proposing node skips applying its own
/// entries (its transaction commits them locally).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The node that proposed the entry.
    pub node: NodeId,
    /// That node's sequence number for the proposal.
    pub seq: u64,
}

/// Where a [`Command::Batch`] came from. A node appends its own batches
/// (those of its current run) only one after another, with no batch
/// missing: a later batch may hold commits that read an earlier one's
/// writes on the leader.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Proposer {
    /// The proposing node.
    pub node: NodeId,
    /// That node's run (a value drawn when its [`Replica`](super::Replica)
    /// was made).
    pub run: u64,
    /// The batch's number in that run, from 1.
    pub batch: u64,
}

/// A committed leader transaction, as carried in the log.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitRecord {
    /// The commit timestamp the leader committed at.
    #[serde(with = "ts_serde")]
    pub commit_ts: Timestamp,
    /// The durable timestamp. Leader transactions commit unprepared, so it
    /// equals `commit_ts`; it is carried so that a node can advance its
    /// all-durable timestamp when the entry is applied.
    #[serde(with = "ts_serde")]
    pub durable_ts: Timestamp,
    /// Where it came from.
    pub origin: Origin,
    /// The writes, in (table, key) order (one per key of a table).
    pub writes: Vec<Write>,
}

impl CommitRecord {
    /// The record's size in a log entry (the replication encoding,
    /// `codec.rs`: the two timestamps and the origin as varints, the count
    /// of writes, then each write's table id as a varint, its key, a tag
    /// byte and the value, each byte string after its varint length).
    pub fn encoded_len(&self) -> usize {
        self.fixed_len()
            + self
                .writes
                .iter()
                .map(|w| write_len(w.table, &w.key, w.value.as_deref()))
                .sum::<usize>()
    }

    /// What the record's timestamps, origin and count of writes take.
    fn fixed_len(&self) -> usize {
        [
            self.commit_ts.get(),
            self.durable_ts.get(),
            self.origin.node,
            self.origin.seq,
            self.writes.len() as u64,
        ]
        .into_iter()
        .map(varint_len)
        .sum()
    }

    /// At least [`CommitRecord::encoded_len`] of a record holding `writes`,
    /// at most 36 bytes more (its timestamps and origin at their widest).
    /// `writes`: (table id, key, value).
    pub(crate) fn encoded_len_bound<'a>(
        writes: impl ExactSizeIterator<Item = (u32, &'a [u8], Option<&'a [u8]>)>,
    ) -> usize {
        // Four u64 varints of at most 10 bytes each, and the count.
        4 * MAX_VARINT
            + varint_len(writes.len() as u64)
            + writes.map(|(t, k, v)| write_len(t, k, v)).sum::<usize>()
    }
}

/// The most bytes a u64 varint takes.
const MAX_VARINT: usize = 10;

/// The bytes the varint of `v` takes: 7 bits a byte.
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// What one write takes: its table id, its key, a tag byte and its value.
fn write_len(table: u32, key: &[u8], value: Option<&[u8]>) -> usize {
    let bytes = |b: &[u8]| varint_len(b.len() as u64) + b.len();
    varint_len(u64::from(table)) + bytes(key) + 1 + value.map_or(0, bytes)
}

/// A named table as the log and snapshots carry it: the id every node
/// gives it (the leader's), its name and its bounds (resolved on the
/// leader, so every node enforces the same ones).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableDef {
    /// The table's id ([`TableId::get`](crate::TableId::get)), never 0.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// The longest key it accepts, in bytes.
    pub max_key_len: u64,
    /// The longest value it accepts, in bytes.
    pub max_value_len: u64,
}

impl TableDef {
    /// The definition of `table`.
    pub(crate) fn of(table: &crate::Table) -> TableDef {
        TableDef {
            id: table.id().get(),
            name: table.name().to_string(),
            max_key_len: table.max_key_len() as u64,
            max_value_len: table.max_value_len() as u64,
        }
    }

    /// The options that create it with these bounds (a bound above
    /// `usize::MAX` saturates, and the engine refuses it by its own
    /// bound).
    pub(crate) fn options(&self) -> crate::TableOptions {
        let len = |v: u64| Some(usize::try_from(v).unwrap_or(usize::MAX));
        crate::TableOptions {
            max_key_len: len(self.max_key_len),
            max_value_len: len(self.max_value_len),
        }
    }
}

/// The application data of a log entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Command {
    /// A committed leader transaction.
    Commit(CommitRecord),
    /// The leader's replicated watermark: every commit at or below it was
    /// appended before this entry. A node that applies it sets its stable
    /// timestamp to it.
    Watermark {
        /// The watermark.
        #[serde(with = "ts_serde")]
        ts: Timestamp,
    },
    /// Many committed leader transactions in one entry (group commit), then
    /// optionally a watermark: every commit at or below it is in this entry
    /// or in an entry before it. A node applies the commits in order, then
    /// the watermark.
    Batch {
        /// Which node proposed it, in which run of that node, and its place
        /// among that run's batches (1, 2, ...).
        proposer: Proposer,
        /// The commits, in the order their transactions committed on the
        /// leader (so two commits of one key are in timestamp order).
        /// Shared: openraft clones an entry for every follower it sends it
        /// to, and a clone is a reference count.
        commits: std::sync::Arc<[CommitRecord]>,
        /// The watermark carried after them, if it moved.
        #[serde(with = "opt_ts_serde")]
        watermark: Option<Timestamp>,
    },
    /// The leader created a named table: every node creates it, with this
    /// id, when it applies the entry (a no-op where a live table has the
    /// id or the name). Writes to it come after this entry in the log.
    CreateTable(TableDef),
    /// The leader dropped the named table of id `id`: every node drops it
    /// when it applies the entry (a no-op where no live table has the id).
    DropTable {
        /// The table's id.
        id: u32,
    },
}

/// What applying one log entry reports back to the proposer.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// The node's stable timestamp after the entry was applied.
    #[serde(with = "opt_ts_serde")]
    pub stable: Option<Timestamp>,
}

/// A byte string as serde bytes (one length, then the bytes) rather than
/// a sequence of `u8`s: the same bytes in a length-prefixed format, written
/// and read as one copy.
mod bytes_serde {
    use serde::de::{Deserializer, SeqAccess, Visitor};
    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(b)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(ByteBuf)
    }

    /// Takes serde bytes, or a sequence of `u8`s from a format that gives
    /// one.
    pub(super) struct ByteBuf;

    impl<'de> Visitor<'de> for ByteBuf {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element()? {
                v.push(b);
            }
            Ok(v)
        }
    }
}

/// An optional byte string, its bytes as [`bytes_serde`] writes them.
mod opt_bytes_serde {
    use serde::de::{Deserializer, Visitor};
    use serde::{Serialize, Serializer};

    /// A borrowed byte string that serializes as serde bytes.
    struct Bytes<'a>(&'a [u8]);

    impl Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    pub(super) fn serialize<S: Serializer>(b: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            Some(b) => s.serialize_some(&Bytes(b)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        d.deserialize_option(OptBytes)
    }

    struct OptBytes;

    impl<'de> Visitor<'de> for OptBytes {
        type Value = Option<Vec<u8>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an optional byte string")
        }

        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            super::bytes_serde::deserialize(d).map(Some)
        }
    }
}

/// Timestamps on the wire: the raw value, checked against
/// [`Timestamp::MAX`] when read.
mod ts_serde {
    use crate::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(ts.get())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let v = u64::deserialize(d)?;
        if v > Timestamp::MAX.get() {
            return Err(serde::de::Error::custom(format!(
                "timestamp {v} above the maximum {}",
                Timestamp::MAX.get()
            )));
        }
        Ok(Timestamp::new(v))
    }
}

/// Optional timestamps on the wire.
mod opt_ts_serde {
    use crate::Timestamp;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        ts: &Option<Timestamp>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        ts.map(Timestamp::get).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Timestamp>, D::Error> {
        match Option::<u64>::deserialize(d)? {
            Some(v) if v > Timestamp::MAX.get() => Err(serde::de::Error::custom(format!(
                "timestamp {v} above the maximum {}",
                Timestamp::MAX.get()
            ))),
            v => Ok(v.map(Timestamp::new)),
        }
    }
}
