//! The key space the workloads share: keys as the store sees them, the
//! PRNG that picks them, and the initial load.

use crate::fmt::fmt_int;
use indicatif::ProgressBar;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{CommitOptions, Timestamp, TimestampUpdate, TxnOptions};

/// splitmix64: a few instructions, no shared state.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    #[inline]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// A key as the store sees it: big-endian, so key order is numeric order.
#[inline]
pub fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// Loads `keys` keys with `value_size`-byte values, committed at ts 1, and
/// sets oldest = stable = 1. The bar's message counts the keys loaded (a
/// load of millions of keys takes seconds to a minute, outside the bar's
/// planned time).
pub fn load<M: Machinery>(e: &Engine<M>, keys: u64, value_size: usize, pb: &ProgressBar) {
    let mut s = e.session().expect("a session for the loader");
    let mut value = vec![0x5a; value_size];
    let mut k = 0;
    let msg = pb.message();
    while k < keys {
        if k % 100_000 == 0 {
            pb.set_message(format!(
                "{msg}: loading keys {}/{}",
                fmt_int(k as f64),
                fmt_int(keys as f64)
            ));
        }
        let mut t = s.begin(&TxnOptions::default()).expect("begin");
        for _ in 0..1000.min(keys - k) {
            value[..8.min(value_size)].copy_from_slice(&k.to_le_bytes()[..8.min(value_size)]);
            t.put(key(k), &value).expect("load put");
            k += 1;
        }
        t.commit(CommitOptions::at(1)).expect("load commit");
    }
    pb.set_message(msg);
    e.set_timestamps(TimestampUpdate {
        oldest: Some(Timestamp::new(1)),
        stable: Some(Timestamp::new(1)),
        durable: None,
    })
    .expect("initial timestamps");
}
