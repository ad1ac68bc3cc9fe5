//! Runs readers and writers against one engine for a couple of seconds and
//! prints what they did: the smallest end-to-end use of the engine.
//!
//! `EXAMPLE_SECS` sets the run time in seconds (default 2; CI runs it with
//! 0.5).

use snapshot_engine::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// splitmix64: a tiny, well-mixed pseudo-random sequence.
fn next(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn main() {
    let run_for = match std::env::var("EXAMPLE_SECS") {
        Err(_) => Duration::from_secs(2),
        Ok(v) => match v.parse::<f64>() {
            Ok(x) if x.is_finite() && (0.0..=3600.0).contains(&x) => Duration::from_secs_f64(x),
            _ => {
                eprintln!("error: invalid value '{v}' for EXAMPLE_SECS: want seconds, 0 to 3600");
                std::process::exit(2);
            }
        },
    };
    let keys: u64 = 10_000;
    let engine = Engine::default();
    {
        let mut s = engine.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in 0..keys {
            t.put(k.to_be_bytes(), [0u8; 100]).unwrap();
        }
        t.commit(CommitOptions::at(1)).unwrap();
    }
    let clock = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let (reads, writes, conflicts) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let start = Instant::now();
    std::thread::scope(|sc| {
        for w in 0..2u64 {
            let (e, clock, stop, writes, conflicts) = (&engine, &clock, &stop, &writes, &conflicts);
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                let mut x = w + 1;
                while !stop.load(Ordering::Relaxed) {
                    let k = next(&mut x) % keys;
                    let mut t = s.begin(&TxnOptions::default()).unwrap();
                    if t.put(k.to_be_bytes(), [w as u8; 100]).is_err() {
                        conflicts.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let ts = clock.fetch_add(1, Ordering::Relaxed) + 1;
                    if t.commit(CommitOptions::at(ts)).is_ok() {
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        for r in 0..2u64 {
            let (e, clock, stop, reads) = (&engine, &clock, &stop, &reads);
            sc.spawn(move || {
                let mut s = e.session().unwrap();
                let mut x = r + 101;
                let mut n = 0;
                // A read timestamp set after begin, rounded up to oldest if
                // the timekeeper moved oldest past it between the clock load
                // and the call (a reader preempted there): with `roundup_read`
                // that race cannot fail the call.
                let opts = TxnOptions {
                    roundup_read: true,
                    ..TxnOptions::default()
                };
                while !stop.load(Ordering::Relaxed) {
                    let k = next(&mut x) % keys;
                    let mut t = s.begin(&opts).unwrap();
                    let read_ts = Timestamp::new(clock.load(Ordering::Relaxed));
                    t.set_read_timestamp(read_ts).unwrap();
                    let len = t
                        .get_with(k.to_be_bytes(), |v| v.map_or(0, <[u8]>::len))
                        .unwrap();
                    assert_eq!(len, 100);
                    t.rollback();
                    n += 1;
                }
                reads.fetch_add(n, Ordering::Relaxed);
            });
        }
        // The timekeeper: stable trails the newest commit, oldest trails
        // stable, so history behind oldest can be pruned.
        while start.elapsed() < run_for {
            std::thread::sleep(Duration::from_millis(1));
            let stable = clock.load(Ordering::Relaxed).saturating_sub(1_000).max(1);
            let oldest = stable.saturating_sub(1_000).max(1);
            let _ = engine.set_timestamps(TimestampUpdate {
                oldest: Some(Timestamp::new(oldest)),
                stable: Some(Timestamp::new(stable)),
                durable: None,
            });
        }
        stop.store(true, Ordering::Relaxed);
    });
    let secs = start.elapsed().as_secs_f64();
    let st = engine.stats();
    println!("2 readers, 2 writers, {keys} keys, {secs:.1} s");
    println!(
        "read txns/s {:>12.0}   write txns/s {:>10.0}   conflicts {}",
        reads.load(Ordering::Relaxed) as f64 / secs,
        writes.load(Ordering::Relaxed) as f64 / secs,
        conflicts.load(Ordering::Relaxed)
    );
    println!(
        "snapshots reused {}  rebuilt {}  descriptor installs {} (CAS retries {})  versions pruned {}  freed {}",
        st.snapshot_reused,
        st.snapshot_rebuilt,
        st.descriptor_installs,
        st.descriptor_cas_retries,
        st.versions_pruned,
        st.versions_freed
    );
}
