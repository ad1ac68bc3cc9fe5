//! The `ceiling` engine: the read-ts read with no engine at all, a plain
//! `HashMap<u64, Box<[u8]>>` (foldhash) get of a random key plus a touch of
//! one value byte, no transaction and no synchronization (the same lookup as
//! the standalone ceiling program), so a run gives the ratio to it. It runs
//! the configuration's readers only: a plain map takes no concurrent writes,
//! so its writers are not started.

use crate::keys::Rng;
use crate::measure::Meter;
use crate::phases::{run_phases_sampled, Ctl};
use crate::read_ts::{merge_peer, Out, Params, PeerThread as ThreadRes};
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::hint::black_box;

/// The map: keys as the integers they encode, each value its own block.
pub type Map = HashMap<u64, Box<[u8]>, foldhash::fast::RandomState>;

/// Loads keys `0..keys` in order, as the engines' load does.
pub fn fill(m: &mut Map, keys: u64, value_size: usize) {
    m.reserve(keys as usize);
    for k in 0..keys {
        m.insert(k, vec![0x5a; value_size].into());
    }
}

/// One read-ts run on the map.
pub fn run(p: &Params, pb: &ProgressBar) -> Out {
    let mut m = Map::default();
    fill(&mut m, p.keys, p.value_size);
    let ctl = Ctl::new(1);
    let (rs, secs) = std::thread::scope(|sc| {
        let (m, ctl) = (&m, &ctl);
        let rh: Vec<_> = (0..p.readers)
            .map(|i| {
                sc.spawn(move || {
                    let mut rng = Rng::new(0x1000 + i as u64);
                    let mut meter = Meter::new(p.worst, i, p.round);
                    let mut n = 0u64;
                    while meter.next(ctl).is_some() {
                        for _ in 0..p.batch {
                            let k = rng.below(p.keys);
                            black_box(m.get(&k).map(|v| v[v.len() / 2]));
                        }
                        if meter.record("read") {
                            n += 1;
                        }
                    }
                    let (hist, worst, cpu) = meter.finish();
                    (n, hist, worst, cpu)
                })
            })
            .collect();
        // No timekeeper: a steady warm-up is its floor.
        let secs = run_phases_sampled(ctl, p.warmup, false, p.seconds, pb);
        let rs: Vec<ThreadRes> = rh.into_iter().map(|h| h.join().expect("reader")).collect();
        (rs, secs)
    });
    let mut out = merge_peer(secs.seconds, rs, Vec::new(), p.worst);
    out.warmup = secs.warmup;
    out
}
