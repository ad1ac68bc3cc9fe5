//! [`Reader`]: the follower read path, read-only transactions at a node's
//! replicated watermark.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::ReplicaError;
use super::shared::Shared;
use crate::sync::Ordering;
use crate::{Engine, Session, Table, Timestamp, TimestampKind, Txn, TxnOptions};

/// The read path of one node at its replicated watermark. Cheap to make;
/// one per reading thread.
///
/// Named tables: [`Reader::table`] opens one by name on the reader's
/// engine, and a transaction from [`Reader::begin`] reads it with
/// [`Txn::table`], at the watermark like every table. A handle belongs to
/// that engine: after [`ReplicaError::EngineReplaced`] take a new reader
/// and open the tables again (by name; ids are the same on every node and
/// across snapshots). A table exists on a node from when it applies the
/// table's create entry until it applies its drop (creates and drops are
/// not timestamped); its contents are read at the watermark.
pub struct Reader {
    shared: Arc<Shared>,
    engine: Arc<Engine>,
    gen: u64,
}

impl Reader {
    /// A reader of `shared`'s current engine.
    pub(crate) fn new(shared: Arc<Shared>) -> Reader {
        Reader {
            gen: shared.engine_gen.load(Ordering::Relaxed),
            engine: shared.engine(),
            shared,
        }
    }

    /// The engine to open sessions on for [`Reader::begin`].
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A handle to the live named table `name` on [`Reader::engine`], for
    /// [`Txn::table`] in this reader's transactions.
    ///
    /// # Errors
    /// [`ReplicaError::Engine`] with
    /// [`Error::TableNotFound`](crate::Error::TableNotFound) (not created
    /// on this node yet, or dropped) or
    /// [`Error::InvalidTableName`](crate::Error::InvalidTableName).
    pub fn table(&self, name: &str) -> Result<Table, ReplicaError> {
        Ok(self.engine.open_table(name)?)
    }

    /// The live named tables on [`Reader::engine`], in byte order.
    pub fn table_names(&self) -> Vec<String> {
        self.engine.table_names()
    }

    /// The node's watermark now (`Timestamp::NONE`: none yet).
    pub fn watermark(&self) -> Timestamp {
        self.engine
            .query_timestamp(TimestampKind::Stable)
            .unwrap_or(Timestamp::NONE)
    }

    /// Begins a read-only transaction at the node's watermark (the
    /// read-only fast path: no snapshot descriptor, no validation). If
    /// `at_least` is set (not `Timestamp::NONE`), first waits up to `wait`
    /// for the watermark to reach it (read-your-writes after a leader commit
    /// at `at_least`). Before the node has applied any watermark it waits as
    /// if `at_least` were 1.
    ///
    /// # Errors
    /// [`ReplicaError::WatermarkBehind`] naming `at_least` and the watermark
    /// when the wait ran out; [`ReplicaError::WrongEngine`] if `session` is
    /// not on [`Reader::engine`]; [`ReplicaError::EngineReplaced`] after a
    /// snapshot install (take a new reader); [`ReplicaError::Fenced`];
    /// [`ReplicaError::Engine`] from begin.
    pub fn begin<'s, 'e>(
        &self,
        session: &'s mut Session<'e>,
        at_least: Timestamp,
        wait: Duration,
    ) -> Result<Txn<'s, 'e>, ReplicaError> {
        if !std::ptr::eq(session.engine(), &*self.engine) {
            return Err(ReplicaError::WrongEngine);
        }
        if self.shared.engine_gen.load(Ordering::Relaxed) != self.gen {
            return Err(ReplicaError::EngineReplaced);
        }
        // Without a watermark the fast path would read the newest commits,
        // holes included: require one.
        let need = if at_least.is_none() {
            Timestamp::new(1)
        } else {
            at_least
        };
        if self.watermark() < need {
            self.wait_for(need, wait)?;
        }
        let txn = session.begin(&TxnOptions {
            read_at_stable: true,
            ..TxnOptions::default()
        })?;
        // After begin loaded stable: a fence stored before that stable was
        // published is seen here (the fence precedes the rollback that lets
        // stable move). `is_fenced` loads with Acquire, pairing with the
        // Release store in `fence`.
        if self.shared.is_fenced() {
            drop(txn);
            return Err(ReplicaError::Fenced {
                node: self.shared.id,
            });
        }
        Ok(txn)
    }

    fn wait_for(&self, need: Timestamp, wait: Duration) -> Result<(), ReplicaError> {
        let start = Instant::now();
        let deadline = start + wait;
        let mut g = self.shared.wm_lock.lock();
        loop {
            let w = self.watermark();
            if w >= need {
                return Ok(());
            }
            // `is_fenced`: Acquire, pairs with the Release store in `fence`.
            if self.shared.is_fenced() {
                return Err(ReplicaError::Fenced {
                    node: self.shared.id,
                });
            }
            if self.shared.engine_gen.load(Ordering::Relaxed) != self.gen {
                return Err(ReplicaError::EngineReplaced);
            }
            if Instant::now() >= deadline
                || self.shared.wm_cv.wait_until(&mut g, deadline).timed_out()
            {
                let w = self.watermark();
                if w >= need {
                    return Ok(());
                }
                return Err(ReplicaError::WatermarkBehind {
                    requested: need,
                    watermark: w,
                    waited: start.elapsed(),
                });
            }
        }
    }
}
