//! Every `EngineConfig` field out of its bounds is a typed error naming the
//! field, the value and the bounds, from `Engine::new` and from the
//! machinery's constructors alike; nothing is allocated and nothing aborts
//! (a `max_sessions` of 2^40 once tried to allocate 8 TiB).

use snapshot_engine::machinery::TxnManager;
use snapshot_engine::with_machinery;

/// The machinery the generic constructors are checked on: a read-write-lock
/// baseline where it is built (feature `baseline`, on in the workspace's
/// `cargo test`), else the lock-free one through its generic path.
#[cfg(feature = "baseline")]
type Other = with_machinery::RwLockBaseline;
#[cfg(not(feature = "baseline"))]
type Other = with_machinery::LockFree;
use snapshot_engine::{Engine, EngineConfig, Error};

fn out_of_range(field: &'static str, value: usize, min: usize, max: usize) -> Error {
    Error::ConfigOutOfRange {
        field,
        value,
        min,
        max,
    }
}

#[test]
fn every_field_out_of_bounds_is_refused_with_its_bounds() {
    let d = EngineConfig::default;
    let rows: Vec<(EngineConfig, Error, &str)> = vec![
        (
            EngineConfig {
                max_sessions: 0,
                ..d()
            },
            out_of_range("max_sessions", 0, 1, EngineConfig::MAX_SESSIONS),
            "EngineConfig::max_sessions 0 is out of range (1..=65536)",
        ),
        (
            EngineConfig {
                max_sessions: 1 << 40,
                ..d()
            },
            out_of_range("max_sessions", 1 << 40, 1, EngineConfig::MAX_SESSIONS),
            "EngineConfig::max_sessions 1099511627776 is out of range (1..=65536)",
        ),
        (
            EngineConfig {
                max_key_len: usize::MAX,
                ..d()
            },
            out_of_range("max_key_len", usize::MAX, 0, EngineConfig::MAX_KEY_LEN),
            "EngineConfig::max_key_len 18446744073709551615 is out of range (0..=2147483647)",
        ),
        (
            EngineConfig {
                max_value_len: EngineConfig::MAX_VALUE_LEN + 1,
                ..d()
            },
            out_of_range("max_value_len", 1 << 31, 0, EngineConfig::MAX_VALUE_LEN),
            "EngineConfig::max_value_len 2147483648 is out of range (0..=2147483647)",
        ),
        (
            EngineConfig {
                horizon_refresh_commits: 0,
                ..d()
            },
            out_of_range("horizon_refresh_commits", 0, 1, u32::MAX as usize),
            "EngineConfig::horizon_refresh_commits 0 is out of range (1..=4294967295)",
        ),
    ];
    for (config, want, text) in rows {
        assert_eq!(config.validate(), Err(want.clone()), "{config:?}");
        assert_eq!(want.to_string(), text);
        assert_eq!(Engine::new(config.clone()).err(), Some(want.clone()));
        assert_eq!(
            with_machinery::Engine::<Other>::with_machinery(config.clone()).err(),
            Some(want.clone())
        );
        assert_eq!(
            with_machinery::TxnManager::<Other>::with_config(&config).err(),
            Some(want)
        );
    }
}

#[test]
fn the_bounds_themselves_are_accepted() {
    let d = EngineConfig::default;
    for config in [
        d(),
        EngineConfig {
            max_sessions: 1,
            ..d()
        },
        EngineConfig {
            max_key_len: 0,
            max_value_len: 0,
            ..d()
        },
        EngineConfig {
            max_key_len: EngineConfig::MAX_KEY_LEN,
            max_value_len: EngineConfig::MAX_VALUE_LEN,
            horizon_refresh_commits: u32::MAX,
            ..d()
        },
        EngineConfig {
            horizon_refresh_commits: 1,
            asymmetric_fences: true,
            ..d()
        },
    ] {
        assert_eq!(config.validate(), Ok(()), "{config:?}");
        let e = Engine::new(config.clone()).unwrap();
        let mut s = e.session().unwrap();
        let t = s.begin(&Default::default()).unwrap();
        t.commit(Default::default()).unwrap();
    }
    // The largest table is built (and its slots are usable).
    let e = Engine::new(EngineConfig {
        max_sessions: EngineConfig::MAX_SESSIONS,
        ..d()
    })
    .unwrap();
    assert_eq!(e.manager().max_sessions(), EngineConfig::MAX_SESSIONS);
    let sessions: Vec<_> = (0..3).map(|_| e.session().unwrap()).collect();
    assert_eq!(sessions.len(), 3);
}

#[test]
fn the_machinery_constructors_refuse_a_bad_table_size() {
    let want = |v| out_of_range("max_sessions", v, 1, EngineConfig::MAX_SESSIONS);
    assert_eq!(TxnManager::new(0).err(), Some(want(0)));
    assert_eq!(TxnManager::new(1 << 40).err(), Some(want(1 << 40)));
    assert_eq!(
        with_machinery::TxnManager::<Other>::with_machinery(0).err(),
        Some(want(0))
    );
    assert_eq!(TxnManager::new(4).unwrap().max_sessions(), 4);
    let e = Engine::default();
    assert_eq!(
        e.config().max_sessions,
        EngineConfig::default().max_sessions
    );
}
