//! [`KeyRange`]: the key ranges scans and cursors take.

use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// A range of keys for [`Txn::scan`](crate::Txn::scan),
/// [`Txn::range`](crate::Txn::range) and [`Txn::iter`](crate::Txn::iter):
/// every standard range over anything `AsRef<[u8]>` (`..`, `"a".."m"`,
/// `b"aa"..=b"zz"`, `key..`, `..end`), and a pair of [`Bound`]s whose two
/// sides may differ in type.
///
/// ```
/// # use snapshot_engine::{Engine, EngineConfig, TxnOptions};
/// # use std::ops::Bound;
/// let engine = Engine::new(EngineConfig::default())?;
/// let mut session = engine.session()?;
/// let mut txn = session.begin(&TxnOptions::default())?;
/// txn.range(..)?;
/// txn.range("a".."zz")?;
/// txn.range(&b"a"[..]..b"zz")?;
/// txn.range((Bound::Included(b"a"), Bound::Excluded(b"zz")))?;
/// # Ok::<(), snapshot_engine::Error>(())
/// ```
///
/// `range(b"a"..b"zz")` itself does not compile, and no signature can make
/// it: `b"a"` is a `&[u8; 1]` and `b"zz"` a `&[u8; 2]`, and a `std` range's
/// two ends must have one type, so the expression is refused (E0308)
/// before any method sees it. Write one end as a slice
/// (`&b"a"[..]..b"zz"`), use string literals, or byte-string literals of
/// the same length.
pub trait KeyRange {
    /// The range as borrowed byte bounds.
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>);
}

fn map<A: AsRef<[u8]>>(b: Bound<&A>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl KeyRange for RangeFull {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<A: AsRef<[u8]>> KeyRange for Range<A> {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start.as_ref()),
            Bound::Excluded(self.end.as_ref()),
        )
    }
}

impl<A: AsRef<[u8]>> KeyRange for RangeInclusive<A> {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start().as_ref()),
            Bound::Included(self.end().as_ref()),
        )
    }
}

impl<A: AsRef<[u8]>> KeyRange for RangeFrom<A> {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Included(self.start.as_ref()), Bound::Unbounded)
    }
}

impl<A: AsRef<[u8]>> KeyRange for RangeTo<A> {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Excluded(self.end.as_ref()))
    }
}

impl<A: AsRef<[u8]>> KeyRange for RangeToInclusive<A> {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Included(self.end.as_ref()))
    }
}

impl<A: AsRef<[u8]>, B: AsRef<[u8]>> KeyRange for (Bound<A>, Bound<B>) {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (map(self.0.as_ref()), map(self.1.as_ref()))
    }
}

impl<R: KeyRange + ?Sized> KeyRange for &R {
    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (**self).bounds()
    }
}
