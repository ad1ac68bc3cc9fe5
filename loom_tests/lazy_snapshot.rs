//! Model — the lazy snapshot (invariant 7, real-time order).
//!
//! A transaction takes its snapshot at its first read, not at begin, so its
//! point in time is that read. A session runs one transaction that reads
//! `k = v1` (which leaves the session's cached snapshot at that point),
//! then begins a second one, while a writer commits `k = v2`. The reader
//! waits for the commit to return and only then reads: the commit returned
//! before the read that takes the snapshot, so the read must see `v2`. A
//! first read that reuses the session's cached snapshot without taking it
//! (mutant LAZY_VIEW_SKIPS_SNAPSHOT) reads `v1`; so would a snapshot taken
//! at begin that raced the commit.

use super::common::{check, commit, engine};
use crate::sync::mutant;
use crate::{CommitOptions, TxnOptions};
use loom::thread;

fn model() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v1")], 0);
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    t.commit(CommitOptions::default()).unwrap();
    let writer = {
        let e = e.clone();
        thread::spawn(move || commit(&e, &[(b"k", b"v2")], 0))
    };
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    writer.join().unwrap();
    let got = t.get(b"k").unwrap();
    assert_eq!(
        got.as_deref(),
        Some(&b"v2"[..]),
        "real-time order violated: the first read missed a commit that returned before it"
    );
}

#[test]
fn lazy_snapshot_is_taken_at_the_first_read() {
    check("lazy_snapshot", mutant::NONE, model);
}

/// The lazy take reuses the session's cached snapshot when the published
/// generation has not moved (invariant 5): a commit that skips the bump
/// leaves the first read with the stale cache.
#[test]
#[should_panic(expected = "real-time order violated")]
fn mutant_skip_generation_bump() {
    check(
        "lazy_snapshot/SKIP_GENERATION_BUMP",
        mutant::SKIP_GENERATION_BUMP,
        model,
    );
}

#[test]
#[should_panic(expected = "real-time order violated")]
fn mutant_lazy_view_skips_snapshot() {
    check(
        "lazy_snapshot/LAZY_VIEW_SKIPS_SNAPSHOT",
        mutant::LAZY_VIEW_SKIPS_SNAPSHOT,
        model,
    );
}
