//! The key space the workloads share: keys as the store sees them, the
//! PRNG that picks them, and the initial load.

use crate::fmt::fmt_int;
use indicatif::ProgressBar;
use snapshot_engine::with_machinery::{Engine, Machinery};
use snapshot_engine::{CommitOptions, Table, Timestamp, TimestampUpdate, TxnOptions};

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

/// The fewest bytes a key has (`--key-size`): the u64 it encodes.
pub const MIN_KEY_SIZE: usize = 8;

/// Keys of `--key-size` bytes: a fixed filler, then the key's number
/// big-endian in the last 8 bytes, so key order is still numeric order and
/// an 8-byte key is exactly [`key`]. One buffer, rewritten per key.
#[derive(Clone, Debug)]
pub struct KeyBuf {
    buf: Vec<u8>,
}

impl KeyBuf {
    /// Keys of `size` bytes (at least [`MIN_KEY_SIZE`]; the CLI bounds it).
    pub fn new(size: usize) -> KeyBuf {
        assert!(size >= MIN_KEY_SIZE, "a key holds its 8-byte number");
        KeyBuf {
            buf: vec![b'k'; size],
        }
    }

    /// Key number `k`.
    #[inline]
    pub fn at(&mut self, k: u64) -> &[u8] {
        let n = self.buf.len();
        self.buf[n - 8..].copy_from_slice(&k.to_be_bytes());
        &self.buf
    }
}

impl AsRef<[u8]> for KeyBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

/// Loads `keys` keys of `key_size` bytes ([`KeyBuf`]) with `value_size`-byte
/// values, committed at ts 1, and
/// sets oldest = stable = 1. The bar's message counts the keys loaded (a
/// load of millions of keys takes seconds to a minute, outside the bar's
/// planned time).
pub fn load<M: Machinery>(
    e: &Engine<M>,
    keys: u64,
    key_size: usize,
    value_size: usize,
    pb: &ProgressBar,
) {
    load_into(e, &[], keys, key_size, value_size, pb);
}

/// The table key `k` lives in: `tables[k % tables.len()]` (round-robin), or
/// the default table (`None`) when `tables` is empty.
#[inline]
pub fn table_of(tables: &[Table], k: u64) -> Option<&Table> {
    if tables.is_empty() {
        None
    } else {
        Some(&tables[(k % tables.len() as u64) as usize])
    }
}

/// [`load`] with the keys spread over `tables` by [`table_of`] (the default
/// table when `tables` is empty).
pub fn load_into<M: Machinery>(
    e: &Engine<M>,
    tables: &[Table],
    keys: u64,
    key_size: usize,
    value_size: usize,
    pb: &ProgressBar,
) {
    let mut s = e.session().expect("a session for the loader");
    let mut kb = KeyBuf::new(key_size);
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
            match table_of(tables, k) {
                None => t.put(kb.at(k), &value),
                Some(tb) => t
                    .table(tb)
                    .expect("a live table of this engine")
                    .put(kb.at(k), &value),
            }
            .expect("load put");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_longer_key_ends_in_the_short_one_and_keeps_numeric_order() {
        let mut kb = KeyBuf::new(24);
        assert_eq!(kb.at(7).len(), 24);
        assert_eq!(&kb.at(7)[16..], &key(7)[..]);
        let a = kb.at(255).to_vec();
        assert!(a.as_slice() < kb.at(256));
        assert_eq!(KeyBuf::new(8).at(42), &key(42)[..]);
    }
}
