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
    /// (`RwLockBaselinePatched`).
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
    /// The lock-free engine with its commit log on (`Engine::open` in a
    /// fresh directory), every commit `Durability::Sync` (read-ts and tail
    /// only; also added by `--durability sync`).
    #[value(name = "lock-free+sync")]
    LogSync,
    /// The same with `Durability::Periodic(10 ms)`.
    #[value(name = "lock-free+periodic")]
    LogPeriodic,
    /// The same with `Durability::None`.
    #[value(name = "lock-free+none")]
    LogNone,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::LockFree => "lock-free",
            EngineKind::RwLock3 => "rwlock3",
            EngineKind::RwLock2 => "rwlock2",
            EngineKind::Lmdb => "lmdb",
            EngineKind::Ceiling => "ceiling",
            EngineKind::LogSync => "lock-free+sync",
            EngineKind::LogPeriodic => "lock-free+periodic",
            EngineKind::LogNone => "lock-free+none",
        }
    }

    /// The durability of a lock-free engine with its log on (`None`: not
    /// one of those).
    pub fn durability(self) -> Option<snapshot_engine::Durability> {
        use snapshot_engine::Durability;
        match self {
            EngineKind::LogSync => Some(Durability::Sync),
            EngineKind::LogPeriodic => {
                Some(Durability::Periodic(std::time::Duration::from_millis(10)))
            }
            EngineKind::LogNone => Some(Durability::None),
            _ => None,
        }
    }
}

/// Calls `$f::<M>($args)` for the machinery `$kind` names; `$lmdb` for LMDB
/// and the ceiling (which are not machinery).
#[macro_export]
macro_rules! dispatch {
    ($kind:expr, $f:ident ( $($arg:expr),* ), $lmdb:expr) => {
        match $kind {
            $crate::engines::EngineKind::LockFree => $f::<snapshot_engine::with_machinery::LockFree>($($arg),*),
            $crate::engines::EngineKind::RwLock3 => $f::<snapshot_engine::with_machinery::RwLockBaseline>($($arg),*),
            $crate::engines::EngineKind::RwLock2 => {
                $f::<snapshot_engine::with_machinery::RwLockBaselinePatched>($($arg),*)
            }
            $crate::engines::EngineKind::Lmdb | $crate::engines::EngineKind::Ceiling => $lmdb,
            $crate::engines::EngineKind::LogSync
            | $crate::engines::EngineKind::LogPeriodic
            | $crate::engines::EngineKind::LogNone => {
                unreachable!("cli::plan runs an engine with its log on in read-ts and tail only")
            }
        }
    };
}

/// The engine (or row) order for round `r`: as given on even rounds,
/// reversed on odd ones, so no engine always runs first (or last) on a
/// warming machine.
pub fn order<T: Clone>(engines: &[T], round: usize) -> Vec<T> {
    let mut v = engines.to_vec();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}
