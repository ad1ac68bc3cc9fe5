//! [`Engine::open`]: a durable engine on a directory. The durability layer
//! recovers the directory ([`Recovery`]) and hands back what it read; it is
//! applied here, through ordinary transactions, before the log becomes the
//! engine's.

use super::engine::Engine;
use crate::config::{CommitOptions, EngineConfig, TimestampUpdate, TxnOptions};
use crate::durability::{DurabilityOptions, Record, Recovery};
use crate::error::{Error, Result};
use crate::machinery::with_machinery::LockFree;
use crate::ts::Timestamp;
use std::path::Path;

/// Rebuilds the store from a checkpoint's base and the records after it,
/// through ordinary transactions on an engine that is not logging yet.
/// Named tables are not replayed: a directory holding one is refused.
fn replay(engine: &Engine, dir: &Path, rec: &Recovery) -> Result<u64> {
    let (st, tail) = (&rec.checkpoint, &rec.records);
    let ddl = |r: &&Record| !matches!(r, Record::Commit(_));
    if st.catalog.tables().len() > 0 || tail.iter().any(|r| ddl(&r)) {
        return Err(Error::UnsupportedFormat {
            file: dir.to_path_buf(),
            version: 3,
            supported: 2,
        });
    }
    let mut s = engine.session()?;
    let at = |ts: Timestamp| CommitOptions {
        commit_ts: ts.to_option(),
        durable_ts: None,
    };
    let mut base: Vec<_> = st
        .base
        .get(&0)
        .into_iter()
        .flatten()
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
    // Consecutive unprepared records at one commit timestamp are replayed
    // as one transaction (up to 1,024): nothing can read between them, and
    // lsn order, which each key's chain order follows (D3), is kept. A
    // prepared record stays alone: its id is noted for rollback to stable.
    let commits = tail.iter().filter_map(|r| match r {
        Record::Commit(c) => Some(c),
        _ => None,
    });
    let records: Vec<_> = st.carried.iter().chain(commits).collect();
    let mut i = 0;
    while i < records.len() {
        let first = records[i];
        let mut end = i + 1;
        if !first.prepared {
            while end < records.len()
                && end - i < 1024
                && !records[end].prepared
                && records[end].commit_ts == first.commit_ts
            {
                end += 1;
            }
        }
        let mut t = s.begin(&TxnOptions::default())?;
        for r in &records[i..end] {
            for w in &r.writes {
                if st
                    .base_entry(w.table, &w.key)
                    .is_some_and(|e| e.lsn > r.lsn)
                {
                    continue;
                }
                match &w.value {
                    Some(v) => t.put(&w.key, v)?,
                    None => t.delete(&w.key)?,
                }
            }
        }
        // Replayed as an ordinary commit: note a prepared one's durable
        // timestamp for `rollback_to_stable`, as its commit did.
        let (commit, durable) = (
            Timestamp::new(first.commit_ts),
            Timestamp::new(first.durable_ts),
        );
        let prepared = first.prepared.then_some((commit, durable));
        let id = t.id();
        t.commit(at(commit))?;
        if let Some((c, d)) = prepared {
            engine.prepared_durable.note(id, c, d, Timestamp::NONE);
        }
        i = end;
    }
    let n = records.len() as u64;
    Ok(n)
}

impl Engine<LockFree> {
    /// See [`Engine::open`](crate::Engine::open).
    ///
    /// # Errors
    /// As [`Engine::open`](crate::Engine::open).
    pub fn open(
        dir: impl AsRef<Path>,
        config: EngineConfig,
        options: DurabilityOptions,
    ) -> Result<Engine> {
        // The config first: a bad one touches no file.
        config.validate()?;
        options.validate()?;
        let rec = Recovery::open(dir.as_ref(), &options)?;
        let mut engine = Engine::with_machinery(config)?;
        let replayed = replay(&engine, dir.as_ref(), &rec)?;
        engine
            .serial
            .recovered(engine.mgr.query_timestamp(crate::TimestampKind::AllDurable));
        let stable = rec.stable();
        if !stable.is_none() {
            engine.set_timestamps(TimestampUpdate {
                oldest: Some(stable),
                stable: Some(stable),
                ..TimestampUpdate::default()
            })?;
        }
        engine.durable = Some(rec.start(replayed)?);
        Ok(engine)
    }
}
