//! What a serializable commit's validation costs: the index lookups it
//! makes (`Index::get`, counted per thread under `cfg(test)`).

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
