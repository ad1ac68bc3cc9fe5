//! The snapshot machinery as a public API for your own storage: sessions,
//! snapshots, read/commit/prepare/durable timestamps, first-updater-wins,
//! and the reclaim horizon, knowing nothing of keys or values.
//!
//! You keep your versions however you like (a B-tree leaf's update list, an
//! LSM memtable, a column store's delta chain); each embeds a
//! [`VersionStatus`]. The machinery tells a [`Transaction`] which of them it
//! sees ([`ReadView::visibility`]), whether it may write
//! ([`ReadView::write_check`]), flips their statuses when it commits,
//! prepares or rolls back (through the [`Completion`] your closure gets, at
//! the one moment that is correct), and tells you which ones nobody can read
//! any more ([`Horizon::covers`]); [`epoch`] frees them once no reader can
//! still hold a pointer. The bundled key-value store
//! ([`Engine`](crate::Engine)) is built on exactly this API.
//!
//! ```
//! use snapshot_engine::machinery::{TxnManager, VersionStatus, Visibility, WriteCheck};
//! use snapshot_engine::{CommitOptions, Timestamp, TxnOptions};
//! use std::sync::Mutex;
//!
//! // One key's versions, newest first: your storage, your lock.
//! struct Version { status: VersionStatus, value: u64 }
//! let versions: Mutex<Vec<Version>> = Mutex::new(Vec::new());
//!
//! let mgr = TxnManager::new(8)?;
//! let mut session = mgr.session()?;
//!
//! // A writer: get a status (and the transaction's id), check first
//! // updater wins, link the version, commit at timestamp 10.
//! let mut txn = session.begin(&TxnOptions::default())?;
//! let (status, view) = txn.new_version()?;
//! let mut list = versions.lock().unwrap();
//! let conflict = list.iter().map(|v| view.write_check(&v.status))
//!     .find(|c| *c != WriteCheck::Skip) == Some(WriteCheck::Conflict);
//! assert!(!conflict);
//! list.insert(0, Version { status, value: 42 });
//! drop(list);
//! txn.commit(CommitOptions::at(10), |done| {
//!     // Runs before the commit becomes visible to other snapshots.
//!     for v in versions.lock().unwrap().iter() {
//!         done.flip(&v.status);
//!     }
//! })?;
//! drop(txn);
//!
//! // Readers: the newest version the view accepts.
//! let read = |opts: &TxnOptions, session: &mut snapshot_engine::machinery::TxnSession<'_>| {
//!     let mut txn = session.begin(opts).unwrap();
//!     let view = txn.read_view().unwrap();
//!     let list = versions.lock().unwrap();
//!     list.iter().find(|v| view.visibility(&v.status) == Visibility::Visible).map(|v| v.value)
//! };
//! assert_eq!(read(&TxnOptions::default(), &mut session), Some(42));
//! let at_5 = TxnOptions { read_timestamp: Some(Timestamp::new(5)), ..TxnOptions::default() };
//! assert_eq!(read(&at_5, &mut session), None);
//! # Ok::<(), snapshot_engine::Error>(())
//! ```
//!
//! See `examples/own_storage/` for a whole versioned map with prepare,
//! write conflicts and pruning under the horizon.

// Private to the machinery: the store and the KV layer reach it only
// through the `pub use` items below (DESIGN.md, "The two layers").
#[cfg(all(feature = "baseline", not(loom)))]
mod baseline;
mod lockfree;
#[cfg(all(test, not(loom)))]
pub(crate) use lockfree::COMPLETION_FLUSHES;
#[cfg(all(test, not(loom)))]
pub(crate) use raw::descriptor::DESCRIPTOR_ALLOCS;
#[cfg(all(test, loom))]
pub(crate) mod loom_support;
mod manager;
mod plain;
mod raw;
mod rules;
mod snapshot;
mod txn;
mod version;

pub use manager::{Count, SessionPin};
pub use plain::{Transaction, TxnManager, TxnSession};
pub use txn::Completion;
pub use version::{Horizon, ReadView, VersionState, VersionStatus, Visibility, WriteCheck};

/// The machinery's generic forms, on any snapshot protocol, and the
/// protocols: re-exported as `crate::with_machinery` for the workload
/// driver and the tests, and named by the KV layer's generic forms.
pub(crate) mod with_machinery {
    #[cfg(all(feature = "baseline", not(loom)))]
    pub use super::baseline::{RwLockBaseline, RwLockBaselinePatched, RwLockMachinery};
    pub use super::lockfree::LockFree;
    pub use super::manager::{TxnManager, TxnSession};
    pub use super::rules::Machinery;
    pub use super::txn::Transaction;
}

/// The epoch collector the machinery and the bundled store free memory
/// with (crossbeam-epoch's default collector; DESIGN.md, "Why
/// crossbeam-epoch"), for your own versions: load shared pointers under a
/// [`Guard`](epoch::Guard), and hand what you unlinked to
/// [`Collector::defer`](epoch::Collector::defer) (or a
/// [`RetireBatch`](epoch::RetireBatch)); it is freed only after every
/// guard that could still reach it has dropped (invariant 11).
///
/// Hold a guard for one operation, never across a whole transaction: a
/// guard held for long stalls every thread's reclamation.
pub mod epoch {
    #[cfg(all(test, not(loom)))]
    pub(crate) use super::raw::reclaim::OUTER_PINS;
    pub use super::raw::reclaim::{Collector, Guard, RetireBatch, RETIRE_BATCH};
}
