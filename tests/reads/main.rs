//! What a reader sees: its own writes and never an aborted one, range scans
//! and batched gets, a consistent cut of concurrent transfers, and snapshots
//! that hold while writers and the horizon race them (on both fence pairs,
//! and the completion-versus-advance race that Miri checks).

mod asymmetric_fences;
mod bank_transfer;
mod get_many;
mod miri_floor_source;
mod own_and_aborted_writes;
mod range_scans;
