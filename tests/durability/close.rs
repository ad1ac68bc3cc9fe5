//! Dropping a durable engine ends its background threads before it
//! returns: the directory reopens at once, every time.

use super::{get, DIR};
use snapshot_engine::durability::MemFs;
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, TxnOptions,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const ROUNDS: usize = 200;

/// `ROUNDS` times: open with a 1 ms background checkpoint (and, every
/// other round, a 1 ms periodic sync), commit a few keys, drop, and reopen
/// at once: the reopen never finds the directory locked, and holds every
/// key committed so far.
fn drop_then_reopen(dir: &Path, fs: impl Fn() -> DurabilityOptions) {
    for round in 0..ROUNDS {
        let durability = if round % 2 == 0 {
            Durability::Sync
        } else {
            Durability::Periodic(Duration::from_millis(1))
        };
        let options = DurabilityOptions {
            durability,
            checkpoint_interval: Some(Duration::from_millis(1)),
            ..fs()
        };
        let e = Engine::open(dir, EngineConfig::default(), options)
            .unwrap_or_else(|err| panic!("round {round}: {err}"));
        let mut s = e.session().unwrap();
        for i in 0..20 {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(format!("r{round:03}-{i:02}"), vec![round as u8; 64])
                .unwrap();
            t.commit(CommitOptions::default()).unwrap();
        }
        drop(s);
        if round % 10 == 0 {
            for r in 0..=round {
                assert!(get(&e, &format!("r{r:03}-19")).is_some(), "round {r}");
            }
        }
        drop(e);
    }
    let e = Engine::open(dir, EngineConfig::default(), fs()).unwrap();
    for r in 0..ROUNDS {
        assert!(get(&e, &format!("r{r:03}-00")).is_some(), "round {r}");
    }
}

#[test]
fn drop_then_reopen_with_a_background_checkpointer_on_memfs() {
    let fs = MemFs::new();
    drop_then_reopen(Path::new(DIR), || DurabilityOptions {
        fs: Arc::new(fs.clone()),
        ..DurabilityOptions::default()
    });
}

#[test]
fn drop_then_reopen_with_a_background_checkpointer_on_disk() {
    let dir = std::env::temp_dir().join(format!("snapshot-drop-reopen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    drop_then_reopen(&dir, DurabilityOptions::default);
    std::fs::remove_dir_all(&dir).unwrap();
}
