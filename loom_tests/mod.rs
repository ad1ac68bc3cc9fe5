//! Loom models of the snapshot protocol, run on the real code through the
//! `sync` shim (`src/sync/`). One module per protocol; every model has a
//! `#[should_panic]` twin that turns on a deliberately broken variant of the
//! code (`crate::sync::mutant`) and shows that the model catches it.
//!
//! Unit tests of the crate, compiled only under `--cfg loom` (`src/lib.rs`),
//! so the internals they drive (`api.rs`, `machinery::loom_support`) stay
//! crate-private. Run with `scripts/loom.sh` (bounded:
//! `LOOM_MAX_PREEMPTIONS=2`; set `LOOM_MAX_PREEMPTIONS` yourself for a wider
//! search); it refuses to report success unless the models themselves ran.
//!
//! Invariant numbers refer to DESIGN.md.

mod all_durable_report;
mod announce_stable;
mod api;
mod chains;
mod common;
mod descriptors;
mod dropped_prepared;
#[cfg(crossbeam_loom)]
mod epoch;
mod finger;
mod floor_source;
mod hash_index;
mod hint;
mod lazy_snapshot;
mod pin_horizon;
mod prepare_stable;
mod prepared;
mod prune_race;
mod read_ts_oldest;
mod read_ts_refresh;
mod rollback;
mod serializable;
mod skipped_prepared;
mod slab;
mod slots;
mod stable;
mod stable_view;
