//! Your own storage on the machinery layer: a deliberately simple versioned
//! map (one `RwLock` around a `BTreeMap` of version lists) that gets
//! snapshots, read timestamps, prepare, write conflicts and pruning from
//! `snapshot_engine::machinery`. `tests/own_storage.rs` runs the
//! bank-transfer invariant on it.
//!
//! `cargo run --release --example own_storage`

use snapshot_engine::machinery::{
    Protocol, Transaction, TxnManager, VersionStatus, Visibility, WriteCheck,
};
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

/// The keys a transaction wrote (the map finds its versions by writer id).
pub type WriteSet = Vec<Vec<u8>>;

impl VersionedMap {
    /// The value `txn` sees under `key`.
    pub fn get<P: Protocol>(
        &self,
        txn: &mut Transaction<'_, '_, P>,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let view = txn.read_view()?;
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
    pub fn put<P: Protocol>(
        &self,
        txn: &mut Transaction<'_, '_, P>,
        writes: &mut WriteSet,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        let (status, view) = txn.new_version()?;
        let mut map = self.map.write().unwrap();
        let versions = map.entry(key.to_vec()).or_default();
        let check = versions.iter().rev().map(|v| view.write_check(&v.status));
        if check.into_iter().find(|c| *c != WriteCheck::Skip) == Some(WriteCheck::Conflict) {
            drop(map);
            txn.mark_write_conflict();
            return Err(Error::WriteConflict { key: key.to_vec() });
        }
        versions.push(UserVersion {
            status,
            value: value.map(<[u8]>::to_vec),
        });
        writes.push(key.to_vec());
        Ok(())
    }

    /// Flips every version `writes` names, for commit, prepare or rollback
    /// (`flip` skips versions of other writers).
    fn flip_all(&self, writes: &WriteSet, done: &snapshot_engine::machinery::Completion<'_>) {
        let map = self.map.read().unwrap();
        for key in writes {
            for v in &map[key] {
                done.flip(&v.status);
            }
        }
    }

    /// Commits `txn`; on an error from a refused timestamp it stays open.
    pub fn commit<P: Protocol>(
        &self,
        txn: &mut Transaction<'_, '_, P>,
        writes: &WriteSet,
        opts: CommitOptions,
    ) -> Result<()> {
        txn.commit(opts, |done| self.flip_all(writes, done))
    }

    /// Prepares `txn` at `ts`.
    pub fn prepare<P: Protocol>(
        &self,
        txn: &mut Transaction<'_, '_, P>,
        writes: &WriteSet,
        ts: u64,
    ) -> Result<Timestamp> {
        txn.prepare(Timestamp::new(ts), |done| self.flip_all(writes, done))
    }

    /// Rolls `txn` back and drops its versions.
    pub fn rollback<P: Protocol>(
        &self,
        txn: &mut Transaction<'_, '_, P>,
        writes: &WriteSet,
    ) -> Result<()> {
        txn.rollback(|done| self.flip_all(writes, done))?;
        self.prune(txn.manager());
        Ok(())
    }

    /// Drops every version nobody can read: below each key's safe point
    /// (the newest version the horizon covers), and every aborted one. Under
    /// the write lock no reader holds a version, so it is freed at once (a
    /// lock-free store would hand it to `machinery::epoch` instead).
    pub fn prune<P: Protocol>(&self, mgr: &TxnManager<P>) -> usize {
        mgr.advance_horizon();
        let h = mgr.horizon();
        let mut map = self.map.write().unwrap();
        let mut freed = 0;
        for versions in map.values_mut() {
            let before = versions.len();
            if let Some(safe) = versions.iter().rposition(|v| h.covers(&v.status)) {
                versions.drain(..safe);
            }
            versions
                .retain(|v| v.status.state() != snapshot_engine::machinery::VersionState::Aborted);
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
    TxnOptions {
        read_timestamp: Some(Timestamp::new(ts)),
        ..TxnOptions::default()
    }
}

fn main() -> Result<()> {
    let mgr = TxnManager::new(8);
    let map = VersionedMap::default();
    let (mut s1, mut s2) = (mgr.session()?, mgr.session()?);

    // Two commits of `k`, at timestamps 10 and 20.
    for (ts, v) in [(10, b"v10"), (20, b"v20")] {
        let mut t = s1.begin(&TxnOptions::default())?;
        let mut w = WriteSet::new();
        map.put(&mut t, &mut w, b"k", Some(v))?;
        map.commit(&mut t, &w, CommitOptions::at(ts))?;
    }

    // Read timestamps choose the version; a snapshot ignores later commits.
    let mut old = s2.begin(&at(15))?;
    println!(
        "at 15: {:?}",
        map.get(&mut old, b"k")?.map(String::from_utf8)
    );
    drop(old);
    let mut snap = s2.begin(&TxnOptions::default())?;
    let mut t = s1.begin(&TxnOptions::default())?;
    let mut w = WriteSet::new();
    map.put(&mut t, &mut w, b"k", Some(b"v30"))?;
    map.commit(&mut t, &w, CommitOptions::at(30))?;
    drop(t);
    println!(
        "snapshot from before 30: {:?}",
        map.get(&mut snap, b"k")?.map(String::from_utf8)
    );

    // First updater wins: the snapshot from before 30 may not write `k`.
    let mut w2 = WriteSet::new();
    let e = map
        .put(&mut snap, &mut w2, b"k", Some(b"lost"))
        .unwrap_err();
    println!("stale writer: {e}");
    map.rollback(&mut snap, &w2)?;
    drop(snap);

    // Prepare: a reader at or above the prepare timestamp must wait.
    let mut p = s1.begin(&TxnOptions::default())?;
    let mut w = WriteSet::new();
    map.put(&mut p, &mut w, b"k", Some(b"v40"))?;
    map.prepare(&mut p, &w, 40)?;
    let mut r = s2.begin(&at(45))?;
    println!(
        "reader at 45 meets the prepared update: {}",
        map.get(&mut r, b"k").unwrap_err()
    );
    drop(r);
    map.commit(
        &mut p,
        &w,
        CommitOptions {
            commit_ts: Some(Timestamp::new(40)),
            durable_ts: Some(Timestamp::new(41)),
        },
    )?;
    drop(p);
    let mut r = s2.begin(&at(45))?;
    println!(
        "after commit at 40: {:?}",
        map.get(&mut r, b"k")?.map(String::from_utf8)
    );
    drop(r);

    // Pruning: once oldest moves to 40, only the version at 40 is needed.
    mgr.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(40)),
        stable: Some(Timestamp::new(41)),
        ..TimestampUpdate::default()
    })?;
    let before = map.versions();
    let freed = map.prune(&mgr);
    println!(
        "pruned {freed} of {before} versions; {} left",
        map.versions()
    );
    assert_eq!(map.versions(), 1);
    Ok(())
}
