//! Durability: [`Engine::open`] on a directory, a commit log with group
//! commit, checkpoints at the stable timestamp, and recovery.
//!
//! [`Engine::new`] stays the in-memory engine; an engine from
//! [`Engine::open`] writes one log record per committing write transaction
//! (before its versions become visible) and recovers from its directory on
//! the next open. Readers never touch the log.
//!
//! This layer sits below the KV API and imports nothing from it
//! (`tests/api/layering.rs`): at open, `Recovery` locks and recovers the
//! directory and hands the KV layer what it read (the checkpoint's
//! contents, the records after it), which `kv/open.rs` applies through
//! ordinary transactions before the log becomes the engine's; at commit,
//! `CommitLog::log_commit` frames the `(table, key, value)` triples of the
//! KV layer's write set, and `log_create_table` and `log_drop_table` log
//! the catalog's changes (`catalog.rs`), which carry no timestamp.
//!
//! [`Engine::new`]: crate::Engine::new
//! [`Engine::open`]: crate::Engine::open
//!
//! Files in the directory: `LOCK` (held while the engine is open),
//! `log-<seq>.seg` (the commit log's segments, see `record.rs` for the
//! format) and `ckpt-<seq>.ckpt` (the newest checkpoint, named by the first
//! segment it does not cover). A backup's directory (`backup.rs`) holds the
//! same files, and [`BACKUP_INCOMPLETE`] until the backup is complete.
//!
//! A prepared transaction is logged only when it commits: one still
//! prepared at a crash is gone after recovery, as in WiredTiger, and its
//! coordinator re-drives two-phase commit.

mod backup;
mod catalog;
mod checkpoint;
mod checkpointer;
mod commit;
mod fs;
mod handle;
mod log;
mod memfs;
mod options;
pub(crate) mod record;
mod recovery;
mod report;

pub use backup::{BackupReport, BACKUP_INCOMPLETE};
pub(crate) use catalog::TableDef;
pub(crate) use checkpointer::Opened;
pub(crate) use commit::CommitMode;
pub use fs::{Fs, FsFile, FsLock, StdFs};
pub use handle::CommitHandle;
#[cfg(feature = "replication")]
pub(crate) use log::create_synced;
#[cfg(feature = "replication")]
pub(crate) use log::io_error;
pub use memfs::{FaultOp, MemFs, Stop, WriteBack};
#[cfg(feature = "replication")]
pub(crate) use options::validate_log;
pub use options::{Durability, DurabilityOptions};
pub(crate) use record::{Commit, Record};
pub(crate) use recovery::Recovery;
pub use report::{CheckpointReport, CheckpointerStatus, Damage, LogStats, RecoveryReport};
