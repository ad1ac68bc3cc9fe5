//! LMDB through heed on the read-ts shape, as far as its model allows:
//! readers open a read transaction on the latest snapshot (LMDB has no
//! timestamps), read one random key (`--batch N`: N gets) and abort; writers (LMDB admits one at
//! a time) update one random key and commit. The environment lives in a
//! temporary directory with `NO_SYNC | NO_META_SYNC | WRITE_MAP`, so commits
//! do not wait for the disk (the engines here have no durability either).

use crate::keys::{KeyBuf, Rng};
use crate::measure::Meter;
use crate::phases::{run_phases_sampled, Ctl};
use crate::read_ts::{merge_peer, Out, Params, PeerThread as ThreadRes};
use heed::types::Bytes;
use heed::{Database, EnvFlags, EnvOpenOptions};
use indicatif::ProgressBar;
use std::hint::black_box;

type Db = Database<Bytes, Bytes>;

fn thread_loop(
    ctl: &Ctl,
    p: &Params,
    id: usize,
    kind: &'static str,
    mut one: impl FnMut(&mut Rng),
) -> ThreadRes {
    let mut rng = Rng::new(0x4000 + id as u64);
    let mut m = Meter::new(p.worst, id, p.round);
    let mut n = 0u64;
    while m.next(ctl).is_some() {
        one(&mut rng);
        if m.record(kind) {
            n += 1;
        }
    }
    let (hist, worst, cpu) = m.finish();
    (n, hist, worst, cpu)
}

/// A map of at least `bytes` and 4 GiB, rounded up to a whole MiB: LMDB
/// refuses a map size that is not a multiple of the page size.
fn map_size(bytes: usize) -> usize {
    bytes.max(4 << 30).next_multiple_of(1 << 20)
}

/// One read-ts run on a fresh LMDB environment.
pub fn run(p: &Params, pb: &ProgressBar) -> Out {
    // Named by configuration too: heed keeps one environment per path per
    // process, and refuses (BadOpenOptions) to reopen a path with other
    // options, e.g. round 0 of `--configs 8/4,2/0` (other max_readers).
    let dir = std::env::temp_dir().join(format!(
        "snapshot-bench-lmdb-{}-{}r{}w-{}",
        std::process::id(),
        p.readers,
        p.writers,
        p.round
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir for LMDB");
    // LMDB reuses a freed page only once no reader holds a snapshot older
    // than it; on a loaded machine a preempted reader holds one for long
    // enough that 4x the data filled the map (MapFull). The map is sparse,
    // so a large one costs address space, not disk.
    let map = map_size(p.keys as usize * (p.key_size + p.value_size + 64) * 64);
    // SAFETY: the directory is ours alone (named by pid and round) and is
    // opened once; NO_SYNC/NO_META_SYNC/WRITE_MAP only give up durability.
    let env = unsafe {
        EnvOpenOptions::new()
            .map_size(map)
            .max_readers((p.readers + p.writers + 8) as u32)
            .flags(EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC | EnvFlags::WRITE_MAP)
            .open(&dir)
    }
    .expect("open LMDB");
    let db: Db = {
        let mut w = env.write_txn().expect("write txn");
        let db = env.create_database(&mut w, None).expect("db");
        let value = vec![0x5au8; p.value_size];
        let mut kb = KeyBuf::new(p.key_size);
        for k in 0..p.keys {
            db.put(&mut w, kb.at(k), &value[..]).expect("load");
        }
        w.commit().expect("load commit");
        db
    };
    let ctl = Ctl::new(1);
    let (rs, ws, secs) = std::thread::scope(|sc| {
        let (env, ctl) = (&env, &ctl);
        let rh: Vec<_> = (0..p.readers)
            .map(|i| {
                sc.spawn(move || {
                    let mut kb = KeyBuf::new(p.key_size);
                    thread_loop(ctl, p, i, "read", |rng| {
                        let t = env.read_txn().expect("read txn");
                        for _ in 0..p.batch {
                            let k = kb.at(rng.below(p.keys));
                            let v = db.get(&t, k).expect("get").map(|v| v[v.len() / 2]);
                            black_box(v);
                        }
                        drop(t);
                    })
                })
            })
            .collect();
        let wh: Vec<_> = (0..p.writers)
            .map(|i| {
                sc.spawn(move || {
                    let mut value = vec![0xa5u8; p.value_size];
                    let mut kb = KeyBuf::new(p.key_size);
                    let mut n = 0u64;
                    thread_loop(ctl, p, p.readers + i, "write", |rng| {
                        n += 1;
                        let w = value.len().min(8);
                        value[..w].copy_from_slice(&n.to_le_bytes()[..w]);
                        let k = kb.at(rng.below(p.keys));
                        let mut t = env.write_txn().expect("write txn");
                        db.put(&mut t, k, &value[..]).expect("put");
                        t.commit().expect("commit");
                        ctl.next_ts();
                    })
                })
            })
            .collect();
        // No timekeeper (LMDB has no timestamps): a steady warm-up is its
        // floor.
        let secs = run_phases_sampled(ctl, p.warmup, false, p.seconds, pb);
        let rs: Vec<ThreadRes> = rh.into_iter().map(|h| h.join().expect("reader")).collect();
        let ws: Vec<ThreadRes> = wh.into_iter().map(|h| h.join().expect("writer")).collect();
        (rs, ws, secs)
    });
    drop(env);
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = merge_peer(secs.seconds, rs, ws, p.worst);
    out.warmup = secs.warmup;
    out
}

/// `--report-memory` for LMDB: used map pages and resident-set growth over
/// the load and over a second pass that writes every key again while a
/// reader holds the loaded snapshot (so its pages cannot be reused).
pub fn memory(keys: u64, key_size: usize, value_size: usize) -> crate::memory::Mem {
    use crate::memory::{rss_now, Mem};
    let dir =
        std::env::temp_dir().join(format!("snapshot-bench-lmdb-{}-memory", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir for LMDB");
    let map = map_size(keys as usize * (key_size + value_size + 64) * 8);
    // SAFETY: as in `run`: our own directory, opened once.
    let env = unsafe {
        EnvOpenOptions::new()
            .map_size(map)
            .max_readers(8)
            .flags(EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC | EnvFlags::WRITE_MAP)
            .open(&dir)
    }
    .expect("open LMDB");
    let used = |env: &heed::Env| (env.info().last_page_number as u64 + 1) * 4096;
    let (u0, r0) = (used(&env), rss_now());
    let db: Db = {
        let mut w = env.write_txn().expect("write txn");
        let db = env.create_database(&mut w, None).expect("db");
        let value = vec![0x5au8; value_size];
        let mut kb = KeyBuf::new(key_size);
        for k in 0..keys {
            db.put(&mut w, kb.at(k), &value[..]).expect("load");
        }
        w.commit().expect("load commit");
        db
    };
    let (u1, r1) = (used(&env), rss_now());
    let reader = env.read_txn().expect("the pinning reader");
    let value = vec![0x6bu8; value_size];
    let mut kb = KeyBuf::new(key_size);
    let mut k = 0;
    while k < keys {
        let mut w = env.write_txn().expect("write txn");
        for _ in 0..1000.min(keys - k) {
            db.put(&mut w, kb.at(k), &value[..]).expect("second pass");
            k += 1;
        }
        w.commit().expect("second-pass commit");
    }
    let (u2, r2) = (used(&env), rss_now());
    drop(reader);
    drop(env);
    let _ = std::fs::remove_dir_all(&dir);
    let n = keys as f64;
    let d = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| (b as f64 - a as f64) / n);
    let bk = (u1 - u0) as f64 / n;
    Mem {
        engine: "lmdb",
        keys,
        key_size,
        value_size,
        bytes_per_key: bk,
        times_raw: bk / (key_size + value_size) as f64,
        bytes_per_extra_version: (u2 - u1) as f64 / n,
        rss_per_key: d(r0, r1),
        rss_per_extra_version: d(r1, r2),
        slab_slack_per_key: 0.0,
        slab_slack_per_extra_version: 0.0,
        slab_fallbacks: 0,
    }
}
