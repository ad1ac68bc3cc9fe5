//! Bad input and misuse, as a table: each row names the state, makes one
//! bad call, and expects one typed error with the values it carries. After
//! every row the same engine must still serve correct reads and writes to a
//! fresh transaction, hold no pins, and have every slot free.
//!
//! Every row starts from the same state: key `base` = `v0` committed at 15,
//! then oldest = 10 and stable = 20.

use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, Error, PrepareConflicts, Timestamp, TimestampRole,
    TimestampUpdate, Txn, TxnOptions,
};

const MAX_SESSIONS: usize = 4;
const MAX_KEY: usize = 8;
const MAX_VALUE: usize = 16;
const OLDEST: u64 = 10;
const STABLE: u64 = 20;

fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

fn at_read(r: u64) -> TxnOptions {
    TxnOptions {
        read_timestamp: Some(ts(r)),
        ..TxnOptions::default()
    }
}

fn set(e: &Engine, oldest: Option<u64>, stable: Option<u64>) -> Result<(), Error> {
    e.set_timestamps(TimestampUpdate {
        oldest: oldest.map(ts),
        stable: stable.map(ts),
        durable: None,
    })
}

fn setup() -> Engine {
    let e = Engine::new(EngineConfig {
        max_sessions: MAX_SESSIONS,
        max_key_len: MAX_KEY,
        max_value_len: MAX_VALUE,
        ..EngineConfig::default()
    })
    .unwrap();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"base", b"v0").unwrap();
        t.commit(CommitOptions::at(15)).unwrap();
    }
    set(&e, Some(OLDEST), Some(STABLE)).unwrap();
    e
}

/// The engine still serves correct reads and writes after a row.
fn still_works(e: &Engine, row: &str) {
    assert_eq!(e.stats().sessions_open, 0, "{row}: a slot was left claimed");
    assert!(
        e.pins().is_empty(),
        "{row}: pins left behind: {:?}",
        e.pins()
    );
    let stable = e
        .query_timestamp(snapshot_engine::TimestampKind::Stable)
        .map_or(0, Timestamp::get);
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"base").unwrap(), Some(b"v0".to_vec()), "{row}: base");
    t.put(
        b"check",
        row.as_bytes().get(..MAX_VALUE.min(row.len())).unwrap(),
    )
    .unwrap_or_else(|err| panic!("{row}: write after the row failed: {err}"));
    t.commit(CommitOptions::at(stable + 100))
        .unwrap_or_else(|err| panic!("{row}: commit after the row failed: {err}"));
    let mut t = s.begin(&at_read(stable + 100)).unwrap();
    let want = row.as_bytes()[..MAX_VALUE.min(row.len())].to_vec();
    assert_eq!(t.get(b"check").unwrap(), Some(want), "{row}: own commit");
    // Nothing the row wrote (under `bad`) became visible.
    assert_eq!(
        t.get(b"bad").unwrap(),
        None,
        "{row}: a refused write leaked"
    );
}

/// Makes `call` on a fresh transaction that has written `bad = x`.
fn after_a_write(
    e: &Engine,
    call: impl FnOnce(Txn<'_, '_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut s = e.session()?;
    let mut t = s.begin(&TxnOptions::default())?;
    t.put(b"bad", b"x")?;
    call(t)
}

/// Makes `call` on a fresh transaction that has written `bad = x` and
/// prepared at 25.
fn after_prepare_at_25(
    e: &Engine,
    call: impl FnOnce(Txn<'_, '_>) -> Result<(), Error>,
) -> Result<(), Error> {
    after_a_write(e, |mut t| {
        t.prepare(ts(25))?;
        call(t)
    })
}

/// A commit refused for a timestamp: the transaction must come back open
/// (it rolls back as it drops here); the error is the row's result.
fn refused(r: Result<(), snapshot_engine::CommitError<'_, '_>>) -> Result<(), Error> {
    let e = r.expect_err("the commit should have been refused");
    let err = e.error().clone();
    assert!(
        e.into_txn().is_some(),
        "a commit refused with {err} should hand the transaction back"
    );
    Err(err)
}

struct Row {
    /// What is misused.
    name: &'static str,
    /// The state the bad call is made in.
    state: &'static str,
    /// The typed error, with its carried values.
    expect: Error,
    /// Sets up the state, makes the bad call and returns its result
    /// (asserting any follow-up, e.g. that the transaction stays usable).
    run: fn(&Engine) -> Result<(), Error>,
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            name: "read timestamp zero",
            state: "fresh transaction",
            expect: Error::TimestampOutOfRange {
                role: TimestampRole::Read,
                value: 0,
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                let r = t.set_read_timestamp(ts(0)).map(drop);
                // Still usable: a valid read timestamp afterwards works.
                assert_eq!(t.set_read_timestamp(ts(12)).unwrap(), ts(12));
                r
            },
        },
        Row {
            name: "read timestamp above Timestamp::MAX",
            state: "fresh transaction",
            expect: Error::TimestampOutOfRange {
                role: TimestampRole::Read,
                value: Timestamp::MAX.get() + 1,
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.set_read_timestamp(ts(Timestamp::MAX.get() + 1)).map(drop)
            },
        },
        Row {
            name: "read timestamp set twice",
            state: "read timestamp 12 already set",
            expect: Error::ReadTimestampAlreadySet { current: ts(12) },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&at_read(12))?;
                let r = t.set_read_timestamp(ts(13)).map(drop);
                assert_eq!(t.read_timestamp(), ts(12));
                r
            },
        },
        Row {
            name: "read timestamp below oldest",
            state: "oldest 10, no round-up",
            expect: Error::ReadTimestampTooOld {
                read: ts(5),
                oldest: ts(OLDEST),
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                let r = t.set_read_timestamp(ts(5)).map(drop);
                assert_eq!(t.read_timestamp(), Timestamp::NONE);
                // With round-up the same request is rounded to oldest.
                let mut s2 = e.session()?;
                let mut t2 = s2.begin(&TxnOptions {
                    roundup_read: true,
                    ..TxnOptions::default()
                })?;
                assert_eq!(t2.set_read_timestamp(ts(5)).unwrap(), ts(OLDEST));
                r
            },
        },
        Row {
            name: "read timestamp after prepare",
            state: "prepared at 25",
            expect: Error::TransactionPrepared,
            run: |e| after_prepare_at_25(e, |mut t| t.set_read_timestamp(ts(21)).map(drop)),
        },
        Row {
            name: "read timestamp with read_at_stable",
            state: "begin options",
            expect: Error::IncompatibleOptions {
                first: "read_at_stable",
                second: "read_timestamp",
            },
            run: |e| {
                let mut s = e.session()?;
                s.begin(&TxnOptions {
                    read_at_stable: true,
                    read_timestamp: Some(ts(12)),
                    ..TxnOptions::default()
                })
                .map(drop)
            },
        },
        Row {
            name: "commit timestamp at stable",
            state: "one write, stable 20",
            expect: Error::CommitTimestampNotAfterStable {
                commit: ts(STABLE),
                stable: ts(STABLE),
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.put(b"ok", b"x")?;
                let e = t.try_commit(CommitOptions::at(STABLE)).unwrap_err();
                let r = Err(e.error().clone());
                // A timestamp error hands the transaction back open: it
                // commits at a valid timestamp and the write is visible.
                let t = e.into_txn().expect("still open");
                t.commit(CommitOptions::at(STABLE + 1)).unwrap();
                let mut t = s.begin(&at_read(STABLE + 1))?;
                assert_eq!(t.get(b"ok").unwrap(), Some(b"x".to_vec()));
                r
            },
        },
        Row {
            name: "set commit timestamp below stable",
            state: "stable 20",
            expect: Error::CommitTimestampNotAfterStable {
                commit: ts(15),
                stable: ts(STABLE),
            },
            run: |e| after_a_write(e, |mut t| t.set_commit_timestamp(ts(15))),
        },
        Row {
            name: "commit timestamp below oldest",
            state: "oldest 10",
            expect: Error::CommitTimestampBeforeOldest {
                commit: ts(8),
                oldest: ts(OLDEST),
            },
            run: |e| after_a_write(e, |mut t| t.set_commit_timestamp(ts(8))),
        },
        Row {
            name: "commit timestamp below read timestamp",
            state: "read timestamp 30",
            expect: Error::CommitTimestampBeforeRead {
                commit: ts(25),
                read: ts(30),
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&at_read(30))?;
                t.put(b"bad", b"x")?;
                refused(t.try_commit(CommitOptions::at(25)))
            },
        },
        Row {
            name: "commit timestamp set twice, differently",
            state: "commit timestamp 25 set",
            expect: Error::CommitTimestampAlreadySet { current: ts(25) },
            run: |e| {
                after_a_write(e, |mut t| {
                    t.set_commit_timestamp(ts(25))?;
                    refused(t.try_commit(CommitOptions::at(26)))
                })
            },
        },
        Row {
            name: "commit timestamp zero",
            state: "one write",
            expect: Error::TimestampOutOfRange {
                role: TimestampRole::Commit,
                value: 0,
            },
            run: |e| after_a_write(e, |mut t| t.set_commit_timestamp(ts(0))),
        },
        Row {
            name: "durable timestamp without prepare (commit)",
            state: "not prepared",
            expect: Error::DurableTimestampWithoutPrepare { durable: ts(30) },
            run: |e| {
                after_a_write(e, |t| {
                    refused(t.try_commit(CommitOptions {
                        commit_ts: Some(ts(25)),
                        durable_ts: Some(ts(30)),
                    }))
                })
            },
        },
        Row {
            name: "durable timestamp without prepare (set)",
            state: "not prepared",
            expect: Error::DurableTimestampWithoutPrepare { durable: ts(30) },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.set_durable_timestamp(ts(30))
            },
        },
        Row {
            name: "durable timestamp below commit timestamp",
            state: "prepared at 25",
            expect: Error::DurableTimestampBeforeCommit {
                durable: ts(26),
                commit: ts(30),
            },
            run: |e| {
                after_prepare_at_25(e, |t| {
                    refused(t.try_commit(CommitOptions {
                        commit_ts: Some(ts(30)),
                        durable_ts: Some(ts(26)),
                    }))
                })
            },
        },
        Row {
            name: "prepared commit without a commit timestamp",
            state: "prepared at 25",
            expect: Error::PreparedCommitNeedsTimestamp,
            run: |e| after_prepare_at_25(e, |t| refused(t.try_commit(CommitOptions::default()))),
        },
        Row {
            name: "commit timestamp below prepare timestamp",
            state: "prepared at 25",
            expect: Error::CommitTimestampBeforePrepare {
                commit: ts(23),
                prepare: ts(25),
            },
            run: |e| after_prepare_at_25(e, |t| refused(t.try_commit(CommitOptions::at(23)))),
        },
        Row {
            name: "prepared durable timestamp at stable",
            state: "prepared at 25, then stable raised to 30",
            expect: Error::DurableTimestampNotAfterStable {
                durable: ts(28),
                stable: ts(30),
            },
            run: |e| {
                after_prepare_at_25(e, |t| {
                    set(e, None, Some(30))?;
                    refused(t.try_commit(CommitOptions::at(28)))
                })
            },
        },
        Row {
            name: "prepare timestamp at stable",
            state: "stable 20, no round-up",
            expect: Error::PrepareTimestampNotAfterStable {
                prepare: ts(STABLE),
                stable: ts(STABLE),
            },
            run: |e| after_a_write(e, |mut t| t.prepare(ts(STABLE)).map(drop)),
        },
        Row {
            name: "prepare twice",
            state: "prepared at 25",
            expect: Error::AlreadyPrepared,
            run: |e| after_prepare_at_25(e, |mut t| t.prepare(ts(26)).map(drop)),
        },
        Row {
            name: "prepare after a commit timestamp",
            state: "commit timestamp 25 set",
            expect: Error::PrepareAfterCommitTimestamp { commit: ts(25) },
            run: |e| {
                after_a_write(e, |mut t| {
                    t.set_commit_timestamp(ts(25))?;
                    t.prepare(ts(26)).map(drop)
                })
            },
        },
        Row {
            name: "prepare below an active read timestamp",
            state: "another session reads at 30",
            expect: Error::PrepareTimestampBeforeActiveRead {
                prepare: ts(22),
                read: ts(30),
            },
            run: |e| {
                let mut r = e.session()?;
                let _reader = r.begin(&at_read(30))?;
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.put(b"bad", b"x")?;
                t.prepare(ts(22)).map(drop)
            },
        },
        Row {
            name: "write in a prepared transaction",
            state: "prepared at 25",
            expect: Error::TransactionPrepared,
            run: |e| after_prepare_at_25(e, |mut t| t.put(b"bad", b"y")),
        },
        Row {
            name: "oldest past stable",
            state: "stable 20",
            expect: Error::OldestAfterStable {
                oldest: ts(25),
                stable: ts(STABLE),
            },
            run: |e| set(e, Some(25), None),
        },
        Row {
            name: "oldest backwards",
            state: "oldest 10",
            expect: Error::TimestampMovedBackwards {
                role: TimestampRole::Oldest,
                requested: ts(5),
                current: ts(OLDEST),
            },
            run: |e| set(e, Some(5), None),
        },
        Row {
            name: "stable backwards",
            state: "stable 20",
            expect: Error::TimestampMovedBackwards {
                role: TimestampRole::Stable,
                requested: ts(15),
                current: ts(STABLE),
            },
            run: |e| set(e, None, Some(15)),
        },
        Row {
            name: "stable zero",
            state: "stable 20",
            expect: Error::TimestampOutOfRange {
                role: TimestampRole::Stable,
                value: 0,
            },
            run: |e| set(e, None, Some(0)),
        },
        Row {
            name: "global durable above Timestamp::MAX",
            state: "any",
            expect: Error::TimestampOutOfRange {
                role: TimestampRole::GlobalDurable,
                value: Timestamp::MAX.get() + 1,
            },
            run: |e| {
                e.set_timestamps(TimestampUpdate {
                    durable: Some(ts(Timestamp::MAX.get() + 1)),
                    ..TimestampUpdate::default()
                })
            },
        },
        Row {
            name: "stable past a prepared transaction's durable timestamp",
            state: "prepared at 25, durable 30 announced",
            expect: Error::StablePastPreparedDurable {
                stable: ts(40),
                durable: ts(30),
            },
            run: |e| {
                after_prepare_at_25(e, |mut t| {
                    t.set_durable_timestamp(ts(30))?;
                    let r = set(e, None, Some(40));
                    // Refused as a whole: stable did not move.
                    assert_eq!(
                        e.query_timestamp(snapshot_engine::TimestampKind::Stable),
                        Some(ts(STABLE))
                    );
                    r
                })
            },
        },
        // A KV `Txn` ends by value: after commit or rollback it cannot be
        // named, so these misuses no longer compile. The machinery's
        // `Transaction` ends in place and still refuses them at run time.
        Row {
            name: "read after commit",
            state: "finished transaction (machinery)",
            expect: Error::TransactionFinished,
            run: |e| {
                let mut s = e.manager().session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.commit(CommitOptions::default(), |_| {})?;
                t.read_view().map(drop)
            },
        },
        Row {
            name: "rollback twice",
            state: "finished transaction (machinery)",
            expect: Error::TransactionFinished,
            run: |e| {
                let mut s = e.manager().session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.new_version()?;
                t.rollback(|_| {})?;
                t.rollback(|_| {})
            },
        },
        Row {
            name: "write after rollback",
            state: "finished transaction (machinery)",
            expect: Error::TransactionFinished,
            run: |e| {
                let mut s = e.manager().session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.rollback(|_| {})?;
                t.new_version().map(drop)
            },
        },
        Row {
            name: "rollback to a savepoint of an earlier transaction",
            state: "savepoint taken in a committed transaction",
            expect: Error::UnknownSavepoint,
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                let sp = t.savepoint()?;
                t.commit(CommitOptions::default())?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.put(b"bad", b"x")?;
                t.rollback_to(&sp)
            },
        },
        Row {
            name: "rollback to a savepoint discarded by an earlier one",
            state: "savepoints a, b; rolled back to a",
            expect: Error::UnknownSavepoint,
            run: |e| {
                after_a_write(e, |mut t| {
                    let a = t.savepoint()?;
                    let b = t.savepoint()?;
                    t.rollback_to(&a)?;
                    t.rollback_to(&b)
                })
            },
        },
        Row {
            name: "savepoint after prepare",
            state: "prepared at 25",
            expect: Error::TransactionPrepared,
            run: |e| after_prepare_at_25(e, |mut t| t.savepoint().map(drop)),
        },
        Row {
            name: "write in a read-only transaction",
            state: "read_only",
            expect: Error::ReadOnlyTransaction,
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions {
                    read_only: true,
                    ..TxnOptions::default()
                })?;
                t.put(b"bad", b"x")
            },
        },
        Row {
            name: "write in a read_at_stable transaction",
            state: "read_at_stable",
            expect: Error::ReadOnlyTransaction,
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions {
                    read_at_stable: true,
                    ..TxnOptions::default()
                })?;
                assert_eq!(t.read_timestamp(), ts(STABLE));
                t.delete(b"base")
            },
        },
        Row {
            name: "write while ignoring prepared updates",
            state: "prepare_conflicts = Ignore",
            expect: Error::ReadOnlyTransaction,
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions {
                    prepare_conflicts: PrepareConflicts::Ignore,
                    ..TxnOptions::default()
                })?;
                t.put(b"bad", b"x")
            },
        },
        Row {
            name: "key over max_key_len",
            state: "max_key_len 8",
            expect: Error::KeyTooLarge {
                len: MAX_KEY + 1,
                max: MAX_KEY,
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                let r = t.put([b'k'; MAX_KEY + 1], b"x");
                // Not a conflict: the transaction still writes and commits.
                t.put(b"ok", b"y").unwrap();
                t.commit(CommitOptions::at(STABLE + 1)).unwrap();
                r
            },
        },
        Row {
            name: "get of a key over max_key_len",
            state: "max_key_len 8",
            expect: Error::KeyTooLarge {
                len: MAX_KEY + 1,
                max: MAX_KEY,
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                let r = t.get([b'k'; MAX_KEY + 1]).map(|_| ());
                assert_eq!(
                    t.get_with([b'k'; MAX_KEY + 1], |v| v.is_some()),
                    Err(Error::KeyTooLarge {
                        len: MAX_KEY + 1,
                        max: MAX_KEY
                    })
                );
                assert_eq!(
                    t.get_many(&[&b"k"[..], &[b'k'; MAX_KEY + 1]]),
                    Err(Error::KeyTooLarge {
                        len: MAX_KEY + 1,
                        max: MAX_KEY
                    })
                );
                // A key at the limit is an ordinary read.
                assert_eq!(t.get([b'k'; MAX_KEY])?, None);
                r
            },
        },
        Row {
            name: "value over max_value_len",
            state: "max_value_len 16",
            expect: Error::ValueTooLarge {
                len: MAX_VALUE + 1,
                max: MAX_VALUE,
            },
            run: |e| {
                let mut s = e.session()?;
                let mut t = s.begin(&TxnOptions::default())?;
                t.put(b"bad", [0; MAX_VALUE + 1])
            },
        },
        Row {
            name: "one session past the table size",
            state: "every slot open",
            expect: Error::SessionTableFull {
                max_sessions: MAX_SESSIONS,
            },
            run: |e| {
                let open: Vec<_> = (0..MAX_SESSIONS).map(|_| e.session().unwrap()).collect();
                let r = e.session().map(drop);
                drop(open);
                // A freed slot is usable again.
                e.session().unwrap();
                r
            },
        },
        Row {
            name: "write after a write conflict",
            state: "doomed by a conflict on base",
            expect: Error::MustRollBack,
            run: |e| {
                let mut s1 = e.session()?;
                let mut s2 = e.session()?;
                let mut t1 = s1.begin(&TxnOptions::default())?;
                let mut t2 = s2.begin(&TxnOptions::default())?;
                t1.put(b"base", b"v1")?;
                assert_eq!(
                    t2.put(b"base", b"v2"),
                    Err(Error::WriteConflict {
                        key: b"base".to_vec()
                    })
                );
                let r = t2.put(b"bad", b"x");
                assert_eq!(t2.get(b"base"), Err(Error::MustRollBack));
                // Commit of a doomed transaction rolls it back.
                assert_eq!(
                    t2.try_commit(CommitOptions::at(30)).map_err(|e| {
                        let err = e.error().clone();
                        assert!(e.into_txn().is_none(), "a doomed commit rolls back");
                        err
                    }),
                    Err(Error::MustRollBack)
                );
                t1.rollback();
                r
            },
        },
    ]
}

#[test]
fn every_misuse_gets_its_typed_error_and_the_engine_keeps_working() {
    let rows = rows();
    assert!(
        rows.len() >= 20,
        "the table must cover at least 20 kinds of misuse"
    );
    for row in &rows {
        let e = setup();
        let got = (row.run)(&e);
        assert_eq!(
            got,
            Err(row.expect.clone()),
            "row '{}' (state: {}): wrong result",
            row.name,
            row.state
        );
        // The error's message names the values it carries.
        assert!(!row.expect.to_string().is_empty());
        still_works(&e, row.name);
    }
    eprintln!("{} misuse rows passed", rows.len());
}
