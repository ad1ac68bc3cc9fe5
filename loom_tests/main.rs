//! Loom models of the snapshot protocol, run on the real code through the
//! `sync` shim (`src/sync.rs`). One module per protocol; every model has a
//! `#[should_panic]` twin that turns on a deliberately broken variant of the
//! code (`snapshot_engine::mutant`) and shows that the model catches it.
//!
//! Run with `scripts/loom.sh` (bounded: `LOOM_MAX_PREEMPTIONS=2`; set
//! `LOOM_MAX_PREEMPTIONS` yourself for a wider search). Built without
//! `--cfg loom` this target holds only [`built_without_cfg_loom`], an ignored
//! test that says so; `scripts/loom.sh` refuses to report success unless the
//! models themselves ran.
//!
//! Invariant numbers refer to DESIGN.md.

#[cfg(loom)]
mod common;

#[cfg(loom)]
mod announce_stable;
#[cfg(loom)]
mod chains;
#[cfg(loom)]
mod descriptors;
#[cfg(loom)]
mod dropped_prepared;
#[cfg(loom)]
mod durable_report;
#[cfg(all(loom, crossbeam_loom))]
mod epoch;
#[cfg(loom)]
mod finger;
#[cfg(loom)]
mod floor_source;
#[cfg(loom)]
mod lazy_snapshot;
#[cfg(loom)]
mod pin_horizon;
#[cfg(loom)]
mod prepare_stable;
#[cfg(loom)]
mod prepared;
#[cfg(loom)]
mod prune_race;
#[cfg(loom)]
mod read_ts_oldest;
#[cfg(loom)]
mod read_ts_refresh;
#[cfg(loom)]
mod rollback;
#[cfg(loom)]
mod skipped_prepared;
#[cfg(loom)]
mod slots;
#[cfg(loom)]
mod stable;
#[cfg(loom)]
mod stable_view;

/// The models need `RUSTFLAGS="--cfg loom"`; without it this target would be
/// an empty binary that passes. This test stands in its place: ignored so a
/// plain `cargo test` stays green (and prints the reason), and failing if
/// anyone runs it.
#[cfg(not(loom))]
#[test]
#[ignore = "the loom models need RUSTFLAGS=\"--cfg loom\": run scripts/loom.sh"]
fn built_without_cfg_loom() {
    panic!("this loom target was built without --cfg loom, so no model ran: run scripts/loom.sh");
}
