//! A commit's returned outcome is its fate after recovery: a commit that
//! returned `Ok` is there after a restart (and, in `Sync`, after a power
//! cut), one that returned an error is not, whatever file operation failed:
//! a commit's own write or sync, or any step of a segment roll-over.

use super::faulty::{Faulty, Op, Rule};
use super::{get, DIR};
use snapshot_engine::durability::{FaultOp, MemFs};
use snapshot_engine::{
    CommitOptions, Durability, DurabilityOptions, Engine, EngineConfig, Error, TxnOptions,
};
use std::sync::Arc;
use std::time::Duration;

/// Commits per run: enough for several 4 KiB segments.
const COMMITS: usize = 48;

const MODES: [Durability; 3] = [
    Durability::Sync,
    // Long enough that the flusher never runs during a run: the faults
    // below then land on the same operation every time.
    Durability::Periodic(Duration::from_secs(3600)),
    Durability::None,
];

fn key(i: usize) -> String {
    format!("c{i:03}")
}

fn options(fs: Arc<dyn snapshot_engine::durability::Fs>, mode: Durability) -> DurabilityOptions {
    DurabilityOptions {
        fs,
        durability: mode,
        segment_bytes: 4096,
        ..DurabilityOptions::default()
    }
}

/// Opens on `fs`, lets `arm` set a fault, commits [`COMMITS`] puts of 200
/// bytes one by one (going on after a failure: each later commit must be
/// refused) and drops the engine. Returns each commit's result.
fn run(fs: &Faulty, mode: Durability, arm: impl FnOnce()) -> Vec<Result<(), Error>> {
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        options(Arc::new(fs.clone()), mode),
    )
    .expect("open");
    arm();
    let mut s = e.session().unwrap();
    let out = (0..COMMITS)
        .map(|i| {
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(key(i), vec![i as u8; 200]).unwrap();
            t.commit(CommitOptions::default())
        })
        .collect();
    drop(s);
    drop(e);
    out
}

/// Checks each commit's presence after reopening `image` against its
/// result: `exact` (a restart, or a power cut in `Sync`): present exactly
/// when it returned `Ok`; otherwise (a power cut in `Periodic`/`None`)
/// present only if it returned `Ok`.
fn check(image: &MemFs, mode: Durability, results: &[Result<(), Error>], exact: bool, what: &str) {
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        options(Arc::new(image.clone()), mode),
    )
    .unwrap_or_else(|err| panic!("{what}: reopen failed: {err}"));
    for (i, r) in results.iter().enumerate() {
        let present = get(&e, &key(i)).is_some();
        if exact {
            assert_eq!(
                present,
                r.is_ok(),
                "{what}: commit {i} returned {r:?} but is {} after recovery",
                if present { "present" } else { "absent" }
            );
        } else {
            assert!(
                !present || r.is_ok(),
                "{what}: commit {i} returned {r:?} but is present after a power cut"
            );
        }
    }
}

/// Checks a run's results: at most one kind of error, every commit after
/// the first failure refused, and each commit's fate after a restart and
/// after a power cut.
fn check_run(fs: &Faulty, mode: Durability, results: &[Result<(), Error>], what: &str) {
    if let Some(first) = results.iter().position(Result::is_err) {
        for r in &results[first..] {
            assert!(
                matches!(r, Err(Error::Io { .. })),
                "{what}: after the first failure: {r:?}"
            );
        }
    }
    // Faults left armed would fire in the reopen.
    fs.mem.fail_after(FaultOp::Append, u64::MAX);
    fs.mem.fail_after(FaultOp::Sync, u64::MAX);
    let exact = mode == Durability::Sync;
    check(
        &fs.mem.crash(),
        mode,
        results,
        exact,
        &format!("{what}, power cut"),
    );
    check(&fs.mem, mode, results, true, &format!("{what}, restart"));
}

/// Each step of a segment roll-over fails (the new segment's create, its
/// header write, its sync, the directory sync), at the first and the
/// second roll-over, in every durability mode.
#[test]
fn a_failed_roll_over_fails_exactly_the_commits_it_reports() {
    for mode in MODES {
        for (op, name) in [
            (Op::Create, "log-"),
            (Op::FirstAppend, "log-"),
            (Op::FirstSync, "log-"),
            (Op::SyncDir, ""),
        ] {
            for skip in 0..2 {
                let fs = Faulty::new(MemFs::new());
                let results = run(&fs, mode, || fs.arm(Rule { op, name, skip }));
                let what = format!("{mode:?}, {op:?} of roll-over {skip}");
                assert_eq!(fs.fired().len(), 1, "{what}: the fault never fired");
                assert!(
                    results.iter().any(Result::is_err),
                    "{what}: no commit failed"
                );
                check_run(&fs, mode, &results, &what);
            }
        }
    }
}

/// `MemFs::fail_after` on every append and every sync of a run (a commit's
/// write or sync, a roll-over's, the directory's): whichever fails, each
/// commit's fate after recovery is what it returned.
#[test]
fn any_failed_write_or_sync_fails_exactly_the_commits_it_reports() {
    for mode in MODES {
        for op in [FaultOp::Append, FaultOp::Sync] {
            let mut n = 0;
            loop {
                let fs = Faulty::new(MemFs::new());
                let results = run(&fs, mode, || fs.mem.fail_after(op, n));
                let what = format!("{mode:?}, {op:?} number {n}");
                check_run(&fs, mode, &results, &what);
                if results.iter().all(Result::is_ok) {
                    // Past the run's last operation of this kind.
                    assert!(n > 3, "{what}: the fault never fired");
                    break;
                }
                n += 1;
            }
        }
    }
}

/// The one exception, as documented: a commit's sync fails and so does
/// cutting its batch back. The error says so (`op: "truncate"`); the
/// commit is not applied now, and recovery replays it.
#[test]
fn a_batch_that_cannot_be_cut_back_says_so() {
    let fs = Faulty::new(MemFs::new());
    let e = Engine::open(
        DIR,
        EngineConfig::default(),
        options(Arc::new(fs.clone()), Durability::Sync),
    )
    .unwrap();
    let put = |k: &str| {
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(k, "v").unwrap();
        t.commit(CommitOptions::default())
    };
    put("a").unwrap();
    for op in [Op::Sync, Op::Truncate] {
        fs.arm(Rule {
            op,
            name: "log-",
            skip: 0,
        });
    }
    let err = put("b").unwrap_err();
    assert!(matches!(err, Error::Io { op: "truncate", .. }), "{err}");
    assert!(err.to_string().contains("injected Sync failure"), "{err}");
    assert_eq!(get(&e, "b"), None);
    drop(e);
    let r = Engine::open(
        DIR,
        EngineConfig::default(),
        options(Arc::new(fs.mem.clone()), Durability::Sync),
    )
    .unwrap();
    assert!(get(&r, "a").is_some());
    assert!(get(&r, "b").is_some(), "the batch that was not cut back");
}
