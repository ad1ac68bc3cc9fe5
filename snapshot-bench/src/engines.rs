//! Which engines a run compares.

use clap::ValueEnum;

/// An engine the driver can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum EngineKind {
    /// snapshot-engine's lock-free machinery (`LockFree`).
    #[value(name = "lock-free")]
    LockFree,
    /// The read-write-lock baseline as WiredTiger develop: three lock
    /// acquisitions when a read timestamp is set after begin and a writer
    /// committed in between (`RwLockBaseline`).
    #[value(name = "rwlock3")]
    RwLock3,
    /// The baseline with the published fix: two acquisitions
    /// (`RwLockBaselineFixed`).
    #[value(name = "rwlock2")]
    RwLock2,
    /// LMDB through heed (cargo feature `peers`; read-ts only: latest
    /// snapshot, no timestamps).
    #[value(name = "lmdb")]
    Lmdb,
    /// No engine: a plain `HashMap` get per read, no transaction, no
    /// synchronization (read-ts only; its writers are not started).
    #[value(name = "ceiling")]
    Ceiling,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::LockFree => "lock-free",
            EngineKind::RwLock3 => "rwlock3",
            EngineKind::RwLock2 => "rwlock2",
            EngineKind::Lmdb => "lmdb",
            EngineKind::Ceiling => "ceiling",
        }
    }
}

/// Calls `$f::<P>($args)` for the machinery `$kind` names; `$lmdb` for LMDB
/// and the ceiling (which are not machinery).
#[macro_export]
macro_rules! dispatch {
    ($kind:expr, $f:ident ( $($arg:expr),* ), $lmdb:expr) => {
        match $kind {
            $crate::engines::EngineKind::LockFree => $f::<snapshot_engine::LockFree>($($arg),*),
            $crate::engines::EngineKind::RwLock3 => $f::<snapshot_engine::machinery::RwLockBaseline>($($arg),*),
            $crate::engines::EngineKind::RwLock2 => {
                $f::<snapshot_engine::machinery::RwLockBaselineFixed>($($arg),*)
            }
            $crate::engines::EngineKind::Lmdb | $crate::engines::EngineKind::Ceiling => $lmdb,
        }
    };
}

/// The engine order for round `r`: as given on even rounds, reversed on odd
/// ones, so no engine always runs first (or last) on a warming machine.
pub fn order(engines: &[EngineKind], round: usize) -> Vec<EngineKind> {
    let mut v = engines.to_vec();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}
