//! A transaction sees its own writes; nobody ever sees an aborted write.

use snapshot_engine::*;

#[test]
fn a_transaction_sees_its_own_writes_and_deletes_before_commit() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut other = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"a", b"1").unwrap();
    t.put(b"a", b"2").unwrap();
    t.put(b"b", b"x").unwrap();
    t.delete(b"b").unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(t.get(b"b").unwrap(), None);
    assert_eq!(
        t.range(b"a".as_slice()..b"z".as_slice()).unwrap(),
        vec![(b"a".to_vec(), b"2".to_vec())]
    );

    // Nobody else sees them yet.
    let mut o = other.begin(&TxnOptions::default()).unwrap();
    assert_eq!(o.get(b"a").unwrap(), None);
    drop(o);

    t.commit(CommitOptions::default()).unwrap();
    let mut o = other.begin(&TxnOptions::default()).unwrap();
    assert_eq!(o.get(b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(o.get(b"b").unwrap(), None);
}

#[test]
fn rolled_back_writes_are_never_seen_and_leave_the_key_writable() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"old").unwrap();
    t.commit(CommitOptions::at(5)).unwrap();

    let mut other = e.session().unwrap();
    let mut reader = other.begin(&TxnOptions::default()).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"aborted").unwrap();
    t.put(b"new", b"aborted").unwrap();
    assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
    // `rollback` takes the transaction: using it afterwards no longer
    // compiles (what `TransactionFinished` used to catch at run time).
    t.rollback();
    assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(reader.get(b"new").unwrap(), None);
    drop(reader);

    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
    t.put(b"k", b"next").unwrap();
    t.commit(CommitOptions::at(6)).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"next"[..]));
    // The aborted version was unlinked: old and next remain.
    assert_eq!(e.chain_len(b"k"), 2);
}

#[test]
fn dropping_an_open_transaction_rolls_it_back() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", b"dropped").unwrap();
    }
    let mut other = e.session().unwrap();
    let mut t = other.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap(), None);
    // And the key is free: no conflict.
    t.put(b"k", b"kept").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    let st = e.stats();
    assert_eq!(st.rollbacks, 1);
    assert_eq!(st.commits, 1);
}
