//! A transaction's write set: the versions it prepended and the keys they
//! belong to, with the safe operations that finish them (commit, prepare,
//! rollback, rollback to a savepoint) and prune their keys afterwards.
//!
//! The set holds raw pointers to its versions; it is the only holder that
//! dereferences them outside the chains, and it does so only while they
//! are still the open transaction's own (the *ownership invariant*): every
//! version in `recs` was prepended on its key by this session's open
//! transaction through [`WriteSet::write`], is still linked, and is neither
//! committed nor aborted. Such a version is freed by nobody else: pruning
//! cuts only below a committed version the horizon covers (invariant 3),
//! and only its writer unlinks an unfinished version (invariant 15).
//!
//! The invariant is kept by construction: a version enters only through
//! [`WriteSet::write`]; [`WriteSet::complete`] is the one place a version
//! stops being the transaction's own (a commit marks the set `released`
//! before its first flip, so from then on only the key entries are used;
//! a rollback takes the records out before its first unlink); and
//! [`WriteSet::rollback_to`] drops the records of what it unlinks. Key
//! entries and key bytes are plain references into an index: the default
//! table's lives until the store drops, which the `'s` borrow of the store
//! rules out; a named table's is held (an `Arc`, `raw/table.rs`) by the set
//! from the transaction's first write to, cursor on or tracked read of the
//! table until the
//! set is cleared at the transaction's end, after its records go
//! ([`WriteSet::hold`]).
//!
//! The set records each write's key (the index's bytes, no copy) beside
//! its version, so a durable commit's log record is framed from its
//! `(table, key, value)` triples ([`WriteSet::writes`]), a serializable
//! commit checks its written keys from the same records
//! ([`WriteSet::keys`]), and a rollback to a savepoint drops both at once.

use super::chain::{tails, Conflict, KeyEntry, Pruned, Tails, Version};
use super::hashindex::SlotAt;
use super::index::Index;
use super::sweep::{Sweep, PER_WRITE};
use super::table::TableIndex;
use crate::machinery::epoch::RETIRE_BATCH;
use crate::machinery::{Completion, Horizon, ReadView, VersionState, VersionStatus};
use crate::store::{Store, TableState, Tb};
use std::ptr::NonNull;
use std::sync::Arc;

/// A named table the open transaction wrote to or opened a cursor on: its
/// index, held until the set is cleared.
struct Held {
    state: Arc<TableState>,
    index: Arc<TableIndex>,
    /// The transaction wrote to it (a commit checks it was not dropped).
    wrote: bool,
}

struct Rec<'s> {
    /// The table's id (0: the default table).
    table: u32,
    /// The key's bytes as the index stores them (no copy), the index, and
    /// where the write found the key's slot.
    key: &'s [u8],
    index: &'s Index,
    at: SlotAt,
    entry: &'s KeyEntry,
    version: NonNull<Version>,
}

/// What [`WriteSet::complete`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Completed {
    /// Versions a commit's links examined.
    pub(crate) examined: u64,
    /// Versions a rollback unlinked.
    pub(crate) unlinked: u64,
}

/// The store's half of a session: the open transaction's writes (buffer
/// reused across transactions) and the pruned chain tails waiting for the
/// collector.
pub(crate) struct WriteSet<'s> {
    store: &'s Store,
    recs: Vec<Rec<'s>>,
    /// The named tables the records (and the transaction's cursors) use;
    /// cleared after `recs`.
    held: Vec<Held>,
    /// A commit began flipping: the versions are shared now (other writers
    /// may prune them), so only the key entries of `recs` are used.
    released: bool,
    /// The timestamp the last commit's versions were flipped to (0: none
    /// or untimestamped), for the stable sweep.
    committed: u64,
    /// Default-table keys committed above the stable they were pruned to,
    /// pruned again once stable passes them (`sweep.rs`).
    sweep: Sweep,
    tails: Tails,
}

// SAFETY: the version pointers are dereferenced only through `&mut self`
// (by the thread holding the session, which the borrow checker makes the
// only one), and only under the ownership invariant (module docs); the key
// entries and the store are Sync. Moving the set moves that exclusive
// access; `Tails` is Send.
unsafe impl Send for WriteSet<'_> {}
// SAFETY: through `&WriteSet` no version is dereferenced and nothing is
// changed: `&self` methods read the vectors' lengths, the records' table
// ids and key slices (index bytes, Sync), and the held tables' ids.
unsafe impl Sync for WriteSet<'_> {}

impl<'s> WriteSet<'s> {
    /// An empty write set on `store`.
    pub(crate) fn new(store: &'s Store) -> WriteSet<'s> {
        WriteSet {
            store,
            recs: Vec::new(),
            held: Vec::new(),
            released: false,
            committed: 0,
            sweep: Sweep::default(),
            tails: tails(),
        }
    }

    /// Writes recorded.
    pub(crate) fn len(&self) -> usize {
        self.recs.len()
    }

    /// No writes recorded?
    pub(crate) fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// The index of table `tb`, for as long as the open transaction runs:
    /// a named table's is held from now until the set is cleared (module
    /// docs); `wrote` marks it written.
    ///
    /// # Errors
    /// [`Error::TableDropped`](crate::Error::TableDropped).
    pub(crate) fn hold(&mut self, tb: Tb<'_>, wrote: bool) -> crate::Result<&'s Index> {
        let t = match tb {
            Tb::Default => return Ok(&self.store.index),
            Tb::Named(t) => t,
        };
        if t.is_dropped() {
            return Err(t.dropped());
        }
        let i = match self.held.iter().position(|h| h.state.id == t.id) {
            Some(i) => i,
            None => {
                let guard = self.store.collector.pin();
                let index = t.slot.hold(&guard).ok_or_else(|| t.dropped())?;
                drop(guard);
                self.held.push(Held {
                    state: t.clone(),
                    index,
                    wrote: false,
                });
                self.held.len() - 1
            }
        };
        let h = &mut self.held[i];
        h.wrote |= wrote;
        let index: *const Index = &h.index.index;
        // SAFETY: the `Arc` in `held` keeps the index alive until `clear`,
        // which forgets every record first; a transaction's borrows of the
        // result (its records, its cursors' keys, its tracked reads' kept
        // entries, used only while `holds` says so) end with it, before the
        // set is cleared for the next one.
        Ok(unsafe { &*index })
    }

    /// Does the set hold table `tb`'s index now (the default table's: always)?
    /// A borrow [`WriteSet::hold`] gave for it is good while it does.
    pub(crate) fn holds(&self, tb: Tb<'_>) -> bool {
        match tb {
            Tb::Default => true,
            Tb::Named(t) => self.held.iter().any(|h| h.state.id == t.id),
        }
    }

    /// A named table the open transaction wrote to that was dropped since,
    /// if any: its commit must fail (`kv/commit.rs`).
    pub(crate) fn dropped_table(&self) -> Option<crate::Error> {
        let h = self.held.iter().find(|h| h.wrote && h.state.is_dropped())?;
        Some(h.state.dropped())
    }

    /// Prepends a version of `key` in table `tb` holding `value` (`None`:
    /// a tombstone) with `status` (fresh from the open transaction's
    /// `new_version`, whose `view` it is checked against: first updater
    /// wins) and records it. Returns the head CAS retries.
    ///
    /// # Errors
    /// The outer error: [`Error::TableDropped`](crate::Error::TableDropped),
    /// nothing written. [`Conflict::Write`]: another transaction's update
    /// is in progress, prepared, or committed after the view's snapshot;
    /// nothing recorded.
    pub(crate) fn write(
        &mut self,
        tb: Tb<'_>,
        key: &[u8],
        status: VersionStatus,
        value: Option<&[u8]>,
        view: &ReadView<'_>,
    ) -> crate::Result<Result<u64, Conflict>> {
        debug_assert!(!self.released, "a write after commit began");
        let index = self.hold(tb, true)?;
        let store = self.store;
        let guard = store.collector.pin();
        let (stored, entry, at) = index.get_or_insert(key, &store.collector, &guard);
        Ok(
            match entry.prepend(Version::alloc(status, value), view, &guard) {
                Ok((v, retries)) => {
                    let version = NonNull::new(v).expect("prepend returns the linked version");
                    // The index's bytes, which live as long as its index (keys
                    // are never removed): recorded without a copy.
                    self.recs.push(Rec {
                        table: tb.id(),
                        key: stored,
                        index,
                        at,
                        entry,
                        version,
                    });
                    Ok(retries)
                }
                Err((_, c)) => Err(c),
            },
        )
    }

    /// Finishes every recorded version with `done`, by its outcome:
    ///
    /// * committed: links each key's previous committed version to ours
    ///   (`newer`/`stop`; the link precedes the Release flip that publishes
    ///   it, invariant 13), then flips; the set keeps the keys for
    ///   [`WriteSet::prune_committed`];
    /// * prepared: flips (the versions stay the transaction's own);
    /// * aborted: unlinks every version, newest first, while it is still in
    ///   progress or prepared, then flips them to aborted, and forgets them.
    ///
    /// Unlinking comes first because no other writer can prepend on top of
    /// an unfinished version (its conflict check refuses), so each is its
    /// chain's head once our newer versions above it are gone, and the
    /// unlink always succeeds. Flipped to aborted first, a concurrent writer
    /// of the key could skip it and prepend on top; the unlink then failed
    /// and the aborted version stayed in the chain above the safe point for
    /// as long as a reader held the horizon.
    pub(crate) fn complete(&mut self, done: &Completion<'_>) -> Completed {
        let mut out = Completed::default();
        if self.recs.is_empty() || self.released {
            // Nothing to finish (and no epoch pin: most of a read-only
            // rollback's cost).
            return out;
        }
        let store = self.store;
        match done.outcome() {
            VersionState::Committed(cts) => {
                // Released before the first flip: from it on, our versions
                // may be pruned by other writers.
                self.released = true;
                self.committed = cts.get();
                let guard = store.collector.pin();
                for w in &self.recs {
                    // SAFETY: ownership invariant (module docs): `released`
                    // was false, so every version is ours, linked and
                    // unfinished; we hold `guard`.
                    out.examined += unsafe {
                        w.entry.commit_version(w.version.as_ptr(), cts.get(), |st| {
                            done.flip(st);
                        })
                    };
                }
                drop(guard);
            }
            VersionState::Prepared(_) => {
                for w in &self.recs {
                    // SAFETY: ownership invariant; a prepared version is
                    // still unfinished, so it stays ours.
                    done.flip(&unsafe { w.version.as_ref() }.status);
                }
            }
            _ => {
                // Taken out first: whatever happens below, no record of an
                // unlinked version stays behind.
                let mut recs = std::mem::take(&mut self.recs);
                let guard = store.collector.pin();
                let flip = |recs: &[Rec<'_>]| {
                    for w in recs {
                        // SAFETY: our versions were ours and linked when
                        // `guard` was pinned; those unlinked are retired
                        // under it, so none is freed before it drops
                        // (invariant 11). Readers that loaded one before
                        // the unlink see it aborted (or still in progress:
                        // invisible).
                        done.flip(&unsafe { w.version.as_ref() }.status);
                    }
                };
                let flip_first =
                    crate::sync::mutant_on(crate::sync::mutant::ROLLBACK_FLIPS_BEFORE_UNLINK);
                if flip_first {
                    flip(&recs);
                }
                for w in recs.iter().rev() {
                    // SAFETY: ownership invariant: ours, linked, unfinished
                    // (newest first, so each is its chain's head); retired
                    // to the store's collector, which `guard` pins.
                    if unsafe {
                        w.entry
                            .unlink_head(w.version.as_ptr(), &store.collector, &guard)
                    } {
                        out.unlinked += 1;
                    }
                }
                if !flip_first {
                    flip(&recs);
                }
                drop(guard);
                recs.clear();
                self.recs = recs;
            }
        }
        out
    }

    /// The recorded writes' table ids (0: the default table) and keys, in
    /// write order (a key written twice appears twice).
    pub(crate) fn keys(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.recs.iter().map(|w| (w.table, w.key))
    }

    /// The recorded writes in write order: each write's table id (0: the
    /// default table), key and value (`None`: a tombstone), for a durable
    /// commit's log record, which is written before the commit flips (so
    /// before `released`).
    pub(crate) fn writes(
        &mut self,
    ) -> impl ExactSizeIterator<Item = (u32, &[u8], Option<&[u8]>)> + '_ {
        debug_assert!(!self.released, "writes read after commit began");
        self.recs.iter().map(|w| {
            // SAFETY: ownership invariant (module docs): not released, so
            // every version is ours, linked and unfinished, and freed by
            // nobody while `&mut self` is borrowed.
            (w.table, w.key, unsafe { w.version.as_ref() }.value())
        })
    }

    /// Unlinks every recorded version, newest first, without finishing
    /// them, and forgets them: a durable commit whose log write failed,
    /// inside its completion and before any flip. The versions are still in
    /// progress or prepared, so each is its chain's head once ours above it
    /// are gone (invariant 15); a reader that loaded one before the unlink
    /// finds it unfinished with its writer gone, which reads as aborted.
    /// Returns how many it unlinked.
    pub(crate) fn abandon(&mut self) -> u64 {
        if self.released {
            return 0;
        }
        let store = self.store;
        let guard = store.collector.pin();
        let mut unlinked = 0;
        for w in self.recs.drain(..).rev() {
            // SAFETY: ownership invariant: ours, linked, unfinished (newest
            // first, so each is its chain's head); retired to the store's
            // collector, which `guard` pins.
            if unsafe {
                w.entry
                    .unlink_head(w.version.as_ptr(), &store.collector, &guard)
            } {
                unlinked += 1;
            }
        }
        unlinked
    }

    /// Undoes the writes after the first `keep`: unlinks them newest first
    /// and forgets them. Returns how many it unlinked.
    pub(crate) fn rollback_to(&mut self, keep: usize) -> u64 {
        if self.released || keep >= self.recs.len() {
            return 0;
        }
        let store = self.store;
        let guard = store.collector.pin();
        let mut unlinked = 0;
        for w in self.recs.drain(keep..).rev() {
            // SAFETY: ownership invariant: our versions are in progress, so
            // no other writer prepends above them (its conflict check
            // refuses), and we unlink newest first, so each is its chain's
            // head here (invariant 15); retired to the store's collector,
            // which `guard` pins.
            let ok = unsafe {
                w.entry
                    .unlink_head(w.version.as_ptr(), &store.collector, &guard)
            };
            debug_assert!(ok, "an in-progress own version is its chain's head");
            unlinked += u64::from(ok);
        }
        unlinked
    }

    /// After a commit: prunes the chains written to `horizon`, moves their
    /// fingers up to `stable`, refreshes their slots' hints, keeps the
    /// default-table keys committed above `stable` and prunes again those
    /// of earlier commits that `stable` has passed since (the stable sweep,
    /// `sweep.rs`), hands full batches of cut tails to the collector, and
    /// empties the set for the next transaction. Returns the work done
    /// (nothing if no commit completed).
    pub(crate) fn prune_committed(
        &mut self,
        horizon: Horizon,
        stable: crate::ts::Timestamp,
    ) -> Pruned {
        let stable = stable.get();
        let mut out = Pruned::default();
        if !self.released {
            debug_assert!(self.recs.is_empty(), "prune before commit");
            return out;
        }
        let store = self.store;
        let guard = store.collector.pin();
        for w in &self.recs {
            let n = w.entry.cut(horizon, stable, &mut self.tails, &guard);
            // The slot's hints, for readers: the head and the version at
            // the stable just pruned to (`hashindex.rs`, `Slot`).
            w.index.hint(w.key, w.entry, w.at, &guard);
            out.cut += n.cut;
            out.examined += n.examined;
            // Equivalent mutant (`>=`: a commit exactly at stable is kept,
            // and the sweep's prune of it moves nothing).
            if store.stable_sweep && w.table == 0 && self.committed > stable {
                self.sweep.note(w.index.key_ref(w.key), self.committed);
            }
        }
        if store.stable_sweep {
            // SAFETY: the store's default index, the only one whose keys
            // were noted just above (`w.table == 0`).
            let n = unsafe {
                self.sweep.run(
                    &store.index,
                    horizon,
                    stable,
                    PER_WRITE * self.recs.len(),
                    &mut self.tails,
                    &guard,
                )
            };
            out.cut += n.cut;
            out.examined += n.examined;
        }
        // Equivalent mutant (`>`: one tail more per flush; a batch size,
        // not a safety bound).
        if self.tails.len() >= RETIRE_BATCH {
            self.tails.flush(&store.collector, &guard, store.on_free());
        }
        drop(guard);
        self.clear();
        out
    }

    /// Forgets every record (the versions stay where they are), then lets
    /// the named tables' indexes go: at the transaction's end (after a
    /// commit's pruning, a rollback, or a commit whose flips unwound).
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.recs.clear();
        self.released = false;
        self.committed = 0;
        // After the records, which borrow these indexes. Most transactions
        // hold none: skip the call that drops them.
        if !self.held.is_empty() {
            self.held.clear();
        }
    }

    /// Hands the pruned tails still held to the collector.
    pub(crate) fn flush_tails(&mut self) {
        let store = self.store;
        let guard = store.collector.pin();
        self.tails.flush(&store.collector, &guard, store.on_free());
    }
}

impl Drop for WriteSet<'_> {
    fn drop(&mut self) {
        self.flush_tails();
    }
}
