//! A checkpoint that fails writing its file leaves nothing behind and the
//! engine committing: the log is intact and the previous checkpoint stays
//! in force. One that fails in the log's own cut stops the log, as a
//! failed commit write does.

use super::faulty::{Faulty, Op, Rule};
use super::{get, DIR};
use snapshot_engine::durability::{FaultOp, Fs, MemFs};
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, Error, TxnOptions,
};
use std::path::Path;
use std::sync::Arc;

fn open(fs: &Faulty) -> Engine {
    Engine::open(
        DIR,
        EngineConfig::default(),
        DurabilityOptions {
            fs: Arc::new(fs.clone()),
            durability: Durability::Sync,
            ..DurabilityOptions::default()
        },
    )
    .unwrap()
}

fn put(e: &Engine, key: &str) -> snapshot_engine::Result<()> {
    let mut s = e.session()?;
    let mut t = s.begin(&TxnOptions::default())?;
    t.put(key, vec![7u8; 3000])?;
    t.commit(CommitOptions::default())
}

fn temporaries(fs: &MemFs) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    v.sort();
    v
}

/// The checkpoint file's create, a write of it (a full disk: part of the
/// buffer lands), its sync: the checkpoint fails, its temporary file is
/// gone, commits go on, and the next checkpoint and a reopen see them.
#[test]
fn a_failed_checkpoint_file_is_removed_and_commits_go_on() {
    for op in [Op::Create, Op::FirstAppend, Op::Append, Op::FirstSync] {
        let fs = Faulty::new(MemFs::new());
        let e = open(&fs);
        for i in 0..400 {
            put(&e, &format!("a{i:03}")).unwrap();
        }
        // The second write of a checkpoint over 1 MiB, for `Append`.
        let skip = u64::from(op == Op::Append);
        fs.arm(Rule {
            op,
            name: ".ckpt.tmp",
            skip,
        });
        let err = e.checkpoint().unwrap_err();
        assert_eq!(fs.fired().len(), 1, "{op:?}: {err}");
        assert!(matches!(err, Error::Io { .. }), "{op:?}: {err}");
        assert_eq!(temporaries(&fs.mem), Vec::<String>::new(), "{op:?}");
        put(&e, "after").unwrap();
        let c = e.checkpoint().unwrap();
        assert_eq!(c.keys, 401, "{op:?}");
        put(&e, "later").unwrap();
        drop(e);
        let r = open(&fs);
        for k in ["a000", "a399", "after", "later"] {
            assert!(get(&r, k).is_some(), "{op:?}: {k}");
        }
    }
}

/// If removing the temporary file fails too, the checkpoint reports the
/// write's error, and the next checkpoint removes what it left.
#[test]
fn a_temporary_file_left_by_a_failed_checkpoint_goes_with_the_next() {
    let fs = Faulty::new(MemFs::new());
    let e = open(&fs);
    put(&e, "a").unwrap();
    for op in [Op::FirstAppend, Op::Remove] {
        fs.arm(Rule {
            op,
            name: ".ckpt.tmp",
            skip: 0,
        });
    }
    let err = e.checkpoint().unwrap_err();
    assert!(matches!(err, Error::Io { op: "write", .. }), "{err}");
    assert_eq!(temporaries(&fs.mem).len(), 1);
    put(&e, "b").unwrap();
    e.checkpoint().unwrap();
    assert_eq!(temporaries(&fs.mem), Vec::<String>::new());
}

/// `MemFs::fail_after` on every append of a checkpoint, nothing pending:
/// the cut's own writes (starting the new segment) stop the log; the
/// checkpoint file's leave it committing. Either way no
/// temporary file stays and a reopen holds every commit that returned `Ok`.
#[test]
fn every_failed_append_of_a_checkpoint_leaves_no_temporary_file() {
    let mut n = 0;
    let mut seen = [false; 2];
    loop {
        let fs = Faulty::new(MemFs::new());
        let e = open(&fs);
        for i in 0..400 {
            put(&e, &format!("a{i:03}")).unwrap();
        }
        fs.mem.fail_after(FaultOp::Append, n);
        let Err(err) = e.checkpoint() else {
            break;
        };
        fs.mem.fail_after(FaultOp::Append, u64::MAX);
        let Error::Io { path, .. } = &err else {
            panic!("append {n}: {err}")
        };
        assert_eq!(temporaries(&fs.mem), Vec::<String>::new(), "append {n}");
        let in_log = path.extension().is_some_and(|x| x == "seg");
        seen[usize::from(in_log)] = true;
        let r = put(&e, "after");
        assert_eq!(r.is_ok(), !in_log, "append {n}: {err}, then {r:?}");
        drop(e);
        let r = open(&fs);
        assert!(get(&r, "a399").is_some(), "append {n}");
        assert_eq!(get(&r, "after").is_some(), !in_log, "append {n}");
        n += 1;
    }
    assert_eq!(
        seen,
        [true, true],
        "both kinds of failure after {n} appends"
    );
}

/// A background checkpoint that fails is reported by
/// `Engine::checkpointer_status` (nothing else surfaces it), commits go
/// on, and the next background checkpoint that succeeds clears the error.
#[test]
fn a_failed_background_checkpoint_is_reported_and_the_next_clears_it() {
    use std::time::{Duration, Instant};
    let fs = Faulty::new(MemFs::new());
    // Every background checkpoint fails until disarmed, so no success can
    // clear the error before the test reads it.
    fs.arm_sticky(Rule {
        op: Op::Create,
        name: ".ckpt.tmp",
        skip: 0,
    });
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        DurabilityOptions {
            fs: Arc::new(fs.clone()),
            durability: Durability::Sync,
            checkpoint_interval: Some(Duration::from_millis(1)),
            ..DurabilityOptions::default()
        },
    )
    .unwrap();
    // Waits for the background thread's outcomes (a bound on a hang, not
    // a timing assertion: the thread runs every millisecond).
    let wait_for =
        |what: &str, done: &dyn Fn(&snapshot_engine::durability::CheckpointerStatus) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let s = e.checkpointer_status().unwrap();
                if done(&s) {
                    return s;
                }
                assert!(Instant::now() < deadline, "{what}: {s:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
    let s = wait_for("a failure", &|s| s.failed >= 1);
    assert!(!fs.fired().is_empty());
    assert_eq!(s.completed, 0);
    assert!(
        matches!(s.last_error, Some(Error::Io { .. })),
        "{:?}",
        s.last_error
    );
    fs.disarm();
    put(&e, "after").unwrap();
    let s = wait_for("a success after the failure", &|s| s.completed >= 1);
    assert!(s.failed >= 1);
    assert_eq!(s.last_error, None);
    assert!(s.last.is_some());
    drop(e);
    assert!(get(&open(&fs), "after").is_some());
}
