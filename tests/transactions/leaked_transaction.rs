//! A transaction leaked with `mem::forget` (safe code: no drop runs) is
//! rolled back when its session begins again or drops: its writes never
//! become visible, its id leaves the running set, its keys are writable.

use snapshot_engine::*;

fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

fn setup() -> Engine {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"base").unwrap();
    t.commit(CommitOptions::at(5)).unwrap();
    drop(s);
    e
}

fn read(e: &Engine, opts: &TxnOptions) -> Option<Vec<u8>> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(opts).unwrap();
    t.get(b"k").unwrap()
}

#[test]
fn a_leaked_writer_is_rolled_back_by_the_sessions_next_begin() {
    let e = setup();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"leaked").unwrap();
    std::mem::forget(t);

    // The next transaction on the session commits normally; the leaked
    // version must not ride along.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(e.stats().rollbacks, 1, "begin rolled the leaked one back");
    t.put(b"other", b"v").unwrap();
    t.commit(CommitOptions::at(10)).unwrap();
    e.set_timestamps(TimestampUpdate {
        oldest: Some(ts(10)),
        stable: Some(ts(20)),
        ..Default::default()
    })
    .unwrap();

    assert_eq!(
        read(&e, &TxnOptions::default()).as_deref(),
        Some(&b"base"[..])
    );
    let fast = TxnOptions {
        read_at_stable: true,
        ..Default::default()
    };
    assert_eq!(read(&e, &fast).as_deref(), Some(&b"base"[..]));
    // The key is writable: the leaked version no longer conflicts.
    let mut w = e.session().unwrap();
    let mut t = w.begin(&TxnOptions::default()).unwrap();
    t.put(b"k", b"next").unwrap();
    t.commit(CommitOptions::at(21)).unwrap();
    // The leaked id left the running set: nobody pins an old xmin.
    assert!(e.pins().iter().all(|p| p.xmin_lag == 0), "{:?}", e.pins());
}

#[test]
fn a_leaked_prepared_transaction_is_rolled_back_when_its_session_drops() {
    let e = setup();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", b"prepared").unwrap();
        t.prepare(ts(30)).unwrap();
        t.set_durable_timestamp(ts(40)).unwrap();
        std::mem::forget(t);
    }
    // Stable may now pass the leaked transaction's announced durable
    // timestamp, and readers at 35 see no prepare conflict.
    e.set_timestamps(TimestampUpdate {
        stable: Some(ts(50)),
        ..Default::default()
    })
    .unwrap();
    let at35 = TxnOptions {
        read_timestamp: Some(ts(35)),
        ..Default::default()
    };
    assert_eq!(read(&e, &at35).as_deref(), Some(&b"base"[..]));
    assert_eq!(e.stats().sessions_open, 0);
}
