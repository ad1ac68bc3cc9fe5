//! Model 17 (issue 11b) — a reader settling a prepared status versus the
//! prepared transaction's commit (the prepared table, `machinery/version.rs`
//! "Orderings"; on the public machinery layer, with the user's version in
//! storage of its own).
//!
//! A transaction writes one version and prepares it at 30; then it commits
//! at 30 while a reader at read timestamp 40 judges the version. A status
//! that still says `Prepared` is settled to aborted only when its
//! transaction is no longer listed as prepared *and* no outcome was flipped
//! before it was unlisted (it was dropped). The reader must meet the
//! prepared update (a prepare conflict) or the commit (visible); it never
//! skips the version as aborted, and the commit is never overwritten. If
//! the commit unlisted itself before its flips, or the unlisting and the
//! scan were not a Release/Acquire pair, the reader could see the entry gone
//! and the word still prepared, take the transaction for a dropped one and
//! skip (and abort) a committed version.

use crate::common::{check, ts};
use loom::sync::Arc;
use loom::thread;
use snapshot_engine::machinery::{TxnManager, VersionState, VersionStatus, Visibility, WriteCheck};
use snapshot_engine::{mutant, CommitOptions, TxnOptions};
use std::sync::OnceLock;

/// The user's storage: one version, linked before the reader starts (the
/// spawn orders it; nothing else orders the two threads).
struct World {
    mgr: TxnManager,
    version: OnceLock<VersionStatus>,
}

fn model() {
    let w = Arc::new(World {
        mgr: TxnManager::new(2).unwrap(),
        version: OnceLock::new(),
    });
    let mut s = w.mgr.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let (status, _) = t.new_version().unwrap();
    assert!(w.version.set(status).is_ok());
    let status = w.version.get().unwrap();
    t.prepare(ts(30), |done| assert!(done.flip(status)))
        .unwrap();
    let reader = {
        let w = w.clone();
        thread::spawn(move || {
            let mut s = w.mgr.session().unwrap();
            let mut t = s.begin(&TxnOptions::at(40)).unwrap();
            let view = t.read_view().unwrap();
            view.visibility(w.version.get().unwrap())
        })
    };
    t.commit(CommitOptions::at(30), |done| assert!(done.flip(status)))
        .unwrap();
    drop(t);
    drop(s);
    let got = reader.join().unwrap();
    assert!(
        got != Visibility::Skip,
        "dropped-prepared settling broken: a reader at 40 skipped a version prepared and committed at 30"
    );
    assert_eq!(
        status.state(),
        VersionState::Committed(ts(30)),
        "dropped-prepared settling broken: the commit was overwritten"
    );
}

/// A writer's first-updater-wins check racing the prepare itself: the
/// version is linked (in progress) before the writer starts; then the
/// transaction prepares at 30 and commits at 30 while another transaction
/// checks the version before writing the key. The check must meet the
/// update as running or prepared (a conflict) or as committed in its
/// snapshot (allowed); it never skips it as aborted, and the commit is
/// never overwritten. If prepare listed the transaction in the prepared
/// table after its flips instead of before, a check that met `Prepared` in
/// between would find the writer unlisted, settle the status to aborted
/// and write on top: a lost update.
fn model_write_check() {
    let w = Arc::new(World {
        mgr: TxnManager::new(2).unwrap(),
        version: OnceLock::new(),
    });
    let mut s = w.mgr.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let (status, _) = t.new_version().unwrap();
    assert!(w.version.set(status).is_ok());
    let status = w.version.get().unwrap();
    let writer = {
        let w = w.clone();
        thread::spawn(move || {
            let mut s = w.mgr.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            let (_mine, view) = t.new_version().unwrap();
            view.write_check(w.version.get().unwrap())
        })
    };
    t.prepare(ts(30), |done| assert!(done.flip(status)))
        .unwrap();
    t.commit(CommitOptions::at(30), |done| assert!(done.flip(status)))
        .unwrap();
    drop(t);
    drop(s);
    let got = writer.join().unwrap();
    assert!(
        got != WriteCheck::Skip,
        "first updater wins broken: a writer's check took a prepared (not dropped) transaction's version for an aborted one"
    );
    assert_eq!(
        status.state(),
        VersionState::Committed(ts(30)),
        "first updater wins broken: the prepared commit was overwritten"
    );
}

#[test]
fn settle_versus_prepared_commit() {
    check("dropped_prepared", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "dropped-prepared settling broken")]
fn mutant_prepared_clear_relaxed() {
    check(
        "dropped_prepared/PREPARED_CLEAR_RELAXED",
        mutant::PREPARED_CLEAR_RELAXED,
        model,
    );
}

#[test]
#[should_panic(expected = "dropped-prepared settling broken")]
fn mutant_prepared_scan_relaxed() {
    check(
        "dropped_prepared/PREPARED_SCAN_RELAXED",
        mutant::PREPARED_SCAN_RELAXED,
        model,
    );
}

#[test]
#[should_panic(expected = "dropped-prepared settling broken")]
fn mutant_prepared_cleared_before_flip() {
    check(
        "dropped_prepared/PREPARED_CLEARED_BEFORE_FLIP",
        mutant::PREPARED_CLEARED_BEFORE_FLIP,
        model,
    );
}

#[test]
fn write_check_versus_prepare() {
    check(
        "dropped_prepared/write_check",
        mutant::NONE,
        model_write_check,
    );
}

#[test]
#[should_panic(expected = "first updater wins broken")]
fn mutant_prepared_published_after_flip() {
    check(
        "dropped_prepared/write_check/PREPARED_PUBLISHED_AFTER_FLIP",
        mutant::PREPARED_PUBLISHED_AFTER_FLIP,
        model_write_check,
    );
}
