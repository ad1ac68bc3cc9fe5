//! The bundled store: the first user of the public machinery layer
//! (`crate::machinery`), which it reaches only through its public API.
//!
//! An index of keys (`raw/index.rs`: a hash table for point reads, a
//! skiplist for ordered scans) leading to each key's version chain
//! (`raw/chain.rs`). Keys are never removed, only their versions pruned
//! (DESIGN.md, "Boundaries"). Every unsafe block of the store lives in
//! `raw/`; the rest of the crate uses the safe API this module and
//! `raw/writes.rs` give (see `raw/mod.rs` for the boundary).

pub(crate) mod raw;

use crate::machinery::epoch::Collector;
use crate::machinery::{Horizon, ReadView};
pub(crate) use raw::chain::rollback_to_stable::RolledBack;
pub(crate) use raw::chain::{Found, Pruned};
pub(crate) use raw::index::Index;
pub(crate) use raw::writes::{Completed, WriteSet};

/// The key-value store: index, collector, and freed-version count.
pub(crate) struct Store {
    pub(crate) index: Index,
    pub(crate) collector: Collector,
    pub(crate) freed: std::sync::Arc<crate::sync::AtomicU64>,
}

impl Store {
    pub(crate) fn new() -> Store {
        Store {
            index: Index::new(),
            collector: Collector::new(),
            freed: std::sync::Arc::new(crate::sync::AtomicU64::new(0)),
        }
    }

    /// Reads `key` with `view`: `f` gets what the read found (borrowed
    /// under an epoch guard held while it runs) and the versions the read
    /// examined. Loads only: no lock, no shared read-modify-write.
    #[inline]
    pub(crate) fn read<R>(
        &self,
        key: &[u8],
        view: &ReadView<'_>,
        f: impl FnOnce(Found<'_>, u64) -> R,
    ) -> R {
        let guard = self.collector.pin();
        let mut examined = 0;
        let found = match self.index.get(key, &guard) {
            Some(e) => e.read_counted(view, &guard, &mut examined),
            None => Found::Absent,
        };
        f(found, examined)
    }

    /// Reads every key of `keys` with `view`, in batches whose cache misses
    /// overlap (slots, then nodes, then head versions requested before the
    /// first read): `f(i, found, examined)` runs for each key in order,
    /// under one epoch guard per call, until it returns false. Loads only.
    #[inline]
    pub(crate) fn read_many<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        view: &ReadView<'_>,
        mut f: impl FnMut(usize, Found<'_>, u64) -> bool,
    ) {
        let guard = self.collector.pin();
        self.index.get_batch(keys, &guard, |i, e| {
            let mut examined = 0;
            let found = match e {
                Some(e) => e.read_counted(view, &guard, &mut examined),
                None => Found::Absent,
            };
            f(i, found, examined)
        });
    }

    /// Prunes every key's chain to `horizon` and moves its finger up to
    /// `stable`, then hands this thread's retired memory on.
    pub(crate) fn collect(&self, horizon: Horizon, stable: crate::ts::Timestamp) -> Pruned {
        let stable = stable.get();
        let guard = self.collector.pin();
        let mut out = Pruned::default();
        self.index.for_each(&guard, |e| {
            let n = e.prune(horizon, stable, &self.collector, &guard, || self.on_free());
            out.cut += n.cut;
            out.examined += n.examined;
        });
        // What was just retired sits in this thread's deferred bag until it
        // fills; hand it on so it is freed without later writes here.
        self.collector.flush(&guard);
        out
    }

    /// Rollback to stable's store half: removes every committed version
    /// `remove` picks (given its status and commit timestamp) from every
    /// chain and rebuilds the chains it changed (`raw/chain/rollback_to_stable.rs`).
    /// `&mut self`: no reader, writer or pruner can be in the store.
    pub(crate) fn rollback_to_stable(
        &mut self,
        stable: crate::ts::Timestamp,
        state: impl Fn(&crate::machinery::VersionStatus) -> crate::machinery::VersionState,
        remove: impl Fn(&crate::machinery::VersionStatus, crate::ts::Timestamp) -> bool,
    ) -> RolledBack {
        let on_free = self.on_free();
        raw::chain::rollback_to_stable::rebuild(
            &mut self.index,
            &self.collector,
            stable.get(),
            state,
            remove,
            on_free,
        )
    }

    /// Calls `f` with every version linked in any chain.
    pub(crate) fn for_each_version(&self, f: impl FnMut(&crate::machinery::VersionStatus)) {
        let guard = self.collector.pin();
        raw::chain::rollback_to_stable::for_each_version(&self.index, &guard, f);
    }

    /// The versions linked in `key`'s chain (0: never written).
    pub(crate) fn chain_len(&self, key: &[u8]) -> usize {
        let guard = self.collector.pin();
        self.index
            .get(key, &guard)
            .map_or(0, |e| e.chain_len(&guard))
    }

    /// A callback for the collector that counts freed versions.
    pub(crate) fn on_free(&self) -> impl Fn(u64) + Send + 'static {
        let freed = self.freed.clone();
        move |n| {
            // Relaxed: a statistic.
            freed.fetch_add(n, crate::sync::Ordering::Relaxed);
        }
    }
}
