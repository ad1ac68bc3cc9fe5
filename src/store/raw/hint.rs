//! The encoding of a key's *hint* word (`KeyEntry::hint`, DESIGN.md
//! "Version chains and the index"): one 64-bit word that a pruner stores
//! and a reader loads whole, so its parts are always consistent with each
//! other.
//!
//! * bits 0..48: the address of the version right above the key's finger
//!   (or floor), 0: none. Versions are 8-aligned, so the low three bits of
//!   an address are 0;
//! * bit 0: the key is *unordered* (a commit landed below the key's newest
//!   committed timestamp; set for good);
//! * bits 48..64: the *gap*, a lower bound on the head summary minus the
//!   hinted version's commit timestamp, in a 16-bit floating format (5-bit
//!   exponent, 11-bit mantissa, rounded down); 0: no usable gap (an
//!   untimestamped or unfinished version, or none).
//!
//! A reader whose read timestamp `t` rejects the head (its summary
//! `s > t`) takes the hinted version when `s - gap <= t`: since the gap is
//! a lower bound and the summary only grows between prunes, that version's
//! commit timestamp is then at or below `t`. The hint only picks where a
//! read starts; the reader still judges the version it lands on (status,
//! visibility, `stop`) as on the finger path, so a gap measured from
//! another summary than the reader's costs a version examined, never a
//! wrong read.

use super::chain::Version;
use std::ptr;

/// Bits of a version address: user-space addresses on the 64-bit targets
/// this builds for fit in 48 (checked for every version in
/// `Version::alloc`).
pub(crate) const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// The unordered flag, in the low (alignment) bits of the address.
const UNORDERED: u64 = 1;
/// Mantissa bits of the gap.
const MANTISSA: u32 = 11;
/// The largest exponent of the gap (5 bits).
const MAX_EXP: u32 = 31;

/// The hint word of no version, with the unordered flag `unordered`.
#[inline]
pub(crate) fn empty(unordered: bool) -> u64 {
    u64::from(unordered)
}

/// The hint word for `v` (null: none), a gap of at most `gap` timestamps
/// (0: none usable), and the unordered flag.
#[inline]
pub(crate) fn pack(v: *mut Version, gap: u64, unordered: bool) -> u64 {
    let a = v.expose_provenance() as u64;
    debug_assert_eq!(a & !ADDR_MASK, 0, "version addresses fit in 48 bits");
    debug_assert_eq!(a & 7, 0, "versions are 8-aligned");
    a | (u64::from(encode_gap(gap)) << ADDR_BITS) | u64::from(unordered)
}

/// The version a hint word names (null: none).
#[inline]
pub(crate) fn version(w: u64) -> *mut Version {
    let a = w & ADDR_MASK & !UNORDERED;
    if a == 0 {
        return ptr::null_mut();
    }
    ptr::with_exposed_provenance_mut(a as usize)
}

/// Is the key unordered?
#[inline]
pub(crate) fn unordered(w: u64) -> bool {
    w & UNORDERED != 0
}

/// The gap of a hint word (a lower bound; 0: none usable).
#[inline]
pub(crate) fn gap(w: u64) -> u64 {
    decode_gap((w >> ADDR_BITS) as u16)
}

/// Encodes `d` rounded down: `decode_gap(encode_gap(d)) <= d`, within a
/// factor of `1 - 2^-10` of `d` up to about `2^42`.
#[inline]
fn encode_gap(d: u64) -> u16 {
    // Equivalent mutant (`<=`: 2048 as it is, 0x800, is exponent 1 and
    // mantissa 0, which is also what the general case gives it).
    if d < 1 << MANTISSA {
        return d as u16;
    }
    // Keep the top MANTISSA + 1 bits; the leading one is implicit, and the
    // exponent field (>= 1) tells these apart from the small values.
    let e = 64 - d.leading_zeros() - MANTISSA;
    if e > MAX_EXP {
        return ((MAX_EXP << MANTISSA) | ((1 << MANTISSA) - 1)) as u16;
    }
    let m = (d >> (e - 1)) & ((1 << MANTISSA) - 1);
    ((e << MANTISSA) | m as u32) as u16
}

#[inline]
fn decode_gap(g: u16) -> u64 {
    let e = u32::from(g) >> MANTISSA;
    let m = u64::from(g) & ((1 << MANTISSA) - 1);
    if e == 0 {
        m
    } else {
        (m | (1 << MANTISSA)) << (e - 1)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_gap_decodes_to_at_most_itself_and_close_to_it() {
        let mut d = 0u64;
        while d < 1 << 50 {
            for x in [d, d + 1, d.saturating_sub(1), d + d / 3] {
                let got = decode_gap(encode_gap(x));
                assert!(got <= x, "gap {x} decoded as {got}");
                if x < 1 << 42 {
                    assert!(got >= x - x / 1024, "gap {x} decoded as {got}");
                }
            }
            d = d * 2 + 1;
        }
        assert_eq!(decode_gap(encode_gap(0)), 0);
        assert_eq!(decode_gap(encode_gap(2047)), 2047);
        assert_eq!(decode_gap(encode_gap(2048)), 2048);
        // Past the format's range: its largest value, still a lower bound.
        assert_eq!(decode_gap(encode_gap(u64::MAX)), 0xFFF << 30);
        assert_eq!(decode_gap(encode_gap(1 << 50)), 0xFFF << 30);
    }

    #[test]
    fn a_word_keeps_its_three_parts_apart() {
        let v = 0x7fff_1234_5678_u64 as *mut Version;
        for unordered in [false, true] {
            let w = pack(v, 1_000_000, unordered);
            assert_eq!(version(w), v);
            assert_eq!(super::unordered(w), unordered);
            assert!(gap(w) <= 1_000_000 && gap(w) > 999_000);
            let e = empty(unordered);
            assert!(version(e).is_null());
            assert_eq!(gap(e), 0);
            assert_eq!(super::unordered(e), unordered);
        }
    }
}
