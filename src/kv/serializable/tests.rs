//! What a serializable commit costs: the index lookups its validation
//! makes (`Index::get`) and the retire batches its completion hands to the
//! collector under the gate, each counted per thread under `cfg(test)`.

use crate::machinery::epoch::{OUTER_PINS, RETIRE_BATCH};
use crate::machinery::COMPLETION_FLUSHES;
use crate::store::raw::index::LOOKUPS;
use crate::{CommitOptions, Engine, Isolation, TableOptions, TxnOptions};

fn ser() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::Serializable,
        ..TxnOptions::default()
    }
}

fn lookups() -> u64 {
    LOOKUPS.with(std::cell::Cell::get)
}

/// A serializable writer that read four keys that exist (a point read,
/// a batch of two, and one in a named table) and one that does not:
/// validation looks up only the missing one (an insert since would have
/// created its entry); the others are checked on the entries the reads
/// kept.
#[test]
fn validation_looks_up_only_the_keys_their_reads_found_no_entry_for() {
    let e = Engine::default();
    let x = e.create_table("x", TableOptions::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for k in ["a", "b", "c"] {
        t.put(k, "1").unwrap();
    }
    t.table(&x).unwrap().put("a", "1").unwrap();
    t.commit(CommitOptions::default()).unwrap();

    let mut t = s.begin(&ser()).unwrap();
    assert!(t.get("a").unwrap().is_some());
    assert_eq!(t.get_many(&["b", "c"]).unwrap().len(), 2);
    assert!(t.table(&x).unwrap().get("a").unwrap().is_some());
    assert!(t.get("missing").unwrap().is_none());
    t.put("a", "2").unwrap();
    let before = lookups();
    t.commit(CommitOptions::default()).unwrap();
    assert_eq!(lookups() - before, 1, "lookups made by the commit");
}

fn completion_flushes() -> u64 {
    COMPLETION_FLUSHES.with(std::cell::Cell::get)
}

/// `n` commits on `s` with `opts`, each a read-modify-write of one key.
fn rmw(s: &mut crate::Session<'_>, opts: &TxnOptions, n: usize) {
    for i in 0..n {
        let mut t = s.begin(opts).unwrap();
        t.get("k").unwrap();
        t.put("k", i.to_string()).unwrap();
        t.commit(CommitOptions::default()).unwrap();
    }
}

/// A gated commit hands its session's retire batch to the collector
/// before it takes the gate when its completion would fill it, so the
/// completion under the gate never does; an ungated one's completion
/// does.
#[test]
fn a_gated_commit_hands_no_retire_batch_to_the_collector_under_the_gate() {
    let e = Engine::default();
    let mut s = e.session().unwrap();
    let before = completion_flushes();
    rmw(&mut s, &ser(), 3 * RETIRE_BATCH);
    assert_eq!(completion_flushes() - before, 0, "gated commits");
    // A prepare completes under the gate too (its rollback, and its
    // commit, install nothing).
    for i in 0..3 * RETIRE_BATCH as u64 {
        let mut t = s.begin(&ser()).unwrap();
        t.get("p").unwrap();
        t.put("p", "1").unwrap();
        t.prepare(10 + i).unwrap();
        t.rollback();
    }
    assert_eq!(completion_flushes() - before, 0, "gated prepares");
    rmw(&mut s, &TxnOptions::default(), 3 * RETIRE_BATCH);
    assert!(completion_flushes() - before >= 2, "ungated completions");
}

/// A gated commit on an in-memory engine pins once, before the gate: every
/// pin after it (validation, flips, the descriptor install, pruning) nests
/// in that guard, so none pays a fence or runs crossbeam's collection
/// under the gate.
#[test]
fn a_gated_commit_pins_the_epoch_once_before_the_gate() {
    let e = Engine::default();
    let mut s = e.session().unwrap();
    let pins = || OUTER_PINS.with(std::cell::Cell::get);
    for i in 0..4 {
        let mut t = s.begin(&ser()).unwrap();
        t.get("k").unwrap();
        t.scan("a".."z", |_, _| true).unwrap();
        t.put("k", i.to_string()).unwrap();
        let before = pins();
        t.commit(CommitOptions::default()).unwrap();
        assert_eq!(pins() - before, 1, "commit {i}");
    }
}
