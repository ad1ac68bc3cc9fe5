//! Plain-struct configuration: no string parsing on any hot path
//! (WiredTiger WT-11105 measured its config-string parsing at up to 2.8 µs
//! per begin).

use crate::ts::Timestamp;

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Size of the session table: the most sessions open at once.
    /// Opening one more is [`Error::SessionTableFull`](crate::Error::SessionTableFull).
    pub max_sessions: usize,
    /// Longest key accepted by `put`/`delete`, in bytes.
    pub max_key_len: usize,
    /// Longest value accepted by `put`, in bytes.
    pub max_value_len: usize,
    /// A session refreshes the reclaim horizon (a scan of the session table)
    /// after this many of its own commits. Lower values prune sooner and cost
    /// more scans; `engine.collect()` refreshes it on demand.
    pub horizon_refresh_commits: u32,
    /// Use the asymmetric fence for handshake 1 (pin versus horizon) where
    /// the platform has it: readers issue a compiler fence instead of a
    /// SeqCst fence (about 4 ns less per snapshot taken), and each horizon
    /// advance a `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (Linux
    /// 4.14+; the process registers once, at the first engine built with it
    /// on), which costs 0.3-9 µs per advance on a 2-vCPU VM. **Off by
    /// default**: with an advance every `horizon_refresh_commits` commits
    /// of a session, the advances cost more than the readers save unless
    /// readers take hundreds to thousands of snapshots per advance (the
    /// numbers are in DESIGN.md, "The asymmetric fence").
    /// Where registration fails, on other systems, or when this is false,
    /// both sides use SeqCst fences. The environment variable
    /// `SNAPSHOT_ENGINE_FENCES` overrides this for every engine of the
    /// process: `asymmetric` turns it on, `symmetric` off. Only the
    /// lock-free machinery uses it;
    /// [`Engine::asymmetric_fences`](crate::Engine::asymmetric_fences) says
    /// which pair an engine got.
    pub asymmetric_fences: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_sessions: 128,
            max_key_len: 64 * 1024,
            max_value_len: 16 * 1024 * 1024,
            horizon_refresh_commits: 64,
            asymmetric_fences: false,
        }
    }
}

/// Isolation level of a transaction.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Isolation {
    /// One snapshot for the whole transaction (WiredTiger `snapshot`).
    #[default]
    Snapshot,
    /// A fresh snapshot for every read (WiredTiger `read-committed`).
    ReadCommitted,
}

/// What a reader does when it meets a prepared update whose prepare
/// timestamp is at or below its read timestamp.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrepareConflicts {
    /// Return [`Error::PrepareConflict`](crate::Error::PrepareConflict)
    /// (WiredTiger's default).
    #[default]
    Enforce,
    /// Skip prepared updates; the transaction becomes read-only
    /// (`ignore_prepare=true`).
    Ignore,
    /// Skip prepared updates and still allow writes (`ignore_prepare=force`).
    IgnoreAllowWrites,
}

/// Options for [`Session::begin`](crate::Session::begin): a plain struct, the
/// replacement for WiredTiger's configuration string.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnOptions {
    /// Isolation level.
    pub isolation: Isolation,
    /// Read as of this timestamp (same as calling `set_read_timestamp` right
    /// after begin).
    pub read_timestamp: Option<Timestamp>,
    /// Round a read timestamp below oldest up to oldest instead of failing
    /// (`roundup_timestamps=(read=true)`).
    pub roundup_read: bool,
    /// Round a prepare timestamp at or below stable (or below oldest) up to
    /// the first valid one, and a prepared commit timestamp below the prepare
    /// timestamp up to it (`roundup_timestamps=(prepared=true)`).
    pub roundup_prepared: bool,
    /// What to do on meeting a prepared update.
    pub prepare_conflicts: PrepareConflicts,
    /// Refuse writes.
    pub read_only: bool,
    /// The read-only fast path: read at the stable timestamp with no snapshot
    /// descriptor; a version is visible when committed at or below stable.
    /// Implies `read_only`; `read_timestamp` must be `None`
    /// ([`Error::IncompatibleOptions`](crate::Error::IncompatibleOptions)).
    pub read_at_stable: bool,
}

impl TxnOptions {
    /// A snapshot transaction that reads at `read_ts` (the rest default):
    /// `session.begin(&TxnOptions::at(15))`.
    pub fn at(read_ts: u64) -> TxnOptions {
        TxnOptions {
            read_timestamp: Some(Timestamp::new(read_ts)),
            ..TxnOptions::default()
        }
    }
}

/// Options for [`Txn::commit`](crate::Txn::commit).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitOptions {
    /// The commit timestamp; `None` for an untimestamped commit (or one whose
    /// timestamp was set earlier with `set_commit_timestamp`).
    pub commit_ts: Option<Timestamp>,
    /// The durable timestamp; only for prepared transactions. Defaults to the
    /// one set with `Txn::set_durable_timestamp`, else the commit timestamp.
    pub durable_ts: Option<Timestamp>,
}

impl CommitOptions {
    /// A commit at `ts`.
    pub fn at(ts: u64) -> CommitOptions {
        CommitOptions {
            commit_ts: Some(Timestamp::new(ts)),
            durable_ts: None,
        }
    }
}

/// New values for the global timestamps; `None` leaves one unchanged.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TimestampUpdate {
    /// The oldest timestamp: no read timestamp may be older; history below it
    /// may be discarded.
    pub oldest: Option<Timestamp>,
    /// The stable timestamp: commits must be newer; the read-only fast path
    /// reads here.
    pub stable: Option<Timestamp>,
    /// The global durable timestamp (an upper bound for `all_durable`).
    pub durable: Option<Timestamp>,
}

/// Which global timestamp `Engine::query_timestamp` reports.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimestampKind {
    /// The oldest timestamp.
    Oldest,
    /// The stable timestamp.
    Stable,
    /// The largest timestamp at or below which every commit is finished:
    /// `min(global durable, every unfinished commit's claimed timestamp - 1)`.
    AllDurable,
    /// The oldest read timestamp of any active transaction.
    OldestReader,
    /// `min(oldest, oldest reader)`: history newer than this is kept.
    Pinned,
    /// The stable timestamp of the checkpoint a durable engine recovered
    /// from at open (`None`: in memory, or no checkpoint at a stable
    /// timestamp).
    Recovery,
}
