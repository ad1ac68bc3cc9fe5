//! WiredTiger's general timestamp rules, as tables: global
//! oldest/stable/durable, commit timestamps and read timestamps.
//!
//! Every row names the rule, the state it starts from, the call, and the
//! expected outcome or typed error with the values it carries. After every
//! row the harness checks that the engine is still usable: every session is
//! closed, stable and oldest can advance past everything the row did, and a
//! fresh transaction writes, commits and reads back.

use crate::support::*;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::*;

/// Every fixture starts with `k = v0` committed at 5.
const SEED: Seed = &[(b"k", b"v0")];

/// Runs a table of this file's rows, each from `SEED`.
fn run<M: Machinery>(rows: Vec<Row<M>>) {
    run_seeded(SEED, rows)
}

fn roundup_read() -> TxnOptions {
    TxnOptions {
        roundup_read: true,
        ..TxnOptions::default()
    }
}

/// The global timestamps as (oldest, stable).
fn globals<M: Machinery>(e: &Engine<M>) -> Out {
    Out::Globals(
        e.query_timestamp(TimestampKind::Oldest),
        e.query_timestamp(TimestampKind::Stable),
    )
}

/// Writes `k = v1` in a fresh transaction and commits with `opts`.
fn write_commit<M: Machinery>(
    e: &Engine<M>,
    begin: &TxnOptions,
    opts: CommitOptions,
) -> Result<Out> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(begin).unwrap();
    t.put(b"k", b"v1").unwrap();
    t.commit(opts).map(|()| Out::Done)
}

#[test]
fn global_timestamp_rules() {
    on_every_machinery!(global_timestamp_rules_on);
}

fn global_timestamp_rules_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "oldest never moves backwards",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(5), None, None))
                    .map(|()| Out::Done)
            },
            Err(Error::TimestampMovedBackwards {
                role: TimestampRole::Oldest,
                requested: ts(5),
                current: ts(10),
            }),
        ),
        row(
            "stable never moves backwards",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(None, Some(15), None))
                    .map(|()| Out::Done)
            },
            Err(Error::TimestampMovedBackwards {
                role: TimestampRole::Stable,
                requested: ts(15),
                current: ts(20),
            }),
        ),
        row(
            "setting the current values again is allowed",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(10), Some(20), None)).unwrap();
                Ok(globals(e))
            },
            Ok(Out::Globals(Some(ts(10)), Some(ts(20)))),
        ),
        row(
            "oldest may reach stable",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(20), None, None)).unwrap();
                Ok(globals(e))
            },
            Ok(Out::Globals(Some(ts(20)), Some(ts(20)))),
        ),
        row(
            "oldest never passes stable (oldest alone)",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(25), None, None))
                    .map(|()| Out::Done)
            },
            Err(Error::OldestAfterStable {
                oldest: ts(25),
                stable: ts(20),
            }),
        ),
        row(
            "oldest never passes stable (both in one update)",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(40), Some(30), None))
                    .map(|()| Out::Done)
            },
            Err(Error::OldestAfterStable {
                oldest: ts(40),
                stable: ts(30),
            }),
        ),
        row(
            "both may move together",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(30), Some(40), None)).unwrap();
                Ok(globals(e))
            },
            Ok(Out::Globals(Some(ts(30)), Some(ts(40)))),
        ),
        Row {
            rule: "a first stable below oldest is refused",
            state: "oldest 50, no stable",
            setup: oldest_50_no_stable,
            call: |e| {
                e.set_timestamps(set(None, Some(40), None))
                    .map(|()| Out::Done)
            },
            expect: Err(Error::OldestAfterStable {
                oldest: ts(50),
                stable: ts(40),
            }),
        },
        row(
            "a refused update changes nothing",
            "oldest 10, stable 20",
            |e| {
                assert_eq!(
                    e.set_timestamps(set(Some(15), Some(5), Some(99))),
                    Err(Error::TimestampMovedBackwards {
                        role: TimestampRole::Stable,
                        requested: ts(5),
                        current: ts(20)
                    })
                );
                assert_eq!(e.query_timestamp(TimestampKind::AllDurable), Some(ts(5)));
                Ok(globals(e))
            },
            Ok(Out::Globals(Some(ts(10)), Some(ts(20)))),
        ),
        row(
            "oldest 0 is out of range",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(Some(0), None, None))
                    .map(|()| Out::Done)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Oldest,
                value: 0,
            }),
        ),
        row(
            "stable above MAX is out of range",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(None, Some(OVER), None))
                    .map(|()| Out::Done)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Stable,
                value: OVER,
            }),
        ),
        row(
            "global durable 0 is out of range",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(set(None, None, Some(0)))
                    .map(|()| Out::Done)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::GlobalDurable,
                value: 0,
            }),
        ),
        row(
            "the all-durable timestamp may move backwards",
            "global durable 100, then 50",
            |e| {
                e.set_timestamps(set(None, None, Some(100))).unwrap();
                e.set_timestamps(set(None, None, Some(50))).unwrap();
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(50)))),
        ),
        row(
            "every commit after a durable set raises all_durable, a session's later ones too",
            "oldest 10, stable 20, global durable 30",
            |e| {
                e.set_timestamps(set(None, None, Some(30))).unwrap();
                let mut s = e.session().unwrap();
                for at in [40, 50] {
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(b"k", b"v1").unwrap();
                    t.commit(CommitOptions::at(at)).unwrap();
                }
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(50)))),
        ),
        row(
            "a session's later commit at a lower timestamp leaves all_durable at its highest",
            "oldest 10, stable 20",
            |e| {
                let mut s = e.session().unwrap();
                for at in [50, 40] {
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(b"k", b"v1").unwrap();
                    t.commit(CommitOptions::at(at)).unwrap();
                }
                Ok(Out::Stamp(e.query_timestamp(TimestampKind::AllDurable)))
            },
            Ok(Out::Stamp(Some(ts(50)))),
        ),
        row(
            "all_durable counts the commit after each of five durable sets",
            "oldest 10, stable 20",
            |e| {
                // Each set restarts the session slot's durable word with
                // its next 2-bit tag; the fourth wraps it to 0.
                let mut s = e.session().unwrap();
                let mut seen = Vec::new();
                for i in 1..=5u64 {
                    e.set_timestamps(set(None, None, Some(20 + i))).unwrap();
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    t.put(b"k", b"v1").unwrap();
                    t.commit(CommitOptions::at(100 * i)).unwrap();
                    seen.push(e.query_timestamp(TimestampKind::AllDurable));
                }
                let want: Vec<_> = (1..=5).map(|i| Some(ts(100 * i))).collect();
                assert_eq!(seen, want, "all_durable after each durable set and commit");
                Ok(Out::Stamp(seen[4]))
            },
            Ok(Out::Stamp(Some(ts(500)))),
        ),
        row(
            "an empty update is a no-op",
            "oldest 10, stable 20",
            |e| {
                e.set_timestamps(TimestampUpdate::default()).unwrap();
                Ok(globals(e))
            },
            Ok(Out::Globals(Some(ts(10)), Some(ts(20)))),
        ),
        Row {
            rule: "an unset global timestamp queries as none",
            state: "no oldest, no stable",
            setup: fresh,
            call: |e| Ok(globals(e)),
            expect: Ok(Out::Globals(None, None)),
        },
        row(
            "oldest_reader and pinned follow the active read timestamps",
            "oldest 10, stable 20, a reader at 15",
            |e| {
                let mut s = e.session().unwrap();
                let t = s.begin(&read_at(15)).unwrap();
                assert_eq!(e.query_timestamp(TimestampKind::OldestReader), Some(ts(15)));
                let pinned = e.query_timestamp(TimestampKind::Pinned);
                drop(t);
                assert_eq!(e.query_timestamp(TimestampKind::OldestReader), None);
                Ok(Out::Stamp(pinned))
            },
            Ok(Out::Stamp(Some(ts(10)))),
        ),
    ]);
}

#[test]
fn commit_timestamp_rules() {
    on_every_machinery!(commit_timestamp_rules_on);
}

fn commit_timestamp_rules_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "commit timestamp after stable (equal refused)",
            "stable 20",
            |e| write_commit(e, &TxnOptions::default(), CommitOptions::at(20)),
            Err(Error::CommitTimestampNotAfterStable {
                commit: ts(20),
                stable: ts(20),
            }),
        ),
        row(
            "commit timestamp after stable (below refused)",
            "stable 20",
            |e| write_commit(e, &TxnOptions::default(), CommitOptions::at(15)),
            Err(Error::CommitTimestampNotAfterStable {
                commit: ts(15),
                stable: ts(20),
            }),
        ),
        row(
            "set_commit_timestamp at stable is refused",
            "stable 20",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(20)).map(|()| Out::Done)
            },
            Err(Error::CommitTimestampNotAfterStable {
                commit: ts(20),
                stable: ts(20),
            }),
        ),
        row(
            "a refused commit leaves the transaction open and usable",
            "stable 20",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                let (_, mut t) = kept(t.try_commit(CommitOptions::at(15)));
                assert_eq!(t.get(b"k").unwrap(), Some(b"v1".to_vec()));
                t.commit(CommitOptions::at(25)).unwrap();
                let mut r = s.begin(&read_at(25)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v1".to_vec()))),
        ),
        Row {
            rule: "commit timestamp at or above oldest",
            state: "oldest 50, no stable",
            setup: oldest_50_no_stable,
            call: |e| write_commit(e, &TxnOptions::default(), CommitOptions::at(40)),
            expect: Err(Error::CommitTimestampBeforeOldest {
                commit: ts(40),
                oldest: ts(50),
            }),
        },
        Row {
            rule: "commit at exactly oldest",
            state: "oldest 50, no stable",
            setup: oldest_50_no_stable,
            call: |e| write_commit(e, &TxnOptions::default(), CommitOptions::at(50)),
            expect: Ok(Out::Done),
        },
        row(
            "commit timestamp at or above the read timestamp",
            "writer reads at 40",
            |e| write_commit(e, &read_at(40), CommitOptions::at(30)),
            Err(Error::CommitTimestampBeforeRead {
                commit: ts(30),
                read: ts(40),
            }),
        ),
        row(
            "commit at exactly the read timestamp",
            "writer reads at 40",
            |e| write_commit(e, &read_at(40), CommitOptions::at(40)),
            Ok(Out::Done),
        ),
        row(
            "commit timestamp 0 is out of range (not \"untimestamped\")",
            "stable 20",
            |e| write_commit(e, &TxnOptions::default(), CommitOptions::at(0)),
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Commit,
                value: 0,
            }),
        ),
        row(
            "commit timestamp above MAX is out of range",
            "stable 20",
            |e| write_commit(e, &TxnOptions::default(), CommitOptions::at(OVER)),
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Commit,
                value: OVER,
            }),
        ),
        row(
            "set_commit_timestamp 0 is out of range",
            "stable 20",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.set_commit_timestamp(ts(0)).map(|()| Out::Done)
            },
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Commit,
                value: 0,
            }),
        ),
        row(
            "a second, different commit timestamp is refused",
            "commit timestamp 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                assert_eq!(
                    t.set_commit_timestamp(ts(31)),
                    Err(Error::CommitTimestampAlreadySet { current: ts(30) })
                );
                t.commit(CommitOptions::at(31)).map(|()| Out::Done)
            },
            Err(Error::CommitTimestampAlreadySet { current: ts(30) }),
        ),
        row(
            "the same commit timestamp given again at commit is fine",
            "commit timestamp 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                t.commit(CommitOptions::at(30)).unwrap();
                let mut r = s.begin(&read_at(29)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v0".to_vec()))),
        ),
        row(
            "set_commit_timestamp with the same value again is accepted",
            "commit timestamp 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                t.set_commit_timestamp(ts(30))?;
                t.commit(CommitOptions::default()).unwrap();
                let mut r = s.begin(&read_at(30)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v1".to_vec()))),
        ),
        row(
            "set_commit_timestamp with a different value after the first is refused",
            "commit timestamp 30 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                let r = t.set_commit_timestamp(ts(29)).map(|()| Out::Done);
                // Refused, the transaction still commits at 30.
                t.commit(CommitOptions::default()).unwrap();
                r
            },
            Err(Error::CommitTimestampAlreadySet { current: ts(30) }),
        ),
        row(
            "the same commit timestamp again is validated again: refused once stable passed it",
            "commit timestamp 30 set, stable moved to 35",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                e.set_timestamps(set(None, Some(35), None)).unwrap();
                t.set_commit_timestamp(ts(30)).map(|()| Out::Done)
            },
            Err(Error::CommitTimestampNotAfterStable {
                commit: ts(30),
                stable: ts(35),
            }),
        ),
        row(
            "stable may pass a commit timestamp set early; commit then refuses it",
            "commit timestamp 30 set, stable moved to 35",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.put(b"k", b"v1").unwrap();
                t.set_commit_timestamp(ts(30)).unwrap();
                e.set_timestamps(set(None, Some(35), None)).unwrap();
                t.commit(CommitOptions::default()).map(|()| Out::Done)
            },
            Err(Error::CommitTimestampNotAfterStable {
                commit: ts(30),
                stable: ts(35),
            }),
        ),
        row(
            "an untimestamped commit is allowed with stable set",
            "stable 20",
            |e| {
                write_commit(e, &TxnOptions::default(), CommitOptions::default()).unwrap();
                let mut s = e.session().unwrap();
                let mut r = s.begin(&read_at(11)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v1".to_vec()))),
        ),
        row(
            "a commit at 10 is visible at 15 and not at 5",
            "oldest 1, stable 1",
            |e| {
                let _ = e;
                let e = fresh::<M>(SEED);
                e.set_timestamps(set(Some(1), Some(1), None)).unwrap();
                write_commit(&e, &TxnOptions::default(), CommitOptions::at(10)).unwrap();
                let mut s = e.session().unwrap();
                let mut r = s.begin(&read_at(5)).unwrap();
                assert_eq!(r.get(b"k").unwrap(), Some(b"v0".to_vec()));
                drop(r);
                let mut r = s.begin(&read_at(15)).unwrap();
                r.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v1".to_vec()))),
        ),
    ]);
}

/// Sets read timestamp `r` in a fresh transaction begun with `begin`.
fn set_read<M: Machinery>(e: &Engine<M>, begin: &TxnOptions, r: u64) -> Result<Out> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(begin).unwrap();
    t.set_read_timestamp(ts(r)).map(Out::Ts)
}

/// The same after a read, so the transaction already has its snapshot
/// (taken lazily) and setting the read timestamp refreshes it:
/// the other path through the machinery.
fn set_read_after_read<M: Machinery>(e: &Engine<M>, begin: &TxnOptions, r: u64) -> Result<Out> {
    let mut s = e.session().unwrap();
    let mut t = s.begin(begin).unwrap();
    t.get(b"k").unwrap();
    t.set_read_timestamp(ts(r)).map(Out::Ts)
}

#[test]
fn read_timestamp_rules() {
    on_every_machinery!(read_timestamp_rules_on);
}

fn read_timestamp_rules_on<M: Machinery>() {
    run::<M>(vec![
        row(
            "a read timestamp below oldest is refused",
            "oldest 10",
            |e| set_read(e, &TxnOptions::default(), 5),
            Err(Error::ReadTimestampTooOld {
                read: ts(5),
                oldest: ts(10),
            }),
        ),
        row(
            "roundup_read rounds a read timestamp below oldest up to oldest",
            "oldest 10, roundup_read",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&roundup_read()).unwrap();
                let r = t.set_read_timestamp(ts(5)).map(Out::Ts);
                assert_eq!(t.read_timestamp(), ts(10));
                r
            },
            Ok(Out::Ts(ts(10))),
        ),
        row(
            "roundup_read leaves a valid read timestamp alone",
            "oldest 10, roundup_read",
            |e| set_read(e, &roundup_read(), 15),
            Ok(Out::Ts(ts(15))),
        ),
        row(
            "after a refusal a valid read timestamp is accepted and reads",
            "oldest 10, one refused attempt at 5",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                assert!(t.set_read_timestamp(ts(5)).is_err());
                assert_eq!(t.set_read_timestamp(ts(15)), Ok(ts(15)));
                t.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v0".to_vec()))),
        ),
        row(
            "a read timestamp at exactly oldest is accepted",
            "oldest 10",
            |e| set_read(e, &TxnOptions::default(), 10),
            Ok(Out::Ts(ts(10))),
        ),
        row(
            "after a read, a read timestamp below oldest is refused",
            "oldest 10, snapshot taken",
            |e| set_read_after_read(e, &TxnOptions::default(), 5),
            Err(Error::ReadTimestampTooOld {
                read: ts(5),
                oldest: ts(10),
            }),
        ),
        row(
            "after a read, a read timestamp at exactly oldest is accepted",
            "oldest 10, snapshot taken",
            |e| set_read_after_read(e, &TxnOptions::default(), 10),
            Ok(Out::Ts(ts(10))),
        ),
        row(
            "after a read, roundup_read rounds a read timestamp below oldest up",
            "oldest 10, roundup_read, snapshot taken",
            |e| set_read_after_read(e, &roundup_read(), 5),
            Ok(Out::Ts(ts(10))),
        ),
        row(
            "a read timestamp above stable is accepted",
            "stable 20",
            |e| set_read(e, &TxnOptions::default(), 500),
            Ok(Out::Ts(ts(500))),
        ),
        row(
            "a second read timestamp is refused",
            "read timestamp 15 set",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.set_read_timestamp(ts(15)).unwrap();
                t.set_read_timestamp(ts(16)).map(Out::Ts)
            },
            Err(Error::ReadTimestampAlreadySet { current: ts(15) }),
        ),
        row(
            "a read timestamp given at begin counts as set",
            "began with read timestamp 15",
            |e| {
                let mut s = e.session().unwrap();
                let mut t = s.begin(&read_at(15)).unwrap();
                t.set_read_timestamp(ts(16)).map(Out::Ts)
            },
            Err(Error::ReadTimestampAlreadySet { current: ts(15) }),
        ),
        row(
            "begin with a read timestamp below oldest fails",
            "oldest 10",
            |e| {
                let mut s = e.session().unwrap();
                s.begin(&read_at(5)).map(|_| Out::Done)
            },
            Err(Error::ReadTimestampTooOld {
                read: ts(5),
                oldest: ts(10),
            }),
        ),
        row(
            "begin with a read timestamp below oldest and roundup_read rounds up",
            "oldest 10",
            |e| {
                let mut s = e.session().unwrap();
                let opts = TxnOptions {
                    read_timestamp: Some(ts(5)),
                    roundup_read: true,
                    ..TxnOptions::default()
                };
                s.begin(&opts).map(|t| Out::Ts(t.read_timestamp()))
            },
            Ok(Out::Ts(ts(10))),
        ),
        row(
            "read timestamp 0 is out of range",
            "standard",
            |e| set_read(e, &TxnOptions::default(), 0),
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Read,
                value: 0,
            }),
        ),
        row(
            "read timestamp above MAX is out of range",
            "standard",
            |e| set_read(e, &TxnOptions::default(), OVER),
            Err(Error::TimestampOutOfRange {
                role: TimestampRole::Read,
                value: OVER,
            }),
        ),
        row(
            "read_at_stable already has a read timestamp",
            "stable 20, read_at_stable",
            |e| {
                let mut s = e.session().unwrap();
                let opts = TxnOptions {
                    read_at_stable: true,
                    ..TxnOptions::default()
                };
                let mut t = s.begin(&opts).unwrap();
                t.set_read_timestamp(ts(15)).map(Out::Ts)
            },
            Err(Error::ReadTimestampAlreadySet { current: ts(20) }),
        ),
        row(
            "a read timestamp on a finished transaction is refused",
            "committed",
            |e| {
                // A KV `Txn` ends by value (a finished one cannot be
                // named); the machinery's `Transaction` still can be.
                let mut s = e.manager().session().unwrap();
                let mut t = s.begin(&TxnOptions::default()).unwrap();
                t.commit(CommitOptions::default(), |_| {}).unwrap();
                t.set_read_timestamp(ts(15)).map(Out::Ts)
            },
            Err(Error::TransactionFinished),
        ),
        row(
            "a commit that lands between begin and set_read_timestamp is seen",
            "reader began, then a commit at 30",
            |e| {
                let mut rs = e.session().unwrap();
                let mut reader = rs.begin(&TxnOptions::default()).unwrap();
                write_commit(e, &TxnOptions::default(), CommitOptions::at(30)).unwrap();
                reader.set_read_timestamp(ts(30)).unwrap();
                reader.get(b"k").map(Out::Value)
            },
            Ok(Out::Value(Some(b"v1".to_vec()))),
        ),
    ]);
}
