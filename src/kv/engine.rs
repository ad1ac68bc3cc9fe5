//! [`Engine`] and [`Session`]: the bundled key-value store on the public
//! machinery layer.

use super::txn::{self, Txn};
use crate::config::{EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::error::Result;
use crate::machinery::{Count, LockFree, Protocol, SessionPin, TxnManager, TxnSession};
use crate::stats::Stats;
use crate::store::raw::chain::{tails, KeyEntry, Tails, Version};
use crate::store::Store;
use crate::sync::Ordering;
use crate::ts::Timestamp;

/// The transaction engine: snapshot machinery, session table, timestamps and
/// the MVCC key-value store. `Send + Sync`; share it by reference or `Arc`.
///
/// `P` is the snapshot machinery: [`LockFree`] unless you are benchmarking
/// against the lock baseline.
pub struct Engine<P: Protocol = LockFree> {
    pub(crate) mgr: TxnManager<P>,
    pub(crate) store: Store,
    pub(crate) config: EngineConfig,
}

impl Engine<LockFree> {
    /// A lock-free engine.
    ///
    /// # Panics
    /// If `config.max_sessions` is 0.
    pub fn new(config: EngineConfig) -> Engine<LockFree> {
        Engine::with_machinery(config)
    }
}

impl<P: Protocol> Engine<P> {
    /// An engine on machinery `P`.
    ///
    /// # Panics
    /// If `config.max_sessions` is 0.
    pub fn with_machinery(config: EngineConfig) -> Engine<P> {
        Engine {
            mgr: TxnManager::with_machinery(config.max_sessions),
            store: Store::new(),
            config,
        }
    }

    /// Opens a session: claims a slot in the session table, released when
    /// the session drops. Use one session per thread.
    ///
    /// # Errors
    /// [`Error::SessionTableFull`](crate::Error::SessionTableFull) when
    /// every slot is taken.
    pub fn session(&self) -> Result<Session<'_, P>> {
        Ok(Session {
            msess: self.mgr.session()?,
            data: SessionData {
                engine: self,
                writes: Vec::new(),
                commits: 0,
                tails: tails(),
            },
        })
    }

    /// Sets global timestamps, with WiredTiger's rules: oldest and stable
    /// never move backwards and oldest never passes stable; stable never
    /// passes a prepared transaction's announced durable timestamp. Raising
    /// stable waits for commits in flight at or below it.
    ///
    /// # Errors
    /// A timestamp out of range or moving backwards, oldest after stable, or
    /// stable past a prepared transaction's durable timestamp; nothing
    /// changes.
    pub fn set_timestamps(&self, update: TimestampUpdate) -> Result<()> {
        self.mgr.set_timestamps(update)
    }

    /// Reports a global timestamp (`None` if it is not set / no reader).
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        self.mgr.query_timestamp(kind)
    }

    /// Sums every session's counters.
    pub fn stats(&self) -> Stats {
        let mut s = self.mgr.stats();
        s.versions_freed = self.store.freed.load(Ordering::Relaxed);
        s
    }

    /// Recomputes the reclaim horizon and prunes every key's version chain
    /// to it. Writers prune the keys they write as they commit; call this to
    /// give memory back after a long reader ends when the keys it pinned are
    /// no longer written.
    pub fn collect(&self) {
        self.mgr.advance_horizon();
        let h = self.mgr.horizon();
        let stable = self.mgr.stable_timestamp();
        let guard = self.store.rc.pin();
        let (mut pruned, mut examined) = (0, 0);
        self.store.index.for_each(&guard, |e| {
            let n = e.prune(h, stable.get(), &self.store.rc, &guard, || {
                self.store.on_free()
            });
            pruned += n.cut;
            examined += n.examined;
        });
        // What was just retired sits in this thread's deferred bag until it
        // fills; hand it on so it is freed without later writes here.
        self.store.rc.flush(&guard);
        self.mgr.count(Count::VersionsPruned, pruned);
        self.mgr.count(Count::CommitVersionsExamined, examined);
    }

    /// The pins every open session holds: which sessions hold history back,
    /// and by how much.
    pub fn pins(&self) -> Vec<SessionPin> {
        self.mgr.pins()
    }

    /// The versions in `key`'s chain (pruned ones excluded), for tests and
    /// diagnostics; 0 if the key was never written.
    pub fn chain_len(&self, key: &[u8]) -> usize {
        let guard = self.store.rc.pin();
        self.store
            .index
            .get(key, &guard)
            .map_or(0, |e| e.chain_len(&guard))
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The transaction manager underneath (the public machinery layer).
    pub fn manager(&self) -> &TxnManager<P> {
        &self.mgr
    }
}

/// A write recorded for commit or rollback.
pub(crate) struct WriteRec {
    pub(crate) entry: *const KeyEntry,
    pub(crate) version: *mut Version,
}

/// A session: one slot in the session table. Begin transactions on it, one
/// at a time. `Send` (move it to the thread that uses it) but not `Sync`.
///
/// ```compile_fail
/// fn is_sync<T: Sync>() {}
/// is_sync::<snapshot_engine::Session<'static>>();
/// ```
pub struct Session<'e, P: Protocol = LockFree> {
    pub(crate) msess: TxnSession<'e, P>,
    pub(crate) data: SessionData<'e, P>,
}

/// The store's half of a session, borrowed by its open [`Txn`].
pub(crate) struct SessionData<'e, P: Protocol> {
    pub(crate) engine: &'e Engine<P>,
    /// The open transaction's writes (buffer reused across transactions).
    pub(crate) writes: Vec<WriteRec>,
    /// Commits since the last horizon refresh.
    pub(crate) commits: u32,
    /// Pruned chain tails not yet handed to the collector.
    pub(crate) tails: Tails,
}

// SAFETY: the raw pointers in `writes` point into the engine's store, which
// is Sync and outlives the session ('e); they are only dereferenced by the
// session's own open transaction, which the borrow checker confines to the
// thread holding `&mut Session`. Moving the session moves that exclusive
// access with it. Everything else in a Session is Send.
unsafe impl<P: Protocol> Send for SessionData<'_, P> {}

impl<'e, P: Protocol> Session<'e, P> {
    /// Begins a transaction.
    ///
    /// # Errors
    /// An invalid read timestamp in `options` (out of range, older than
    /// oldest without `roundup_read`, or combined with `read_at_stable`).
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Txn<'_, 'e, P>> {
        if self.msess.has_leaked() {
            txn::recover_leaked(&mut self.msess, &mut self.data);
        }
        Txn::begin(&mut self.msess, &mut self.data, options)
    }

    /// This session's slot in the session table.
    pub fn slot(&self) -> usize {
        self.msess.slot()
    }

    /// The engine this session belongs to.
    pub fn engine(&self) -> &'e Engine<P> {
        self.data.engine
    }

    /// This session's own counters (every transaction it ran, since its
    /// slot was first used; blocks are never reset). `read_path_rmw` and
    /// `versions_freed` are engine-wide and left at their defaults here.
    pub fn stats(&self) -> Stats {
        self.msess.stats()
    }
}

impl<P: Protocol> Drop for Session<'_, P> {
    fn drop(&mut self) {
        // Invariant 12: every slot is released exactly once (by the
        // machinery session, dropped after this); an open transaction
        // borrows the session, so it has already ended, unless leaked.
        if self.msess.has_leaked() {
            txn::recover_leaked(&mut self.msess, &mut self.data);
        }
        let store = &self.data.engine.store;
        let guard = store.rc.pin();
        self.data.tails.flush(&store.rc, &guard, store.on_free());
        drop(guard);
    }
}
