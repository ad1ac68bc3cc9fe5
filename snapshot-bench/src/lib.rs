//! What the driver shares with its criterion bench (`benches/begin.rs`):
//! the W2 cells. The rest of the driver is its binary's (`main.rs`).

pub mod w2;
