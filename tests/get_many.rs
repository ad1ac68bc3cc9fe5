//! `Txn::get_many` / `get_many_with`: a batched read answers exactly what a
//! `get` of each key answers (present, absent, deleted, the transaction's
//! own writes, keys of every allowed length, batches that cross the
//! store's internal batch size), and stops at a prepared update.

use snapshot_engine::*;

fn key(i: u64, long: bool) -> Vec<u8> {
    let mut k = i.to_be_bytes().to_vec();
    if long {
        // Past the index's inline key bytes: the key lives on the heap.
        k.extend_from_slice(&[0xab; 40]);
    }
    k
}

#[test]
fn a_batch_reads_what_each_get_reads() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for i in 0..500u64 {
        t.put(key(i, i % 3 == 0), i.to_le_bytes()).unwrap();
    }
    t.put(vec![], b"empty key").unwrap();
    let max = vec![7u8; e.config().max_key_len];
    t.put(&max, b"longest key").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for i in (0..500u64).step_by(7) {
        t.delete(key(i, i % 3 == 0)).unwrap();
    }
    t.commit(CommitOptions::default()).unwrap();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut x = 12345u64;
    for _ in 0..1000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = (x >> 33) % 600; // some never written
        keys.push(key(i, i.is_multiple_of(3)));
    }
    keys.push(vec![]);
    keys.push(max.clone());
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    // The transaction's own writes are read too.
    t.put(key(1, false), b"own").unwrap();
    keys.push(key(1, false));
    for n in [0, 1, 15, 16, 17, 33, keys.len()] {
        let batch = &keys[..n];
        let got = t.get_many(batch).unwrap();
        let want: Vec<Option<Vec<u8>>> = batch.iter().map(|k| t.get(k).unwrap()).collect();
        assert_eq!(got, want, "batch of {n}");
    }
    let mut order = Vec::new();
    t.get_many_with(&keys[..40], |i, _| order.push(i)).unwrap();
    assert_eq!(order, (0..40).collect::<Vec<_>>());
    assert!(keys.iter().any(|k| t.get(k).unwrap().is_none()));
    assert!(keys.iter().any(|k| t.get(k).unwrap().is_some()));
}

#[test]
fn a_prepared_update_stops_the_batch_at_its_key() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    e.set_timestamps(TimestampUpdate {
        stable: Some(Timestamp::new(10)),
        ..TimestampUpdate::default()
    })
    .unwrap();
    let (mut w, mut r) = (e.session().unwrap(), e.session().unwrap());
    let mut t = w.begin(&TxnOptions::default()).unwrap();
    for i in 0..40u64 {
        t.put(key(i, false), b"v").unwrap();
    }
    t.commit(CommitOptions::at(20)).unwrap();
    let mut p = w.begin(&TxnOptions::default()).unwrap();
    p.put(key(20, false), b"prepared").unwrap();
    p.prepare(Timestamp::new(30)).unwrap();
    let opts = TxnOptions {
        read_timestamp: Some(Timestamp::new(40)),
        ..TxnOptions::default()
    };
    let mut t = r.begin(&opts).unwrap();
    let keys: Vec<Vec<u8>> = (0..40).map(|i| key(i, false)).collect();
    let mut seen = Vec::new();
    let err = t
        .get_many_with(&keys, |i, v| {
            assert_eq!(v, Some(&b"v"[..]));
            seen.push(i);
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::PrepareConflict {
            key: key(20, false)
        }
    );
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
    assert_eq!(
        t.get(key(20, false)),
        Err(Error::PrepareConflict {
            key: key(20, false)
        })
    );
}
