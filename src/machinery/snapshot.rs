//! A transaction's view of which transactions had completed: the session's
//! private copy of a snapshot descriptor (or, for the lock baseline, the
//! snapshot it built by scanning).

/// Which transaction ids a snapshot treats as completed.
///
/// An id `t` is visible when `t < xmax` and `t` is not in `running`. Ids
/// below `xmin` are never in `running`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Generation of the descriptor this was copied from (0: none yet).
    pub(crate) generation: u64,
    /// Every id below this has completed.
    pub(crate) xmin: u64,
    /// `latest completed + 1`: ids at or above are invisible.
    pub(crate) xmax: u64,
    /// Ids in `[xmin, xmax)` still running, sorted ascending.
    pub(crate) running: Vec<u64>,
}

impl Snapshot {
    /// Did transaction `id` complete before this snapshot was taken?
    #[inline]
    pub(crate) fn sees(&self, id: u64) -> bool {
        id < self.xmax && (id < self.xmin || self.running.binary_search(&id).is_err())
    }

    /// Overwrites `self` with the given fields, reusing the allocation.
    #[inline]
    pub(crate) fn assign(&mut self, generation: u64, xmin: u64, xmax: u64, running: &[u64]) {
        self.generation = generation;
        self.xmin = xmin;
        self.xmax = xmax;
        self.running.clear();
        self.running.extend_from_slice(running);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sees_follows_xmin_xmax_and_running() {
        let s = Snapshot {
            generation: 1,
            xmin: 5,
            xmax: 10,
            running: vec![5, 7],
        };
        assert!(s.sees(4));
        assert!(!s.sees(5));
        assert!(s.sees(6));
        assert!(!s.sees(7));
        assert!(s.sees(9));
        assert!(!s.sees(10));
        assert!(!s.sees(11));
    }
}
