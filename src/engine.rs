//! [`Engine`] and [`Session`]: the safe public face of the machinery, the
//! store and the session table.

use crate::config::{EngineConfig, TimestampKind, TimestampUpdate, TxnOptions};
use crate::error::Result;
use crate::lockfree::LockFree;
use crate::protocol::Protocol;
use crate::raw::chain::{tails, KeyEntry, Tails, Version};
use crate::snapshot::Snapshot;
use crate::stats::{Counters, Stats};
use crate::store::Store;
use crate::sync::Ordering;
use crate::ts::Timestamp;
use crate::txn::Txn;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;

/// The transaction engine: snapshot machinery, session table, timestamps and
/// the MVCC key-value store. `Send + Sync`; share it by reference or `Arc`.
///
/// `P` is the snapshot machinery: [`LockFree`] unless you are benchmarking
/// against the lock baseline.
pub struct Engine<P: Protocol = LockFree> {
    pub(crate) proto: P,
    pub(crate) store: Store,
    /// One block per slot, plus one for the engine's own work.
    pub(crate) counters: Box<[CachePadded<Counters>]>,
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

/// Who pins history, from [`Engine::pins`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionPin {
    /// The session's slot.
    pub slot: usize,
    /// The xmin of the snapshot it reads with (`None`: no transaction).
    pub snapshot_xmin: Option<u64>,
    /// Its read timestamp, if any.
    pub read_ts: Option<Timestamp>,
    /// How many transactions have completed since its snapshot's xmin
    /// (how far it holds back id-based pruning).
    pub xmin_lag: u64,
    /// How far its read timestamp is below the oldest timestamp's floor
    /// (how far it holds back timestamp-based pruning; 0 if not below).
    pub ts_lag: u64,
}

impl<P: Protocol> Engine<P> {
    /// An engine on machinery `P`.
    ///
    /// # Panics
    /// If `config.max_sessions` is 0.
    pub fn with_machinery(config: EngineConfig) -> Engine<P> {
        assert!(config.max_sessions > 0, "max_sessions must be at least 1");
        Engine {
            proto: P::new(&config),
            store: Store::new(),
            counters: (0..=config.max_sessions)
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            config,
        }
    }

    /// Opens a session: claims a slot in the session table, released when
    /// the session drops. Use one session per thread.
    ///
    /// A full table is [`Error::SessionTableFull`](crate::Error::SessionTableFull).
    pub fn session(&self) -> Result<Session<'_, P>> {
        let slot = self.proto.open_session()?;
        Ok(Session {
            engine: self,
            slot,
            snap: Snapshot::default(),
            writes: Vec::new(),
            commits: 0,
            tails: tails(),
            open: OpenTxn::default(),
            _not_sync: PhantomData,
        })
    }

    /// Sets global timestamps, with WiredTiger's rules: oldest and stable
    /// never move backwards and oldest never passes stable; stable never
    /// passes a prepared transaction's announced durable timestamp. Raising
    /// stable waits for commits in flight at or below it.
    pub fn set_timestamps(&self, update: TimestampUpdate) -> Result<()> {
        self.proto.set_timestamps(&update)
    }

    /// Reports a global timestamp (`None` if it is not set / no reader).
    pub fn query_timestamp(&self, kind: TimestampKind) -> Option<Timestamp> {
        self.proto.query_timestamp(kind)
    }

    /// Sums every session's counters.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.counters.iter() {
            s.add(c);
        }
        s.versions_freed = self.store.freed.load(Ordering::Relaxed);
        s.read_path_rmw = crate::sync::thread_rmw_count().map(|_| s.read_rmw_raw);
        s.sessions_open = self.proto.sessions_open();
        self.proto.add_stats(None, &mut s);
        s
    }

    /// Recomputes the reclaim horizon and prunes every key's version chain
    /// to it. Writers prune the keys they write as they commit; call this to
    /// give memory back after a long reader ends when the keys it pinned are
    /// no longer written.
    pub fn collect(&self) {
        let ctr = &self.counters[self.config.max_sessions];
        self.proto.advance_horizon(ctr);
        let h = self.proto.horizon();
        let (_, stable) = self.proto.oldest_stable();
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
        ctr.versions_pruned.bump(pruned);
        ctr.commit_versions_examined.bump(examined);
    }

    /// The pins every open session holds: which sessions hold history back,
    /// and by how much.
    pub fn pins(&self) -> Vec<SessionPin> {
        let h = self.proto.horizon();
        let floor_xmin = self.proto.current_xmin();
        let (oldest, _) = self.proto.oldest_stable();
        self.proto
            .pins()
            .into_iter()
            .map(|(slot, x, r)| SessionPin {
                slot,
                snapshot_xmin: (x != 0).then_some(x),
                read_ts: Timestamp::new(r).to_option(),
                xmin_lag: if x != 0 {
                    floor_xmin.saturating_sub(x)
                } else {
                    0
                },
                ts_lag: if r != 0 {
                    oldest.get().max(h.ts).saturating_sub(r)
                } else {
                    0
                },
            })
            .collect()
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
}

/// What a session knows of its open transaction.
#[derive(Clone, Copy, Default)]
pub(crate) struct OpenTxn {
    /// A transaction began and has not ended.
    pub(crate) live: bool,
    /// Its id (0: none yet).
    pub(crate) id: u64,
    /// It prepared (its id already left the running set).
    pub(crate) prepared: bool,
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
    pub(crate) engine: &'e Engine<P>,
    pub(crate) slot: usize,
    /// The cached snapshot, reused while the descriptor generation is
    /// unchanged.
    pub(crate) snap: Snapshot,
    /// The open transaction's writes (buffer reused across transactions).
    pub(crate) writes: Vec<WriteRec>,
    /// Commits since the last horizon refresh.
    pub(crate) commits: u32,
    /// Pruned chain tails not yet handed to the collector.
    pub(crate) tails: Tails,
    /// The transaction open on this session, if any (to recover one that
    /// was leaked with `mem::forget`).
    pub(crate) open: OpenTxn,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the raw pointers in `writes` point into the engine's store, which
// is Sync and outlives the session ('e); they are only dereferenced by the
// session's own open transaction, which the borrow checker confines to the
// thread holding `&mut Session`. Moving the session moves that exclusive
// access with it. Everything else in a Session is Send.
unsafe impl<P: Protocol> Send for Session<'_, P> {}

impl<'e, P: Protocol> Session<'e, P> {
    /// Begins a transaction.
    #[inline]
    pub fn begin(&mut self, options: &TxnOptions) -> Result<Txn<'_, 'e, P>> {
        Txn::begin(self, options)
    }

    /// This session's slot in the session table.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The engine this session belongs to.
    pub fn engine(&self) -> &'e Engine<P> {
        self.engine
    }

    /// This session's own counters (every transaction it ran, since its
    /// slot was first used; blocks are never reset). `read_path_rmw` and
    /// `versions_freed` are engine-wide and left at their defaults here.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        s.add(self.ctr());
        self.engine.proto.add_stats(Some(self.slot), &mut s);
        s
    }

    #[inline]
    pub(crate) fn ctr(&self) -> &'e Counters {
        &self.engine.counters[self.slot]
    }
}

impl<P: Protocol> Drop for Session<'_, P> {
    fn drop(&mut self) {
        // Invariant 12: every slot is released exactly once; an open
        // transaction borrows the session, so it has already ended.
        if self.open.live {
            crate::txn::recover_leaked(self);
        }
        let store = &self.engine.store;
        let guard = store.rc.pin();
        self.tails.flush(&store.rc, &guard, store.on_free());
        drop(guard);
        self.engine.proto.close_session(self.slot);
    }
}
