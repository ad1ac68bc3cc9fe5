#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(not(loom))]
mod baseline;
mod config;
mod engine;
mod error;
mod lockfree;
mod protocol;
mod raw;
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
