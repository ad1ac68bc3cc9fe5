//! The table harness shared by the timestamp-rule tables
//! (`timestamp_rules.rs`, `prepared_transactions.rs`), and the helpers the
//! other timestamp tests share with them.
//!
//! A table is a `Vec<Row>`: each row names the rule, the state it starts
//! from, the call, and the expected outcome or typed error with the values
//! it carries. [`run`] builds each row's engine, makes the call, compares,
//! and then checks that the engine is still usable ([`assert_usable`]).
//!
//! Each table has its `Seed`: the keys every fixture here commits at
//! timestamp 5. The tables differ only in those keys, so [`run`] hands the
//! table's seed to each row's fixture instead of the fixtures being written
//! once per table.

use snapshot_engine::with_machinery::{CommitError, Engine, Machinery, Txn};
use snapshot_engine::*;

/// Keys and values committed at timestamp 5 by every fixture.
pub type Seed = &'static [(&'static [u8], &'static [u8])];

/// Runs a generic table for the lock-free engine and, with feature
/// `baseline` (on in the workspace's `cargo test`: the driver needs it),
/// both read-write-lock baselines: they share the transaction code, and
/// must share its rules.
macro_rules! on_every_machinery {
    ($f:ident) => {
        $f::<snapshot_engine::with_machinery::LockFree>();
        #[cfg(feature = "baseline")]
        $f::<snapshot_engine::with_machinery::RwLockBaseline>();
        #[cfg(feature = "baseline")]
        $f::<snapshot_engine::with_machinery::RwLockBaselinePatched>();
    };
}
pub(crate) use on_every_machinery;

pub fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

/// One past `Timestamp::MAX`: the smallest out-of-range timestamp.
pub const OVER: u64 = Timestamp::MAX.get() + 1;

pub fn read_at(r: u64) -> TxnOptions {
    TxnOptions {
        read_timestamp: Some(ts(r)),
        ..TxnOptions::default()
    }
}

pub fn set(oldest: Option<u64>, stable: Option<u64>, durable: Option<u64>) -> TimestampUpdate {
    TimestampUpdate {
        oldest: oldest.map(ts),
        stable: stable.map(ts),
        durable: durable.map(ts),
    }
}

/// `seed` committed at 5; no global timestamps set.
pub fn fresh<M: Machinery>(seed: Seed) -> Engine<M> {
    let e = Engine::<M>::with_machinery(EngineConfig {
        max_sessions: 8,
        ..EngineConfig::default()
    })
    .unwrap();
    {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for (key, value) in seed {
            t.put(key, value).unwrap();
        }
        t.commit(CommitOptions::at(5)).unwrap();
    }
    e
}

/// The standard state: `seed` committed at 5, then oldest 10 and stable 20.
pub fn standard<M: Machinery>(seed: Seed) -> Engine<M> {
    let e = fresh(seed);
    e.set_timestamps(set(Some(10), Some(20), None)).unwrap();
    e
}

/// `seed` committed at 5, oldest 50, no stable timestamp.
pub fn oldest_50_no_stable<M: Machinery>(seed: Seed) -> Engine<M> {
    let e = fresh(seed);
    e.set_timestamps(set(Some(50), None, None)).unwrap();
    e
}

/// The standard state, with stable at `Timestamp::MAX`.
pub fn stable_at_max<M: Machinery>(seed: Seed) -> Engine<M> {
    let e = standard(seed);
    e.set_timestamps(TimestampUpdate {
        stable: Some(Timestamp::MAX),
        ..TimestampUpdate::default()
    })
    .unwrap();
    e
}

/// What a row's call produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    Done,
    Ts(Timestamp),
    Value(Option<Vec<u8>>),
    Pairs(Vec<(Vec<u8>, Vec<u8>)>),
    Stamp(Option<Timestamp>),
    /// The global timestamps as (oldest, stable).
    Globals(Option<Timestamp>, Option<Timestamp>),
    /// (descriptor installs, snapshots reused, snapshots rebuilt) deltas.
    Counts(u64, u64, u64),
}

pub struct Row<M: Machinery> {
    pub rule: &'static str,
    pub state: &'static str,
    /// Builds the row's engine from the table's seed.
    pub setup: fn(Seed) -> Engine<M>,
    pub call: fn(&Engine<M>) -> Result<Out>,
    pub expect: Result<Out>,
}

/// A row that starts from [`standard`].
pub fn row<M: Machinery>(
    rule: &'static str,
    state: &'static str,
    call: fn(&Engine<M>) -> Result<Out>,
    expect: Result<Out>,
) -> Row<M> {
    Row {
        rule,
        state,
        setup: standard,
        call,
        expect,
    }
}

/// After a row: no session is left open; stable and oldest advance past
/// everything the row did (nothing prepared or announced is left behind);
/// a fresh transaction writes, commits and reads back correctly.
pub fn assert_usable<M: Machinery>(e: &Engine<M>, rule: &str) {
    assert_eq!(e.stats().sessions_open, 0, "{rule}: a session leaked");
    let stable = e.query_timestamp(TimestampKind::Stable);
    if stable == Some(Timestamp::MAX) {
        // No timestamped commit can be after stable: check untimestamped.
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"usable", b"yes").unwrap();
        t.commit(CommitOptions::default()).unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        assert_eq!(t.get(b"usable").unwrap(), Some(b"yes".to_vec()), "{rule}");
        return;
    }
    let far = stable.map_or(1_000, |s| s.get() + 1_000);
    e.set_timestamps(set(None, Some(far), None))
        .unwrap_or_else(|err| panic!("{rule}: stable cannot advance: {err}"));
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.get(b"k")
        .unwrap_or_else(|err| panic!("{rule}: fresh read failed: {err}"));
    t.put(b"usable", b"yes").unwrap();
    t.commit(CommitOptions::at(far + 1)).unwrap();
    let mut t = s.begin(&read_at(far + 1)).unwrap();
    assert_eq!(t.get(b"usable").unwrap(), Some(b"yes".to_vec()), "{rule}");
    drop(t);
    let mut t = s.begin(&read_at(far)).unwrap();
    assert_eq!(t.get(b"usable").unwrap(), None, "{rule}");
    drop(t);
    drop(s);
    e.set_timestamps(set(Some(far), None, None))
        .unwrap_or_else(|err| panic!("{rule}: oldest cannot advance: {err}"));
}

/// Runs every row, each from its fixture with the table's `seed` committed,
/// then fails listing every row whose outcome differed.
pub fn run_seeded<M: Machinery>(seed: Seed, rows: Vec<Row<M>>) {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let mut wrong = Vec::new();
    for r in rows {
        let e = (r.setup)(seed);
        // A step inside a row that panics is reported against its row.
        match catch_unwind(AssertUnwindSafe(|| (r.call)(&e))) {
            Ok(got) if got == r.expect => {}
            Ok(got) => wrong.push(format!(
                "[{}] rule `{}` from state `{}`:\n    expected {:?}\n         got {:?}",
                M::NAME,
                r.rule,
                r.state,
                r.expect,
                got
            )),
            Err(_) => wrong.push(format!(
                "[{}] rule `{}` from state `{}`: a step panicked (see above)",
                M::NAME,
                r.rule,
                r.state
            )),
        }
        if catch_unwind(AssertUnwindSafe(|| assert_usable(&e, r.rule))).is_err() {
            wrong.push(format!(
                "[{}] rule `{}`: engine not usable afterwards",
                M::NAME,
                r.rule
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} row(s) failed:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A commit refused for a timestamp: its error, and the transaction it
/// handed back (which must still be open).
#[track_caller]
pub fn kept<'s, 'e, M: Machinery>(
    r: std::result::Result<(), CommitError<'s, 'e, M>>,
) -> (Error, Txn<'s, 'e, M>) {
    let e = r.expect_err("the commit should have been refused");
    let err = e.error().clone();
    let txn = e
        .into_txn()
        .unwrap_or_else(|| panic!("a refused commit ({err}) should hand the transaction back"));
    (err, txn)
}
