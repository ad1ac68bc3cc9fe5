//! A panic in user code while a transaction is open (inside a `get_with` or
//! `scan` closure, or between operations) rolls the transaction back and
//! releases its slot (invariant 12); its writes are never seen (invariant 9)
//! and the keys it wrote are writable by others without a conflict; other
//! sessions keep working.

use snapshot_engine::{CommitOptions, Engine, EngineConfig, Error, Timestamp, TxnOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};

const SLOTS: usize = 2;

fn engine() -> Engine {
    Engine::new(EngineConfig {
        max_sessions: SLOTS,
        ..EngineConfig::default()
    })
    .unwrap()
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent for the deliberate panics
/// of the thread that asked for quiet, and prints every other panic as
/// usual. (Swapping the process-wide hook per test would race between tests
/// running in parallel.)
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                default(info);
            }
        }));
    });
}

fn quiet<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    install_hook();
    QUIET.with(|q| q.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    r
}

/// After a panicking writer: its slot is free, no pins remain, its write to
/// `key` is invisible, and another session writes `key` with no conflict.
fn check_recovered(e: &Engine, key: &[u8], before: &Option<Vec<u8>>, rollbacks_before: u64) {
    assert_eq!(
        e.stats().sessions_open,
        0,
        "the panicking session's slot was not released"
    );
    assert!(e.pins().is_empty(), "pins left behind: {:?}", e.pins());
    assert!(
        e.stats().rollbacks > rollbacks_before,
        "the open transaction was not rolled back"
    );
    // Every slot can be claimed again.
    let mut all: Vec<_> = (0..SLOTS).map(|_| e.session().unwrap()).collect();
    assert_eq!(
        e.session().err(),
        Some(Error::SessionTableFull {
            max_sessions: SLOTS
        })
    );
    let s = &mut all[0];
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        &t.get(key).unwrap(),
        before,
        "the panicking writer's value leaked"
    );
    t.put(key, b"after")
        .expect("the key must be writable without a conflict");
    t.commit(CommitOptions::default()).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(key).unwrap(), Some(b"after".to_vec()));
}

#[test]
fn panic_inside_get_with_rolls_back_and_frees_the_slot() {
    let e = engine();
    let rb = e.stats().rollbacks;
    let r = quiet(|| {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", b"doomed").unwrap();
        t.get_with(b"k", |v| {
            assert_eq!(v, Some(&b"doomed"[..]));
            panic!("user code panics while borrowing a value");
        })
        .unwrap();
    });
    assert!(r.is_err());
    check_recovered(&e, b"k", &None, rb);
}

#[test]
fn panic_inside_a_scan_rolls_back_and_frees_the_slot() {
    let e = engine();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"a", b"0").unwrap();
        t.commit(CommitOptions::default()).unwrap();
    }
    let rb = e.stats().rollbacks;
    let r = quiet(|| {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"a", b"doomed").unwrap();
        t.scan(.., |_, _| panic!("user code panics mid-scan"))
            .unwrap();
    });
    assert!(r.is_err());
    check_recovered(&e, b"a", &Some(b"0".to_vec()), rb);
}

#[test]
fn panic_between_operations_rolls_back_a_prepared_transaction() {
    let e = engine();
    let rb = e.stats().rollbacks;
    let r = quiet(|| {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"p", b"prepared").unwrap();
        t.prepare(Timestamp::new(50)).unwrap();
        t.set_durable_timestamp(Timestamp::new(60)).unwrap();
        panic!("user code panics between prepare and commit");
    });
    assert!(r.is_err());
    // The prepared transaction's announcement is gone: stable may pass it.
    e.set_timestamps(snapshot_engine::TimestampUpdate {
        stable: Some(Timestamp::new(100)),
        ..Default::default()
    })
    .expect("a rolled-back prepared transaction must not hold stable back");
    check_recovered(&e, b"p", &None, rb);
}

#[test]
fn a_session_outliving_the_panic_is_reusable_and_others_keep_working() {
    let e = engine();
    let mut other = e.session().unwrap();
    let mut reader = other.begin(&TxnOptions::default()).unwrap();
    assert_eq!(reader.get(b"k").unwrap(), None);

    let mut s = e.session().unwrap();
    let slot = s.slot();
    let r = quiet(|| {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", b"doomed").unwrap();
        t.get_with(b"k", |_| panic!("boom")).unwrap();
    });
    assert!(r.is_err());
    // The session survived (it was borrowed, not moved, into the closure):
    // same slot, and its pins are cleared.
    assert_eq!(s.slot(), slot);
    assert!(e
        .pins()
        .iter()
        .all(|p| p.slot != slot || (p.snapshot_xmin.is_none() && p.read_ts.is_none())));
    // The other session's open transaction keeps working, and can write the
    // key the panicking transaction had written.
    assert_eq!(reader.get(b"k").unwrap(), None);
    reader.put(b"k", b"other").unwrap();
    reader.commit(CommitOptions::default()).unwrap();
    // The surviving session begins again and sees the other's commit only.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap(), Some(b"other".to_vec()));
}

#[test]
fn a_panicking_thread_releases_its_session() {
    let e = engine();
    let rb = e.stats().rollbacks;
    install_hook();
    let joined = std::thread::scope(|sc| {
        sc.spawn(|| {
            QUIET.with(|q| q.set(true));
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"t", b"doomed").unwrap();
            panic!("the worker thread dies with a transaction open");
        })
        .join()
    });
    assert!(joined.is_err());
    check_recovered(&e, b"t", &None, rb);
}
