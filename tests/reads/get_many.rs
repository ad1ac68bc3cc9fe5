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

/// Every batch length from 0 to past a few of the store's groups of 16,
/// with repeated and never-written keys, reads what `get` reads, in order.
#[test]
fn repeats_and_absent_keys_in_batches_of_every_length() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for i in 0..64u64 {
        t.put(key(i, i % 5 == 0), [i as u8; 100]).unwrap();
    }
    t.commit(CommitOptions::default()).unwrap();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for i in 0..80u64 {
        // Repeats (i % 7), never-written keys (64 and up), long keys.
        let k = match i % 4 {
            0 => (i % 7) * 9,
            1 => 64 + i,
            _ => i % 64,
        };
        keys.push(key(k, k % 5 == 0));
    }
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for n in 0..=keys.len() {
        for start in [0, 3] {
            let batch = &keys[start.min(n)..n];
            let mut got = Vec::new();
            t.get_many_with(batch, |i, v| got.push((i, v.map(<[u8]>::to_vec))))
                .unwrap();
            let want: Vec<_> = batch
                .iter()
                .enumerate()
                .map(|(i, k)| (i, t.get(k).unwrap()))
                .collect();
            assert_eq!(got, want, "keys {start}..{n}");
        }
    }
    let absent: Vec<Vec<u8>> = (1000..1040).map(|i| key(i, false)).collect();
    assert_eq!(t.get_many(&absent).unwrap(), vec![None; 40]);
    let same = vec![key(3, false); 40];
    assert_eq!(t.get_many(&same).unwrap(), vec![Some(vec![3u8; 100]); 40]);
}

/// A batch reads each key at the transaction's read timestamp, as `get`
/// does, over chains with newer, aborted and deleted versions (the slot's
/// head hint then names a version the read does not return).
#[test]
fn a_batch_reads_old_versions_as_get_does() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    for round in 1..=4u64 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for i in 0..50u64 {
            if (i + round) % 6 == 0 {
                t.delete(key(i, i % 4 == 0)).unwrap();
            } else if i % round == 0 {
                t.put(key(i, i % 4 == 0), [round as u8; 30]).unwrap();
            }
        }
        t.commit(CommitOptions::at(10 * round)).unwrap();
        let mut a = s.begin(&TxnOptions::default()).unwrap();
        for i in (0..50u64).step_by(3) {
            a.put(key(i, i % 4 == 0), b"aborted").unwrap();
        }
        a.rollback();
    }
    let keys: Vec<Vec<u8>> = (0..60u64).map(|i| key(i, i % 4 == 0)).collect();
    for ts in [5, 10, 15, 20, 30, 40, 50] {
        let opts = TxnOptions {
            read_timestamp: Some(Timestamp::new(ts)),
            ..TxnOptions::default()
        };
        let mut t = s.begin(&opts).unwrap();
        let got = t.get_many(&keys).unwrap();
        let want: Vec<_> = keys.iter().map(|k| t.get(k).unwrap()).collect();
        assert_eq!(got, want, "read timestamp {ts}");
        assert!(ts < 10 || got.iter().any(Option::is_some), "ts {ts}");
    }
}

/// A key over `max_key_len` anywhere in the batch fails it before any key
/// is read, and the transaction goes on reading.
#[test]
fn a_key_over_the_limit_fails_the_batch_before_any_read() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let max = e.config().max_key_len;
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"a", b"1").unwrap();
    let mut keys: Vec<Vec<u8>> = (0..30).map(|_| b"a".to_vec()).collect();
    keys[25] = vec![1; max + 1];
    let mut called = 0;
    let err = t.get_many_with(&keys, |_, _| called += 1).unwrap_err();
    assert_eq!(err, Error::KeyTooLarge { len: max + 1, max });
    assert_eq!(called, 0);
    assert_eq!(
        t.get_many(&keys[..25]).unwrap(),
        vec![Some(b"1".to_vec()); 25]
    );
}

/// A prepared update stops a batch at its key wherever the key sits: the
/// first key, one inside the first group of 16, one in the second, or the
/// last; `f` has seen exactly the keys before it, a point read of it
/// conflicts too, and the keys after it still read.
#[test]
fn a_prepared_update_stops_the_batch_wherever_it_sits() {
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
    let keys: Vec<Vec<u8>> = (0..40).map(|i| key(i, false)).collect();
    let opts = TxnOptions {
        read_timestamp: Some(Timestamp::new(40)),
        ..TxnOptions::default()
    };
    for at in [0usize, 5, 20, 39] {
        let mut p = w.begin(&TxnOptions::default()).unwrap();
        p.put(key(at as u64, false), b"prepared").unwrap();
        p.prepare(Timestamp::new(30)).unwrap();
        let mut t = r.begin(&opts).unwrap();
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
                key: key(at as u64, false)
            }
        );
        assert_eq!(seen, (0..at).collect::<Vec<_>>());
        assert_eq!(
            t.get(key(at as u64, false)),
            Err(Error::PrepareConflict {
                key: key(at as u64, false)
            })
        );
        // The keys after it still read.
        assert_eq!(
            t.get_many(&keys[at + 1..]).unwrap(),
            vec![Some(b"v".to_vec()); 39 - at]
        );
        drop(t);
        p.rollback();
    }
}
