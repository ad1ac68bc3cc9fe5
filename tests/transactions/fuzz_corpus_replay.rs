//! Replays the checked-in fuzz corpus (`fuzz/corpus/differential/`) through
//! the differential harness on stable Rust, so CI exercises it without
//! nightly or libFuzzer. Also runs the regression inputs the fuzzer found,
//! written out as op lists.

use snapshot_engine_fuzz as harness;

use harness::{BeginOpts, Key, Op, Ts, B, Q, S};
use std::path::{Path, PathBuf};

#[test]
fn every_corpus_file_matches_the_model() {
    // `FUZZ_CORPUS_DIR` replays another directory (e.g. a fuzzing run's
    // full working corpus) the same way.
    let dir = match std::env::var_os("FUZZ_CORPUS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/differential"),
    };
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus directory {} is missing: {e}", dir.display()));
    let mut files: Vec<_> = entries
        .map(|e| e.expect("readable corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "corpus directory {} is empty: the replay would prove nothing",
        dir.display()
    );
    for f in &files {
        let data = std::fs::read(f).expect("readable corpus file");
        let r = std::panic::catch_unwind(|| harness::run_bytes(&data));
        if let Err(e) = r {
            eprintln!("corpus file {} diverged", f.display());
            std::panic::resume_unwind(e);
        }
    }
    eprintln!("replayed {} corpus files", files.len());
}

const PLAIN: BeginOpts = BeginOpts {
    flags: 0,
    more: 0,
    read_ts: None,
};
/// `read_at_stable` (flags bits 4-6 == 1).
const AT_STABLE: BeginOpts = BeginOpts {
    flags: 0x10,
    more: 0,
    read_ts: None,
};

/// A fast-path reader begun while no stable timestamp is set, with oldest
/// set: it used to spin forever in `begin_at_stable` (floor_ts > stable = 0
/// never validates).
#[test]
fn read_at_stable_with_oldest_but_no_stable_does_not_hang() {
    harness::run(&[
        Op::SetTimestamps(Some(Ts(5)), None, None),
        Op::Begin(S(0), AT_STABLE),
        Op::Get(S(0), Key(0)),
    ]);
}

/// A fast-path reader at stable 0 (nothing set) sees an untimestamped
/// version under a timestamped one; raising oldest (still no stable) and
/// collecting used to prune the version it was reading.
#[test]
fn read_at_stable_without_stable_keeps_what_it_reads_across_pruning() {
    harness::run(&[
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 2),
        Op::Commit(S(1), None, None),
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 3),
        Op::Commit(S(1), Some(Ts(5)), None),
        Op::Collect,
        Op::Begin(S(0), AT_STABLE),
        Op::Get(S(0), Key(0)),
        Op::SetTimestamps(Some(Ts(6)), None, None),
        Op::Collect,
        Op::Get(S(0), Key(0)),
        Op::Range(S(0), B::Unb, B::Unb),
        Op::Query(Q::Pinned),
    ]);
}

/// Rounding a prepare timestamp up past stable = `Timestamp::MAX` used to
/// return `MAX + 1` and store it masked to 0 in the version status word.
#[test]
fn prepare_roundup_at_max_stable_is_refused() {
    harness::run(&[
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::SetTimestamps(None, Some(Ts(254)), None),
        Op::Begin(
            S(1),
            BeginOpts {
                flags: 0,
                more: 1,
                read_ts: None,
            },
        ),
        Op::Put(S(1), Key(2), 2),
        Op::Prepare(S(1), Ts(3)),
        Op::Begin(S(2), PLAIN),
        Op::Get(S(2), Key(2)),
    ]);
}

const fn at(r: u8) -> BeginOpts {
    BeginOpts {
        flags: 0,
        more: 0,
        read_ts: Some(Ts(r)),
    }
}

/// The boundaries the visibility rules turn on, one step either side, in
/// case the corpus misses one (a commit exactly at the read timestamp or at
/// stable; a prepare exactly at the read timestamp).
#[test]
fn visibility_boundaries_match_the_model() {
    harness::run(&[
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::Commit(S(0), Some(Ts(5)), None),
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 3),
        Op::Commit(S(0), Some(Ts(6)), None),
        Op::SetTimestamps(None, Some(Ts(5)), None),
        Op::Begin(S(1), AT_STABLE),
        Op::Get(S(1), Key(0)),
        Op::Range(S(1), B::Unb, B::Unb),
        Op::Begin(S(2), at(4)),
        Op::Get(S(2), Key(0)),
        Op::Begin(S(2), at(5)),
        Op::Get(S(2), Key(0)),
        Op::Begin(S(2), at(6)),
        Op::Get(S(2), Key(0)),
    ]);
    harness::run(&[
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(2), 2),
        Op::Prepare(S(0), Ts(8)),
        Op::Begin(S(1), at(7)),
        Op::Get(S(1), Key(2)),
        Op::Begin(S(1), at(8)),
        Op::Get(S(1), Key(2)),
        Op::Range(S(1), B::Unb, B::Unb),
        // Ignoring prepared updates ((more >> 1) % 8 == 6) skips it.
        Op::Begin(
            S(2),
            BeginOpts {
                flags: 0,
                more: 6 << 1,
                read_ts: Some(Ts(9)),
            },
        ),
        Op::Get(S(2), Key(2)),
        Op::Commit(S(0), Some(Ts(9)), None),
        Op::Begin(S(1), at(8)),
        Op::Get(S(1), Key(2)),
        Op::Begin(S(1), at(9)),
        Op::Get(S(1), Key(2)),
    ]);
}

/// First updater wins: a version committed after the writer's snapshot (or
/// above its read timestamp) is a conflict; one it can see is not.
#[test]
fn write_conflict_boundaries_match_the_model() {
    harness::run(&[
        Op::Begin(S(1), PLAIN),
        // The read takes S1's snapshot (lazily) before S0 commits.
        Op::Get(S(1), Key(1)),
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::Commit(S(0), Some(Ts(5)), None),
        Op::Put(S(1), Key(0), 3),
        Op::Put(S(1), Key(1), 3),
        Op::Commit(S(1), None, None),
        Op::Begin(S(2), at(4)),
        Op::Put(S(2), Key(0), 4),
        Op::Begin(S(2), at(5)),
        Op::Put(S(2), Key(0), 4),
        Op::Commit(S(2), Some(Ts(7)), None),
    ]);
}

/// Savepoints: a key written before and after the savepoint returns to its
/// value at the savepoint, keys first written after it disappear, a nested
/// savepoint is discarded by rolling back to an outer one, the outer one
/// stays usable, and the commit publishes exactly what is left.
#[test]
fn savepoint_rollback_matches_the_model() {
    harness::run(&[
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::Savepoint(S(0)),
        Op::Put(S(0), Key(0), 3),
        Op::Put(S(0), Key(2), 4),
        Op::Delete(S(0), Key(0)),
        Op::Get(S(0), Key(0)),
        Op::Savepoint(S(0)),
        Op::Put(S(0), Key(4), 5),
        Op::Range(S(0), B::Unb, B::Unb),
        Op::RollbackTo(S(0), 0),
        Op::Get(S(0), Key(0)),
        Op::Get(S(0), Key(2)),
        Op::Range(S(0), B::Unb, B::Unb),
        // The inner savepoint was discarded; the outer one still works.
        Op::RollbackTo(S(0), 1),
        Op::Put(S(0), Key(6), 2),
        Op::RollbackTo(S(0), 0),
        Op::Commit(S(0), Some(Ts(5)), None),
        Op::Begin(S(1), PLAIN),
        Op::Range(S(1), B::Unb, B::Unb),
    ]);
}

/// After rolling back to a savepoint the key's chain head is the version
/// below again: another writer that began after a commit can write it, and
/// the undone writer conflicts on what it cannot see.
#[test]
fn savepoint_rollback_and_write_conflicts_match_the_model() {
    harness::run(&[
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::Commit(S(0), Some(Ts(3)), None),
        Op::Begin(S(0), PLAIN),
        Op::Savepoint(S(0)),
        Op::Put(S(0), Key(0), 3),
        // s1 conflicts with s0's in-progress write, and is doomed.
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 4),
        Op::RollbackTo(S(1), 0),
        Op::Rollback(S(1)),
        Op::RollbackTo(S(0), 0),
        // s2, begun now, still conflicts: s0 is running and its snapshot
        // predates nothing; the head is the committed version, visible.
        Op::Begin(S(2), PLAIN),
        Op::Put(S(2), Key(0), 5),
        Op::Commit(S(2), Some(Ts(6)), None),
        // s0 cannot see s2's commit: writing the key again conflicts.
        Op::Put(S(0), Key(0), 2),
        Op::Commit(S(0), None, None),
        // A read timestamp set after the undone write: the version below
        // (committed at 3) stays visible at 4, 6's is not.
        Op::Begin(S(0), PLAIN),
        Op::Put(S(1), Key(2), 2),
        Op::Savepoint(S(0)),
        Op::Put(S(0), Key(2), 2),
        Op::RollbackTo(S(0), 1),
        Op::SetReadTs(S(0), Ts(4)),
        Op::Put(S(0), Key(0), 3),
    ]);
}

/// Savepoints are refused on the wrong transaction: one taken on another
/// session, one from an earlier transaction on the same session, one from
/// before a reopen; and after prepare or a write conflict.
#[test]
fn stale_and_foreign_savepoints_are_refused_as_in_the_model() {
    harness::run(&[
        Op::RollbackTo(S(0), 0),
        Op::Begin(S(0), PLAIN),
        Op::Savepoint(S(0)),
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(2), 2),
        Op::RollbackTo(S(1), 0),
        Op::Savepoint(S(1)),
        Op::Commit(S(0), None, None),
        Op::Begin(S(0), PLAIN),
        Op::RollbackTo(S(0), 0),
        Op::RollbackTo(S(0), 1),
        Op::Reopen(S(1)),
        Op::Begin(S(1), PLAIN),
        Op::Savepoint(S(1)),
        Op::RollbackTo(S(1), 1),
        Op::RollbackTo(S(1), 2),
        Op::Put(S(1), Key(4), 2),
        Op::Prepare(S(1), Ts(5)),
        Op::Savepoint(S(1)),
        Op::RollbackTo(S(1), 2),
        Op::Commit(S(1), Some(Ts(6)), None),
        Op::Begin(S(2), PLAIN),
        Op::Range(S(2), B::Unb, B::Unb),
    ]);
}

/// Cursors yield what `range` does: forwards, backwards, after a seek or a
/// seek back (inside, before and past the range), from both ends in turn, over
/// deleted keys, own writes, and a prepared key (the conflict comes first).
#[test]
fn cursors_match_the_model() {
    let all = |s, mode, k| Op::Iter(S(s), B::Unb, B::Unb, mode, Key(k));
    let mut ops = vec![
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::Put(S(0), Key(2), 3),
        Op::Put(S(0), Key(4), 4),
        Op::Put(S(0), Key(6), 5),
        Op::Commit(S(0), Some(Ts(3)), None),
        Op::Begin(S(0), PLAIN),
        Op::Delete(S(0), Key(2)),
        Op::Put(S(0), Key(4), 2),
    ];
    for mode in 0..6 {
        for k in [0, 3, 6, 8] {
            ops.push(all(0, mode, k));
            ops.push(Op::Iter(S(0), B::Exc(Key(0)), B::Inc(Key(4)), mode, Key(k)));
            ops.push(Op::Iter(S(0), B::Inc(Key(4)), B::Exc(Key(2)), mode, Key(k)));
        }
    }
    ops.extend([Op::Prepare(S(0), Ts(4)), Op::Begin(S(1), at(5))]);
    for mode in 0..6 {
        ops.push(all(1, mode, 4));
        ops.push(Op::Iter(S(1), B::Unb, B::Exc(Key(2)), mode, Key(0)));
    }
    ops.push(all(0, 0, 0));
    harness::run(&ops);
}

/// Random op sequences through the harness (savepoints and cursors
/// included), from a fixed seed: 2,000 runs of up to 120 ops each, decoded
/// op by op (a `Vec<Op>` decoded from random bytes stops after about one op,
/// as each element costs a "more?" byte), a second or two.
#[test]
fn seeded_random_op_sequences_match_the_model() {
    use arbitrary::{Arbitrary, Unstructured};
    let mut x: u64 = 0x5eed_0012;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut total = 0;
    for _ in 0..2000 {
        let data: Vec<u8> = (0..1200).map(|_| next() as u8).collect();
        let mut u = Unstructured::new(&data);
        let n = 20 + (next() % 100) as usize;
        let ops: Vec<Op> = (0..n).map_while(|_| Op::arbitrary(&mut u).ok()).collect();
        total += ops.len();
        let r = std::panic::catch_unwind(|| harness::run(&ops));
        if let Err(e) = r {
            eprintln!("random op sequence diverged: {ops:?}");
            std::panic::resume_unwind(e);
        }
    }
    assert!(
        total > 100_000,
        "the random runs should be long: {total} ops"
    );
}

/// The finger read path against the model: several versions of
/// one key, pruned so that the key has a floor and a finger; reads at
/// timestamps that climb from the floor, start at the finger, climb from
/// it, and come from the head; then an out-of-order commit (the key reads
/// from the head for good) and a prepared head. The corpus alone did not
/// reach the climb: a climb that never moved passed it. (`Ts` wraps at 16.)
#[test]
fn finger_and_floor_reads_match_the_model() {
    let mut ops = Vec::new();
    let commit = |ops: &mut Vec<Op>, len: u8, cts: u8| {
        ops.push(Op::Begin(S(0), PLAIN));
        ops.push(Op::Put(S(0), Key(0), len));
        ops.push(Op::Commit(S(0), Some(Ts(cts)), None));
    };
    let reads = |ops: &mut Vec<Op>, ats: &[u8]| {
        for &r in ats {
            ops.push(Op::Begin(S(1), at(r)));
            ops.push(Op::Get(S(1), Key(0)));
            ops.push(Op::Range(S(1), B::Unb, B::Unb));
        }
        ops.push(Op::Drop(S(1)));
    };
    // Values are 2-4 bytes (the harness's bound), unique per step.
    for (i, cts) in [2u8, 4, 6, 8].into_iter().enumerate() {
        commit(&mut ops, 2 + i as u8 % 3, cts);
    }
    ops.push(Op::SetTimestamps(Some(Ts(2)), Some(Ts(3)), None));
    ops.push(Op::Collect);
    commit(&mut ops, 2, 10);
    commit(&mut ops, 3, 12);
    ops.push(Op::SetTimestamps(None, Some(Ts(9)), None));
    ops.push(Op::Collect);
    reads(&mut ops, &[2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13]);
    // Below the newest committed version (12): out of order.
    // Then one in order on top, so a reader at 11 meets 13 first and must
    // not climb from the finger past 11 (it stops at 10 when the key is
    // taken for ordered).
    commit(&mut ops, 4, 11);
    commit(&mut ops, 2, 13);
    ops.push(Op::Collect);
    reads(&mut ops, &[9, 10, 11, 12, 13]);
    ops.push(Op::Begin(S(2), PLAIN));
    ops.push(Op::Put(S(2), Key(0), 3));
    ops.push(Op::Prepare(S(2), Ts(14)));
    reads(&mut ops, &[10, 12, 13, 14]);
    ops.push(Op::Commit(S(2), Some(Ts(14)), None));
    ops.push(Op::SetTimestamps(Some(Ts(6)), Some(Ts(15)), None));
    ops.push(Op::Collect);
    reads(&mut ops, &[6, 7, 9, 12, 13, 14, 15]);
    harness::run(&ops);
}

/// As above on a key that stays ordered, with two keys so that pruning one
/// key's chain and reading another's interleave.
#[test]
fn finger_climbs_on_an_ordered_key_match_the_model() {
    let mut ops = Vec::new();
    for (i, cts) in [2u8, 3, 4, 5, 6, 7].into_iter().enumerate() {
        ops.push(Op::Begin(S(0), PLAIN));
        ops.push(Op::Put(S(0), Key(0), 2 + i as u8 % 3));
        ops.push(Op::Put(S(0), Key(1), 2 + (i as u8 + 1) % 3));
        ops.push(Op::Commit(S(0), Some(Ts(cts)), None));
        if cts == 3 {
            ops.push(Op::SetTimestamps(Some(Ts(2)), Some(Ts(2)), None));
            ops.push(Op::Collect);
        }
    }
    ops.push(Op::SetTimestamps(None, Some(Ts(4)), None));
    for r in 2..=8u8 {
        ops.push(Op::Begin(S(1), at(r)));
        ops.push(Op::Get(S(1), Key(0)));
        ops.push(Op::Get(S(1), Key(1)));
    }
    harness::run(&ops);
}

/// Pruning regression 1: a reader that began before a delete keeps
/// the value under the tombstone. A committed tombstone is the safe point
/// only when the horizon covers it (invariant 3); taking it whether or not
/// it is covered cuts the value this reader still reads.
#[test]
fn a_reader_from_before_a_delete_keeps_the_value_across_collect() {
    harness::run(&[
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 2),
        Op::Commit(S(1), None, None),
        Op::Begin(S(0), PLAIN),
        Op::Get(S(0), Key(0)),
        Op::Begin(S(1), PLAIN),
        Op::Delete(S(1), Key(0)),
        Op::Commit(S(1), None, None),
        Op::Collect,
        Op::Get(S(0), Key(0)),
    ]);
}

/// Pruning regression 2: a reader whose snapshot has a writer
/// running (the writer's id is the reader's xmin, and so the horizon's).
/// The writer commits and `collect` runs: its version is not covered by the
/// horizon (`txn < xmin`, not `<=`), so the version below it, which the
/// reader still sees, stays.
#[test]
fn a_reader_with_a_running_writer_in_its_snapshot_keeps_the_older_version() {
    harness::run(&[
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 2),
        Op::Commit(S(1), None, None),
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 3),
        Op::Begin(S(0), PLAIN),
        // The first read takes the snapshot (lazily): here, with
        // the writer still running.
        Op::Get(S(0), Key(0)),
        Op::Commit(S(1), None, None),
        Op::Collect,
        Op::Get(S(0), Key(0)),
    ]);
}

/// A transaction takes its snapshot at its first read, write or
/// read timestamp, not at begin. A commit that returns between begin and
/// the first read is seen; until that read the transaction pins nothing
/// (`pins()` shows no snapshot), and a read timestamp set first publishes
/// both pins at once.
#[test]
fn the_snapshot_is_taken_at_the_first_read_not_at_begin() {
    harness::run(&[
        Op::Begin(S(0), PLAIN),
        Op::Query(Q::Pinned),
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 2),
        Op::Commit(S(1), None, None),
        Op::Get(S(0), Key(0)),
        Op::Query(Q::Pinned),
        Op::Begin(S(2), PLAIN),
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(0), 3),
        Op::Commit(S(1), Some(Ts(5)), None),
        Op::SetReadTs(S(2), Ts(6)),
        Op::Query(Q::OldestReader),
        Op::Get(S(2), Key(0)),
        Op::Get(S(0), Key(0)),
    ]);
}

/// Durability against the model: a checkpoint at stable 6 (one commit
/// below it, one above), a prepared commit durable above stable, an
/// untimestamped commit after the checkpoint that a power cut may lose (the
/// fuzzed engine does not sync), a clean restart that keeps everything,
/// reads at and above the recovered stable, and writes after recovery.
#[test]
fn checkpoint_crash_and_restart_match_the_model() {
    let ops = [
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::Commit(S(0), Some(Ts(5)), None),
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(2), 3),
        Op::Put(S(1), Key(2), 4),
        Op::Commit(S(1), Some(Ts(9)), None),
        Op::Begin(S(2), PLAIN),
        Op::Put(S(2), Key(4), 5),
        Op::Prepare(S(2), Ts(6)),
        Op::Commit(S(2), Some(Ts(6)), Some(Ts(12))),
        Op::SetTimestamps(None, Some(Ts(7)), None),
        Op::Checkpoint,
        Op::Begin(S(0), PLAIN),
        Op::Delete(S(0), Key(0)),
        Op::Commit(S(0), None, None),
        Op::Crash,
        Op::Begin(S(0), at(7)),
        Op::Range(S(0), B::Unb, B::Unb),
        Op::Begin(S(1), at(10)),
        Op::Range(S(1), B::Unb, B::Unb),
        Op::Put(S(1), Key(6), 2),
        Op::Commit(S(1), Some(Ts(11)), None),
        Op::Restart,
        Op::Begin(S(2), at(12)),
        Op::Range(S(2), B::Unb, B::Unb),
        Op::Query(Q::Stable),
        Op::Query(Q::AllDurable),
        Op::Checkpoint,
        Op::Crash,
        Op::Begin(S(2), PLAIN),
        Op::Range(S(2), B::Unb, B::Unb),
    ];
    harness::run(&ops);
}

/// Named tables against the model: creates and drops (a name taken, a
/// name missing), reads and writes that pick a table, a commit across
/// three tables, per-table conflicts, a handle used after its table was
/// dropped, an unprepared writer of a dropped table refused at commit and
/// at prepare and a prepared one committed, a serializable reader of a
/// dropped table refused at commit; then a checkpoint, a power cut that may
/// lose the creates and drops after it, and a clean restart.
#[test]
fn named_tables_match_the_model() {
    use harness::N;
    let ser = BeginOpts {
        flags: 0x40,
        more: 0,
        read_ts: None,
    };
    let t = |n| Some(N(n));
    let ops = [
        Op::UseTable(S(0), t(0)),
        Op::CreateTable(N(0)),
        Op::CreateTable(N(0)),
        Op::CreateTable(N(1)),
        Op::CreateTable(N(2)),
        Op::DropTable(N(2)),
        Op::DropTable(N(2)),
        Op::CreateTable(N(2)),
        // One commit across the default table and three named ones.
        Op::Begin(S(0), PLAIN),
        Op::Put(S(0), Key(0), 2),
        Op::UseTable(S(0), t(0)),
        Op::Put(S(0), Key(0), 3),
        Op::Put(S(0), Key(2), 4),
        Op::UseTable(S(0), t(1)),
        Op::Put(S(0), Key(0), 2),
        Op::Range(S(0), B::Unb, B::Unb),
        Op::UseTable(S(0), t(2)),
        Op::Delete(S(0), Key(4)),
        Op::Put(S(0), Key(8), 2),
        Op::Commit(S(0), Some(Ts(3)), None),
        // Conflicts are per (table, key).
        Op::Begin(S(1), PLAIN),
        Op::UseTable(S(1), t(0)),
        Op::Put(S(1), Key(0), 3),
        Op::Begin(S(2), PLAIN),
        Op::Put(S(2), Key(0), 4),
        Op::UseTable(S(2), t(0)),
        Op::Put(S(2), Key(0), 4),
        Op::Rollback(S(2)),
        Op::Commit(S(1), None, None),
        // s1 writes t0 and reads t1; s2 prepares a write to t1.
        Op::Begin(S(1), PLAIN),
        Op::Put(S(1), Key(2), 3),
        Op::Begin(S(2), PLAIN),
        Op::UseTable(S(2), t(1)),
        Op::Put(S(2), Key(2), 3),
        Op::Prepare(S(2), Ts(5)),
        // A serializable reader of t2.
        Op::Begin(S(0), ser),
        Op::Get(S(0), Key(0)),
        Op::Range(S(0), B::Unb, B::Exc(Key(6))),
        Op::UseTable(S(0), None),
        Op::Put(S(0), Key(6), 2),
        Op::DropTable(N(0)),
        Op::DropTable(N(1)),
        Op::DropTable(N(2)),
        Op::UseTable(S(1), t(0)),
        // The handles reach nothing; the writers of t0 and t1 end apart.
        Op::Get(S(2), Key(0)),
        Op::Cursor(
            S(2),
            B::Unb,
            B::Unb,
            harness::CSteps(vec![harness::CStep::Next]),
        ),
        Op::Put(S(1), Key(0), 2),
        Op::Commit(S(1), Some(Ts(6)), None),
        Op::Commit(S(2), Some(Ts(6)), None),
        Op::Commit(S(0), Some(Ts(7)), None),
        Op::CreateTable(N(0)),
        Op::UseTable(S(1), t(0)),
        Op::Begin(S(1), PLAIN),
        Op::Range(S(1), B::Unb, B::Unb),
        Op::Put(S(1), Key(0), 4),
        Op::Prepare(S(1), Ts(8)),
        Op::Begin(S(2), PLAIN),
        Op::UseTable(S(2), t(0)),
        Op::Put(S(2), Key(2), 4),
        Op::DropTable(N(0)),
        Op::Prepare(S(2), Ts(9)),
        Op::Put(S(2), Key(2), 4),
        Op::Commit(S(2), Some(Ts(9)), None),
        Op::Commit(S(1), Some(Ts(9)), None),
        // Durability: a checkpoint, then creates, drops and commits that a
        // power cut may lose (a prefix of them), then a clean restart.
        Op::CreateTable(N(1)),
        Op::Begin(S(0), PLAIN),
        Op::UseTable(S(0), t(1)),
        Op::Put(S(0), Key(0), 2),
        Op::Commit(S(0), Some(Ts(10)), None),
        Op::SetTimestamps(None, Some(Ts(10)), None),
        Op::Checkpoint,
        Op::CreateTable(N(2)),
        Op::Begin(S(0), PLAIN),
        Op::UseTable(S(0), t(2)),
        Op::Put(S(0), Key(2), 3),
        Op::UseTable(S(0), t(1)),
        Op::Put(S(0), Key(2), 3),
        Op::Commit(S(0), Some(Ts(11)), None),
        Op::DropTable(N(1)),
        Op::Crash,
        Op::UseTable(S(0), t(1)),
        Op::UseTable(S(1), t(2)),
        Op::Begin(S(0), PLAIN),
        Op::Range(S(0), B::Unb, B::Unb),
        Op::Begin(S(1), PLAIN),
        Op::Range(S(1), B::Unb, B::Unb),
        Op::Put(S(1), Key(4), 2),
        Op::Commit(S(1), Some(Ts(12)), None),
        Op::DropTable(N(1)),
        Op::CreateTable(N(0)),
        Op::Restart,
        Op::UseTable(S(0), t(0)),
        Op::UseTable(S(1), t(1)),
        Op::UseTable(S(2), t(2)),
        Op::Begin(S(2), PLAIN),
        Op::Range(S(2), B::Unb, B::Unb),
        Op::Query(Q::AllDurable),
    ];
    harness::run(&ops);
}

/// Random op sequences with named tables in them, from a fixed seed: each
/// run starts by creating tables and choosing one per session, and about
/// one op in six is a create, a drop or a change of table, so the ops meet
/// live tables, dropped handles, names taken and missing, and crashes and
/// restarts around creates and drops.
#[test]
fn seeded_random_op_sequences_with_tables_match_the_model() {
    use arbitrary::{Arbitrary, Unstructured};
    use harness::N;
    let mut x: u64 = 0x7ab1_e500;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut total, mut tables) = (0, 0);
    for _ in 0..1500 {
        let data: Vec<u8> = (0..1200).map(|_| next() as u8).collect();
        let mut u = Unstructured::new(&data);
        let mut ops = vec![
            Op::CreateTable(N(0)),
            Op::CreateTable(N(1)),
            Op::UseTable(S(0), Some(N(0))),
            Op::UseTable(S(1), Some(N(1))),
        ];
        let n = 20 + (next() % 100) as usize;
        for _ in 0..n {
            let r = next();
            let n = N((r >> 8) as u8);
            ops.push(match r % 18 {
                0 => Op::CreateTable(n),
                1 => Op::DropTable(n),
                2 => Op::UseTable(S((r >> 16) as u8), Some(n).filter(|_| r & 1 << 20 != 0)),
                _ => match Op::arbitrary(&mut u) {
                    Ok(op) => op,
                    Err(_) => break,
                },
            });
        }
        total += ops.len();
        tables += ops
            .iter()
            .filter(|o| matches!(o, Op::CreateTable(_) | Op::DropTable(_) | Op::UseTable(..)))
            .count();
        let r = std::panic::catch_unwind(|| harness::run(&ops));
        if let Err(e) = r {
            eprintln!("random op sequence diverged: {ops:?}");
            std::panic::resume_unwind(e);
        }
    }
    assert!(
        total > 50_000 && tables > 10_000,
        "the random runs should be long: {total} ops, {tables} on tables"
    );
}
