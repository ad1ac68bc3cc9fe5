//! The log's background flusher: every `interval` (Periodic durability)
//! and whenever an async commit waits, it writes and syncs what is
//! pending, then wakes the async commits it covered.

use super::Log;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::Duration;

/// What the background flusher waits on.
#[derive(Default)]
pub(super) struct Bg {
    /// Async commits waiting for their lsn to be synced: (lsn, waker).
    pub(super) waiters: Vec<(u64, Waker)>,
    /// A blocking async waiter or a waker asked for a sync.
    pub(super) wanted: bool,
    pub(super) stop: bool,
}

pub(crate) struct BgShared {
    pub(super) state: Mutex<Bg>,
    pub(super) cv: Condvar,
}

impl BgShared {
    pub(super) fn new() -> BgShared {
        BgShared {
            state: Mutex::new(Bg::default()),
            cv: Condvar::new(),
        }
    }
}

/// The flusher's loop. Holds the log only while it works; [`Log::close`]
/// stops it and waits for it.
pub(super) fn background(log: Weak<Log>, bg: Arc<BgShared>, interval: Option<Duration>) {
    loop {
        {
            let mut st = bg.state.lock();
            if !st.wanted && !st.stop {
                match interval {
                    Some(d) => {
                        bg.cv.wait_for(&mut st, d);
                    }
                    None => bg.cv.wait(&mut st),
                }
            }
            if st.stop {
                return;
            }
            st.wanted = false;
        }
        let Some(log) = log.upgrade() else { return };
        let _ = log.sync_all();
        let failed = log.failed().is_some();
        let mut st = bg.state.lock();
        st.waiters.retain(|(lsn, w)| {
            let done = failed || log.is_done(*lsn, true);
            if done {
                w.wake_by_ref();
            }
            !done
        });
        if !st.waiters.is_empty() {
            st.wanted = true;
        }
        drop(st);
        drop(log);
    }
}
