//! The `begin` workload's rows (begin options, WiredTiger WT-11105) and the engine they run
//! on, shared by the driver's `begin` workload and its criterion bench
//! (`benches/begin.rs`), so the two measure the same cells.

use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{EngineConfig, PrepareConflicts, Timestamp, TimestampUpdate, TxnOptions};

/// One combination of begin options.
pub struct BeginRow {
    /// The criterion benchmark id (`begin/<engine>/<id>`).
    pub id: &'static str,
    /// The driver's table label.
    pub label: &'static str,
    /// The options the row begins with.
    pub opts: TxnOptions,
}

/// Every row, in table order. Read timestamps are at stable (10).
pub fn begin_rows() -> Vec<BeginRow> {
    let o = TxnOptions::default;
    let pc = |p: PrepareConflicts, roundup: bool| TxnOptions {
        prepare_conflicts: p,
        roundup_prepared: roundup,
        roundup_read: roundup,
        ..o()
    };
    let row = |id, label, opts| BeginRow { id, label, opts };
    vec![
        row("no-options", "no options", o()),
        row(
            "enforce",
            "enforce prepare conflicts, no round-up",
            pc(PrepareConflicts::Enforce, false),
        ),
        row(
            "enforce-roundup",
            "enforce, round up timestamps",
            pc(PrepareConflicts::Enforce, true),
        ),
        row(
            "ignore",
            "ignore prepare conflicts, no round-up",
            pc(PrepareConflicts::Ignore, false),
        ),
        row(
            "ignore-roundup",
            "ignore, round up",
            pc(PrepareConflicts::Ignore, true),
        ),
        row(
            "ignore-allow-writes",
            "ignore allowing writes, no round-up",
            pc(PrepareConflicts::IgnoreAllowWrites, false),
        ),
        row(
            "ignore-allow-writes-roundup",
            "ignore allowing writes, round up",
            pc(PrepareConflicts::IgnoreAllowWrites, true),
        ),
        row(
            "read-only",
            "read-only",
            TxnOptions {
                read_only: true,
                ..o()
            },
        ),
        row(
            "read-timestamp",
            "set a timestamp (read_timestamp in options)",
            TxnOptions {
                read_timestamp: Some(Timestamp::new(10)),
                ..o()
            },
        ),
        row(
            "read-at-stable",
            "read at stable (fast path)",
            TxnOptions {
                read_at_stable: true,
                ..o()
            },
        ),
    ]
}

/// A fresh engine with oldest 1 and stable 10, as every `begin` cell uses.
pub fn begin_engine<M: Machinery>() -> Engine<M> {
    let e =
        Engine::<M>::with_machinery(EngineConfig::default()).expect("the default config is valid");
    e.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(1)),
        stable: Some(Timestamp::new(10)),
        durable: None,
    })
    .expect("timestamps");
    e
}
