//! What the driver shares with its criterion bench (`benches/begin.rs`):
//! the `begin` workload's cells. The rest of the driver is its binary's (`main.rs`).

pub mod begin_rows;
