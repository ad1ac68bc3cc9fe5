//! Model — the reported all-durable timestamp (`all_durable`,
//! the durable exception to invariant 4).
//!
//! A commit no longer raises one shared durable word with a `fetch_max`:
//! it raises its own slot's word, and `query_timestamp` folds the words.
//! Setting the all-durable timestamp (it may move backwards) captures
//! every slot's word and bumps a reset count; a commit that sees the count
//! moved restarts its word with a new tag, and a word still equal to its
//! capture counts as "nothing made durable since the set".
//!
//! Writer W commits at 120 on one session, then at 120 again on the same
//! session (another key), while the timekeeper T sets the global durable
//! timestamp to 50 and raises a flag. If W saw the flag before its second
//! commit, that commit came after the set and the report must be 120. It
//! may be 50 otherwise (a commit concurrent with the set may be ordered
//! before it), and nothing else. A restart that keeps the word's tag
//! (mutant ALL_DURABLE_RESTART_KEEPS_TAG) writes exactly the captured word
//! back, and the report loses the commit.
//!
//! `model_racing_report`: after a commit at 120, the timekeeper sets the
//! all-durable timestamp to 50 while another thread reports. The report
//! reads the set's record (value and the slots' words as found) without a
//! lock, so it must read the record's fields after their writer (the
//! record's causality witness; mutant RELAXED_ALL_DURABLE_SET_LOAD), and get
//! 120 (the record before) or 50 (the new one), never a mix. (A third
//! thread in the first model made it 200k executions; this pair is small.)

use super::common::{check, commit, engine};
use crate::sync::mutant;
use crate::{CommitOptions, TimestampKind, TimestampUpdate, TxnOptions};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

fn model() {
    let e = engine(2);
    let set_done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (e, set_done) = (e.clone(), set_done.clone());
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"k", b"v1").unwrap();
            t.commit(CommitOptions::at(120)).unwrap();
            // Acquire: pairs with T's Release; the set has returned.
            let after_set = set_done.load(Ordering::Acquire);
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"j", b"j1").unwrap();
            t.commit(CommitOptions::at(120)).unwrap();
            after_set
        })
    };
    let timekeeper = {
        let (e, set_done) = (e.clone(), set_done.clone());
        thread::spawn(move || {
            e.set_timestamps(TimestampUpdate {
                durable: Some(crate::Timestamp::new(50)),
                ..TimestampUpdate::default()
            })
            .unwrap();
            // Release: pairs with W's Acquire.
            set_done.store(true, Ordering::Release);
        })
    };
    let after_set = writer.join().unwrap();
    timekeeper.join().unwrap();
    let got = e
        .query_timestamp(TimestampKind::AllDurable)
        .map(|t| t.get());
    if after_set {
        assert_eq!(
            got,
            Some(120),
            "all-durable report lost a commit made after the all-durable timestamp was set"
        );
    }
    assert!(
        got == Some(50) || got == Some(120),
        "all-durable report {got:?}: neither the set value nor the commits' 120"
    );
}

/// Two commits on one session after a durable set: the timekeeper T sets
/// the all-durable timestamp to 50 while writer W commits at 110, then
/// at 120, on one session. The report must be 120 (the set came first, or
/// between the commits) or 50 (it came after both); if W saw the set
/// return before its first commit, 120. A commit that compares its
/// timestamp with its slot's word with the word's restart tag left on
/// (mutant ALL_DURABLE_COMPARE_KEEPS_TAG) never raises a restarted word again:
/// 110.
fn model_later_commits() {
    let e = engine(2);
    let set_done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (e, set_done) = (e.clone(), set_done.clone());
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            // Acquire: pairs with T's Release; the set has returned.
            let after_set = set_done.load(Ordering::Acquire);
            for (key, at) in [(b"k", 110), (b"j", 120)] {
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(key, b"v").unwrap();
                t.commit(CommitOptions::at(at)).unwrap();
            }
            after_set
        })
    };
    let timekeeper = {
        let (e, set_done) = (e.clone(), set_done.clone());
        thread::spawn(move || {
            e.set_timestamps(TimestampUpdate {
                durable: Some(crate::Timestamp::new(50)),
                ..TimestampUpdate::default()
            })
            .unwrap();
            // Release: pairs with W's Acquire.
            set_done.store(true, Ordering::Release);
        })
    };
    let after_set = writer.join().unwrap();
    timekeeper.join().unwrap();
    let got = e
        .query_timestamp(TimestampKind::AllDurable)
        .map(|t| t.get());
    if after_set {
        assert_eq!(
            got,
            Some(120),
            "all-durable report lost a session's later commit made after the all-durable timestamp was set"
        );
    }
    assert!(
        got == Some(50) || got == Some(120),
        "all-durable report {got:?}: neither the set value, 50, nor a session's later commit, 120"
    );
}

/// Five durable sets, each followed by a commit on the one session (one
/// thread, one execution): each report is the commit's timestamp. Each
/// set makes the slot's word restart with the next 2-bit tag, so the
/// fourth restart wraps the tag to 0 and the word is smaller than the one
/// the set recorded; a report that counts a word only when it grew
/// (mutant ALL_DURABLE_REPORT_COUNTS_GROWTH) ignores it.
fn model_tag_wraps() {
    let e = engine(1);
    let mut s = e.session().unwrap();
    for i in 1..=5u64 {
        e.set_timestamps(TimestampUpdate {
            durable: Some(crate::Timestamp::new(i)),
            ..TimestampUpdate::default()
        })
        .unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", b"v").unwrap();
        t.commit(CommitOptions::at(100 * i)).unwrap();
        let got = e
            .query_timestamp(TimestampKind::AllDurable)
            .map(|t| t.get());
        assert_eq!(
            got,
            Some(100 * i),
            "all-durable report ignored the commit after durable set {i} (the slot word's restart tag wraps at the fourth)"
        );
    }
}

fn model_racing_report() {
    let e = engine(2);
    commit(&e, &[(b"k", b"v1")], 120);
    let timekeeper = {
        let e = e.clone();
        thread::spawn(move || {
            e.set_timestamps(TimestampUpdate {
                durable: Some(crate::Timestamp::new(50)),
                ..TimestampUpdate::default()
            })
            .unwrap()
        })
    };
    let reporter = {
        let e = e.clone();
        thread::spawn(move || {
            e.query_timestamp(TimestampKind::AllDurable)
                .map(|t| t.get())
        })
    };
    timekeeper.join().unwrap();
    let got = reporter.join().unwrap();
    assert!(
        matches!(got, Some(50) | Some(120)),
        "all-durable report {got:?} while the set ran: neither the record before nor the new one"
    );
}

#[test]
fn all_durable_report_folds_the_slots() {
    check("all_durable_report", mutant::NONE, model);
}

#[test]
fn all_durable_report_races_the_set() {
    check(
        "all_durable_report/racing",
        mutant::NONE,
        model_racing_report,
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn mutant_relaxed_durable_set_load() {
    check(
        "all_durable_report/racing/RELAXED_ALL_DURABLE_SET_LOAD",
        mutant::RELAXED_ALL_DURABLE_SET_LOAD,
        model_racing_report,
    );
}

#[test]
#[should_panic(expected = "all-durable report lost a commit")]
fn mutant_durable_restart_keeps_tag() {
    check(
        "all_durable_report/ALL_DURABLE_RESTART_KEEPS_TAG",
        mutant::ALL_DURABLE_RESTART_KEEPS_TAG,
        model,
    );
}

#[test]
fn all_durable_report_counts_later_commits() {
    check(
        "all_durable_report/later_commits",
        mutant::NONE,
        model_later_commits,
    );
}

#[test]
#[should_panic(expected = "a session's later commit")]
fn mutant_durable_compare_keeps_tag() {
    check(
        "all_durable_report/later_commits/ALL_DURABLE_COMPARE_KEEPS_TAG",
        mutant::ALL_DURABLE_COMPARE_KEEPS_TAG,
        model_later_commits,
    );
}

#[test]
fn all_durable_report_survives_the_tag_wrap() {
    check(
        "all_durable_report/tag_wraps",
        mutant::NONE,
        model_tag_wraps,
    );
}

#[test]
#[should_panic(expected = "all-durable report ignored the commit after durable set 4")]
fn mutant_durable_report_counts_growth() {
    check(
        "all_durable_report/tag_wraps/ALL_DURABLE_REPORT_COUNTS_GROWTH",
        mutant::ALL_DURABLE_REPORT_COUNTS_GROWTH,
        model_tag_wraps,
    );
}
