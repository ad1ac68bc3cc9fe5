//! The commit path of [`Txn`]: timestamps for commit, prepare, the
//! commit itself (in memory, or logged first on a durable engine) and the
//! pruning after it; [`CommitError`], a refused commit.

use super::serializable::LogTurn;
use super::txn::Txn;
use crate::config::CommitOptions;
use crate::durability::CommitMode;
use crate::error::{Error, Result};
use crate::machinery::with_machinery::{LockFree, Machinery};
use crate::machinery::{Count, VersionState};
use crate::ts::{Timestamp, TxnId};
use std::fmt;

/// The generic form of [`CommitError`](crate::CommitError).
pub struct CommitError<'s, 'e, M: Machinery = LockFree> {
    error: Error,
    txn: Option<Box<Txn<'s, 'e, M>>>,
}

impl<'s, 'e, M: Machinery> CommitError<'s, 'e, M> {
    /// See [`CommitError::error`](crate::CommitError::error).
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// See [`CommitError::into_error`](crate::CommitError::into_error).
    pub fn into_error(self) -> Error {
        self.error
    }

    /// See [`CommitError::into_txn`](crate::CommitError::into_txn).
    pub fn into_txn(self) -> Option<Txn<'s, 'e, M>> {
        self.txn.map(|t| *t)
    }
}

impl<M: Machinery> fmt::Debug for CommitError<'_, '_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommitError")
            .field("error", &self.error)
            .field("txn_open", &self.txn.is_some())
            .finish()
    }
}

impl<M: Machinery> fmt::Display for CommitError<'_, '_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<M: Machinery> std::error::Error for CommitError<'_, '_, M> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<M: Machinery> From<CommitError<'_, '_, M>> for Error {
    fn from(e: CommitError<'_, '_, M>) -> Error {
        e.error
    }
}

impl<M: Machinery> PartialEq<Error> for CommitError<'_, '_, M> {
    fn eq(&self, other: &Error) -> bool {
        self.error == *other
    }
}

impl<'s, 'e, M: Machinery> Txn<'s, 'e, M> {
    /// See [`Txn::set_commit_timestamp`](crate::Txn::set_commit_timestamp).
    pub fn set_commit_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.inner.set_commit_timestamp(ts)
    }

    /// See [`Txn::set_durable_timestamp`](crate::Txn::set_durable_timestamp).
    pub fn set_durable_timestamp(&mut self, ts: impl Into<Timestamp>) -> Result<()> {
        self.inner.set_durable_timestamp(ts)
    }

    /// See [`Txn::prepare`](crate::Txn::prepare).
    pub fn prepare(&mut self, ts: impl Into<Timestamp>) -> Result<Timestamp> {
        if self.inner.is_open() && !self.inner.is_prepared() {
            if let Some(e) = self.session.writes.dropped_table() {
                self.rollback_in_place();
                return Err(e);
            }
        }
        super::serializable::gated_prepare(self, ts.into(), |t, ts| {
            let writes = &mut t.session.writes;
            t.inner.prepare(ts, |done| {
                writes.complete(done);
            })
        })
    }

    /// See [`Txn::set_durability`](crate::Txn::set_durability).
    pub fn set_durability(&mut self, durability: crate::Durability) {
        self.session.durability = Some(CommitMode::Durability(durability));
    }

    /// See [`Txn::commit_async`](crate::Txn::commit_async).
    pub fn commit_async(mut self, opts: CommitOptions) -> Result<crate::CommitHandle> {
        self.session.durability = Some(CommitMode::Async);
        // On an error `self` drops here, which rolls it back, as `commit`
        // does.
        let lsn = super::serializable::gated(&mut self, opts, |t, opts, turn| {
            if t.session.engine.durable.is_some() {
                t.commit_logged(opts, turn)
            } else {
                t.commit_in_place(opts, turn).map(|()| None)
            }
        })?;
        Ok(match &self.session.engine.durable {
            Some(d) => d.handle(lsn),
            None => crate::CommitHandle::ready(),
        })
    }

    /// See [`Txn::commit`](crate::Txn::commit).
    #[inline]
    pub fn commit(self, opts: CommitOptions) -> Result<()> {
        self.try_commit(opts).map_err(CommitError::into_error)
    }

    /// See [`Txn::try_commit`](crate::Txn::try_commit).
    #[inline]
    pub fn try_commit(mut self, opts: CommitOptions) -> Result<(), CommitError<'s, 'e, M>> {
        // A closure inlined where `gated` calls it: into this function for
        // an ungated commit, into the gated commit's path rather than
        // called from it (a call there costs the result's copies).
        let gated = super::serializable::gated(
            &mut self,
            opts,
            #[inline(always)]
            |t, opts, turn| t.commit_in_place(opts, turn),
        );
        match gated {
            Ok(()) => Ok(()),
            Err(error) => {
                let txn = self.inner.is_open().then(|| Box::new(self));
                Err(CommitError { error, txn })
            }
        }
    }

    /// The commit itself; `turn`: a gated commit's hold on the gate, let go
    /// once the completion is installed (`kv/serializable.rs`,
    /// [`LogTurn`]). Inlined into each of its callers' paths, the gated
    /// one's included.
    #[inline(always)]
    fn commit_in_place(
        &mut self,
        opts: CommitOptions,
        turn: Option<&mut LogTurn<'_>>,
    ) -> Result<()> {
        if self.session.engine.durable.is_some() {
            return self.commit_logged(opts, turn).map(|_| ());
        }
        // One epoch guard for the whole in-memory commit: the flips, the
        // descriptor install and the pruning pin inside it, nested, so the
        // commit pays one pin's fence (and crossbeam's periodic collection
        // at most once) rather than one per step. It waits for no log, so
        // the guard holds reclamation back only for the commit's own work.
        // A gated commit (`turn`) runs inside its caller's guard, pinned
        // before the gate: it needs none of its own.
        let _pinned = turn
            .is_none()
            .then(|| self.session.engine.store.collector.pin());
        self.refuse_dropped()?;
        let id = self.inner.id();
        let prepared = self.prepared();
        let d = &mut *self.session;
        let (writes, engine) = (&mut d.writes, d.engine);
        let mut done_with = None;
        // A doomed transaction's completion is a rollback, a
        // committed one's links and flips.
        let r = self.inner.commit(opts, |done| {
            if let Some(announced) = prepared {
                note_prepared(engine, announced, id, done.outcome(), opts);
            }
            done_with = Some(writes.complete(done));
        });
        if let Some(t) = turn {
            t.completed(r.is_ok());
        }
        self.after_completion(done_with, r.is_ok());
        self.end_if_finished();
        r
    }

    /// A durable engine's commit: the log record is appended (and written,
    /// and for `Sync` synced) inside the completion, after the timestamps
    /// are validated and claimed and before any status flips, so a commit
    /// is visible only once its record is where its durability asks
    /// (invariant D1). If the log fails, nothing is flipped: the versions,
    /// still unfinished, are unlinked, and the commit returns the error.
    /// Returns the record's lsn (`None`: nothing was logged).
    ///
    /// With `turn` (a gated commit), the gate is left once the completion is
    /// installed, before the pruning; a serializable one leaves it once the
    /// record is framed, and its flips wait, after the log's wait, for
    /// every commit that left the gate earlier to complete.
    #[cold]
    #[inline(never)]
    fn commit_logged(
        &mut self,
        opts: CommitOptions,
        mut turn: Option<&mut LogTurn<'_>>,
    ) -> Result<Option<u64>> {
        let id = self.inner.id();
        let prepared = self.prepared();
        self.refuse_dropped()?;
        let d = &mut *self.session;
        let engine = d.engine;
        let log = engine.durable.as_deref().expect("a durable engine");
        if !d.writes.is_empty() {
            if let Some(e) = log.refusal() {
                return Err(e);
            }
        }
        let (writes, mode) = (&mut d.writes, d.durability);
        let mut done_with = None;
        let mut logged: Result<Option<u64>, (Error, u64)> = Ok(None);
        let r = self.inner.commit(opts, |done| {
            if let VersionState::Committed(cts) = done.outcome() {
                if !writes.is_empty() {
                    let durable = prepared.map_or(cts, |a| durable_ts(cts, a, opts));
                    let prep = prepared.is_some();
                    let appended = || {
                        if let Some(t) = turn.as_deref_mut() {
                            t.appended();
                        }
                    };
                    match log.log_commit(writes.writes(), cts, durable, prep, mode, appended) {
                        Ok(lsn) => {
                            if let Some(t) = turn.as_deref_mut() {
                                t.wait_turn();
                            }
                            logged = Ok(Some(lsn));
                        }
                        Err(e) => {
                            logged = Err((e, writes.abandon()));
                            return;
                        }
                    }
                }
            }
            if let Some(announced) = prepared {
                note_prepared(engine, announced, id, done.outcome(), opts);
            }
            done_with = Some(writes.complete(done));
        });
        if let Some(t) = turn {
            t.completed(r.is_ok() && logged.is_ok());
        }
        let lsn = match logged {
            Ok(lsn) => lsn,
            Err((e, unlinked)) => {
                self.session.writes.clear();
                self.inner.count(Count::VersionsPruned, unlinked);
                return Err(e);
            }
        };
        self.after_completion(done_with, r.is_ok());
        self.end_if_finished();
        r.map(|()| lsn)
    }

    /// Refuses the commit of an unprepared transaction that wrote to a
    /// table dropped since, rolling it back. A prepared one commits (its
    /// prepare checked the same), and its writes to a table dropped since
    /// go with the table; so does a commit whose check passed before the
    /// drop.
    ///
    /// # Errors
    /// [`Error::TableDropped`].
    #[inline]
    fn refuse_dropped(&mut self) -> Result<()> {
        if self.inner.is_prepared() {
            return Ok(());
        }
        match self.session.writes.dropped_table() {
            None => Ok(()),
            Some(e) => {
                self.rollback_in_place();
                Err(e)
            }
        }
    }

    /// After a commit: if the transaction ended, the write set lets the
    /// named tables' indexes it held go.
    #[inline]
    fn end_if_finished(&mut self) {
        if !self.inner.is_open() {
            self.session.writes.clear();
        }
    }

    /// The durable timestamp announced with `set_durable_timestamp`
    /// ([`Timestamp::NONE`]: none) if the transaction is prepared; `None`
    /// if it is not. Read before the commit, which finishes it.
    fn prepared(&self) -> Option<Timestamp> {
        self.inner
            .is_prepared()
            .then(|| self.inner.durable_timestamp())
    }

    /// After the machinery ran the commit's completion (`done`, if it
    /// did): a refused or doomed commit's versions were unlinked, so the
    /// write set is cleared; a committed one prunes the chains it wrote.
    fn after_completion(&mut self, done: Option<crate::store::Completed>, committed: bool) {
        let Some(c) = done else { return };
        if !committed {
            self.session.writes.clear();
            self.inner.count(Count::VersionsPruned, c.unlinked);
        } else if !self.session.writes.is_empty() {
            self.inner.count(Count::CommitVersionsExamined, c.examined);
            self.prune_written();
        }
    }

    /// Prunes the chains this transaction wrote, and refreshes the horizon
    /// every `horizon_refresh_commits` commits.
    fn prune_written(&mut self) {
        let d = &mut *self.session;
        let engine = d.engine;
        d.commits += 1;
        // Not a safety bound: `>` refreshes the horizon one commit later,
        // an equivalent mutant.
        if d.commits >= engine.config.horizon_refresh_commits {
            d.commits = 0;
            self.inner.session().advance_horizon();
        }
        let h = engine.mgr.horizon();
        let stable = engine.mgr.stable_timestamp();
        let n = d.writes.prune_committed(h, stable);
        self.inner.count(Count::VersionsPruned, n.cut);
        self.inner.count(Count::CommitVersionsExamined, n.examined);
    }
}

/// A prepared transaction's commit (`outcome`, before its flips): notes
/// its durable timestamp for `rollback_to_stable` when it is above the
/// commit timestamp (`kv/rollback_to_stable.rs`).
#[cold]
#[inline(never)]
fn note_prepared<M: Machinery>(
    engine: &super::Engine<M>,
    announced: Timestamp,
    id: TxnId,
    outcome: VersionState,
    opts: CommitOptions,
) {
    if let VersionState::Committed(cts) = outcome {
        let durable = durable_ts(cts, announced, opts);
        let stable = engine.mgr.stable_timestamp();
        engine.prepared_durable.note(id, cts, durable, stable);
    }
}

/// A prepared transaction's durable timestamp, committed at `cts`: the
/// commit's [`CommitOptions::durable_ts`], else the one `announced` with
/// `set_durable_timestamp`, else the commit timestamp.
fn durable_ts(cts: Timestamp, announced: Timestamp, opts: CommitOptions) -> Timestamp {
    opts.durable_ts.or(announced.to_option()).unwrap_or(cts)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::machinery::epoch::OUTER_PINS;
    use crate::{CommitOptions, Engine, EngineConfig, Timestamp, TimestampUpdate, TxnOptions};

    /// An in-memory commit pins the epoch once: its flips, the descriptor
    /// install, the horizon advance and the pruning of the chain it wrote
    /// all nest in that guard.
    #[test]
    fn an_in_memory_commit_pins_the_epoch_once() {
        let e = Engine::new(EngineConfig {
            horizon_refresh_commits: 1,
            ..EngineConfig::default()
        })
        .unwrap();
        let mut s = e.session().unwrap();
        let pins = || OUTER_PINS.with(std::cell::Cell::get);
        let mut pruned = 0;
        for ts in 1..=6u64 {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put("k", ts.to_string()).unwrap();
            let before = pins();
            t.commit(CommitOptions::at(ts)).unwrap();
            assert_eq!(pins() - before, 1, "commit at {ts}");
            e.set_timestamps(TimestampUpdate {
                oldest: Some(Timestamp::new(ts)),
                stable: Some(Timestamp::new(ts)),
                durable: None,
            })
            .unwrap();
            pruned = s.stats().versions_pruned;
        }
        assert!(pruned > 0, "the commits pruned the chain they wrote");
    }
}
