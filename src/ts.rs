//! Newtypes for every clock value, so `<` versus `<=` slips between a
//! timestamp, a transaction id and a generation cannot type-check.

use std::fmt;

/// A WiredTiger-style timestamp: an application-chosen point in logical time.
///
/// `0` means "not set" ([`Timestamp::NONE`]); valid timestamps are
/// `1..=Timestamp::MAX.get()`. The top two bits of a `u64` are reserved for
/// the version status word (see `machinery/version.rs`).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// "No timestamp".
    pub const NONE: Timestamp = Timestamp(0);
    /// The largest valid timestamp, `2^62 - 1`.
    pub const MAX: Timestamp = Timestamp((1 << 62) - 1);

    /// Wraps a raw value. Validity (non-zero, at most [`Timestamp::MAX`]) is
    /// checked where the timestamp is used, with a typed error.
    #[inline]
    pub const fn new(v: u64) -> Timestamp {
        Timestamp(v)
    }

    /// The raw value.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Is this [`Timestamp::NONE`]?
    #[inline]
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// `None` for [`Timestamp::NONE`], `Some(self)` otherwise.
    #[inline]
    pub const fn to_option(self) -> Option<Timestamp> {
        if self.0 == 0 {
            None
        } else {
            Some(self)
        }
    }
}

impl From<u64> for Timestamp {
    fn from(v: u64) -> Self {
        Timestamp(v)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ts({})", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A transaction id, allocated lazily at a transaction's first write.
/// `0` means "no id"; ids start at 1 and only grow.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TxnId(pub(crate) u64);

impl TxnId {
    /// "No id" (a transaction that has not written).
    pub const NONE: TxnId = TxnId(0);

    /// The raw value.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "txn({})", self.0)
    }
}

/// The generation of a snapshot descriptor: bumped by every exit from the
/// running set (commit, rollback, prepare of a transaction that has an id).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Generation(pub(crate) u64);

impl Generation {
    /// The raw value.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}
