use snapshot_engine::*;

#[test]
fn commit_at_10_is_visible_at_15_not_at_5() {
    let e = Engine::new(EngineConfig::default());
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"v").unwrap();
    t.commit(CommitOptions::at(10)).unwrap();
    drop(t);
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.set_read_timestamp(Timestamp::new(15)).unwrap();
    assert_eq!(t.get(b"k").unwrap(), Some(b"v".to_vec()));
    t.rollback().unwrap();
    drop(t);
    let mut t = s.begin(&TxnOptions { read_timestamp: Some(Timestamp::new(5)), ..Default::default() }).unwrap();
    assert_eq!(t.get(b"k").unwrap(), None);
}
