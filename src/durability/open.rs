//! [`Engine::open`]: a durable engine on a directory.

use super::checkpoint::State;
use super::checkpointer::{checkpoints, Opened, Stopper};
use super::commit::CommitLog;
use super::log::{io_error, Log};
use super::options::{Durability, DurabilityOptions};
use super::record::Commit;
use super::recovery::{recover_files, rollback_to_stable_files};
use crate::config::{EngineConfig, TimestampUpdate, TxnOptions};
use crate::error::{Error, Result};
use crate::kv::Engine;
use crate::machinery::with_machinery::LockFree;
use crate::sync::AtomicU64;
use crate::ts::Timestamp;
use crate::CommitOptions;
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;

/// Rebuilds the store from a checkpoint's base and the records after it,
/// through ordinary transactions on an engine that is not logging yet.
fn replay(engine: &Engine, st: &State, tail: &[Commit]) -> Result<u64> {
    let mut s = engine.session()?;
    let at = |ts: u64| CommitOptions {
        commit_ts: Timestamp::new(ts).to_option(),
        durable_ts: None,
    };
    let mut base: Vec<_> = st
        .base
        .iter()
        .filter_map(|(k, e)| Some((e.commit_ts, k, e.value.as_deref()?)))
        .collect();
    base.sort_unstable_by_key(|&(ts, ..)| ts);
    for group in base.chunk_by(|a, b| a.0 == b.0) {
        for chunk in group.chunks(1024) {
            let mut t = s.begin(&TxnOptions::default())?;
            for &(_, k, v) in chunk {
                t.put(k, v)?;
            }
            t.commit(at(chunk[0].0))?;
        }
    }
    let mut n = 0;
    for r in st.carried.iter().chain(tail) {
        let mut t = s.begin(&TxnOptions::default())?;
        // Replayed as an ordinary commit: note a prepared one's durable
        // timestamp for `rollback_to_stable`, as its commit did.
        let prepared = r.prepared.then_some((r.commit_ts, r.durable_ts));
        for w in &r.writes {
            if st.base.get(&w.key).is_some_and(|e| e.lsn > r.lsn) {
                continue;
            }
            match &w.value {
                Some(v) => t.put(&w.key, v)?,
                None => t.delete(&w.key)?,
            }
        }
        let id = t.id();
        t.commit(at(r.commit_ts))?;
        if let Some((c, d)) = prepared {
            engine.prepared_durable.note(id, c, d, 0);
        }
        n += 1;
    }
    Ok(n)
}

impl Engine<LockFree> {
    /// Opens (creating it if missing) a durable engine on directory `dir`:
    /// recovers the newest checkpoint and replays the log after it, then
    /// logs every committing write transaction there. Stable and oldest
    /// start at the checkpoint's stable timestamp
    /// ([`TimestampKind::Recovery`](crate::TimestampKind::Recovery)).
    /// What recovery found (a torn final record it dropped, a truncation)
    /// is in [`Engine::recovery_report`].
    ///
    /// A transaction that was prepared but not committed at the crash is
    /// gone: prepare is not logged; the coordinator re-drives two-phase
    /// commit.
    ///
    /// # Errors
    /// [`Error::InvalidDurabilityOption`]; [`Error::DirectoryLocked`] when
    /// another open engine (in this or another process) holds `dir`;
    /// [`Error::Corrupt`] for a damaged checkpoint, a missing segment (the
    /// newest too: the segment before it names it), a missing checkpoint,
    /// a segment cut short that a later one shows held more, or a checksum
    /// mismatch before the end of the log that no crash leaves (see
    /// [`RecoveryReport::torn_tail`]; unless `truncate_corrupt`);
    /// [`Error::UnsupportedFormat`] for a log of an older format (nothing is
    /// changed); [`Error::Io`]; an error replaying a record (a key or value
    /// over this `config`'s limits).
    pub fn open(
        dir: impl AsRef<Path>,
        config: EngineConfig,
        options: DurabilityOptions,
    ) -> Result<Engine> {
        // The config first: a bad one touches no file.
        config.validate()?;
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let fs = options.fs.clone();
        fs.create_dir_all(&dir)
            .map_err(|e| io_error("create", &dir, &e))?;
        let lock_path = dir.join("LOCK");
        let lock = fs
            .lock(&lock_path)
            .map_err(|e| io_error("lock", &lock_path, &e))?
            .ok_or(Error::DirectoryLocked { path: dir.clone() })?;
        let mut rec = recover_files(&*fs, &dir, options.truncate_corrupt)?;
        let interval = match options.durability {
            Durability::Periodic(d) => Some(d),
            _ => None,
        };
        // The log's first segment exists (synced, with its directory entry)
        // before a rollback's checkpoint names it.
        let log = Log::create(
            fs.clone(),
            &dir,
            rec.next_seq,
            rec.next_lsn,
            options.segment_bytes,
            interval,
        )?;
        if options.rollback_to_stable && rec.state.stable != 0 {
            rec.report.rolled_back = rollback_to_stable_files(&*fs, &dir, &mut rec)?;
        }
        let mut engine = Engine::with_machinery(config)?;
        let replayed = replay(&engine, &rec.state, &rec.tail)?;
        let stable = Timestamp::new(rec.state.stable);
        if !stable.is_none() {
            engine.set_timestamps(TimestampUpdate {
                oldest: Some(stable),
                stable: Some(stable),
                ..TimestampUpdate::default()
            })?;
        }
        let mut report = rec.report;
        report.records_replayed = replayed;
        let durable = Arc::new(CommitLog {
            log,
            mode: options.durability,
            fs,
            dir,
            report,
            recovery_ts: stable,
            stable: AtomicU64::new(stable.get()),
            ckpt: Mutex::new(Some(rec.state)),
            _lock: lock,
        });
        let mut opened = Opened {
            durable,
            checkpointer: None,
        };
        if let Some(every) = options.checkpoint_interval {
            let stopper = Arc::new(Stopper {
                stop: Mutex::new(false),
                cv: Condvar::new(),
            });
            let weak = Arc::downgrade(&opened.durable);
            let s = stopper.clone();
            let thread = std::thread::Builder::new()
                .name("snapshot-engine-checkpoint".into())
                .spawn(move || checkpoints(weak, s, every))
                .map_err(|e| io_error("spawn the checkpointer for", &opened.dir, &e))?;
            opened.checkpointer = Some((stopper, thread));
        }
        engine.durable = Some(opened);
        Ok(engine)
    }
}
