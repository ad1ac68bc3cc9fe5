//! Prepared transactions (two-phase commit) and the timestamp rules that
//! come with them, as tables.
//!
//! Every row names the rule, the state it starts from, the call, and the
//! expected outcome or typed error with the values it carries. After every
//! row the harness checks that the engine is still usable: every session is
//! closed, stable and oldest can advance past everything the row did, and a
//! fresh transaction writes, commits and reads back.

use crate::support::*;
use snapshot_engine::with_machinery::{Engine, LockFree, Machinery, Session, Txn};
use snapshot_engine::*;

/// Every fixture starts with `j = j0` and `k = v0` committed at 5.
const SEED: Seed = &[(b"j", b"j0"), (b"k", b"v0")];

/// Runs a table of this file's rows, each from `SEED`.
fn run<M: Machinery>(rows: Vec<Row<M>>) {
    run_seeded(SEED, rows)
}

fn with(p: PrepareConflicts, r: Option<u64>) -> TxnOptions {
    TxnOptions {
        read_timestamp: r.map(ts),
        prepare_conflicts: p,
        ..TxnOptions::default()
    }
}

fn roundup() -> TxnOptions {
    TxnOptions {
        roundup_prepared: true,
        ..TxnOptions::default()
    }
}

fn commit_durable(c: u64, d: u64) -> CommitOptions {
    CommitOptions {
        commit_ts: Some(ts(c)),
        durable_ts: Some(ts(d)),
    }
}

fn k() -> Vec<u8> {
    b"k".to_vec()
}

fn val(v: &[u8]) -> Out {
    Out::Value(Some(v.to_vec()))
}

/// Writes `k = v1`, `j = j1` in `t` and prepares at `p`.
fn write_and_prepare<M: Machinery>(t: &mut Txn<'_, '_, M>, p: u64) -> Timestamp {
    t.put(b"j", b"j1").unwrap();
    t.put(b"k", b"v1").unwrap();
    t.prepare(ts(p)).unwrap()
}

/// Writes `k = v1` in a fresh transaction begun with `begin` and prepares
/// at `p`, leaving the transaction to roll back when it is dropped.
fn write_k_and_prepare<M: Machinery>(e: &Engine<M>, begin: &TxnOptions, p: u64) -> Result<Out> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(begin).unwrap();
    t.put(b"k", b"v1").unwrap();
    t.prepare(ts(p)).map(Out::Ts)
}

/// Prepares `j = j1`, `k = v1` at 25 in a new session (and announces
/// durable timestamp `durable`, if given), runs `f` while the transaction is
/// unresolved, then resolves it with `resolve`.
fn while_unresolved<M: Machinery>(
    e: &Engine<M>,
    durable: Option<u64>,
    f: fn(&Engine<M>) -> Result<Out>,
    resolve: fn(Txn<'_, '_, M>) -> Result<()>,
) -> Result<Out> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    write_and_prepare(&mut t, 25);
    if let Some(d) = durable {
        t.set_durable_timestamp(ts(d)).unwrap();
    }
    let r = f(e);
    resolve(t).unwrap();
    r
}

/// Reads `key` in a fresh transaction with `opts`.
fn read<M: Machinery>(e: &Engine<M>, opts: &TxnOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(opts)?;
    t.get(key)
}

#[test]
fn prepare_timestamp_rules() {
    on_every_machinery!(prepare_timestamp_rules_on);
}

fn prepare_timestamp_rules_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "prepare is allowed once",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let r = t.prepare(ts(30)).map(Out::Ts);
                t.commit(CommitOptions::at(25)).unwrap();
                r
            },
            Err(Error::AlreadyPrepared),
        ),
        row(
            "prepare only before a commit timestamp is set",
            "commit timestamp 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                t.prepare(ts(35)).map(Out::Ts)
            },
            Err(Error::PrepareAfterCommitTimestamp { commit: ts(30) }),
        ),
        row(
            "prepare timestamp must be after stable (equal refused)",
            "stable 20",
            |e| write_k_and_prepare(e, &TxnOptions::default(), 20),
            Err(Error::PrepareTimestampNotAfterStable {
                prepare: ts(20),
                stable: ts(20),
            }),
        ),
        row(
            "prepare timestamp must be after stable (below refused)",
            "stable 20",
            |e| write_k_and_prepare(e, &TxnOptions::default(), 15),
            Err(Error::PrepareTimestampNotAfterStable {
                prepare: ts(15),
                stable: ts(20),
            }),
        ),
        row(
            "a refused prepare leaves the transaction usable",
            "stable 20",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                assert!(t.prepare(ts(15)).is_err());
                assert_eq!(t.get(b"k").unwrap(), Some(b"v1".to_vec()));
                let p = t.prepare(ts(25)).map(Out::Ts);
                t.commit(CommitOptions::at(25)).unwrap();
                p
            },
            Ok(Out::Ts(ts(25))),
        ),
        row(
            "roundup_prepared rounds a prepare at or below stable to stable + 1",
            "stable 20, roundup_prepared",
            |e| write_k_and_prepare(e, &roundup(), 15),
            Ok(Out::Ts(ts(21))),
        ),
        row(
            "roundup_prepared leaves a prepare above stable alone",
            "stable 20, roundup_prepared",
            |e| write_k_and_prepare(e, &roundup(), 30),
            Ok(Out::Ts(ts(30))),
        ),
        Row {
            rule: "roundup_prepared cannot round past Timestamp::MAX",
            state: "stable at MAX, roundup_prepared",
            setup: stable_at_max,
            call: |e| write_k_and_prepare(e, &roundup(), 5),
            expect: Err(Error::PrepareTimestampNotAfterStable {
                prepare: ts(5),
                stable: Timestamp::MAX,
            }),
        },
        // The valid range is `1..=Timestamp::MAX`, inclusive, and the only
        // bounds a prepare has besides it are "after stable" and "at or
        // above oldest": with stable below MAX a prepare at MAX is
        // accepted. `Txn::prepare` refuses only a rounding *past* MAX
        // (`p > Timestamp::MAX`; `>=` would refuse this row).
        row(
            "a prepare at Timestamp::MAX is accepted (the range is inclusive)",
            "standard",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                let p = t.prepare(Timestamp::MAX)?;
                t.commit(CommitOptions {
                    commit_ts: Some(Timestamp::MAX),
                    durable_ts: Some(Timestamp::MAX),
                })?;
                Ok(Out::Ts(p))
            },
            Ok(Out::Ts(Timestamp::MAX)),
        ),
        Row {
            rule: "prepare timestamp at or above oldest",
            state: "oldest 50, no stable",
            setup: oldest_50_no_stable,
            call: |e| write_k_and_prepare(e, &TxnOptions::default(), 30),
            expect: Err(Error::PrepareTimestampBeforeOldest {
                prepare: ts(30),
                oldest: ts(50),
            }),
        },
        Row {
            rule: "a prepare at oldest is accepted",
            state: "oldest 50, no stable",
            setup: oldest_50_no_stable,
            call: |e| write_k_and_prepare(e, &TxnOptions::default(), 50),
            expect: Ok(Out::Ts(ts(50))),
        },
        Row {
            rule:
                "a prepare below oldest while stable is set is refused for stable (checked first)",
            state: "oldest 10, stable 20",
            setup: standard,
            call: |e| write_k_and_prepare(e, &TxnOptions::default(), 5),
            expect: Err(Error::PrepareTimestampNotAfterStable {
                prepare: ts(5),
                stable: ts(20),
            }),
        },
        Row {
            rule: "roundup_prepared rounds a prepare below oldest up to oldest",
            state: "oldest 50, no stable, roundup_prepared",
            setup: oldest_50_no_stable,
            call: |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&roundup()).unwrap();
                t.put(b"k", b"v1").unwrap();
                let p = t.prepare(ts(30)).map(Out::Ts);
                t.commit(CommitOptions::at(50)).unwrap();
                p
            },
            expect: Ok(Out::Ts(ts(50))),
        },
        row(
            "prepare timestamp 0 is out of range",
            "standard",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.prepare(ts(0)).map(Out::Ts)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Prepare,
                value: 0,
            }),
        ),
        row(
            "prepare timestamp above MAX is out of range",
            "standard",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.prepare(ts(OVER)).map(Out::Ts)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Prepare,
                value: OVER,
            }),
        ),
        row(
            "prepare not below another session's active read timestamp",
            "a reader open at read timestamp 40",
            |e| {
                let mut rs = e.session().unwrap();
                let _reader = rs.begin(&read_at(40)).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.prepare(ts(30)).map(Out::Ts)
            },
            Err(Error::PrepareTimestampBeforeActiveRead {
                prepare: ts(30),
                read: ts(40),
            }),
        ),
        row(
            "prepare at exactly an active read timestamp is allowed",
            "a reader open at read timestamp 30",
            |e| {
                let mut rs = e.session().unwrap();
                let _reader = rs.begin(&read_at(30)).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.prepare(ts(30)).map(Out::Ts)
            },
            Ok(Out::Ts(ts(30))),
        ),
        row(
            "prepare not below the transaction's own read timestamp",
            "the preparer reads at 40",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&read_at(40)).unwrap();
                t.put(b"k", b"v1").unwrap();
                let r = t.prepare(ts(30)).map(Out::Ts);
                // Refused, so still active: it can prepare at 40.
                assert_eq!(t.prepare(ts(40)), Ok(ts(40)));
                t.commit(CommitOptions::at(40)).unwrap();
                r
            },
            Err(Error::PrepareTimestampBeforeActiveRead {
                prepare: ts(30),
                read: ts(40),
            }),
        ),
        row(
            "a finished reader no longer bounds prepare",
            "a reader at 40 that has ended",
            |e| {
                read(e, &read_at(40), b"k").unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.prepare(ts(30)).map(Out::Ts)
            },
            Ok(Out::Ts(ts(30))),
        ),
        row(
            "a rounded-up prepare timestamp is checked against active reads",
            "a reader open at 40, roundup_prepared",
            |e| {
                let mut rs = e.session().unwrap();
                let _reader = rs.begin(&read_at(40)).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&roundup()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.prepare(ts(15)).map(Out::Ts)
            },
            Err(Error::PrepareTimestampBeforeActiveRead {
                prepare: ts(21),
                read: ts(40),
            }),
        ),
        row(
            "a transaction that hit a write conflict cannot prepare",
            "another transaction holds an update of k",
            |e| {
                let mut s1 = e.session().unwrap();
                let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
                t1.put(b"k", b"first").unwrap();
                let mut s2 = e.session().unwrap();
                let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
                assert_eq!(
                    t2.put(b"k", b"second"),
                    Err(Error::WriteConflict { key: k() })
                );
                t2.prepare(ts(30)).map(Out::Ts)
            },
            Err(Error::MustRollBack),
        ),
        row(
            "a finished transaction cannot prepare",
            "committed",
            |e| {
                // As for "a committed prepared transaction is finished":
                // on the machinery, where a finished one can be named.
                let mut s = e.manager().session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.new_version().unwrap();
                t.commit(CommitOptions::at(30), |_| {}).unwrap();
                t.prepare(ts(40), |_| {}).map(Out::Ts)
            },
            Err(Error::TransactionFinished),
        ),
        row(
            "a transaction with no writes may prepare and commit",
            "no writes",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                assert_eq!(t.prepare(ts(25)), Ok(ts(25)));
                t.commit(CommitOptions::at(25)).map(|()| Out::Done)
            },
            Ok(Out::Done),
        ),
    ]);
}

#[test]
fn after_prepare_only_commit_or_rollback() {
    on_every_machinery!(after_prepare_only_commit_or_rollback_on);
}

fn after_prepare_only_commit_or_rollback_on<M: Machinery>() {
    // Each call is refused with TransactionPrepared, and the transaction
    // still commits afterwards; the commit is then visible at 25.
    fn refused<M: Machinery>(
        e: &Engine<M>,
        op: fn(&mut Txn<'_, '_, M>) -> Result<Out>,
    ) -> Result<Out> {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        write_and_prepare(&mut t, 25);
        let r = op(&mut t);
        t.commit(CommitOptions::at(25)).unwrap();
        drop(s);
        assert_eq!(read(e, &read_at(25), b"k").unwrap(), Some(b"v1".to_vec()));
        r
    }
    let p = Err(Error::TransactionPrepared);
    run::<M>(vec![
        row(
            "get",
            "prepared at 25",
            |e| refused(e, |t| t.get(b"k").map(Out::Value)),
            p.clone(),
        ),
        row(
            "get_with",
            "prepared at 25",
            |e| {
                refused(e, |t| {
                    t.get_with(b"k", |v| Out::Value(v.map(<[u8]>::to_vec)))
                })
            },
            p.clone(),
        ),
        row(
            "range",
            "prepared at 25",
            |e| refused(e, |t| t.range(..).map(Out::Pairs)),
            p.clone(),
        ),
        row(
            "scan",
            "prepared at 25",
            |e| refused(e, |t| t.scan(.., |_, _| true).map(|()| Out::Done)),
            p.clone(),
        ),
        row(
            "put",
            "prepared at 25",
            |e| refused(e, |t| t.put(b"x", b"y").map(|()| Out::Done)),
            p.clone(),
        ),
        row(
            "delete",
            "prepared at 25",
            |e| refused(e, |t| t.delete(b"k").map(|()| Out::Done)),
            p.clone(),
        ),
        row(
            "set_read_timestamp",
            "prepared at 25",
            |e| refused(e, |t| t.set_read_timestamp(ts(30)).map(Out::Ts)),
            p.clone(),
        ),
        row(
            "rollback is allowed and removes every update",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.rollback();
                drop(s);
                assert_eq!(e.chain_len(b"k"), 1);
                assert_eq!(read(e, &read_at(25), b"j").unwrap(), Some(b"j0".to_vec()));
                read(e, &TxnOptions::default(), b"k").map(Out::Value)
            },
            Ok(val(b"v0")),
        ),
        row(
            "dropping a prepared transaction rolls it back",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                drop(t);
                drop(s);
                read(e, &read_at(30), b"k").map(Out::Value)
            },
            Ok(val(b"v0")),
        ),
        row(
            "a committed prepared transaction is finished",
            "prepared at 25, committed",
            |e| {
                // A KV `Txn` ends by value, so a finished one cannot be
                // named; the machinery's `Transaction` still can be.
                let mut s = e.manager().session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.new_version().unwrap();
                t.prepare(ts(25), |_| {}).unwrap();
                t.commit(CommitOptions::at(25), |_| {}).unwrap();
                t.rollback(|_| {}).map(|()| Out::Done)
            },
            Err(Error::TransactionFinished),
        ),
    ]);
}

#[test]
fn prepared_commit_timestamp_rules() {
    on_every_machinery!(prepared_commit_timestamp_rules_on);
}

fn prepared_commit_timestamp_rules_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "a prepared commit needs a commit timestamp",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let (r, t) = kept(t.try_commit(CommitOptions::default()));
                let r = Err(r);
                t.commit(CommitOptions::at(25)).unwrap();
                r
            },
            Err(Error::PreparedCommitNeedsTimestamp),
        ),
        row(
            "commit timestamp at or above the prepare timestamp",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let (r, t) = kept(t.try_commit(CommitOptions::at(24)));
                let r = Err(r);
                t.commit(CommitOptions::at(25)).unwrap();
                r
            },
            Err(Error::CommitTimestampBeforePrepare {
                commit: ts(24),
                prepare: ts(25),
            }),
        ),
        row(
            "set_commit_timestamp below the prepare timestamp is refused",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(22)).map(|()| Out::Done)
            },
            Err(Error::CommitTimestampBeforePrepare {
                commit: ts(22),
                prepare: ts(25),
            }),
        ),
        row(
            "commit at exactly the prepare timestamp",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.commit(CommitOptions::at(25)).unwrap();
                drop(s);
                read(e, &read_at(25), b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "roundup_prepared rounds a commit below the prepare timestamp up to it",
            "prepared at 25, roundup_prepared",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&roundup()).unwrap();
                write_and_prepare(&mut t, 25);
                t.commit(CommitOptions::at(22)).unwrap();
                drop(s);
                assert_eq!(read(e, &read_at(24), b"k").unwrap(), Some(b"v0".to_vec()));
                read(e, &read_at(25), b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "roundup_prepared rounds set_commit_timestamp too",
            "prepared at 25, roundup_prepared",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&roundup()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(22)).unwrap();
                // The same value given again at commit is the same timestamp.
                t.commit(CommitOptions::at(22)).unwrap();
                drop(s);
                read(e, &read_at(25), b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "durable timestamp at or above the commit timestamp",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let (r, t) = kept(t.try_commit(commit_durable(27, 26)));
                let r = Err(r);
                t.commit(commit_durable(27, 27)).unwrap();
                r
            },
            Err(Error::DurableTimestampBeforeCommit {
                durable: ts(26),
                commit: ts(27),
            }),
        ),
        row(
            "the durable timestamp must be after stable at commit",
            "prepared at 25, stable then moved to 30",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                e.set_timestamps(set(None, Some(30), None)).unwrap();
                let (r, t) = kept(t.try_commit(commit_durable(26, 30)));
                let r = Err(r);
                // Still prepared: a later durable timestamp commits.
                t.commit(commit_durable(26, 31)).unwrap();
                r
            },
            Err(Error::DurableTimestampNotAfterStable {
                durable: ts(30),
                stable: ts(30),
            }),
        ),
        row(
            "a prepared commit timestamp may be at or below stable",
            "prepared at 25, stable moved to 30",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                e.set_timestamps(set(None, Some(30), None)).unwrap();
                t.commit(commit_durable(26, 31)).unwrap();
                drop(s);
                assert_eq!(read(e, &read_at(25), b"k").unwrap(), Some(b"v0".to_vec()));
                read(e, &read_at(26), b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "a prepared commit timestamp may be below oldest",
            "prepared at 25, oldest moved to 28, stable to 30",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                e.set_timestamps(set(Some(28), Some(30), None)).unwrap();
                t.commit(commit_durable(26, 31)).unwrap();
                drop(s);
                read(e, &read_at(28), b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "a prepared commit with commit timestamp 0 is out of range",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let (r, t) = kept(t.try_commit(CommitOptions::at(0)));
                let r = Err(r);
                t.commit(CommitOptions::at(25)).unwrap();
                r
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Commit,
                value: 0,
            }),
        ),
        row(
            "a prepared commit with durable timestamp 0 is out of range",
            "prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.commit(commit_durable(25, 0)).map(|()| Out::Done)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Durable,
                value: 0,
            }),
        ),
        row(
            "set_durable_timestamp below the commit timestamp is refused",
            "prepared at 25, commit timestamp 28",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(28)).unwrap();
                t.set_durable_timestamp(ts(27)).map(|()| Out::Done)
            },
            Err(Error::DurableTimestampBeforeCommit {
                durable: ts(27),
                commit: ts(28),
            }),
        ),
        row(
            "a commit timestamp above a durable timestamp already set is refused",
            "prepared at 25, durable 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_durable_timestamp(ts(30)).unwrap();
                t.set_commit_timestamp(ts(35)).map(|()| Out::Done)
            },
            Err(Error::DurableTimestampBeforeCommit {
                durable: ts(30),
                commit: ts(35),
            }),
        ),
        row(
            "set_durable_timestamp equal to the commit timestamp is accepted",
            "prepared at 25, commit timestamp 28",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(28)).unwrap();
                t.set_durable_timestamp(ts(28)).map(|()| Out::Done)
            },
            Ok(Out::Done),
        ),
        row(
            "a commit timestamp equal to a durable timestamp already set is accepted",
            "prepared at 25, durable 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_durable_timestamp(ts(30)).unwrap();
                t.set_commit_timestamp(ts(30)).map(|()| Out::Done)
            },
            Ok(Out::Done),
        ),
        row(
            "set_durable_timestamp at or below stable is refused",
            "prepared at 25, stable 20",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_durable_timestamp(ts(20)).map(|()| Out::Done)
            },
            Err(Error::DurableTimestampNotAfterStable {
                durable: ts(20),
                stable: ts(20),
            }),
        ),
        row(
            "commit uses the durable timestamp set earlier",
            "prepared at 25, durable 40 set, stable moved to 30",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_durable_timestamp(ts(40)).unwrap();
                e.set_timestamps(set(None, Some(30), None)).unwrap();
                // Durable defaults to 40 (after stable), not to the commit
                // timestamp 26 (at or below stable).
                t.commit(CommitOptions::at(26)).unwrap();
                drop(s);
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(40)))),
        ),
        row(
            "a refused second durable timestamp keeps the first in force",
            "prepared at 25, durable 40 set, stable moved to 30",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_durable_timestamp(ts(40)).unwrap();
                e.set_timestamps(set(None, Some(30), None)).unwrap();
                assert_eq!(
                    t.set_durable_timestamp(ts(30)),
                    Err(Error::DurableTimestampNotAfterStable {
                        durable: ts(30),
                        stable: ts(30)
                    })
                );
                let r = e
                    .set_timestamps(set(None, Some(40), None))
                    .map(|()| Out::Done);
                t.commit(CommitOptions::at(26)).unwrap();
                r
            },
            Err(Error::StablePastPreparedDurable {
                stable: ts(40),
                durable: ts(40),
            }),
        ),
        row(
            "an unprepared commit must not give a durable timestamp",
            "unprepared writer",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                let (r, t) = kept(t.try_commit(commit_durable(30, 30)));
                let r = Err(r);
                t.commit(CommitOptions::at(30)).unwrap();
                r
            },
            Err(Error::DurableTimestampWithoutPrepare { durable: ts(30) }),
        ),
        row(
            "set_durable_timestamp needs a prepared transaction",
            "unprepared writer",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_durable_timestamp(ts(30)).map(|()| Out::Done)
            },
            Err(Error::DurableTimestampWithoutPrepare { durable: ts(30) }),
        ),
        row(
            "set_commit_timestamp with the same value again is accepted (WiredTiger's test_prepare02)",
            "prepared at 25, commit timestamp 26 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(26)).unwrap();
                t.set_commit_timestamp(ts(26))?;
                t.commit(commit_durable(26, 30)).unwrap();
                let mut r = s.begin(&read_at(26)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "with roundup_prepared, the same commit timestamp after rounding is accepted again",
            "prepared at 25 with roundup_prepared, commit timestamp 20 rounded to 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&roundup()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(20)).unwrap();
                t.set_commit_timestamp(ts(20))?;
                t.set_commit_timestamp(ts(25))?;
                t.commit(CommitOptions {
                    commit_ts: None,
                    durable_ts: Some(ts(30)),
                })
                .unwrap();
                let mut r = s.begin(&read_at(25)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "set_commit_timestamp with a different value on a prepared transaction is refused (deliberate difference 6)",
            "prepared at 25, commit timestamp 26 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(26)).unwrap();
                // WiredTiger accepts any value at or above the prepare ts.
                let r = t.set_commit_timestamp(ts(27)).map(|()| Out::Done);
                t.commit(commit_durable(26, 30)).unwrap();
                r
            },
            Err(Error::CommitTimestampAlreadySet { current: ts(26) }),
        ),
        row(
            "a second, different commit timestamp is refused",
            "prepared at 25, commit timestamp 26 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(26)).unwrap();
                let (r, t) = kept(t.try_commit(CommitOptions::at(27)));
                let r = Err(r);
                t.commit(CommitOptions::at(26)).unwrap();
                r
            },
            Err(Error::CommitTimestampAlreadySet { current: ts(26) }),
        ),
    ]);
}

#[test]
fn readers_meeting_prepared_updates() {
    on_every_machinery!(readers_meeting_prepared_updates_on);
}

fn readers_meeting_prepared_updates_on<M: Machinery>() {
    // Writer prepares k = v1, j = j1 at 25 and stays prepared while `check`
    // runs; then rolls back.
    fn while_prepared<M: Machinery>(
        e: &Engine<M>,
        check: fn(&Engine<M>) -> Result<Out>,
    ) -> Result<Out> {
        while_unresolved(e, None, check, |t| {
            t.rollback();
            Ok(())
        })
    }
    let conflict_k = Err(Error::PrepareConflict { key: k() });
    run::<M>(vec![
        row(
            "a reader above the prepare timestamp gets PrepareConflict",
            "prepared at 25, reader at 30",
            |e| while_prepared(e, |e| read(e, &read_at(30), b"k").map(Out::Value)),
            conflict_k.clone(),
        ),
        row(
            "a reader at exactly the prepare timestamp gets PrepareConflict",
            "prepared at 25, reader at 25",
            |e| while_prepared(e, |e| read(e, &read_at(25), b"k").map(Out::Value)),
            conflict_k.clone(),
        ),
        row(
            "a reader with no read timestamp gets PrepareConflict",
            "prepared at 25, snapshot taken after prepare",
            |e| while_prepared(e, |e| read(e, &TxnOptions::default(), b"k").map(Out::Value)),
            conflict_k.clone(),
        ),
        row(
            "a reader below the prepare timestamp sees the older version",
            "prepared at 25, reader at 24",
            |e| while_prepared(e, |e| read(e, &read_at(24), b"k").map(Out::Value)),
            Ok(val(b"v0")),
        ),
        row(
            "a snapshot taken before the prepare treats the writer as running",
            "reader began before the prepare at 25",
            |e| {
                let mut rs = e.session().unwrap();
                let mut reader = rs.begin(&TxnOptions::default()).unwrap();
                // Taken now, not at the first read.
                reader.take_snapshot().unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let r = reader.get(b"k").map(Out::Value);
                t.commit(CommitOptions::at(25)).unwrap();
                // Still running for this snapshot after the commit, too.
                assert_eq!(reader.get(b"j").unwrap(), Some(b"j0".to_vec()));
                r
            },
            Ok(val(b"v0")),
        ),
        row(
            "a reader at the prepare timestamp whose snapshot predates it",
            "reader at 25 began before the prepare at 25",
            |e| {
                let mut rs = e.session().unwrap();
                let mut reader = rs.begin(&read_at(25)).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                reader.get(b"k").map(Out::Value)
            },
            Ok(val(b"v0")),
        ),
        row(
            "ignore: the reader skips the prepared update",
            "prepared at 25, Ignore reader at 30",
            |e| {
                while_prepared(e, |e| {
                    read(e, &with(PrepareConflicts::Ignore, Some(30)), b"k").map(Out::Value)
                })
            },
            Ok(val(b"v0")),
        ),
        row(
            "ignore: the transaction is read-only",
            "prepared at 25, Ignore transaction writes another key",
            |e| {
                while_prepared(e, |e| {
                    let mut s = e.session().unwrap();
                    let mut t = s.begin(&with(PrepareConflicts::Ignore, None)).unwrap();
                    assert_eq!(t.get(b"k").unwrap(), Some(b"v0".to_vec()));
                    t.put(b"x", b"y").map(|()| Out::Done)
                })
            },
            Err(Error::ReadOnlyTransaction),
        ),
        row(
            "ignore allowing writes: skips and may write other keys",
            "prepared at 25, IgnoreAllowWrites transaction",
            |e| {
                while_prepared(e, |e| {
                    let mut s = e.session().unwrap();
                    let mut t = s
                        .begin(&with(PrepareConflicts::IgnoreAllowWrites, None))
                        .unwrap();
                    assert_eq!(t.get(b"k").unwrap(), Some(b"v0".to_vec()));
                    t.put(b"x", b"y").unwrap();
                    t.commit(CommitOptions::at(30)).unwrap();
                    drop(s);
                    read(e, &read_at(30), b"x").map(Out::Value)
                })
            },
            Ok(val(b"y")),
        ),
        row(
            "ignore allowing writes: writing the prepared key is a write conflict",
            "prepared at 25, IgnoreAllowWrites transaction writes k",
            |e| {
                while_prepared(e, |e| {
                    let mut s = e.session().unwrap();
                    let mut t = s
                        .begin(&with(PrepareConflicts::IgnoreAllowWrites, None))
                        .unwrap();
                    t.put(b"k", b"mine").map(|()| Out::Done)
                })
            },
            Err(Error::WriteConflict { key: k() }),
        ),
        row(
            "a writer of a prepared key gets a write conflict",
            "prepared at 25, writer of k",
            |e| {
                while_prepared(e, |e| {
                    let mut s = e.session().unwrap();
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(b"k", b"mine").map(|()| Out::Done)
                })
            },
            Err(Error::WriteConflict { key: k() }),
        ),
        row(
            "a range scan meeting a prepared update gets PrepareConflict on its key",
            "prepared at 25, scan at 30",
            |e| {
                while_prepared(e, |e| {
                    let mut s = e.session().unwrap();
                    let mut t = s.begin(&read_at(30)).unwrap();
                    t.range(..).map(Out::Pairs)
                })
            },
            Err(Error::PrepareConflict { key: b"j".to_vec() }),
        ),
        row(
            "an ignoring range scan sees the older versions",
            "prepared at 25, Ignore scan at 30",
            |e| {
                while_prepared(e, |e| {
                    let mut s = e.session().unwrap();
                    let mut t = s.begin(&with(PrepareConflicts::Ignore, Some(30))).unwrap();
                    t.range(..).map(Out::Pairs)
                })
            },
            Ok(Out::Pairs(vec![
                (b"j".to_vec(), b"j0".to_vec()),
                (b"k".to_vec(), b"v0".to_vec()),
            ])),
        ),
        row(
            "read at stable: a prepare at or below stable conflicts",
            "prepared at 25, stable moved to 30, read_at_stable",
            |e| {
                while_prepared(e, |e| {
                    e.set_timestamps(set(None, Some(30), None)).unwrap();
                    let opts = TxnOptions {
                        read_at_stable: true,
                        ..TxnOptions::default()
                    };
                    read(e, &opts, b"k").map(Out::Value)
                })
            },
            conflict_k.clone(),
        ),
        // The equality case: `pts <= stable` in `ReadView::prepared_conflicts`
        // (`<` survived loom).
        row(
            "read at stable: a prepare exactly at stable conflicts",
            "prepared at 25, stable moved to 25, read_at_stable",
            |e| {
                while_prepared(e, |e| {
                    e.set_timestamps(set(None, Some(25), None)).unwrap();
                    let opts = TxnOptions {
                        read_at_stable: true,
                        ..TxnOptions::default()
                    };
                    read(e, &opts, b"k").map(Out::Value)
                })
            },
            conflict_k.clone(),
        ),
        row(
            "read at stable: a prepare above stable is invisible",
            "prepared at 25, stable 20, read_at_stable",
            |e| {
                while_prepared(e, |e| {
                    let opts = TxnOptions {
                        read_at_stable: true,
                        ..TxnOptions::default()
                    };
                    read(e, &opts, b"k").map(Out::Value)
                })
            },
            Ok(val(b"v0")),
        ),
        row(
            "a prepared delete conflicts, and hides the key once committed",
            "k deleted and prepared at 25",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.delete(b"k").unwrap();
                t.prepare(ts(25)).unwrap();
                assert_eq!(
                    read(e, &read_at(30), b"k"),
                    Err(Error::PrepareConflict { key: k() })
                );
                t.commit(CommitOptions::at(26)).unwrap();
                drop(s);
                assert_eq!(read(e, &read_at(25), b"k").unwrap(), Some(b"v0".to_vec()));
                read(e, &read_at(30), b"k").map(Out::Value)
            },
            Ok(Out::Value(None)),
        ),
        row(
            "a reader that met a conflict retries after resolution and sees the commit",
            "reader at 30 met the prepare at 25; writer commits at 26",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                let mut rs = e.session().unwrap();
                let mut reader = rs.begin(&read_at(30)).unwrap();
                assert_eq!(reader.get(b"k"), Err(Error::PrepareConflict { key: k() }));
                t.commit(CommitOptions::at(26)).unwrap();
                reader.get(b"k").map(Out::Value)
            },
            Ok(val(b"v1")),
        ),
        row(
            "prepare conflicts are counted",
            "prepared at 25, two conflicting reads",
            |e| {
                while_prepared(e, |e| {
                    let before = e.stats().prepare_conflicts;
                    let _ = read(e, &read_at(30), b"k");
                    let _ = read(e, &read_at(30), b"j");
                    Ok(Out::Counts(e.stats().prepare_conflicts - before, 0, 0))
                })
            },
            Ok(Out::Counts(2, 0, 0)),
        ),
    ]);
}

/// Prepares `j = j1`, `k = v1` at 25, resolves the transaction with
/// `resolve`, then reads every key in a new session at `read`.
fn resolve_then_read_all<M: Machinery>(
    e: &Engine<M>,
    resolve: fn(Txn<'_, '_, M>) -> Result<()>,
    read: u64,
) -> Result<Out> {
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        write_and_prepare(&mut t, 25);
        resolve(t).unwrap();
    }
    let mut s = e.session().unwrap();
    let mut r = s.begin(&read_at(read)).unwrap();
    r.range(..).map(Out::Pairs)
}

#[test]
fn resolution_is_atomic_for_readers_at_or_above_the_commit_timestamp() {
    on_every_machinery!(resolution_is_atomic_for_readers_at_or_above_the_commit_timestamp_on);
}

fn resolution_is_atomic_for_readers_at_or_above_the_commit_timestamp_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "commit: both keys new at the commit timestamp",
            "prepared at 25, committed at 27",
            |e| resolve_then_read_all(e, |t| t.commit(CommitOptions::at(27)), 27),
            Ok(Out::Pairs(vec![
                (b"j".to_vec(), b"j1".to_vec()),
                (b"k".to_vec(), b"v1".to_vec()),
            ])),
        ),
        row(
            "commit: between prepare and commit timestamps both keys are old, no conflict",
            "prepared at 25, committed at 27, reader at 26",
            |e| resolve_then_read_all(e, |t| t.commit(CommitOptions::at(27)), 26),
            Ok(Out::Pairs(vec![
                (b"j".to_vec(), b"j0".to_vec()),
                (b"k".to_vec(), b"v0".to_vec()),
            ])),
        ),
        row(
            "rollback: every update is gone, no conflict",
            "prepared at 25, rolled back",
            |e| {
                resolve_then_read_all(
                    e,
                    |t| {
                        t.rollback();
                        Ok(())
                    },
                    30,
                )
            },
            Ok(Out::Pairs(vec![
                (b"j".to_vec(), b"j0".to_vec()),
                (b"k".to_vec(), b"v0".to_vec()),
            ])),
        ),
    ]);
}

/// Readers racing a preparer/committer of two keys never see one key's new
/// value with the other key's old value: each pair read is equal or
/// stopped by a prepare conflict.
#[test]
fn concurrent_readers_never_see_half_a_resolved_prepared_transaction() {
    on_every_machinery!(concurrent_readers_never_see_half_a_resolved_prepared_transaction_on);
}

fn concurrent_readers_never_see_half_a_resolved_prepared_transaction_on<M: Machinery>() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let e = Engine::<M>::with_machinery(EngineConfig::default()).unwrap();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"a", 0u64.to_le_bytes()).unwrap();
        t.put(b"b", 0u64.to_le_bytes()).unwrap();
        t.commit(CommitOptions::at(1)).unwrap();
    }
    let done = AtomicBool::new(false);
    const ROUNDS: u64 = 2_000;
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                let mut s = e.session().unwrap();
                let (mut pairs, mut conflicts) = (0u64, 0u64);
                while !done.load(Ordering::Acquire) || pairs == 0 {
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    let a = t.get(b"a");
                    let b = t.get(b"b");
                    match (a, b) {
                        (Ok(Some(a)), Ok(Some(b))) => {
                            assert_eq!(a, b, "half of a prepared transaction seen");
                            pairs += 1;
                        }
                        (Err(Error::PrepareConflict { .. }), _)
                        | (_, Err(Error::PrepareConflict { .. })) => conflicts += 1,
                        other => panic!("unexpected read result {other:?}"),
                    }
                }
                assert!(pairs > 0);
                let _ = conflicts;
            });
        }
        sc.spawn(|| {
            let mut s = e.session().unwrap();
            for i in 1..=ROUNDS {
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"a", i.to_le_bytes()).unwrap();
                t.put(b"b", i.to_le_bytes()).unwrap();
                t.prepare(ts(10 * i)).unwrap();
                if i % 5 == 0 {
                    t.rollback();
                } else {
                    t.commit(commit_durable(10 * i + 1, 10 * i + 2)).unwrap();
                }
            }
            done.store(true, Ordering::Release);
        });
    });
    assert_usable_plain(&e);
}

fn assert_usable_plain<M: Machinery>(e: &Engine<M>) {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let a = t.get(b"a").unwrap();
    assert_eq!(a, t.get(b"b").unwrap());
}

#[test]
fn all_durable_accounts_for_unfinished_commits() {
    on_every_machinery!(all_durable_accounts_for_unfinished_commits_on);
}

fn all_durable_accounts_for_unfinished_commits_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "no all-durable timestamp and no commit: none",
            "fresh engine",
            |_| {
                let e = Engine::<M>::with_machinery(EngineConfig::default()).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(None)),
        ),
        row(
            "commits raise the all-durable timestamp",
            "standard (a commit at 5)",
            |e| Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable))),
            Ok(Out::Stamp(Some(ts(5)))),
        ),
        row(
            "an unprepared transaction with a commit timestamp holds it below",
            "global durable 100, open writer with commit timestamp 50",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(50)).unwrap();
                let during = e.query_timestamp(TimestampKind::AllDurable);
                t.commit(CommitOptions::default()).unwrap();
                assert_eq!(e.query_timestamp(TimestampKind::AllDurable), Some(ts(100)));
                Ok(Out::Stamp(during))
            },
            Ok(Out::Stamp(Some(ts(49)))),
        ),
        row(
            "a rolled-back transaction stops holding it",
            "global durable 100, writer with commit timestamp 50 rolled back",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(50)).unwrap();
                t.rollback();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(100)))),
        ),
        row(
            "a prepared transaction with only a commit timestamp does not hold it",
            "global durable 100, prepared at 25, commit timestamp 30 set",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(30)).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(100)))),
        ),
        row(
            "a prepared transaction with a durable timestamp holds it below",
            "global durable 100, prepared at 25, durable 60 set",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_commit_timestamp(ts(30)).unwrap();
                t.set_durable_timestamp(ts(60)).unwrap();
                let during = e.query_timestamp(TimestampKind::AllDurable);
                t.commit(CommitOptions::default()).unwrap();
                assert_eq!(e.query_timestamp(TimestampKind::AllDurable), Some(ts(100)));
                Ok(Out::Stamp(during))
            },
            Ok(Out::Stamp(Some(ts(59)))),
        ),
        row(
            "a prepared commit's durable timestamp raises the all-durable timestamp",
            "global durable 100, prepared commit durable 150",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.commit(commit_durable(30, 150)).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(150)))),
        ),
        row(
            "the all-durable timestamp may move backwards",
            "global durable 100 then 50",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                e.set_timestamps(set(None, None, Some(50))).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(50)))),
        ),
        row(
            "commits made before it moved backwards stop counting, later ones count",
            "a commit at 120, global durable 50, then a commit at 70 on another session",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.commit(CommitOptions::at(120)).unwrap();
                e.set_timestamps(set(None, None, Some(50))).unwrap();
                assert_eq!(e.query_timestamp(TimestampKind::AllDurable), Some(ts(50)));
                let mut s2 = e.session().unwrap();
                let mut t = s2.begin(&TxnOptions::default()).unwrap();
                t.put(b"j", b"j1").unwrap();
                t.commit(CommitOptions::at(70)).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(70)))),
        ),
        // The lock-free engine keeps each session's share in its
        // slot; a commit after the set restarts that word, and must count
        // even when it restarts at the value the set found there (mutant
        // ALL_DURABLE_RESTART_KEEPS_TAG reports 50 here).
        row(
            "a session's commit after it moved backwards counts at its old value too",
            "a commit at 120, global durable 50, then a commit at 120 on the same session",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.commit(CommitOptions::at(120)).unwrap();
                e.set_timestamps(set(None, None, Some(50))).unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"j", b"j1").unwrap();
                t.commit(CommitOptions::at(120)).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(120)))),
        ),
        row(
            "a closed session's commits still count",
            "a commit at 130 on a session closed since",
            |e| {
                {
                    let mut s = e.session().unwrap();
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(b"k", b"v1").unwrap();
                    t.commit(CommitOptions::at(130)).unwrap();
                }
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(130)))),
        ),
    ]);
}

#[test]
fn stable_may_not_pass_an_unresolved_prepared_durable_timestamp() {
    on_every_machinery!(stable_may_not_pass_an_unresolved_prepared_durable_timestamp_on);
}

fn stable_may_not_pass_an_unresolved_prepared_durable_timestamp_on<M: Machinery>() {
    // Prepared at 25 with durable 40 announced; `f` runs while it is
    // unresolved; then the transaction commits.
    fn while_announced<M: Machinery>(
        e: &Engine<M>,
        f: fn(&Engine<M>) -> Result<Out>,
    ) -> Result<Out> {
        while_unresolved(e, Some(40), f, |t| t.commit(CommitOptions::at(26)))
    }
    run::<M>(vec![
        row(
            "stable at the announced durable timestamp is refused",
            "prepared at 25, durable 40 announced",
            |e| {
                while_announced(e, |e| {
                    e.set_timestamps(set(None, Some(40), None))
                        .map(|()| Out::Done)
                })
            },
            Err(Error::StablePastPreparedDurable {
                stable: ts(40),
                durable: ts(40),
            }),
        ),
        row(
            "stable past the announced durable timestamp is refused",
            "prepared at 25, durable 40 announced",
            |e| {
                while_announced(e, |e| {
                    e.set_timestamps(set(None, Some(41), None))
                        .map(|()| Out::Done)
                })
            },
            Err(Error::StablePastPreparedDurable {
                stable: ts(41),
                durable: ts(40),
            }),
        ),
        row(
            "stable below the announced durable timestamp (past the prepare) is fine",
            "prepared at 25, durable 40 announced",
            |e| {
                while_announced(e, |e| {
                    e.set_timestamps(set(None, Some(39), None)).unwrap();
                    Ok(Out::Stamp(e.query_timestamp(TimestampKind::Stable)))
                })
            },
            Ok(Out::Stamp(Some(ts(39)))),
        ),
        row(
            "a refused update changes nothing (oldest in it not applied)",
            "prepared at 25, durable 40 announced",
            |e| {
                while_announced(e, |e| {
                    assert!(e.set_timestamps(set(Some(15), Some(45), Some(90))).is_err());
                    assert_eq!(e.query_timestamp(TimestampKind::Stable), Some(ts(20)));
                    // Global durable still 5 (90 would show as 39 here).
                    assert_eq!(e.query_timestamp(TimestampKind::AllDurable), Some(ts(5)));
                    Ok(Out::Stamp(e.query_timestamp(TimestampKind::Oldest)))
                })
            },
            Ok(Out::Stamp(Some(ts(10)))),
        ),
        row(
            "after the prepared transaction commits, stable may pass",
            "prepared at 25, durable 40 announced, committed",
            |e| {
                while_announced(e, |_| Ok(Out::Done)).unwrap();
                e.set_timestamps(set(None, Some(45), None))
                    .map(|()| Out::Done)
            },
            Ok(Out::Done),
        ),
        row(
            "after the prepared transaction rolls back, stable may pass",
            "prepared at 25, durable 40 announced, rolled back",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                t.set_durable_timestamp(ts(40)).unwrap();
                t.rollback();
                e.set_timestamps(set(None, Some(45), None))
                    .map(|()| Out::Done)
            },
            Ok(Out::Done),
        ),
        row(
            "without an announced durable timestamp stable may pass the prepare timestamp",
            "prepared at 25, nothing announced",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                e.set_timestamps(set(None, Some(30), None)).unwrap();
                // Its durable timestamp must then be after the new stable.
                let (err, t) = kept(t.try_commit(commit_durable(26, 29)));
                assert_eq!(
                    err,
                    Error::DurableTimestampNotAfterStable {
                        durable: ts(29),
                        stable: ts(30)
                    }
                );
                t.commit(commit_durable(26, 31)).map(|()| Out::Done)
            },
            Ok(Out::Done),
        ),
    ]);
}

/// Lock-free only: the descriptor and its generation are the lock-free
/// machinery's (the baselines rebuild snapshots by scanning).
#[test]
fn prepare_is_an_exit_from_the_running_set() {
    prepare_is_an_exit_from_the_running_set_on::<LockFree>();
}

fn prepare_is_an_exit_from_the_running_set_on<M: Machinery>() {
    /// A transaction on `rs` that takes its snapshot (lazily taken at the
    /// first read otherwise) and ends.
    fn warm<M: Machinery>(rs: &mut Session<'_, M>) {
        rs.begin(&TxnOptions::default())
            .unwrap()
            .take_snapshot()
            .unwrap();
    }
    fn deltas<M: Machinery>(e: &Engine<M>, f: impl FnOnce()) -> Out {
        let a = e.stats();
        f();
        let b = e.stats();
        Out::Counts(
            b.descriptor_installs - a.descriptor_installs,
            b.snapshot_reused - a.snapshot_reused,
            b.snapshot_rebuilt - a.snapshot_rebuilt,
        )
    }
    run::<M>(vec![
        row(
            "prepare of a writer installs a new descriptor",
            "writer with an id",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                let d = deltas(e, || {
                    t.prepare(ts(25)).unwrap();
                });
                t.rollback();
                Ok(d)
            },
            Ok(Out::Counts(1, 0, 0)),
        ),
        row(
            "committing a prepared transaction installs none (it already left)",
            "prepared writer",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                Ok(deltas(e, || t.commit(CommitOptions::at(25)).unwrap()))
            },
            Ok(Out::Counts(0, 0, 0)),
        ),
        row(
            "rolling back a prepared transaction installs none",
            "prepared writer",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                write_and_prepare(&mut t, 25);
                Ok(deltas(e, || t.rollback()))
            },
            Ok(Out::Counts(0, 0, 0)),
        ),
        row(
            "prepare of a transaction without an id installs none",
            "no writes",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                let d = deltas(e, || {
                    t.prepare(ts(25)).unwrap();
                });
                t.rollback();
                Ok(d)
            },
            Ok(Out::Counts(0, 0, 0)),
        ),
        row(
            "another session's cached snapshot is not reused across a prepare",
            "reader session warmed, then a writer prepares",
            |e| {
                let mut rs = e.session().unwrap();
                warm(&mut rs);
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.prepare(ts(25)).unwrap();
                let d = deltas(e, || warm(&mut rs));
                t.rollback();
                Ok(d)
            },
            Ok(Out::Counts(0, 0, 1)),
        ),
        row(
            "without a prepare the cached snapshot is reused (control)",
            "reader session warmed, writer only wrote",
            |e| {
                let mut rs = e.session().unwrap();
                warm(&mut rs);
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                let d = deltas(e, || warm(&mut rs));
                t.rollback();
                Ok(d)
            },
            Ok(Out::Counts(0, 1, 0)),
        ),
    ]);
}
