//! What the replicated log carries: node ids, openraft's type
//! configuration, and the application data of a log entry ([`Command`]:
//! commit records, batches, watermarks), with their wire encoding.

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
    /// The key.
    pub key: Vec<u8>,
    /// The new value, or `None` for a tombstone.
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
    /// The writes, in key order (one per key).
    pub writes: Vec<Write>,
}

impl CommitRecord {
    /// The record's size in a log entry (bincode's fixed-width encoding:
    /// two timestamps, the origin, then each write's key and optional value
    /// with 8-byte lengths).
    pub fn encoded_len(&self) -> usize {
        Self::encoded_len_of(self.writes.iter().map(|w| (&w.key[..], w.value.as_deref())))
    }

    /// [`CommitRecord::encoded_len`] of a record holding `writes`.
    pub(crate) fn encoded_len_of<'a>(
        writes: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> usize {
        // commit_ts, durable_ts, origin (node, seq), the writes' length.
        const FIXED: usize = 8 + 8 + 16 + 8;
        FIXED
            + writes
                .map(|(k, v)| 8 + k.len() + 1 + v.map_or(0, |v| 8 + v.len()))
                .sum::<usize>()
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
}

/// What applying one log entry reports back to the proposer.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// The node's stable timestamp after the entry was applied.
    #[serde(with = "opt_ts_serde")]
    pub stable: Option<Timestamp>,
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
