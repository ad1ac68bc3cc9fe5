//! Typed errors. Every variant carries the values the caller needs: the
//! rejected value and the bound it broke, or the conflicting key.
//!
//! After any error the engine is fully usable. A transaction stays usable
//! after a timestamp error; after [`Error::WriteConflict`] or
//! [`Error::PrepareConflict`] on a write it must roll back
//! ([`Error::MustRollBack`] for anything else it tries). A serializable
//! conflict ([`Error::SerializationConflict`], [`Error::RangeConflict`],
//! [`Error::PreparedReadConflict`]) has already rolled it back.

use crate::ts::Timestamp;
use std::fmt;

/// Which timestamp an error talks about.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimestampRole {
    /// A transaction's read timestamp.
    Read,
    /// A transaction's commit timestamp.
    Commit,
    /// A transaction's durable timestamp.
    Durable,
    /// A transaction's prepare timestamp.
    Prepare,
    /// The global oldest timestamp.
    Oldest,
    /// The global stable timestamp.
    Stable,
    /// The all-durable timestamp.
    GlobalDurable,
}

impl fmt::Display for TimestampRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimestampRole::Read => "read",
            TimestampRole::Commit => "commit",
            TimestampRole::Durable => "durable",
            TimestampRole::Prepare => "prepare",
            TimestampRole::Oldest => "oldest",
            TimestampRole::Stable => "stable",
            TimestampRole::GlobalDurable => "global durable",
        })
    }
}

/// Shows a key as quoted text when it is printable UTF-8, else as hex
/// (`"user:7"`, `0x00ff10`).
struct KeyText<'a>(&'a [u8]);

impl fmt::Display for KeyText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.0) {
            Ok(s) if !s.is_empty() && !s.chars().any(char::is_control) => write!(f, "{s:?}"),
            _ => {
                f.write_str("0x")?;
                for b in self.0 {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// Shows a key range as `["a", "m")`, `(.., 0x00]`.
struct RangeText<'a>(&'a std::ops::Bound<Vec<u8>>, &'a std::ops::Bound<Vec<u8>>);

impl fmt::Display for RangeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use std::ops::Bound;
        match self.0 {
            Bound::Included(k) => write!(f, "[{}", KeyText(k))?,
            Bound::Excluded(k) => write!(f, "({}", KeyText(k))?,
            Bound::Unbounded => f.write_str("(..")?,
        }
        f.write_str(", ")?;
        match self.1 {
            Bound::Included(k) => write!(f, "{}]", KeyText(k)),
            Bound::Excluded(k) => write!(f, "{})", KeyText(k)),
            Bound::Unbounded => f.write_str("..)"),
        }
    }
}

/// `n` and a noun, plural unless `n` is 1 ("1 byte", "2 bytes").
struct Count(usize, &'static str);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.0 == 1 { "" } else { "s" };
        write!(f, "{} {}{s}", self.0, self.1)
    }
}

/// Everything the engine can refuse.
///
/// Every message has one style: lower-case, no trailing period, the
/// timestamps and the bound they broke by name (`commit timestamp 0 is out
/// of range (1..=…)`), keys as quoted text when printable UTF-8 and as hex
/// otherwise (`write conflict on key "k"`, `… on key 0x00ff`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// An [`EngineConfig`](crate::EngineConfig) field outside its bounds
    /// ([`EngineConfig::validate`](crate::EngineConfig::validate)); the
    /// engine (or manager) is not built.
    ConfigOutOfRange {
        /// The field, by its name in `EngineConfig`.
        field: &'static str,
        /// The rejected value.
        value: usize,
        /// The smallest value accepted.
        min: usize,
        /// The largest value accepted.
        max: usize,
    },
    /// Every session slot is taken (`EngineConfig::max_sessions`).
    SessionTableFull {
        /// The configured table size.
        max_sessions: usize,
    },
    /// A timestamp was `0` or above [`Timestamp::MAX`].
    TimestampOutOfRange {
        /// Which timestamp.
        role: TimestampRole,
        /// The rejected raw value.
        value: u64,
    },
    /// A read timestamp below the oldest timestamp (without round-up).
    ReadTimestampTooOld {
        /// The rejected read timestamp.
        read: Timestamp,
        /// The oldest timestamp it fell below.
        oldest: Timestamp,
    },
    /// Two options that cannot be combined (for example
    /// `TxnOptions::read_at_stable` with `TxnOptions::read_timestamp`).
    IncompatibleOptions {
        /// The first option, by its field name.
        first: &'static str,
        /// The option it cannot be combined with.
        second: &'static str,
    },
    /// [`Txn::rollback_to`](crate::Txn::rollback_to) with a savepoint that
    /// is not one of this transaction's live savepoints: taken in another
    /// transaction, or discarded by rolling back to an earlier one.
    UnknownSavepoint,
    /// The transaction already has a read timestamp.
    ReadTimestampAlreadySet {
        /// The read timestamp it has.
        current: Timestamp,
    },
    /// A commit timestamp at or below the stable timestamp.
    CommitTimestampNotAfterStable {
        /// The rejected commit timestamp.
        commit: Timestamp,
        /// The stable timestamp it must exceed.
        stable: Timestamp,
    },
    /// A commit timestamp below the oldest timestamp.
    CommitTimestampBeforeOldest {
        /// The rejected commit timestamp.
        commit: Timestamp,
        /// The oldest timestamp.
        oldest: Timestamp,
    },
    /// A commit timestamp below the transaction's read timestamp.
    CommitTimestampBeforeRead {
        /// The rejected commit timestamp.
        commit: Timestamp,
        /// The transaction's read timestamp.
        read: Timestamp,
    },
    /// A second, different commit timestamp for the same transaction.
    CommitTimestampAlreadySet {
        /// The commit timestamp it has.
        current: Timestamp,
    },
    /// A durable timestamp on a transaction that was not prepared.
    DurableTimestampWithoutPrepare {
        /// The rejected durable timestamp.
        durable: Timestamp,
    },
    /// A durable timestamp below the commit timestamp.
    DurableTimestampBeforeCommit {
        /// The rejected durable timestamp.
        durable: Timestamp,
        /// The commit timestamp.
        commit: Timestamp,
    },
    /// A global timestamp would move backwards.
    TimestampMovedBackwards {
        /// Which global timestamp.
        role: TimestampRole,
        /// The requested value.
        requested: Timestamp,
        /// The current value.
        current: Timestamp,
    },
    /// Oldest would pass stable.
    OldestAfterStable {
        /// The oldest timestamp after the update.
        oldest: Timestamp,
        /// The stable timestamp after the update.
        stable: Timestamp,
    },
    /// Another transaction updated the key first, or updated it after this
    /// transaction's snapshot. The transaction must roll back.
    WriteConflict {
        /// The key.
        key: Vec<u8>,
    },
    /// The read met a prepared update whose prepare timestamp is at or below
    /// the read timestamp. Retry later or roll back.
    PrepareConflict {
        /// The key.
        key: Vec<u8>,
    },
    /// A serializable transaction (or a snapshot-isolation one's
    /// [`Txn::get_for_update`](crate::Txn::get_for_update)) read `key`,
    /// and at its commit or prepare the key has a newer version than the
    /// one it read: committed after its snapshot, or still in progress or
    /// prepared. The transaction was rolled back; retry it.
    SerializationConflict {
        /// The key.
        key: Vec<u8>,
    },
    /// A serializable transaction scanned the range from `start` to `end`,
    /// and at its commit or prepare `key`, inside it, has a newer version
    /// than the scan saw (an insert, update or delete since its snapshot,
    /// or one in progress or prepared). The transaction was rolled back;
    /// retry it.
    RangeConflict {
        /// The scanned range's lower bound.
        start: std::ops::Bound<Vec<u8>>,
        /// The scanned range's upper bound (where the scan stopped).
        end: std::ops::Bound<Vec<u8>>,
        /// The key that changed.
        key: Vec<u8>,
    },
    /// A serializable transaction wrote `key`, which a prepared
    /// transaction (serializable, or with a tracked read) read, or which
    /// lies inside a range it scanned, before that transaction resolved.
    /// The writer was rolled back; retry it once the prepared transaction
    /// has resolved.
    PreparedReadConflict {
        /// The key.
        key: Vec<u8>,
    },
    /// A serializable commit timestamp below the last timestamped
    /// serializable commit's (an untimestamped commit, `commit` 0, is
    /// below every timestamp). The transaction stays open: commit it at
    /// `last` or above, or roll it back.
    SerializableTimestampOrder {
        /// The rejected commit timestamp (`Timestamp::NONE`: untimestamped).
        commit: Timestamp,
        /// The last timestamped serializable commit's timestamp.
        last: Timestamp,
    },
    /// A write in a read-only transaction (`TxnOptions::read_only`,
    /// `read_at_stable`, or ignoring prepared updates without allowing writes).
    ReadOnlyTransaction,
    /// The transaction hit a conflict on a write and must roll back.
    MustRollBack,
    /// A key longer than `EngineConfig::max_key_len`.
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value longer than `EngineConfig::max_value_len`.
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A prepare timestamp at or below the stable timestamp.
    PrepareTimestampNotAfterStable {
        /// The rejected prepare timestamp.
        prepare: Timestamp,
        /// The stable timestamp.
        stable: Timestamp,
    },
    /// A prepare timestamp below an active reader's read timestamp (the
    /// preparing transaction's own included).
    PrepareTimestampBeforeActiveRead {
        /// The rejected prepare timestamp.
        prepare: Timestamp,
        /// The active read timestamp it fell below.
        read: Timestamp,
    },
    /// A prepare timestamp below the oldest timestamp (possible only while
    /// no stable timestamp is set; otherwise stable, which is at or above
    /// oldest, rejects it first).
    PrepareTimestampBeforeOldest {
        /// The rejected prepare timestamp.
        prepare: Timestamp,
        /// The oldest timestamp.
        oldest: Timestamp,
    },
    /// A commit timestamp below the transaction's prepare timestamp.
    CommitTimestampBeforePrepare {
        /// The rejected commit timestamp.
        commit: Timestamp,
        /// The prepare timestamp.
        prepare: Timestamp,
    },
    /// A durable timestamp at or below stable on a prepared commit.
    DurableTimestampNotAfterStable {
        /// The rejected durable timestamp.
        durable: Timestamp,
        /// The stable timestamp.
        stable: Timestamp,
    },
    /// Prepare was called twice.
    AlreadyPrepared,
    /// Prepare after a commit timestamp was set.
    PrepareAfterCommitTimestamp {
        /// The commit timestamp already set.
        commit: Timestamp,
    },
    /// A prepared transaction may only commit or roll back.
    TransactionPrepared,
    /// The transaction already committed or rolled back.
    TransactionFinished,
    /// A prepared transaction committed without a commit timestamp.
    PreparedCommitNeedsTimestamp,
    /// Stable may not pass a prepared transaction's durable timestamp before
    /// that transaction resolves.
    StablePastPreparedDurable {
        /// The requested stable timestamp.
        stable: Timestamp,
        /// The prepared transaction's durable timestamp.
        durable: Timestamp,
    },
    /// A file operation of the durable engine failed. After a failed log
    /// write or sync the commit that hit it is not visible, and every later
    /// commit with writes gets this same error until the engine is
    /// reopened; reads go on. A commit that returns it is not replayed at
    /// recovery either, unless `op` is `"truncate"`: the failed write could
    /// not be cut back ([`Durability`](crate::Durability), "A commit's
    /// outcome").
    Io {
        /// The operation (`write`, `sync`, `create`, ...).
        op: &'static str,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The operating system's error kind.
        kind: std::io::ErrorKind,
        /// The operating system's message.
        message: String,
    },
    /// A log segment or checkpoint is damaged: a checksum mismatch, an
    /// impossible length, a record out of sequence, or a missing segment.
    Corrupt {
        /// The file.
        file: std::path::PathBuf,
        /// The byte offset of the damaged record (0: the file itself).
        offset: u64,
        /// What was wrong.
        reason: &'static str,
    },
    /// A log segment is in an on-disk format version this build does not
    /// read (an older one: nothing in the directory was changed).
    UnsupportedFormat {
        /// The file.
        file: std::path::PathBuf,
        /// The format version it is in.
        version: u32,
        /// The one version this build reads.
        supported: u32,
    },
    /// Another open engine (in this process or another) holds the
    /// directory's lock.
    DirectoryLocked {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// A durability option is out of bounds.
    InvalidDurabilityOption {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: String,
        /// The bound it broke.
        bound: &'static str,
    },
    /// The operation needs an engine opened on a directory
    /// (`Engine::open`), not an in-memory one.
    NotDurable,
    /// `Engine::backup` into a directory that holds files: a backup goes
    /// only into an empty or missing directory. Nothing was written.
    BackupTargetNotEmpty {
        /// The directory.
        path: std::path::PathBuf,
        /// One file in it (the first by name).
        entry: String,
    },
    /// `Engine::open` on a backup that never completed: its directory holds
    /// the `BACKUP-INCOMPLETE` marker (the backup failed, or its process or
    /// machine died during it). Nothing was changed; remove the directory
    /// and back up again.
    IncompleteBackup {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// `Engine::rollback_to_stable` found transactions that never ended
    /// (leaked with `mem::forget` together with their session, or still
    /// prepared): it cannot decide what they will be. Nothing changed.
    RollbackWithOpenTransactions {
        /// Sessions holding a snapshot or read timestamp of an open
        /// transaction.
        open: usize,
        /// Transactions with a version still in progress or prepared in
        /// the store.
        unfinished_writers: usize,
    },
    /// The operation needs a stable timestamp and none is set.
    StableNotSet,
    /// `Engine::rollback_to_stable` at `stable`, below the stable of the
    /// durable engine's last checkpoint (`checkpoint`: one taken with no
    /// stable set holds everything committed, up to its newest durable
    /// timestamp): what that checkpoint holds cannot be rolled back.
    /// Nothing changed.
    RollbackBelowCheckpoint {
        /// The stable timestamp asked for.
        stable: Timestamp,
        /// The last checkpoint's stable timestamp.
        checkpoint: Timestamp,
    },
    /// A table name the engine refuses (`Engine::create_table`,
    /// `Engine::open_table`, `Engine::drop_table`): see [`TableNameProblem`].
    InvalidTableName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        problem: TableNameProblem,
    },
    /// `Engine::create_table` with the name of a live table.
    TableExists {
        /// The name.
        name: String,
    },
    /// No live table has this name (never created, or dropped).
    TableNotFound {
        /// The name.
        name: String,
    },
    /// The table was dropped: a handle to it reads and writes nothing, and
    /// a transaction holding writes to it cannot commit.
    TableDropped {
        /// The dropped table's name.
        name: String,
    },
    /// A table handle from another engine (every engine has its own
    /// tables, even under the same name).
    ForeignTable {
        /// The table's name (in the engine it belongs to).
        name: String,
    },
    /// A [`TableOptions`](crate::TableOptions) field outside its bounds;
    /// the table is not created.
    TableOptionOutOfRange {
        /// The field, by its name in `TableOptions`.
        field: &'static str,
        /// The rejected value.
        value: usize,
        /// The largest value accepted.
        max: usize,
    },
    /// Every table id was used: an engine hands out `u32::MAX` ids over its
    /// life, and never reuses one.
    TableIdsExhausted,
    /// The operation is not available on this kind of engine.
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// Why, and what is available instead.
        reason: &'static str,
    },
}

/// What is wrong with a table name ([`Error::InvalidTableName`]). A name
/// is non-empty UTF-8 of at most
/// [`MAX_TABLE_NAME_LEN`](crate::MAX_TABLE_NAME_LEN) bytes, with no NUL
/// byte.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableNameProblem {
    /// The name is empty.
    Empty,
    /// The name is longer than the limit.
    TooLong {
        /// The name's length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The name holds a NUL byte.
    Nul {
        /// Its byte offset.
        at: usize,
    },
}

impl fmt::Display for TableNameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableNameProblem::Empty => f.write_str("is empty"),
            TableNameProblem::TooLong { len, max } => {
                write!(f, "is {len} bytes long, above the limit {max}")
            }
            TableNameProblem::Nul { at } => write!(f, "holds a NUL byte at offset {at}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Error::*;
        match self {
            ConfigOutOfRange {
                field,
                value,
                min,
                max,
            } => write!(
                f,
                "EngineConfig::{field} {value} is out of range ({min}..={max})"
            ),
            SessionTableFull { max_sessions } => {
                write!(f, "session table is full ({})", Count(*max_sessions, "session"))
            }
            TimestampOutOfRange { role, value } => write!(
                f,
                "{role} timestamp {value} is out of range (1..={})",
                Timestamp::MAX.get()
            ),
            ReadTimestampTooOld { read, oldest } => {
                write!(f, "read timestamp {read} is below the oldest timestamp {oldest}")
            }
            ReadTimestampAlreadySet { current } => {
                write!(f, "read timestamp already set to {current}; it may be set once")
            }
            CommitTimestampNotAfterStable { commit, stable } => write!(
                f,
                "commit timestamp {commit} must be after the stable timestamp {stable}"
            ),
            CommitTimestampBeforeOldest { commit, oldest } => write!(
                f,
                "commit timestamp {commit} is below the oldest timestamp {oldest}"
            ),
            CommitTimestampBeforeRead { commit, read } => write!(
                f,
                "commit timestamp {commit} is below the read timestamp {read}"
            ),
            CommitTimestampAlreadySet { current } => {
                write!(f, "commit timestamp already set to {current}")
            }
            DurableTimestampWithoutPrepare { durable } => write!(
                f,
                "durable timestamp {durable} given for a transaction that was not prepared"
            ),
            DurableTimestampBeforeCommit { durable, commit } => write!(
                f,
                "durable timestamp {durable} is below the commit timestamp {commit}"
            ),
            TimestampMovedBackwards {
                role,
                requested,
                current,
            } => write!(
                f,
                "{role} timestamp may not move backwards: {requested} < {current}"
            ),
            OldestAfterStable { oldest, stable } => write!(
                f,
                "oldest timestamp {oldest} would pass the stable timestamp {stable}"
            ),
            IncompatibleOptions { first, second } => {
                write!(f, "options {first} and {second} cannot be combined")
            }
            UnknownSavepoint => write!(
                f,
                "savepoint is not live in this transaction (taken in another, or discarded by an earlier rollback_to)"
            ),
            WriteConflict { key } => write!(f, "write conflict on key {}", KeyText(key)),
            PrepareConflict { key } => write!(f, "prepare conflict on key {}", KeyText(key)),
            SerializationConflict { key } => write!(
                f,
                "serialization conflict on key {}: it changed after this transaction read it",
                KeyText(key)
            ),
            RangeConflict { start, end, key } => write!(
                f,
                "serialization conflict on key {} inside the scanned range {}",
                KeyText(key),
                RangeText(start, end)
            ),
            PreparedReadConflict { key } => write!(
                f,
                "serialization conflict on key {}: a prepared transaction read it",
                KeyText(key)
            ),
            SerializableTimestampOrder { commit, last } => write!(
                f,
                "serializable commit timestamp {commit} is below the last serializable commit timestamp {last}"
            ),
            ReadOnlyTransaction => write!(f, "write in a read-only transaction"),
            MustRollBack => write!(f, "transaction hit a conflict and must roll back"),
            KeyTooLarge { len, max } => {
                write!(f, "key of {} exceeds the limit {max}", Count(*len, "byte"))
            }
            ValueTooLarge { len, max } => {
                write!(f, "value of {} exceeds the limit {max}", Count(*len, "byte"))
            }
            PrepareTimestampNotAfterStable { prepare, stable } => write!(
                f,
                "prepare timestamp {prepare} must be after the stable timestamp {stable}"
            ),
            PrepareTimestampBeforeActiveRead { prepare, read } => write!(
                f,
                "prepare timestamp {prepare} is below an active read timestamp {read}"
            ),
            PrepareTimestampBeforeOldest { prepare, oldest } => write!(
                f,
                "prepare timestamp {prepare} is below the oldest timestamp {oldest}"
            ),
            CommitTimestampBeforePrepare { commit, prepare } => write!(
                f,
                "commit timestamp {commit} is below the prepare timestamp {prepare}"
            ),
            DurableTimestampNotAfterStable { durable, stable } => write!(
                f,
                "durable timestamp {durable} must be after the stable timestamp {stable}"
            ),
            AlreadyPrepared => write!(f, "transaction is already prepared"),
            PrepareAfterCommitTimestamp { commit } => write!(
                f,
                "prepare after the commit timestamp {commit} was set"
            ),
            TransactionFinished => write!(f, "transaction already committed or rolled back"),
            TransactionPrepared => {
                write!(f, "prepared transaction may only commit or roll back")
            }
            PreparedCommitNeedsTimestamp => {
                write!(f, "prepared transaction needs a commit timestamp")
            }
            StablePastPreparedDurable { stable, durable } => write!(
                f,
                "stable timestamp {stable} would pass a prepared transaction's durable timestamp {durable}"
            ),
            Io {
                op,
                path,
                message,
                ..
            } => write!(f, "{op} {} failed: {message}", path.display()),
            Corrupt {
                file,
                offset,
                reason,
            } => write!(f, "{} is corrupt at byte {offset}: {reason}", file.display()),
            UnsupportedFormat {
                file,
                version,
                supported,
            } => write!(
                f,
                "{} is in log format version {version}; this build reads only version {supported}",
                file.display()
            ),
            DirectoryLocked { path } => {
                write!(f, "{} is open in another engine", path.display())
            }
            InvalidDurabilityOption {
                option,
                value,
                bound,
            } => write!(f, "durability option {option} = {value} is out of bounds ({bound})"),
            NotDurable => write!(f, "the engine is in memory (open one on a directory)"),
            BackupTargetNotEmpty { path, entry } => write!(
                f,
                "backup directory {} is not empty (it holds {entry}); a backup needs an empty or missing directory",
                path.display()
            ),
            IncompleteBackup { path } => write!(
                f,
                "{} holds a backup that never completed (it has a BACKUP-INCOMPLETE file)",
                path.display()
            ),
            RollbackWithOpenTransactions {
                open,
                unfinished_writers,
            } => write!(
                f,
                "rollback to stable needs every transaction ended: {open} session(s) hold an \
                 open transaction's snapshot, {unfinished_writers} transaction(s) have an \
                 unfinished or prepared version"
            ),
            StableNotSet => write!(f, "no stable timestamp is set"),
            RollbackBelowCheckpoint { stable, checkpoint } => write!(
                f,
                "cannot roll back to stable {}: the last checkpoint holds everything up to {}; nothing changed",
                stable.get(),
                checkpoint.get()
            ),
            InvalidTableName { name, problem } => {
                write!(f, "table name {} {problem}", KeyText(name.as_bytes()))
            }
            TableExists { name } => write!(f, "table {name:?} already exists"),
            TableNotFound { name } => write!(f, "no table named {name:?}"),
            TableDropped { name } => write!(f, "table {name:?} was dropped"),
            ForeignTable { name } => {
                write!(f, "table {name:?} belongs to another engine")
            }
            TableOptionOutOfRange { field, value, max } => write!(
                f,
                "TableOptions::{field} {value} is out of range (0..={max})"
            ),
            TableIdsExhausted => write!(
                f,
                "every table id of this engine was used ({} creates)",
                u32::MAX
            ),
            Unsupported { operation, reason } => {
                write!(f, "{operation} is not supported: {reason}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checks a caller-supplied timestamp is in `1..=Timestamp::MAX`.
pub(crate) fn check_ts(role: TimestampRole, ts: Timestamp) -> Result<Timestamp> {
    if ts.is_none() || ts > Timestamp::MAX {
        Err(Error::TimestampOutOfRange {
            role,
            value: ts.get(),
        })
    } else {
        Ok(ts)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn messages_share_one_style_and_show_keys_as_text_or_hex() {
        let e = Error::TimestampOutOfRange {
            role: TimestampRole::Commit,
            value: 0,
        };
        assert!(e
            .to_string()
            .starts_with("commit timestamp 0 is out of range (1..="));
        let e = Error::TimestampMovedBackwards {
            role: TimestampRole::Stable,
            requested: Timestamp::new(5),
            current: Timestamp::new(9),
        };
        assert_eq!(
            e.to_string(),
            "stable timestamp may not move backwards: 5 < 9"
        );
        let k = |key: &[u8]| Error::WriteConflict { key: key.to_vec() }.to_string();
        assert_eq!(k(b"k"), r#"write conflict on key "k""#);
        assert_eq!(k(&[0x00, 0xff]), "write conflict on key 0x00ff");
        assert_eq!(k(b"a\nb"), "write conflict on key 0x610a62");
        assert_eq!(k(b""), "write conflict on key 0x");
        let e = Error::IncompatibleOptions {
            first: "read_at_stable",
            second: "read_timestamp",
        };
        assert_eq!(
            e.to_string(),
            "options read_at_stable and read_timestamp cannot be combined"
        );
        let e = Error::RangeConflict {
            start: std::ops::Bound::Included(b"a".to_vec()),
            end: std::ops::Bound::Excluded(b"m".to_vec()),
            key: b"c".to_vec(),
        };
        assert_eq!(
            e.to_string(),
            r#"serialization conflict on key "c" inside the scanned range ["a", "m")"#
        );
        let e = Error::SerializableTimestampOrder {
            commit: Timestamp::new(5),
            last: Timestamp::new(9),
        };
        assert_eq!(
            e.to_string(),
            "serializable commit timestamp 5 is below the last serializable commit timestamp 9"
        );
        let e = Error::KeyTooLarge { len: 1, max: 0 };
        assert_eq!(e.to_string(), "key of 1 byte exceeds the limit 0");
        let e = Error::ValueTooLarge { len: 17, max: 16 };
        assert_eq!(e.to_string(), "value of 17 bytes exceeds the limit 16");
        let e = Error::SessionTableFull { max_sessions: 1 };
        assert_eq!(e.to_string(), "session table is full (1 session)");
        let e = Error::ConfigOutOfRange {
            field: "max_sessions",
            value: 0,
            min: 1,
            max: 65536,
        };
        assert_eq!(
            e.to_string(),
            "EngineConfig::max_sessions 0 is out of range (1..=65536)"
        );
    }
}
