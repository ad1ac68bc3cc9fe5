//! Lock-free transaction snapshots, WiredTiger-style timestamps and an MVCC
//! key-value store, for storage engines to embed.
//!
//! [`Engine`] is the key-value store: [`Session`]s run [`Txn`]s with
//! snapshot isolation, read, commit, prepare and durable timestamps, and
//! ordered [`Cursor`]s. [`machinery`] is the snapshot and timestamp layer
//! under it, public for storage that keeps its own versions. With the
//! `replication` feature, `replication` runs follower replicas on openraft.
//! The repository's DESIGN.md explains the protocol and its invariants.
//!
//! ```
//! use snapshot_engine::{CommitOptions, Engine, EngineConfig, TableOptions, TxnOptions};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let engine = Engine::new(EngineConfig::default())?;
//!     let colors = engine.create_table("colors", TableOptions::default())?;
//!     let mut session = engine.session()?;
//!
//!     let mut txn = session.begin(&TxnOptions::default())?;
//!     txn.put("apple", "fruit")?; // the default table
//!     txn.table(&colors)?.put("apple", "red")?; // a named table
//!     txn.commit(CommitOptions::at(10))?; // both writes, at once
//!
//!     let mut txn = session.begin(&TxnOptions::at(15))?; // read at timestamp 15
//!     assert_eq!(txn.get("apple")?.as_deref(), Some(&b"fruit"[..]));
//!     assert_eq!(txn.table(&colors)?.get("apple")?.as_deref(), Some(&b"red"[..]));
//!     Ok(())
//! }
//! ```
//!
//! [`Engine::create_table`] makes a named [`Table`]: its own keyspace, with
//! its own key and value bounds ([`TableOptions`]); [`Txn::table`] is a
//! transaction's view of it ([`TableTxn`]). The table rules are in
//! [`Engine::drop_table`] and DESIGN.md: names are non-empty UTF-8 of at
//! most [`MAX_TABLE_NAME_LEN`] bytes with no NUL; ids are never reused;
//! create and drop take effect at once (not transactionally); a dropped
//! table's memory is freed once no reader or transaction can reach it.
//!
//! # Consistency
//!
//! * **Snapshot isolation.** A transaction reads one snapshot: the
//!   transactions that had completed when it took it, plus its own writes.
//!   It takes it **lazily, at its first read, write or scan, or when it sets
//!   its read timestamp** (which takes a fresh one), not at begin, as
//!   PostgreSQL takes a snapshot at a transaction's first statement: a
//!   commit that returns between `begin` and that first operation is seen.
//!   [`Txn::take_snapshot`] fixes it earlier. A transaction that never
//!   reads or writes takes no snapshot and pins nothing. With
//!   [`Isolation::ReadCommitted`] every read takes a fresh snapshot.
//! * **Timestamps.** With a read timestamp it sees, of those, the versions
//!   committed at or below it (untimestamped commits are visible at every
//!   read timestamp). Two transactions reading at the same timestamp at or
//!   below stable see the same versions.
//! * **Consistent cut and real-time order.** If a snapshot sees X and X's
//!   snapshot saw Y, it sees Y; a transaction that begins after `commit`
//!   returned sees that commit (its snapshot's point in time is its first
//!   operation, which comes after its begin). (A read timestamp filters further by the
//!   commit timestamps the application chose, as in WiredTiger.) One
//!   exception: the read-only fast path (`read_at_stable`, below) sees an
//!   *untimestamped* commit only once the writer's id is below the xmin
//!   floor, which moves when the reclaim horizon is recomputed (every
//!   `horizon_refresh_commits` commits of a session, [`Engine::collect`],
//!   or a move of oldest) and never past a transaction still running; a
//!   fast-path transaction can miss an untimestamped commit that already
//!   returned. Timestamped commits at or below stable are always seen.
//! * **Tables.** Every table a transaction touches is read at its one
//!   snapshot and read timestamp, and its commit, prepare and rollback
//!   cover every table it wrote, at once. Conflicts and serializable
//!   tracking are per (table, key).
//! * **Writes.** First updater wins: writing a key whose newest version is
//!   uncommitted, prepared, or committed outside this transaction's view is
//!   [`Error::WriteConflict`], after which the transaction must roll back.
//!   Snapshot isolation permits write skew.
//! * **Serializable.** [`Isolation::Serializable`] transactions track what
//!   they read and validate it at commit: the committed ones are equivalent
//!   to a serial order (their commit order, and for timestamped commits
//!   their commit timestamps' order), with no write skew and no phantoms;
//!   a conflict is a typed error that rolls the transaction back, and a
//!   read-only one never fails. The guarantee holds among serializable
//!   transactions.
//! * **Aborted and prepared updates.** Nobody ever sees an aborted update. A
//!   prepared update at or below the read timestamp is
//!   [`Error::PrepareConflict`] unless the transaction ignores prepared
//!   updates.
//! * **Read-only fast path.** `TxnOptions { read_at_stable: true, .. }` reads
//!   the versions committed at or below the stable timestamp, with no
//!   snapshot; raising stable waits for commits in flight at or below it, so
//!   no commit is seen half-done. Untimestamped commits: see the exception
//!   above.
//!
//! # What holding a transaction costs
//!
//! An open transaction pins history: every key keeps the newest version its
//! snapshot and read timestamp can see, and everything newer. Nothing else
//! is held — no lock, no epoch guard between calls — so a long transaction
//! never stops memory from being freed for versions it cannot see, but a
//! transaction left open for minutes under heavy updates keeps one version
//! per updated key alive. [`Engine::pins`] and
//! [`TimestampKind::OldestReader`] show who pins what; [`Engine::collect`]
//! gives the memory back once it ends. Without an oldest timestamp
//! ([`Engine::set_timestamps`]) timestamped history is never discarded.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

/// Benchmark hooks (`benches/index.rs`, feature `bench-hooks`); not part
/// of the API.
#[cfg(all(feature = "bench-hooks", not(loom)))]
#[doc(hidden)]
pub mod bench_api;
mod config;
pub mod durability;
mod error;
mod kv;
pub mod machinery;
#[cfg(all(feature = "replication", not(loom)))]
pub mod replication;
mod stats;
mod store;
mod sync;
mod ts;

pub use config::{
    CommitOptions, EngineConfig, Isolation, PrepareConflicts, TimestampKind, TimestampUpdate,
    TxnOptions,
};
pub use durability::{CommitHandle, Durability, DurabilityOptions, RecoveryReport};
pub use error::{Error, Result, TableNameProblem, TimestampRole};
pub use kv::plain::{CommitError, Cursor, Engine, OwnedSession, Session, TableTxn, Txn};
pub use kv::{
    KeyRange, RollbackReport, Savepoint, Table, TableId, TableOptions, MAX_TABLE_NAME_LEN,
};
pub use machinery::SessionPin;
pub use stats::Stats;
pub use ts::{Generation, Timestamp, TxnId};

/// The engine and the machinery generic over their snapshot protocol, and
/// the protocols: the lock-free one the types above run on, and with
/// feature `baseline` the read-write-lock baselines, for the workload
/// driver and the tests that run them through the same code. Not part of
/// the API: [`Engine`], [`Session`], [`Txn`] and the rest are these on
/// [`LockFree`](with_machinery::LockFree), and no user names them here.
#[doc(hidden)]
pub mod with_machinery {
    pub use crate::kv::{CommitError, Cursor, Engine, OwnedSession, Session, TableTxn, Txn};
    pub use crate::machinery::with_machinery::*;
}

// The loom switch: `loom_tests/` as unit tests (internals stay private), only under `--cfg loom`.
#[cfg(all(test, loom))]
#[path = "../loom_tests/mod.rs"]
mod loom_tests;
