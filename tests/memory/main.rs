//! Memory held and freed: a long reader pins one version per key, the
//! collector frees what pruning cut, a dropped table's versions are freed
//! once no reader can reach them, and the soak run (ignored; minutes)
//! keeps resident memory and versions per key bounded.
//!
//! These tests need the process to themselves, so they live in this binary
//! and run one at a time ([`one_at_a_time`]): frees wait for
//! crossbeam-epoch's global epoch, which a pinned thread of any other test,
//! descheduled under load, holds back for as long as it sleeps; and the soak
//! run samples the whole process's resident memory.

use std::sync::{Mutex, MutexGuard};

mod long_reader;
mod soak;
mod table_drop;
mod versions_freed;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held for the whole of each test here: no other test of this binary runs
/// meanwhile.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}
