#![doc = include_str!("../README.md")]
//!
//! # Consistency
//!
//! * **Snapshot isolation.** A transaction reads one snapshot: the
//!   transactions that had completed when it began (or when it set its read
//!   timestamp, which takes a fresh snapshot), plus its own writes. With
//!   [`Isolation::ReadCommitted`] every read takes a fresh snapshot.
//! * **Timestamps.** With a read timestamp it sees, of those, the versions
//!   committed at or below it (untimestamped commits are visible at every
//!   read timestamp). Two transactions reading at the same timestamp at or
//!   below stable see the same versions.
//! * **Consistent cut and real-time order.** If a snapshot sees X and X's
//!   snapshot saw Y, it sees Y; a transaction that begins after `commit`
//!   returned sees that commit. (A read timestamp filters further by the
//!   commit timestamps the application chose, as in WiredTiger.) One
//!   exception: the read-only fast path (`read_at_stable`, below) sees an
//!   *untimestamped* commit only once the writer's id is below the xmin
//!   floor, which moves when the reclaim horizon is recomputed (every
//!   `horizon_refresh_commits` commits of a session, [`Engine::collect`],
//!   or a move of oldest) and never past a transaction still running; a
//!   fast-path transaction can miss an untimestamped commit that already
//!   returned. Timestamped commits at or below stable are always seen.
//! * **Writes.** First updater wins: writing a key whose newest version is
//!   uncommitted, prepared, or committed outside this transaction's view is
//!   [`Error::WriteConflict`], after which the transaction must roll back.
//!   Snapshot isolation permits write skew.
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
#![warn(missing_docs)]

#[cfg(not(loom))]
mod baseline;
/// Benchmark hooks (`benches/index.rs`); not part of the API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod bench_api;
mod config;
mod engine;
mod error;
mod lockfree;
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_api;
mod protocol;
mod raw;
#[cfg(all(feature = "replication", not(loom)))]
pub mod replication;
mod snapshot;
mod stats;
mod store;
mod sync;
mod ts;
mod txn;

#[cfg(not(loom))]
pub use baseline::{RwLockBaseline, RwLockBaselineFixed, RwLockMachinery};
pub use config::{
    CommitOptions, EngineConfig, Isolation, PrepareConflicts, TimestampKind, TimestampUpdate,
    TxnOptions,
};
pub use engine::{Engine, Session, SessionPin};
pub use error::{Error, Result, TimestampRole};
pub use lockfree::LockFree;
pub use protocol::Protocol;
pub use stats::Stats;
pub use sync::thread_rmw_count;
pub use ts::{Generation, Timestamp, TxnId};
pub use txn::Txn;

/// Test-only mutant switches for the loom models (`--cfg loom` builds only).
#[cfg(loom)]
pub use sync::mutant;
