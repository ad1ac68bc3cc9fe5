//! Plain-struct configuration: no string parsing on any hot path
//! (WiredTiger WT-11105 measured its config-string parsing at up to 2.8 µs
//! per begin).

use crate::error::{Error, Result};
use crate::ts::Timestamp;

/// Engine-wide settings, checked when an engine or manager is built
/// ([`EngineConfig::validate`]): each field's bounds are below.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Size of the session table: the most sessions open at once,
    /// `1..=`[`EngineConfig::MAX_SESSIONS`] (the table and each slot's
    /// counters are allocated up front, and every horizon refresh scans
    /// the whole table).
    /// Opening one more is [`Error::SessionTableFull`](crate::Error::SessionTableFull).
    pub max_sessions: usize,
    /// Longest key accepted by `get`/`put`/`delete`, in bytes,
    /// `0..=`[`EngineConfig::MAX_KEY_LEN`].
    pub max_key_len: usize,
    /// Longest value accepted by `put`, in bytes,
    /// `0..=`[`EngineConfig::MAX_VALUE_LEN`].
    pub max_value_len: usize,
    /// A session refreshes the reclaim horizon (a scan of the session table)
    /// after this many of its own commits, `1..=u32::MAX` (1: after every
    /// commit). Lower values prune sooner and cost more scans;
    /// `engine.collect()` refreshes it on demand.
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
    /// numbers are in DESIGN.md, "Slots and the three handshakes").
    /// Where registration fails, on other systems, or when this is false,
    /// both sides use SeqCst fences. The environment variable
    /// `SNAPSHOT_ENGINE_FENCES` overrides this for every engine of the
    /// process: `asymmetric` turns it on, `symmetric` off. Only the
    /// lock-free machinery uses it;
    /// [`Engine::asymmetric_fences`](crate::Engine::asymmetric_fences) says
    /// which pair an engine got.
    pub asymmetric_fences: bool,
    /// Move fingers up as the stable timestamp passes commits (the *stable
    /// sweep*): each session keeps the default-table keys its timestamped
    /// commits wrote above stable and, at its later commits, prunes again
    /// (two per key the commit wrote, in groups of eight) those stable has
    /// passed since and a newer commit superseded. A read at a stable
    /// timestamp then finds its version in one step instead of climbing
    /// from the finger the key's last commit left (DESIGN.md, "Version
    /// chains and the index"). **Off by default**: it costs writers about
    /// one more prune of a cold key per write, for fewer misses in reads
    /// at stable (both measured in BENCHMARKS.md, `read-ts`). Worth it
    /// where reads at stable (`read_at_stable`, or read timestamps that
    /// follow stable) far outnumber writes and keys are rewritten within
    /// stable's lag.
    /// A session keeps at most 2^20 keys (16 bytes each).
    pub stable_sweep: bool,
}

impl EngineConfig {
    /// The largest [`EngineConfig::max_sessions`]: 65,536 sessions.
    pub const MAX_SESSIONS: usize = 1 << 16;
    /// The largest [`EngineConfig::max_key_len`]: 2 GiB - 1.
    pub const MAX_KEY_LEN: usize = i32::MAX as usize;
    /// The largest [`EngineConfig::max_value_len`]: 2 GiB - 1.
    pub const MAX_VALUE_LEN: usize = i32::MAX as usize;

    /// Checks every field against its bounds (the field docs);
    /// [`Engine::new`](crate::Engine::new) and
    /// [`TxnManager::with_config`](crate::machinery::TxnManager::with_config)
    /// call it, so no value builds an engine that aborts or panics later.
    /// `asymmetric_fences` and `stable_sweep` take either value.
    ///
    /// ```
    /// # use snapshot_engine::{EngineConfig, Error};
    /// let config = EngineConfig { max_sessions: 0, ..EngineConfig::default() };
    /// assert_eq!(
    ///     config.validate().unwrap_err().to_string(),
    ///     "EngineConfig::max_sessions 0 is out of range (1..=65536)"
    /// );
    /// ```
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`] for the first field out of its bounds,
    /// with the field's name, its value and the bounds.
    pub fn validate(&self) -> Result<()> {
        let check = |field, value, min, max| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(Error::ConfigOutOfRange {
                    field,
                    value,
                    min,
                    max,
                })
            }
        };
        check("max_sessions", self.max_sessions, 1, Self::MAX_SESSIONS)?;
        check("max_key_len", self.max_key_len, 0, Self::MAX_KEY_LEN)?;
        check("max_value_len", self.max_value_len, 0, Self::MAX_VALUE_LEN)?;
        check(
            "horizon_refresh_commits",
            self.horizon_refresh_commits as usize,
            1,
            u32::MAX as usize,
        )
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_sessions: 128,
            max_key_len: 64 * 1024,
            max_value_len: 16 * 1024 * 1024,
            horizon_refresh_commits: 64,
            asymmetric_fences: false,
            stable_sweep: false,
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
    /// Snapshot isolation whose commits are also serializable: the
    /// committed serializable transactions are equivalent to running one
    /// at a time, in the order their commits entered the engine's commit
    /// gate (for timestamped commits, also their commit timestamps' order).
    ///
    /// The transaction reads one snapshot, as [`Isolation::Snapshot`], and
    /// tracks what it read: the keys of `get` and `get_many` and the key
    /// ranges its scans and cursors covered (each end up to where it read,
    /// read-ahead included), in its own memory, freed when it ends
    /// ([`Txn::tracked_bytes`](crate::Txn::tracked_bytes)). A transaction
    /// that wrote validates at commit, under a per-engine lock that only
    /// such transactions take: every key it read, and every key inside a
    /// range it scanned, must have no newer version than the one it saw
    /// (none committed since its snapshot, in progress or prepared), or the
    /// commit rolls it back with [`Error::SerializationConflict`] or
    /// [`Error::RangeConflict`](crate::Error::RangeConflict) (a key
    /// inserted or deleted in a scanned range: no phantoms).
    /// [`Session::transaction`](crate::Session::transaction) retries both
    /// as it retries a write conflict. A read-only serializable
    /// transaction never fails at commit: its snapshot already holds a
    /// prefix of the serial order.
    ///
    /// **The guarantee holds among serializable transactions** (as in
    /// PostgreSQL): a snapshot-isolation writer is not validated, and a
    /// serializable transaction that reads what one wrote may see write
    /// skew with it.
    ///
    /// **Timestamps.** A serializable commit whose commit timestamp is
    /// below the last timestamped serializable commit's (an untimestamped
    /// one counts as below every timestamp) is refused with
    /// [`Error::SerializableTimestampOrder`](crate::Error::SerializableTimestampOrder),
    /// and the transaction stays open to commit at another timestamp: so a
    /// reader at any read timestamp sees a prefix of the serial order. An
    /// engine reopened from its log starts this bound at the newest
    /// recovered commit timestamp.
    ///
    /// **Cost.** A snapshot-isolation transaction tracks nothing. A
    /// serializable one keeps each read key and range bound in its own
    /// buffer, and its commit validates them under the engine's gate, one
    /// serializable writer at a time. On a durable engine the gate covers
    /// the commit up to its log record's framing, not the wait for its
    /// write or sync: serializable writers share group commits (their
    /// commits still complete in gate order). A snapshot-isolation writer
    /// with a tracked read ([`Txn::get_for_update`](crate::Txn::get_for_update))
    /// holds the gate through its whole commit, log wait included. A
    /// commit that had to wait for the gate is counted in
    /// [`Stats::gate_waits`](crate::Stats::gate_waits), and the time it
    /// waited in [`Stats::gate_wait_ns`](crate::Stats::gate_wait_ns): with
    /// more threads than cores, a holder the scheduler preempts makes the
    /// others wait for its time slice.
    ///
    /// **Prepared transactions.** Prepare validates, as commit does (a
    /// conflict there dooms the transaction: roll it back), and
    /// registers the read set with the engine until the transaction
    /// commits or rolls back: a serializable transaction that writes a key
    /// it read (or one inside a range it scanned) meanwhile gets
    /// [`Error::PreparedReadConflict`](crate::Error::PreparedReadConflict),
    /// so a prepared serializable transaction's commit never fails a
    /// validation (only the timestamp order above).
    ///
    /// Not combinable with `read_at_stable` or with a `prepare_conflicts`
    /// that skips prepared updates ([`Error::IncompatibleOptions`]). Per
    /// read: [`Txn::get_untracked`](crate::Txn::get_untracked) reads
    /// without tracking, and a snapshot-isolation transaction can track a
    /// read with [`Txn::get_for_update`](crate::Txn::get_for_update).
    ///
    /// [`Error::SerializationConflict`]: crate::Error::SerializationConflict
    /// [`Error::IncompatibleOptions`]: crate::Error::IncompatibleOptions
    Serializable,
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
    /// `session.begin(&TxnOptions::at(15))`. Like every timestamp parameter
    /// of the crate, `read_ts` is a [`Timestamp`] or a plain `u64`.
    pub fn at(read_ts: impl Into<Timestamp>) -> TxnOptions {
        TxnOptions {
            read_timestamp: Some(read_ts.into()),
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
    /// A commit at `ts` (a [`Timestamp`] or a plain `u64`).
    pub fn at(ts: impl Into<Timestamp>) -> CommitOptions {
        CommitOptions {
            commit_ts: Some(ts.into()),
            durable_ts: None,
        }
    }

    /// A prepared transaction's commit at `commit`, durable at `durable`:
    /// `txn.commit(CommitOptions::prepared(30, 35))`. The same as
    /// `CommitOptions::at(commit).durable(durable)`.
    pub fn prepared(commit: impl Into<Timestamp>, durable: impl Into<Timestamp>) -> CommitOptions {
        CommitOptions::at(commit).durable(durable)
    }

    /// These options with the durable timestamp `ts` (prepared
    /// transactions only; the commit refuses it for any other).
    #[must_use]
    pub fn durable(mut self, ts: impl Into<Timestamp>) -> CommitOptions {
        self.durable_ts = Some(ts.into());
        self
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
    /// The all-durable timestamp (an upper bound for `all_durable`).
    pub durable: Option<Timestamp>,
}

/// Helpers that name the timestamps to move, each a [`Timestamp`] or a plain
/// `u64`: `TimestampUpdate::stable(20).and_oldest(10)` is
/// `TimestampUpdate { stable: Some(20.into()), oldest: Some(10.into()), durable: None }`.
/// (The chained setters are `and_*`: a method cannot share its name with the
/// constructor `TimestampUpdate::oldest`.)
impl TimestampUpdate {
    /// An update that moves the oldest timestamp to `ts` and nothing else.
    pub fn oldest(ts: impl Into<Timestamp>) -> TimestampUpdate {
        TimestampUpdate::default().and_oldest(ts)
    }

    /// An update that moves the stable timestamp to `ts` and nothing else.
    pub fn stable(ts: impl Into<Timestamp>) -> TimestampUpdate {
        TimestampUpdate::default().and_stable(ts)
    }

    /// An update that sets the all-durable timestamp to `ts` and nothing
    /// else.
    pub fn durable(ts: impl Into<Timestamp>) -> TimestampUpdate {
        TimestampUpdate::default().and_durable(ts)
    }

    /// This update, also moving the oldest timestamp to `ts`.
    #[must_use]
    pub fn and_oldest(mut self, ts: impl Into<Timestamp>) -> TimestampUpdate {
        self.oldest = Some(ts.into());
        self
    }

    /// This update, also moving the stable timestamp to `ts`.
    #[must_use]
    pub fn and_stable(mut self, ts: impl Into<Timestamp>) -> TimestampUpdate {
        self.stable = Some(ts.into());
        self
    }

    /// This update, also setting the all-durable timestamp to `ts`.
    #[must_use]
    pub fn and_durable(mut self, ts: impl Into<Timestamp>) -> TimestampUpdate {
        self.durable = Some(ts.into());
        self
    }
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
