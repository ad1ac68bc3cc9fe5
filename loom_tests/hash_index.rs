//! Model 18 — the hash index: a lookup racing an insert that publishes a
//! key, and one racing the migration of a grown table (invariant 11, and
//! the index's orderings in `store/raw/hashindex.rs`).
//!
//! Index level, with no chains or machinery: the store's index is a mutex
//! map under loom, so these models drive `HashIndex` itself (its first
//! table has 8 slots under loom, so a few inserts grow it). A node and a
//! table each carry a causality witness (`sync::Witness`), checked where a
//! lookup reads them: a lookup that reaches one it has no happens-before
//! edge to fails with "Causality violation".
//!
//! * **publication**: one thread inserts `k` while another looks it up; a
//!   lookup that finds the node must see it built. Placing the node with a
//!   Relaxed slot store (`RELAXED_SLOT_STORE`) breaks the edge.
//! * **migration**: six keys fill the first table (three quarters of 8
//!   slots) before the threads start. One thread inserts a seventh, which
//!   installs a grown table with the first as its `prev`, and an eighth,
//!   which moves every slot of `prev` and unlinks it; another looks up the
//!   first key, which must be found whatever it meets: the old table, the
//!   new one with `prev` still linked, or the new one with `prev` gone. A
//!   Relaxed table load (`RELAXED_TABLE_LOAD`) reaches a grown table it has
//!   no edge to; a Relaxed load of `prev` (`RELAXED_PREV_LOAD`) or a
//!   Relaxed unlinking store (`RELAXED_UNLINK_STORE`) lets the lookup see
//!   `prev` gone but not the slot the move stored, and miss the key.
//!
//! The lookup runs in the spawned thread and the inserts in the model's
//! own thread. Loom remembers only the last access to each atomic, so an
//! insert, which loads a slot before it stores it, would hide an earlier
//! lookup's load of that slot from the search: written the other way
//! round, each model explores one execution only. A lookup's load is
//! checked against the last store, which the insert makes.

use super::common::check;
use crate::machinery::epoch::Collector;
use crate::store::raw::hashindex::{HashIndex, Want};
use crate::sync::mutant;
use loom::sync::Arc;
use loom::thread;

/// Inserts `key` (absent before).
fn insert(ix: &HashIndex, c: &Collector, key: &[u8]) {
    let g = c.pin();
    let (n, new) = ix.get_or_insert(key, c, &g, |_| {});
    assert!(new && n.key() == key, "a fresh key gets a fresh node");
}

/// Looks `key` up; `Some(true)` if found with its own bytes.
fn lookup(ix: &HashIndex, c: &Collector, key: &[u8]) -> Option<bool> {
    let g = c.pin();
    ix.get(key, ix.hash(key), Want::Head, &g)
        .map(|n| n.key() == key)
}

fn publication() {
    let c = Arc::new(Collector::new());
    let ix = Arc::new(HashIndex::new());
    let r = {
        let (c, ix) = (c.clone(), ix.clone());
        thread::spawn(move || lookup(&ix, &c, b"k"))
    };
    insert(&ix, &c, b"k");
    let during = r.join().unwrap();
    assert_ne!(during, Some(false), "a found node holds its key");
    assert_eq!(
        lookup(&ix, &c, b"k"),
        Some(true),
        "an inserted key is found"
    );
}

fn migration() {
    let c = Arc::new(Collector::new());
    let ix = Arc::new(HashIndex::new());
    for k in 0..6u8 {
        insert(&ix, &c, &[k]);
    }
    let r = {
        let (c, ix) = (c.clone(), ix.clone());
        thread::spawn(move || lookup(&ix, &c, &[0]))
    };
    insert(&ix, &c, &[6]);
    insert(&ix, &c, &[7]);
    let during = r.join().unwrap();
    assert_eq!(
        during,
        Some(true),
        "a key inserted before the migration is found during it"
    );
    for k in 0..8u8 {
        assert_eq!(
            lookup(&ix, &c, &[k]),
            Some(true),
            "every key is found after it"
        );
    }
}

#[test]
fn lookup_versus_insert() {
    check("hash_index/publication", mutant::NONE, publication);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn mutant_relaxed_slot_store() {
    check(
        "hash_index/publication/RELAXED_SLOT_STORE",
        mutant::RELAXED_SLOT_STORE,
        publication,
    );
}

#[test]
fn lookup_versus_migration() {
    check("hash_index/migration", mutant::NONE, migration);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn mutant_relaxed_table_load() {
    check(
        "hash_index/migration/RELAXED_TABLE_LOAD",
        mutant::RELAXED_TABLE_LOAD,
        migration,
    );
}

#[test]
#[should_panic(expected = "is found during it")]
fn mutant_relaxed_prev_load() {
    check(
        "hash_index/migration/RELAXED_PREV_LOAD",
        mutant::RELAXED_PREV_LOAD,
        migration,
    );
}

#[test]
#[should_panic(expected = "is found during it")]
fn mutant_relaxed_unlink_store() {
    check(
        "hash_index/migration/RELAXED_UNLINK_STORE",
        mutant::RELAXED_UNLINK_STORE,
        migration,
    );
}
