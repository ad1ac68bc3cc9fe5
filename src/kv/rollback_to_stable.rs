//! [`Engine::rollback_to_stable`]: WiredTiger's `rollback_to_stable` on a
//! running engine, and the one thing it needs that a version does not say:
//! the durable timestamp of a prepared commit.
//!
//! A version's status holds its commit timestamp. For every commit but a
//! prepared one the durable timestamp is the commit timestamp; a prepared
//! transaction may commit at `c` with durable `d > c`, and WiredTiger's rule
//! removes it when `d` is above stable even if `c` is not. So each engine
//! keeps a small table of the prepared commits whose durable timestamp is
//! above their commit timestamp: (writer id, durable timestamp). A writer id
//! is never reused, so an entry names its versions exactly, wherever they
//! are in their chains. Entries go once stable reaches their durable
//! timestamp (looked at when a new entry comes, and at each rollback). Only
//! prepared commits touch the table, under its own mutex; nothing on the
//! read path or the ordinary commit path does.

use super::engine::Engine;
use crate::durability::CheckpointReport;
use crate::error::{Error, Result};
use crate::machinery::with_machinery::Machinery;
use crate::machinery::VersionState;
use crate::ts::{Timestamp, TxnId};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};

/// The prepared commits durable above their commit timestamp, whose
/// durable timestamp stable has not reached (module docs).
#[derive(Default)]
pub(crate) struct PreparedDurable {
    entries: Mutex<HashMap<u64, Timestamp>>,
}

impl PreparedDurable {
    /// Notes that writer `id` (a prepared transaction) committed at
    /// `commit` with durable timestamp `durable`; forgets the entries
    /// `stable` has reached.
    #[cold]
    pub(crate) fn note(&self, id: TxnId, commit: Timestamp, durable: Timestamp, stable: Timestamp) {
        if durable <= commit || id == TxnId::NONE {
            return;
        }
        let mut e = self.entries.lock();
        e.retain(|_, d| *d > stable);
        e.insert(id.get(), durable);
    }

    /// The writers whose durable timestamp is above `stable`.
    fn above(&self, stable: Timestamp) -> HashSet<u64> {
        self.entries
            .lock()
            .iter()
            .filter(|&(_, &d)| d > stable)
            .map(|(&id, _)| id)
            .collect()
    }
}

/// What [`Engine::rollback_to_stable`](crate::Engine::rollback_to_stable)
/// did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RollbackReport {
    /// The stable timestamp rolled back to.
    pub stable: Timestamp,
    /// Committed versions removed from the store.
    pub versions_removed: u64,
    /// Keys whose version chain changed.
    pub keys_changed: u64,
    /// Log records dropped for good (durable engines; 0 in memory).
    pub records_dropped: u64,
    /// The checkpoint that drops them (durable engines).
    pub checkpoint: Option<CheckpointReport>,
}

impl<M: Machinery> Engine<M> {
    /// See [`Engine::rollback_to_stable`](crate::Engine::rollback_to_stable).
    pub fn rollback_to_stable(&mut self) -> Result<RollbackReport> {
        let stable = self.mgr.stable_timestamp();
        if stable.is_none() {
            return Err(Error::StableNotSet);
        }
        let open = self
            .mgr
            .pins()
            .iter()
            .filter(|p| p.snapshot_xmin.is_some() || p.read_ts.is_some())
            .count();
        let mut unfinished = HashSet::new();
        self.store.for_each_version(&self.tables.live(), |st| {
            if matches!(
                self.mgr.version_state(st),
                VersionState::InProgress | VersionState::Prepared(_)
            ) {
                unfinished.insert(st.writer());
            }
        });
        if open > 0 || !unfinished.is_empty() {
            return Err(Error::RollbackWithOpenTransactions {
                open,
                unfinished_writers: unfinished.len(),
            });
        }
        let (checkpoint, records_dropped) = match &self.durable {
            Some(d) => {
                let (r, n) = d.rollback_to_stable(stable)?;
                (Some(r), n)
            }
            None => (None, 0),
        };
        let s = stable.get();
        let prepared = self.prepared_durable.above(stable);
        let mgr = &self.mgr;
        let done = self.store.rollback_to_stable(
            &mut self.tables,
            stable,
            |st| mgr.version_state(st),
            |st, cts| cts.get() > s || prepared.contains(&st.writer().get()),
        );
        // Every entry left named a removed version, or one stable reached.
        self.prepared_durable.entries.lock().clear();
        Ok(RollbackReport {
            stable,
            versions_removed: done.versions,
            keys_changed: done.keys,
            records_dropped,
            checkpoint,
        })
    }
}
