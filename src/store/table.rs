//! Named tables' store side: each table's state ([`TableState`]: id, name,
//! bounds, its index behind an [`IndexSlot`]), the engine's registry of
//! live tables ([`Registry`]), and [`Tb`], which names the table an
//! operation is on.
//!
//! The default table (id 0, no name) is the store's own index and never
//! drops; a named table's index is reached through its slot, which a drop
//! empties (`raw/table.rs`).

use super::raw::table::{IndexSlot, TableIndex};
use super::Store;
use crate::error::{Error, Result};
use crate::machinery::epoch::Guard;
use crate::store::Index;
use crate::sync::{AtomicU64, Mutex};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A named table's state, shared by every handle to it.
pub(crate) struct TableState {
    pub(crate) id: u32,
    pub(crate) name: Box<str>,
    /// The instance id of the engine it belongs to.
    pub(crate) engine: u64,
    pub(crate) max_key_len: usize,
    pub(crate) max_value_len: usize,
    pub(crate) slot: IndexSlot,
}

impl TableState {
    /// Has the table been dropped?
    #[inline]
    pub(crate) fn is_dropped(&self) -> bool {
        self.slot.is_retired()
    }

    pub(crate) fn dropped(&self) -> Error {
        Error::TableDropped {
            name: self.name.to_string(),
        }
    }
}

/// The table an operation is on.
#[derive(Clone, Copy)]
pub(crate) enum Tb<'a> {
    /// The default table: the store's own index.
    Default,
    /// A named table.
    Named(&'a Arc<TableState>),
}

impl<'a> Tb<'a> {
    /// The table's id (0: the default table).
    #[inline]
    pub(crate) fn id(self) -> u32 {
        match self {
            Tb::Default => 0,
            Tb::Named(t) => t.id,
        }
    }

    /// The table's key bound (`default`: the engine's).
    #[inline]
    pub(crate) fn max_key_len(self, default: usize) -> usize {
        match self {
            Tb::Default => default,
            Tb::Named(t) => t.max_key_len,
        }
    }

    /// The table's value bound (`default`: the engine's).
    #[inline]
    pub(crate) fn max_value_len(self, default: usize) -> usize {
        match self {
            Tb::Default => default,
            Tb::Named(t) => t.max_value_len,
        }
    }

    /// The table's index in `store`, for as long as `guard` is held.
    ///
    /// # Errors
    /// [`Error::TableDropped`]: a named table was dropped.
    #[inline]
    pub(crate) fn index<'g>(self, store: &'g Store, guard: &'g Guard) -> Result<&'g Index>
    where
        'a: 'g,
    {
        match self {
            Tb::Default => Ok(&store.index),
            Tb::Named(t) => t.slot.get(guard).ok_or_else(|| t.dropped()),
        }
    }
}

/// The engine's live named tables, by name. Creating and dropping take its
/// lock; reads and commits never do.
pub(crate) struct Registry {
    inner: Mutex<Live>,
}

struct Live {
    by_name: BTreeMap<Box<str>, Arc<TableState>>,
    /// The next id to hand out (ids are never reused).
    next_id: u32,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            inner: Mutex::new(Live {
                by_name: BTreeMap::new(),
                next_id: 1,
            }),
        }
    }
}

/// A named table's bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) max_key_len: usize,
    pub(crate) max_value_len: usize,
}

impl Registry {
    fn lock(&self) -> impl std::ops::DerefMut<Target = Live> + '_ {
        // Every change under the lock is one map operation (or one counter
        // store) after its checks: a panic leaves it consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates table `name` with the next id (`id: None`) or with `id`
    /// (recovery's replay; later ids follow it). `log(id)` runs under the
    /// registry's lock once the create is checked and before it is
    /// published (a durable engine logs it there, so the log holds creates
    /// and drops in the order the registry changes); its error leaves
    /// nothing created.
    ///
    /// # Errors
    /// [`Error::TableExists`]; [`Error::TableIdsExhausted`]; `log`'s.
    pub(crate) fn create(
        &self,
        name: &str,
        id: Option<u32>,
        bounds: Bounds,
        engine: u64,
        freed: &Arc<AtomicU64>,
        log: impl FnOnce(u32) -> Result<()>,
    ) -> Result<Arc<TableState>> {
        let mut live = self.lock();
        if live.by_name.contains_key(name) {
            return Err(Error::TableExists {
                name: name.to_string(),
            });
        }
        let id = match id {
            Some(id) => id,
            None if live.next_id == u32::MAX => return Err(Error::TableIdsExhausted),
            None => live.next_id,
        };
        log(id)?;
        let state = Arc::new(TableState {
            id,
            name: name.into(),
            engine,
            max_key_len: bounds.max_key_len,
            max_value_len: bounds.max_value_len,
            slot: IndexSlot::new(TableIndex::new(freed.clone())),
        });
        live.next_id = live.next_id.max(id.saturating_add(1));
        live.by_name.insert(name.into(), state.clone());
        Ok(state)
    }

    /// The live table `name`.
    ///
    /// # Errors
    /// [`Error::TableNotFound`].
    pub(crate) fn open(&self, name: &str) -> Result<Arc<TableState>> {
        self.lock()
            .by_name
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TableNotFound {
                name: name.to_string(),
            })
    }

    /// Removes the live table `name` from the registry and retires its
    /// index to `store`'s collector. `log(id)` runs under the lock first;
    /// its error leaves the table live.
    ///
    /// # Errors
    /// [`Error::TableNotFound`]; `log`'s.
    pub(crate) fn drop_table(
        &self,
        name: &str,
        store: &Store,
        log: impl FnOnce(u32) -> Result<()>,
    ) -> Result<()> {
        let mut live = self.lock();
        let Some(id) = live.by_name.get(name).map(|s| s.id) else {
            return Err(Error::TableNotFound {
                name: name.to_string(),
            });
        };
        log(id)?;
        let state = live.by_name.remove(name).expect("checked under the lock");
        // Under the lock, so a create of the same name that follows finds
        // the old one gone in both places.
        state.slot.retire(&store.collector);
        Ok(())
    }

    /// Raises the next id to hand out to at least `next` (recovery: the
    /// log's next id outlives dropped tables, whose ids are never reused).
    pub(crate) fn raise_next_id(&self, next: u64) {
        let mut live = self.lock();
        live.next_id = live.next_id.max(u32::try_from(next).unwrap_or(u32::MAX));
    }

    /// The live tables' names, in byte order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.lock().by_name.keys().map(|n| n.to_string()).collect()
    }

    /// How many live tables a transaction holds (one leaked with its
    /// session, when the caller has the engine by `&mut`).
    pub(crate) fn held(&self, store: &Store) -> usize {
        let guard = store.collector.pin();
        self.live()
            .iter()
            .filter(|t| t.slot.is_held(&guard))
            .count()
    }

    /// The live tables (a copy of the list: the lock is not held while
    /// the caller walks them).
    pub(crate) fn live(&self) -> Vec<Arc<TableState>> {
        self.lock().by_name.values().cloned().collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // The engine drops: no session (so no reader or transaction) is
        // left, and the handles users keep must not keep the data alive.
        // So they are freed now, not when the process's later pins next
        // advance the global epoch.
        let all = std::mem::take(&mut self.lock().by_name);
        for state in all.into_values() {
            state.slot.release_now(self);
        }
    }
}
