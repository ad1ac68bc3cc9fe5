//! How a Rust program holds the engine: every usage here used to
//! fail to compile or needed a workaround (`static`, `Box::leak`,
//! `drop(txn)`, a turbofish, `&[u8]` conversions). Each test compiles the
//! usage and checks what it does.

use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, OwnedSession, Session, Timestamp, TimestampUpdate,
    Txn, TxnOptions,
};
use std::ops::Bound;
use std::sync::Arc;

fn engine() -> Arc<Engine> {
    Arc::new(Engine::new(EngineConfig::default()).unwrap())
}

fn read(s: &mut Session<'_>, key: &str) -> Option<Vec<u8>> {
    s.begin(&TxnOptions::default()).unwrap().get(key).unwrap()
}

/// A per-connection struct: the session lives beside the `Arc<Engine>`
/// it came from.
struct Connection {
    engine: Arc<Engine>,
    session: OwnedSession,
}

impl Connection {
    fn open(engine: &Arc<Engine>) -> snapshot_engine::Result<Connection> {
        Ok(Connection {
            engine: engine.clone(),
            session: engine.owned_session()?,
        })
    }

    fn put(&mut self, k: &str, v: &str) -> snapshot_engine::Result<()> {
        let mut txn = self.session.begin(&TxnOptions::default())?;
        txn.put(k, v)?;
        txn.commit(CommitOptions::default())?;
        Ok(())
    }
}

#[test]
fn a_session_lives_in_a_struct_beside_its_arc_engine() {
    let e = engine();
    let mut conn = Connection::open(&e).unwrap();
    conn.put("k", "v").unwrap();
    assert!(conn.session.is_owned());
    assert_eq!(conn.engine.stats().sessions_open, 1);
    // The engine outlives the caller's handle: the connection keeps it.
    drop(e);
    assert_eq!(read(&mut conn.session, "k").as_deref(), Some(&b"v"[..]));
    let engine = conn.engine.clone();
    drop(conn);
    assert_eq!(engine.stats().sessions_open, 0, "the slot is released");
}

#[test]
fn sessions_in_a_pool_are_reused() {
    let e = engine();
    let mut pool: Vec<OwnedSession> = (0..3).map(|_| e.owned_session().unwrap()).collect();
    for i in 0..9u8 {
        let mut s = pool.pop().unwrap();
        let mut txn = s.begin(&TxnOptions::default()).unwrap();
        txn.put([i], [i]).unwrap();
        txn.commit(CommitOptions::default()).unwrap();
        pool.insert(0, s);
    }
    assert_eq!(e.stats().sessions_open, 3);
    let mut s = pool.pop().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.range(..).unwrap().len(), 9);
}

#[test]
fn a_session_opened_outside_moves_into_thread_spawn() {
    let e = engine();
    let handles: Vec<_> = (0..4u8)
        .map(|i| {
            let mut s = e.owned_session().unwrap();
            std::thread::spawn(move || {
                for j in 0..50u8 {
                    s.transaction(&TxnOptions::default(), |txn| {
                        txn.put([i, j], [j])?;
                        let n = txn.get("count")?.map_or(0, |v| v[0]);
                        txn.put("count", [n + 1])
                    })
                    .unwrap();
                }
                s.slot()
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    // Every increment landed once: conflicts were retried.
    assert_eq!(t.get("count").unwrap(), Some(vec![200]));
    assert_eq!(t.range(&[0u8][..]..&[4u8][..]).unwrap().len(), 200);
}

#[test]
fn two_transactions_in_sequence_on_one_session_with_no_drop() {
    let e = engine();
    let mut s = e.session().unwrap();
    let mut a = s.begin(&TxnOptions::default()).unwrap();
    a.put("k", "1").unwrap();
    a.commit(CommitOptions::at(10)).unwrap();
    let mut b = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(b.get("k").unwrap().as_deref(), Some(&b"1"[..]));
    b.put("k", "2").unwrap();
    b.rollback();
    let mut c = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"1"[..]));
    c.commit(CommitOptions::default()).unwrap();
}

/// A function that owns the session's borrow can hand a transaction back.
fn begin_with_write<'s, 'e>(s: &'s mut Session<'e>, k: &str) -> Txn<'s, 'e> {
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(k, "x").unwrap();
    t
}

#[test]
fn a_transaction_can_be_returned_from_a_function() {
    let e = engine();
    let mut s = e.session().unwrap();
    begin_with_write(&mut s, "k")
        .commit(CommitOptions::default())
        .unwrap();
    assert_eq!(read(&mut s, "k").as_deref(), Some(&b"x"[..]));
}

#[test]
fn a_refused_commit_hands_the_transaction_back_to_retry() {
    let e = engine();
    e.set_timestamps(TimestampUpdate {
        stable: Some(Timestamp::new(20)),
        ..TimestampUpdate::default()
    })
    .unwrap();
    let mut s = e.session().unwrap();
    let mut txn = s.begin(&TxnOptions::default()).unwrap();
    txn.put("k", "v").unwrap();
    let mut commit_ts = 15;
    loop {
        match txn.try_commit(CommitOptions::at(commit_ts)) {
            Ok(()) => break,
            Err(refused) => {
                assert_eq!(
                    refused.error(),
                    &Error::CommitTimestampNotAfterStable {
                        commit: Timestamp::new(commit_ts),
                        stable: Timestamp::new(20)
                    }
                );
                assert_eq!(
                    refused.to_string(),
                    format!("commit timestamp {commit_ts} must be after the stable timestamp 20")
                );
                txn = refused.into_txn().expect("still open");
                // Still usable: its own write is there.
                assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"v"[..]));
                commit_ts += 5;
            }
        }
    }
    assert_eq!(commit_ts, 25);
    let mut r = s
        .begin(&TxnOptions {
            read_timestamp: Some(Timestamp::new(25)),
            ..TxnOptions::default()
        })
        .unwrap();
    assert_eq!(r.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_commit_after_a_write_conflict_rolls_back_and_returns_nothing() {
    let e = engine();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    t1.put("k", "1").unwrap();
    assert_eq!(
        t2.put("k", "2").unwrap_err().to_string(),
        r#"write conflict on key "k""#
    );
    let refused = t2.try_commit(CommitOptions::default()).unwrap_err();
    assert_eq!(refused.error(), &Error::MustRollBack);
    assert!(refused.into_txn().is_none());
    t1.commit(CommitOptions::default()).unwrap();
    // `?` takes commit's owned error (and `try_commit`'s CommitError) into an Error.
    let f = |s: &mut Session<'_>| -> snapshot_engine::Result<()> {
        let mut t = s.begin(&TxnOptions::default())?;
        t.put("k", "3")?;
        t.commit(CommitOptions::default())?;
        Ok(())
    };
    f(&mut s2).unwrap();
}

#[test]
fn the_transaction_closure_retries_write_conflicts_and_returns_other_errors() {
    let e = engine();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut attempts = 0;
    let got = s1.transaction(&TxnOptions::default(), |txn| {
        attempts += 1;
        // The snapshot is otherwise taken at the first read,
        // which would see the other session's commit below.
        txn.take_snapshot()?;
        if attempts == 1 {
            // Another session writes the key first, then commits: this
            // attempt conflicts, the next sees the commit.
            let mut other = s2.begin(&TxnOptions::default()).unwrap();
            other.put("k", "theirs").unwrap();
            other.commit(CommitOptions::default()).unwrap();
        }
        let old = txn.get("k")?;
        txn.put("k", "mine")?;
        Ok(old)
    });
    assert_eq!(got.unwrap().as_deref(), Some(&b"theirs"[..]));
    assert_eq!(
        attempts, 2,
        "the first attempt conflicted with the commit after its snapshot"
    );

    // A conflict with an open writer is retried until the attempts run out.
    let mut blocker = s2.begin(&TxnOptions::default()).unwrap();
    blocker.put("k", "blocking").unwrap();
    let mut attempts = 0;
    let r = s1.transaction(&TxnOptions::default(), |txn| {
        attempts += 1;
        txn.put("k", "mine")
    });
    assert_eq!(r, Err(Error::WriteConflict { key: b"k".to_vec() }));
    assert_eq!(attempts, <Session>::TRANSACTION_ATTEMPTS);
    blocker.rollback();
    // Another error is returned at once, and the transaction rolled back.
    let mut attempts = 0;
    let r: snapshot_engine::Result<()> = s1.transaction(&TxnOptions::default(), |txn| {
        attempts += 1;
        txn.put("z", "never")?;
        txn.set_commit_timestamp(Timestamp::new(0))
    });
    assert!(matches!(r, Err(Error::TimestampOutOfRange { .. })));
    assert_eq!(attempts, 1);
    assert_eq!(read(&mut s1, "z"), None);
}

fn filled(e: &Engine, keys: &[&str]) {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for k in keys {
        t.put(k, k.to_uppercase()).unwrap();
    }
    t.commit(CommitOptions::default()).unwrap();
}

fn keys<'a>(it: impl Iterator<Item = snapshot_engine::Result<(&'a [u8], Vec<u8>)>>) -> Vec<String> {
    it.map(|r| String::from_utf8(r.unwrap().0.to_vec()).unwrap())
        .collect()
}

#[test]
fn a_cursor_runs_forward_reverse_and_after_seek() {
    let e = engine();
    filled(&e, &["a", "b", "c", "d", "e"]);
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.delete("c").unwrap();
    assert_eq!(keys(t.cursor()), ["a", "b", "d", "e"]);
    assert_eq!(keys(t.cursor().rev()), ["e", "d", "b", "a"]);
    assert_eq!(keys(t.iter("b".."e")), ["b", "d"]);
    assert_eq!(keys(t.iter("b"..="e").rev()), ["e", "d", "b"]);

    let mut c = t.cursor();
    c.seek("c");
    assert_eq!(keys(&mut c), ["d", "e"]);
    // Seek again, backwards: the front moves there.
    c.seek("a");
    let (k, v) = c.next_ref().unwrap().unwrap();
    assert_eq!((k, v), (&b"a"[..], &b"A"[..]));

    // Both ends meet and stop.
    let mut c = t.cursor();
    let mut order = Vec::new();
    while let (Some(f), b) = (c.next(), c.next_back()) {
        order.push(f.unwrap().0.to_vec());
        if let Some(b) = b {
            order.push(b.unwrap().0.to_vec());
        }
    }
    assert_eq!(order, [b"a", b"e", b"b", b"d"]);
    // A seek below the cursor's range stays inside it.
    let mut c = t.iter("b"..);
    c.seek("a");
    assert_eq!(keys(c), ["b", "d", "e"]);
}

#[test]
fn seek_back_moves_the_back_for_a_reverse_scan_from_a_key() {
    let e = engine();
    filled(&e, &["a", "b", "c", "d", "e"]);
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.delete("c").unwrap();
    let mut c = t.cursor();
    c.seek_back("c");
    assert_eq!(keys(c.by_ref().rev()), ["b", "a"]);
    // Seek back again, forwards from where the back was.
    c.seek_back("zz");
    assert_eq!(keys(c.by_ref().rev()), ["e", "d", "b", "a"]);
    // The front is unchanged by a seek back; a forward scan stops there.
    let mut c = t.cursor();
    c.seek_back("d");
    assert_eq!(keys(c), ["a", "b", "d"]);
    // A seek back past the cursor's range stays inside it.
    let mut c = t.iter(.."d");
    c.seek_back("e");
    assert_eq!(keys(c.rev()), ["b", "a"]);
    // Both ends sought: what lies between them.
    let mut c = t.cursor();
    c.seek("b");
    c.seek_back("d");
    assert_eq!(keys(c.rev()), ["d", "b"]);
    // A key before the front leaves nothing.
    let mut c = t.iter("b"..);
    c.seek_back("a");
    assert_eq!(keys(c.rev()), Vec::<String>::new());
    drop(t);
    // Across batches (64 pairs per refill): every key from 700 down.
    let mut w = s.begin(&TxnOptions::default()).unwrap();
    for i in 0..1000u32 {
        w.put(i.to_be_bytes(), "v").unwrap();
    }
    w.commit(CommitOptions::default()).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let mut c = t.iter(&0u32.to_be_bytes()[..]..&1000u32.to_be_bytes()[..]);
    c.seek_back(700u32.to_be_bytes());
    let got: Vec<u32> = c
        .rev()
        .map(|r| u32::from_be_bytes(r.unwrap().0.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..=700).rev().collect::<Vec<_>>());
}

#[test]
fn a_cursor_over_many_keys_refills_in_batches_and_sees_a_snapshot() {
    let e = engine();
    let mut s = e.session().unwrap();
    let mut w = s.begin(&TxnOptions::default()).unwrap();
    for i in 0..1000u32 {
        w.put(i.to_be_bytes(), i.to_le_bytes()).unwrap();
    }
    w.commit(CommitOptions::default()).unwrap();
    let mut s2 = e.session().unwrap();
    let mut t = s2.begin(&TxnOptions::default()).unwrap();
    let mut c = t.cursor();
    let first: Vec<_> = c.by_ref().take(10).map(|r| r.unwrap()).collect();
    // A commit while the cursor is open (it holds no epoch guard) is not in
    // its snapshot.
    let mut w = s.begin(&TxnOptions::default()).unwrap();
    w.delete(500u32.to_be_bytes()).unwrap();
    w.put(2000u32.to_be_bytes(), "late").unwrap();
    w.commit(CommitOptions::default()).unwrap();
    let rest: Vec<_> = c.map(|r| r.unwrap()).collect();
    assert_eq!(first.len() + rest.len(), 1000);
    for (i, (k, v)) in first.iter().chain(rest.iter()).enumerate() {
        assert_eq!(*k, &(i as u32).to_be_bytes()[..]);
        assert_eq!(v[..], (i as u32).to_le_bytes());
    }
    let n = t.cursor().rev().count();
    assert_eq!(n, 1000);
}

#[test]
fn keys_and_values_are_anything_as_ref_bytes_and_ranges_need_no_turbofish() {
    let e = engine();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("k", "v").unwrap();
    t.put(b"a", b"1").unwrap();
    t.put(vec![b'b'], [b'2']).unwrap();
    t.put(String::from("m"), &b"3"[..]).unwrap();
    t.put("zz", "4").unwrap();
    t.delete(String::from("m")).unwrap();
    assert_eq!(t.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(t.get_with("b", |v| v.map(<[u8]>::len)).unwrap(), Some(1));
    assert_eq!(t.range(..).unwrap().len(), 4);
    // `range(b"a"..b"zz")` cannot compile (the two literals are different
    // array types, so the range expression itself is refused); these do:
    assert_eq!(t.range(&b"a"[..]..b"zz").unwrap().len(), 3);
    assert_eq!(t.range(b"aa"..b"zz").unwrap().len(), 2);
    assert_eq!(t.range("a".."zz").unwrap().len(), 3);
    assert_eq!(t.range("a"..="zz").unwrap().len(), 4);
    assert_eq!(
        t.range((Bound::Included(b"a"), Bound::Excluded(b"zz")))
            .unwrap()
            .len(),
        3
    );
    assert_eq!(t.range("b"..).unwrap().len(), 3);
    assert_eq!(t.range(.."k").unwrap().len(), 2);
    let mut seen = 0;
    t.scan(.., |_, _| {
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, 4);
}

#[test]
fn rolling_back_to_a_savepoint_undoes_what_came_after_it() {
    let e = engine();
    filled(&e, &["old"]);
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put("before", "1").unwrap();
    t.put("old", "changed before").unwrap();
    let sp = t.savepoint().unwrap();
    // Written before and after the savepoint: back to its value at the
    // savepoint, not to the committed one.
    t.put("before", "2").unwrap();
    t.put("before", "3").unwrap();
    t.delete("old").unwrap();
    t.put("after", "x").unwrap();
    let inner = t.savepoint().unwrap();
    t.put("inner", "y").unwrap();
    t.rollback_to(&sp).unwrap();
    assert_eq!(t.get("before").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(
        t.get("old").unwrap().as_deref(),
        Some(&b"changed before"[..])
    );
    assert_eq!(t.get("after").unwrap(), None);
    assert_eq!(t.get("inner").unwrap(), None);
    // The inner savepoint went with what it followed; the outer one stays.
    assert_eq!(t.rollback_to(&inner), Err(Error::UnknownSavepoint));
    t.put("after", "again").unwrap();
    t.rollback_to(&sp).unwrap();
    assert_eq!(t.get("after").unwrap(), None);
    t.put("after", "kept").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    assert_eq!(e.chain_len(b"before"), 1, "undone versions are unlinked");
    let mut r = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        r.range(..).unwrap(),
        [
            (b"after".to_vec(), b"kept".to_vec()),
            (b"before".to_vec(), b"1".to_vec()),
            (b"old".to_vec(), b"changed before".to_vec()),
        ]
    );
    // A savepoint of a finished transaction means nothing to the next.
    assert_eq!(r.rollback_to(&sp), Err(Error::UnknownSavepoint));
}

#[test]
fn an_undone_write_no_longer_blocks_other_writers_once_the_transaction_ends() {
    let e = engine();
    let (mut s1, mut s2) = (e.session().unwrap(), e.session().unwrap());
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    let sp = t1.savepoint().unwrap();
    t1.put("k", "t1").unwrap();
    t1.rollback_to(&sp).unwrap();
    t1.put("j", "t1").unwrap();
    // t1 is still running and wrote "k" after t2's snapshot... but undid it:
    // the chain no longer holds it, so t2 may write "k".
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    t2.put("k", "t2").unwrap();
    t1.commit(CommitOptions::default()).unwrap();
    t2.commit(CommitOptions::default()).unwrap();
    assert_eq!(read(&mut s1, "k").as_deref(), Some(&b"t2"[..]));
    assert_eq!(read(&mut s1, "j").as_deref(), Some(&b"t1"[..]));
}

#[test]
fn incompatible_options_name_both() {
    let e = engine();
    let mut s = e.session().unwrap();
    let err = s
        .begin(&TxnOptions {
            read_at_stable: true,
            read_timestamp: Some(Timestamp::new(5)),
            ..TxnOptions::default()
        })
        .map(drop)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "options read_at_stable and read_timestamp cannot be combined"
    );
}
