//! `?` on `commit` in the two commonest `main`s: `Box<dyn Error>` and
//! `anyhow`. This file compiles only if commit's error owns nothing
//! borrowed from the session; the tests check the error that arrives is
//! the engine's, and that `try_commit` still hands a refused transaction
//! back.

use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, Timestamp, TimestampUpdate, TxnOptions,
};

/// Writes `k` and commits at `commit_ts` after stable is set to 20.
fn boxed(commit_ts: u64) -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineConfig::default())?;
    engine.set_timestamps(TimestampUpdate::stable(20))?;
    let mut session = engine.session()?;
    let mut txn = session.begin(&TxnOptions::default())?;
    txn.put("k", "v")?;
    txn.commit(CommitOptions::at(commit_ts))?;
    let mut txn = session.begin(&TxnOptions::at(commit_ts))?;
    assert_eq!(txn.get("k")?.as_deref(), Some(&b"v"[..]));
    Ok(())
}

fn with_anyhow(commit_ts: u64) -> anyhow::Result<()> {
    let engine = Engine::new(EngineConfig::default())?;
    engine.set_timestamps(TimestampUpdate::stable(20))?;
    let mut session = engine.session()?;
    let mut txn = session.begin(&TxnOptions::default())?;
    txn.put("k", "v")?;
    txn.commit(CommitOptions::at(commit_ts))?;
    Ok(())
}

fn refused() -> Error {
    Error::CommitTimestampNotAfterStable {
        commit: Timestamp::new(10),
        stable: Timestamp::new(20),
    }
}

#[test]
fn question_mark_on_commit_works_with_box_dyn_error() {
    boxed(30).unwrap();
    let e = boxed(10).unwrap_err();
    assert_eq!(e.downcast_ref::<Error>(), Some(&refused()));
    assert_eq!(
        e.to_string(),
        "commit timestamp 10 must be after the stable timestamp 20"
    );
}

#[test]
fn question_mark_on_commit_works_with_anyhow() {
    with_anyhow(30).unwrap();
    let e = with_anyhow(10).unwrap_err();
    assert_eq!(e.downcast_ref::<Error>(), Some(&refused()));
}

#[test]
fn a_commit_refused_for_a_timestamp_rolls_back_and_try_commit_keeps_it() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    engine.set_timestamps(TimestampUpdate::stable(20)).unwrap();
    let mut session = engine.session().unwrap();
    // `commit`: refused, and the transaction is gone (rolled back).
    let mut txn = session.begin(&TxnOptions::default()).unwrap();
    txn.put("k", "lost").unwrap();
    assert_eq!(txn.commit(CommitOptions::at(10)), Err(refused()));
    let mut r = session.begin(&TxnOptions::default()).unwrap();
    assert_eq!(r.get("k").unwrap(), None);
    drop(r);
    // `try_commit`: refused, handed back, fixed, committed.
    let mut txn = session.begin(&TxnOptions::default()).unwrap();
    txn.put("k", "kept").unwrap();
    let e = txn.try_commit(CommitOptions::at(10)).unwrap_err();
    assert_eq!(e.error(), &refused());
    let txn = e
        .into_txn()
        .expect("a timestamp error keeps the transaction");
    txn.commit(CommitOptions::at(30)).unwrap();
    let mut r = session.begin(&TxnOptions::at(30)).unwrap();
    assert_eq!(r.get("k").unwrap().as_deref(), Some(&b"kept"[..]));
}

#[test]
fn timestamps_are_plain_numbers_or_timestamps_everywhere() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    engine
        .set_timestamps(TimestampUpdate::stable(20).and_oldest(10))
        .unwrap();
    assert_eq!(
        TimestampUpdate::stable(20).and_oldest(10).and_durable(25),
        TimestampUpdate {
            oldest: Some(Timestamp::new(10)),
            stable: Some(Timestamp::new(20)),
            durable: Some(Timestamp::new(25)),
        }
    );
    assert_eq!(
        TimestampUpdate::oldest(1),
        TimestampUpdate::default().and_oldest(Timestamp::new(1))
    );
    assert_eq!(TimestampUpdate::durable(3).durable, Some(Timestamp::new(3)));
    let mut session = engine.session().unwrap();
    let mut txn = session.begin(&TxnOptions::at(15)).unwrap();
    txn.put("k", "v").unwrap();
    assert_eq!(txn.prepare(21).unwrap(), Timestamp::new(21));
    txn.set_commit_timestamp(22).unwrap();
    txn.set_durable_timestamp(Timestamp::new(23)).unwrap();
    // One options value for a prepared commit's two timestamps.
    assert_eq!(
        CommitOptions::prepared(22, 24),
        CommitOptions {
            commit_ts: Some(Timestamp::new(22)),
            durable_ts: Some(Timestamp::new(24)),
        }
    );
    assert_eq!(
        CommitOptions::at(22).durable(24),
        CommitOptions::prepared(22, 24)
    );
    txn.commit(CommitOptions::prepared(22, 24)).unwrap();
    let mut txn = session.begin(&TxnOptions::default()).unwrap();
    txn.set_read_timestamp(22).unwrap();
    assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}
