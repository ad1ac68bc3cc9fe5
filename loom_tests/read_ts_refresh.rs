//! Model 4 — setting a read timestamp after begin while a commit lands
//! (invariants 5 cache validity and 7 real-time order).
//!
//! `k = v10` is committed at 10. A writer commits `k` at `cts` and then
//! raises a flag. A reader begins, loads the flag, sets read timestamp 25
//! (which takes a fresh snapshot) and reads `k` twice. The commit is seen
//! if and only if its timestamp is at or below 25 and the snapshot taken at
//! `set_read_timestamp` includes it: if the flag was up before the refresh
//! it must be seen (cts <= 25), it is never seen above 25, and the two reads
//! agree (the snapshot is fixed at the refresh).
//!
//! The reader takes its snapshot right after begin (`take_snapshot`;
//! otherwise it would be taken with the read timestamp), so
//! `set_read_timestamp` refreshes a snapshot it already has: the path where
//! a skipped generation bump hands it back stale. The lazy first take from
//! a warm session's cache is `lazy_snapshot`.

use super::common::{check, commit, engine, ts};
use crate::sync::mutant;
use crate::TxnOptions;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

fn model(cts: u64) {
    let e = engine(2);
    commit(&e, &[(b"k", b"v10")], 10);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (e, done) = (e.clone(), done.clone());
        thread::spawn(move || {
            commit(&e, &[(b"k", b"new")], cts);
            // Release: pairs with the reader's Acquire load; the commit
            // returned before the flag went up.
            done.store(true, Ordering::Release);
        })
    };
    let reader = {
        let (e, done) = (e.clone(), done.clone());
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.take_snapshot().unwrap();
            let before_refresh = done.load(Ordering::Acquire);
            assert_eq!(t.set_read_timestamp(ts(25)).unwrap(), ts(25));
            let first = t.get(b"k").unwrap();
            let second = t.get(b"k").unwrap();
            (before_refresh, first, second)
        })
    };
    writer.join().unwrap();
    let (before_refresh, first, second) = reader.join().unwrap();
    assert_eq!(first, second, "a snapshot read is not repeatable");
    let saw_new = match first.as_deref() {
        Some(b"new") => true,
        Some(b"v10") => false,
        other => panic!("read {other:?}"),
    };
    if cts > 25 {
        assert!(!saw_new, "a commit above the read timestamp was seen");
    } else if before_refresh {
        assert!(
            saw_new,
            "a commit that returned before the refresh was missed"
        );
    }
}

#[test]
fn commit_at_or_below_read_timestamp_lands() {
    check("read_ts_refresh/cts=20", mutant::NONE, || model(20));
}

#[test]
fn commit_above_read_timestamp_lands() {
    check("read_ts_refresh/cts=30", mutant::NONE, || model(30));
}

#[test]
#[should_panic(expected = "a commit that returned before the refresh was missed")]
fn mutant_skip_generation_bump() {
    check(
        "read_ts_refresh/SKIP_GENERATION_BUMP",
        mutant::SKIP_GENERATION_BUMP,
        || model(20),
    );
}
