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
pub(crate) mod table;

use crate::machinery::epoch::Collector;
use crate::machinery::{Horizon, ReadView};
pub(crate) use raw::chain::rollback_to_stable::RolledBack;
pub(crate) use raw::chain::{Found, KeyEntry, Pruned};
pub(crate) use raw::index::Index;
pub(crate) use raw::writes::{Completed, WriteSet};
pub(crate) use table::{Registry, TableState, Tb};

/// The key-value store: the default table's index, and the collector and
/// freed-version count every table shares (a named table's index is
/// reached through its [`TableState`]).
pub(crate) struct Store {
    /// The default table's index.
    pub(crate) index: Index,
    pub(crate) collector: Collector,
    pub(crate) freed: std::sync::Arc<crate::sync::AtomicU64>,
    /// Committers keep their keys for the stable sweep
    /// (`EngineConfig::stable_sweep`, `raw/sweep.rs`).
    pub(crate) stable_sweep: bool,
}

impl Store {
    /// A store; `stable_sweep`: see [`Store::stable_sweep`].
    pub(crate) fn new(stable_sweep: bool) -> Store {
        Store {
            stable_sweep,
            index: Index::new(),
            collector: Collector::new(),
            freed: std::sync::Arc::new(crate::sync::AtomicU64::new(0)),
        }
    }

    /// Reads `key` of table `tb` with `view`: `f` gets what the read found
    /// (borrowed under an epoch guard held while it runs) and the versions
    /// the read examined. Loads only: no lock, no shared read-modify-write.
    ///
    /// # Errors
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    #[inline]
    pub(crate) fn read<R>(
        &self,
        tb: Tb<'_>,
        key: &[u8],
        view: &ReadView<'_>,
        f: impl FnOnce(Found<'_>, u64) -> R,
    ) -> crate::Result<R> {
        let guard = self.collector.pin();
        let index = tb.index(self, &guard)?;
        Ok(read_at(index, key, view, &guard, |found, n, _| f(found, n)))
    }

    /// As [`Store::read`], in `index` (the default table's, or a named
    /// table's that the transaction's write set holds: [`WriteSet::hold`]),
    /// also handing `f` the key's entry (`None`: never written), which
    /// lives as long as that borrow of the index (keys are never removed).
    #[inline]
    pub(crate) fn read_in<'i, R>(
        &self,
        index: &'i Index,
        key: &[u8],
        view: &ReadView<'_>,
        f: impl FnOnce(Found<'_>, u64, Option<&'i KeyEntry>) -> R,
    ) -> R {
        read_at(index, key, view, &self.collector.pin(), f)
    }

    /// Reads every key of `keys` with `view`, in batches whose cache misses
    /// overlap (slots, then nodes, then first versions requested before the
    /// first read): `f(i, found)` runs for each key in order, under one
    /// epoch guard per call, until it returns false. Returns the versions
    /// the reads examined, in all. Loads only.
    ///
    /// # Errors
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    #[inline]
    pub(crate) fn read_many<K: AsRef<[u8]>>(
        &self,
        tb: Tb<'_>,
        keys: &[K],
        view: &ReadView<'_>,
        mut f: impl FnMut(usize, Found<'_>) -> bool,
    ) -> crate::Result<u64> {
        let guard = self.collector.pin();
        let index = tb.index(self, &guard)?;
        Ok(read_many_at(index, keys, view, &guard, |i, found, _| {
            f(i, found)
        }))
    }

    /// As [`Store::read_many`], in `index` (as for [`Store::read_in`]),
    /// also handing `f` each key's entry (`None`: never written), which
    /// lives as long as that borrow of the index.
    #[inline]
    pub(crate) fn read_many_in<'i, K: AsRef<[u8]>>(
        &self,
        index: &'i Index,
        keys: &[K],
        view: &ReadView<'_>,
        f: impl FnMut(usize, Found<'_>, Option<&'i KeyEntry>) -> bool,
    ) -> u64 {
        read_many_at(index, keys, view, &self.collector.pin(), f)
    }

    /// Finishes each index's pending hash-table migration, prunes every
    /// key's chain of the default table and of `tables` (the live named
    /// ones; a table dropped meanwhile is passed over) to `horizon` and
    /// moves its finger up to `stable`, then hands this thread's retired
    /// memory on.
    pub(crate) fn collect(
        &self,
        tables: &[std::sync::Arc<TableState>],
        horizon: Horizon,
        stable: crate::ts::Timestamp,
    ) -> Pruned {
        let stable = stable.get();
        let mut out = Pruned::default();
        let default = std::iter::once(Tb::Default);
        for tb in default.chain(tables.iter().map(Tb::Named)) {
            // A guard per table: one is never held across the whole walk.
            let guard = self.collector.pin();
            let Ok(index) = tb.index(self, &guard) else {
                continue;
            };
            index.finish_migration(&self.collector, &guard);
            index.for_each(&guard, |e| {
                let n = e.prune(horizon, stable, &self.collector, &guard, || self.on_free());
                out.cut += n.cut;
                out.examined += n.examined;
            });
        }
        // What was just retired sits in this thread's deferred bag until it
        // fills; hand it on so it is freed without later writes here.
        self.collector.flush(&self.collector.pin());
        out
    }

    /// Rollback to stable's store half: removes every committed version
    /// `remove` picks (given its status and commit timestamp) from every
    /// chain of every live table and rebuilds the chains it changed
    /// (`raw/chain/rollback_to_stable.rs`). `&mut self` and `&mut` the
    /// engine's registry: no reader, writer or pruner can be in the store.
    pub(crate) fn rollback_to_stable(
        &mut self,
        registry: &mut Registry,
        stable: crate::ts::Timestamp,
        state: impl Fn(&crate::machinery::VersionStatus) -> crate::machinery::VersionState,
        remove: impl Fn(&crate::machinery::VersionStatus, crate::ts::Timestamp) -> bool,
    ) -> RolledBack {
        let on_free = self.on_free();
        let mut out = raw::chain::rollback_to_stable::rebuild(
            &mut self.index,
            &self.collector,
            stable.get(),
            &state,
            &remove,
            on_free,
        );
        for t in registry.live() {
            if let Some(index) = t.slot.get_mut(registry) {
                let done = raw::chain::rollback_to_stable::rebuild(
                    index,
                    &self.collector,
                    stable.get(),
                    &state,
                    &remove,
                    self.on_free(),
                );
                out.versions += done.versions;
                out.keys += done.keys;
            }
        }
        out
    }

    /// Calls `f` with every version linked in any chain of the default
    /// table and of `tables`.
    pub(crate) fn for_each_version(
        &self,
        tables: &[std::sync::Arc<TableState>],
        mut f: impl FnMut(&crate::machinery::VersionStatus),
    ) {
        let default = std::iter::once(Tb::Default);
        for tb in default.chain(tables.iter().map(Tb::Named)) {
            let guard = self.collector.pin();
            if let Ok(index) = tb.index(self, &guard) {
                raw::chain::rollback_to_stable::for_each_version(index, &guard, &mut f);
            }
        }
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

/// A point read of `key` in `index` under `guard`: `f` gets what it found,
/// the versions examined and the key's entry (`None`: never written).
#[inline]
fn read_at<'i, R>(
    index: &'i Index,
    key: &[u8],
    view: &ReadView<'_>,
    guard: &crate::machinery::epoch::Guard,
    f: impl FnOnce(Found<'_>, u64, Option<&'i KeyEntry>) -> R,
) -> R {
    let mut examined = 0;
    let entry = index.get_to_read(
        key,
        view.timestamp_bound().map(crate::ts::Timestamp::get),
        guard,
    );
    let found = match entry {
        Some(e) => e.read_counted(view, guard, &mut examined),
        None => Found::Absent,
    };
    f(found, examined, entry)
}

/// A batched read of `keys` in `index` under `guard` (`Index::get_batch`):
/// `f(i, found, entry)` for each key in order until it returns false.
/// Returns the versions examined by the reads `f` was handed.
#[inline]
fn read_many_at<'i, K: AsRef<[u8]>>(
    index: &'i Index,
    keys: &[K],
    view: &ReadView<'_>,
    guard: &crate::machinery::epoch::Guard,
    mut f: impl FnMut(usize, Found<'_>, Option<&'i KeyEntry>) -> bool,
) -> u64 {
    let bound = view.timestamp_bound().map(crate::ts::Timestamp::get);
    // One count for the whole batch, not one a key.
    let mut examined = 0;
    index.get_batch(keys, bound, guard, |i, e| {
        let found = match e {
            Some(e) => e.read_counted(view, guard, &mut examined),
            None => Found::Absent,
        };
        f(i, found, e)
    });
    examined
}
