//! Counters that make the protocol visible.
//!
//! Each session counts into its own cache-padded block with owner-only
//! load-and-store increments (no read-modify-write, no shared line), and
//! [`Engine::stats`](crate::Engine::stats) sums the blocks. Blocks are never
//! reset, so counts survive their sessions.

use crate::sync::{AtomicU64, Ordering};

macro_rules! counters {
    (
        $($(#[$doc:meta])* $name:ident,)*
        ;
        baseline: { $($(#[$bdoc:meta])* $bname:ident,)* }
    ) => {
        /// One session's counters.
        #[derive(Debug)]
        pub struct Counters {
            $(pub(crate) $name: AtomicU64,)*
            $(#[cfg(feature = "baseline")] pub(crate) $bname: AtomicU64,)*
            /// Read-modify-writes issued while read-only transactions ran
            /// (summed into [`Stats::read_path_rmw`]).
            pub(crate) read_rmw: AtomicU64,
        }

        impl Default for Counters {
            fn default() -> Self {
                Counters {
                    $($name: AtomicU64::new(0),)*
                    $(#[cfg(feature = "baseline")] $bname: AtomicU64::new(0),)*
                    read_rmw: AtomicU64::new(0),
                }
            }
        }

        /// A sum of every session's counters, from [`Engine::stats`](crate::Engine::stats).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct Stats {
            $($(#[$doc])* pub $name: u64,)*
            $($(#[$bdoc])* #[cfg(feature = "baseline")] pub $bname: u64,)*
            /// Versions whose memory the epoch collector has freed so far.
            /// It trails [`versions_pruned`](Stats::versions_pruned): pruned
            /// tails go to the collector in batches, and crossbeam-epoch
            /// runs a thread's deferred frees only once its local bag of
            /// them fills and the global epoch has moved on, so a short run
            /// (thousands of commits per thread) can end with 0 here.
            /// Versions unlinked by rollback are not counted.
            pub versions_freed: u64,
            /// Atomic read-modify-writes issued through the `sync` shim while
            /// read-only transactions ran (begin to end). `None` unless the
            /// crate is built with the `count-rmw` feature. The goal is 0.
            pub read_path_rmw: Option<u64>,
            /// Sessions open now.
            pub sessions_open: usize,
        }

        impl Stats {
            /// Adds one session's counters (Relaxed loads: a report of
            /// owner-only counters).
            pub(crate) fn add(&mut self, c: &Counters) {
                $(self.$name += c.$name.load(Ordering::Relaxed);)*
                $(#[cfg(feature = "baseline")] { self.$bname += c.$bname.load(Ordering::Relaxed); })*
            }
        }
    };
}

counters! {
    /// Transactions begun.
    begins,
    /// Transactions committed.
    commits,
    /// Transactions rolled back (explicitly or by drop).
    rollbacks,
    /// Read-only transactions finished (commit or rollback with no writes).
    read_only_txns,
    /// Writes refused with `WriteConflict`.
    write_conflicts,
    /// Reads that met a prepared update and reported `PrepareConflict`.
    prepare_conflicts,
    /// Snapshot requests served from the session's cached copy because the
    /// descriptor generation had not changed (one load, no pin).
    snapshot_reused,
    /// Snapshot requests that copied a newer descriptor (lock-free engine)
    /// or rebuilt a snapshot by scanning the session table (baseline).
    snapshot_rebuilt,
    /// Snapshot descriptors installed by completions.
    descriptor_installs,
    /// Failed descriptor compare-and-swaps (contention between completers).
    descriptor_cas_retries,
    /// Failed head compare-and-swaps on version chains.
    chain_cas_retries,
    /// Versions unlinked by pruning or rollback and handed to the collector.
    versions_pruned,
    /// Reclaim-horizon recomputations (session-table scans).
    horizon_advances,
    /// Keys read: point reads plus keys a scan visited.
    reads,
    /// Versions examined (status word loaded) by those reads; over `reads`,
    /// the versions a read examines on average.
    versions_read,
    /// Versions examined by commits (linking the new version to the key's
    /// previous one) and by pruning (climbing the floor and the finger);
    /// over writing commits, the versions a commit examines on average.
    commit_versions_examined,
    /// Gated commits and prepares (serializable, or with tracked reads)
    /// that found the serializable commit gate held and waited for it.
    gate_waits,
    /// Nanoseconds those waited for the gate; over `gate_waits`, the mean
    /// wait. A holder descheduled inside the gate shows here as waits of
    /// a scheduler's time slice.
    gate_wait_ns,
    ;
    baseline: {
        /// Read-lock acquisitions on the shared transaction-table lock
        /// (the read-write-lock baselines, feature `baseline`).
        read_lock_acquisitions,
        /// Write-lock acquisitions on the shared transaction-table lock
        /// (the read-write-lock baselines, feature `baseline`).
        write_lock_acquisitions,
        /// Nanoseconds spent waiting for the shared lock (the read-write-lock
        /// baselines, feature `baseline`).
        lock_wait_ns,
    }
}
