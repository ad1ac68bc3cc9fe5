//! Your own storage on the machinery layer: a deliberately simple versioned
//! map (one `RwLock` around a `BTreeMap` of version lists) that gets
//! snapshots, read timestamps, prepare, write conflicts and pruning from
//! `snapshot_engine::machinery`. `tests.rs` beside it runs the
//! bank-transfer invariant on it (`cargo test --example own_storage`).
//!
//! `cargo run --release --example own_storage`

use snapshot_engine::machinery::{Completion, Transaction, TxnManager};
use snapshot_engine::machinery::{VersionState, VersionStatus, Visibility, WriteCheck};
use snapshot_engine::{CommitOptions, Error, Result, Timestamp, TimestampUpdate, TxnOptions};
use std::collections::BTreeMap;
use std::sync::RwLock;

/// One version: the machinery's status plus our value (`None`: deleted).
pub struct UserVersion {
    status: VersionStatus,
    value: Option<Vec<u8>>,
}

/// Key -> versions, oldest first.
#[derive(Default)]
pub struct VersionedMap {
    map: RwLock<BTreeMap<Vec<u8>, Vec<UserVersion>>>,
}

/// A transaction on the map: the machinery's handle plus the keys it wrote
/// (the map finds its versions there by writer id).
pub struct Tx<'s, 'm> {
    pub txn: Transaction<'s, 'm>,
    writes: Vec<Vec<u8>>,
}

impl<'s, 'm> Tx<'s, 'm> {
    pub fn new(txn: Transaction<'s, 'm>) -> Self {
        Tx {
            txn,
            writes: Vec::new(),
        }
    }
}

impl VersionedMap {
    /// The value `txn` sees under `key`.
    pub fn get(&self, tx: &mut Tx, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let view = tx.txn.read_view()?;
        let map = self.map.read().unwrap();
        for v in map.get(key).into_iter().flatten().rev() {
            match view.visibility(&v.status) {
                Visibility::Visible => return Ok(v.value.clone()),
                Visibility::PrepareConflict => {
                    return Err(Error::PrepareConflict { key: key.to_vec() })
                }
                Visibility::Skip => {}
            }
        }
        Ok(None)
    }

    /// Writes `value` under `key` (first updater wins).
    pub fn put(&self, tx: &mut Tx, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let (status, view) = tx.txn.new_version()?;
        let mut map = self.map.write().unwrap();
        let versions = map.entry(key.to_vec()).or_default();
        let check = versions.iter().rev().map(|v| view.write_check(&v.status));
        if check.into_iter().find(|c| *c != WriteCheck::Skip) == Some(WriteCheck::Conflict) {
            drop(map);
            tx.txn.mark_write_conflict();
            return Err(Error::WriteConflict { key: key.to_vec() });
        }
        let value = value.map(<[u8]>::to_vec);
        versions.push(UserVersion { status, value });
        tx.writes.push(key.to_vec());
        Ok(())
    }

    /// Flips every version `writes` names, for commit, prepare or rollback
    /// (`flip` skips versions of other writers).
    fn flip_all(&self, writes: &[Vec<u8>], done: &Completion<'_>) {
        let map = self.map.read().unwrap();
        for key in writes {
            for v in &map[key] {
                done.flip(&v.status);
            }
        }
    }

    /// Commits `txn`; on an error from a refused timestamp it stays open.
    pub fn commit(&self, tx: &mut Tx, opts: CommitOptions) -> Result<()> {
        tx.txn.commit(opts, |done| self.flip_all(&tx.writes, done))
    }

    /// Prepares `txn` at `ts`.
    pub fn prepare(&self, tx: &mut Tx, ts: u64) -> Result<Timestamp> {
        let ts = Timestamp::new(ts);
        tx.txn.prepare(ts, |done| self.flip_all(&tx.writes, done))
    }

    /// Rolls `txn` back and drops its versions.
    pub fn rollback(&self, tx: &mut Tx) -> Result<()> {
        tx.txn.rollback(|done| self.flip_all(&tx.writes, done))?;
        self.prune(tx.txn.manager());
        Ok(())
    }

    /// Drops every version nobody can read: below each key's safe point
    /// (the newest version the horizon covers), and every aborted one (also
    /// one whose transaction was dropped without `rollback`). Under
    /// the write lock no reader holds a version, so it is freed at once (a
    /// lock-free store would hand it to `machinery::epoch` instead).
    pub fn prune(&self, mgr: &TxnManager) -> usize {
        mgr.advance_horizon();
        let h = mgr.horizon();
        let mut map = self.map.write().unwrap();
        let mut freed = 0;
        for versions in map.values_mut() {
            let before = versions.len();
            if let Some(safe) = versions.iter().rposition(|v| h.covers(&v.status)) {
                versions.drain(..safe);
            }
            versions.retain(|v| mgr.version_state(&v.status) != VersionState::Aborted);
            freed += before - versions.len();
        }
        freed
    }

    /// Versions stored now (all keys).
    pub fn versions(&self) -> usize {
        self.map.read().unwrap().values().map(Vec::len).sum()
    }
}

fn at(ts: u64) -> TxnOptions {
    let read_timestamp = Some(Timestamp::new(ts));
    TxnOptions {
        read_timestamp,
        ..TxnOptions::default()
    }
}

fn text(v: Option<Vec<u8>>) -> String {
    String::from_utf8(v.unwrap_or_default()).unwrap()
}

fn main() -> Result<()> {
    let mgr = TxnManager::new(8)?;
    let map = VersionedMap::default();
    let (mut s1, mut s2) = (mgr.session()?, mgr.session()?);
    let mut put_at = |value: &[u8], ts: u64| -> Result<()> {
        let mut t = Tx::new(s1.begin(&TxnOptions::default())?);
        map.put(&mut t, b"k", Some(value))?;
        map.commit(&mut t, CommitOptions::at(ts))
    };
    put_at(b"v10", 10)?;
    put_at(b"v20", 20)?;

    // Read timestamps choose the version; a snapshot taken before 30 ignores 30.
    let r = map.get(&mut Tx::new(s2.begin(&at(15))?), b"k")?;
    println!("at 15: {}", text(r));
    let mut snap = Tx::new(s2.begin(&TxnOptions::default())?);
    snap.txn.take_snapshot()?;
    put_at(b"v30", 30)?;
    let r = map.get(&mut snap, b"k")?;
    println!("snapshot from before 30: {}", text(r));

    // First updater wins: the snapshot from before 30 may not write `k`.
    let e = map.put(&mut snap, b"k", Some(b"lost")).unwrap_err();
    println!("stale writer: {e}");
    map.rollback(&mut snap)?;
    drop(snap);

    // Prepare: a reader at or above the prepare timestamp must wait.
    let mut p = Tx::new(s1.begin(&TxnOptions::default())?);
    map.put(&mut p, b"k", Some(b"v40"))?;
    map.prepare(&mut p, 40)?;
    let e = map.get(&mut Tx::new(s2.begin(&at(45))?), b"k").unwrap_err();
    println!("reader at 45: {e}");
    p.txn.set_durable_timestamp(Timestamp::new(41))?;
    map.commit(&mut p, CommitOptions::at(40))?;
    drop(p);
    let r = map.get(&mut Tx::new(s2.begin(&at(45))?), b"k")?;
    println!("after commit at 40: {}", text(r));

    // Pruning: once oldest moves to 40, only the version at 40 is needed.
    let oldest = Some(Timestamp::new(40));
    mgr.set_timestamps(TimestampUpdate {
        oldest,
        stable: oldest,
        durable: None,
    })?;
    let (before, freed) = (map.versions(), map.prune(&mgr));
    println!(
        "pruned {freed} of {before} versions; {} left",
        map.versions()
    );
    assert_eq!(map.versions(), 1);
    Ok(())
}

#[cfg(test)]
mod tests;
