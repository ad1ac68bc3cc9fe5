//! References to the machinery's generic forms on [`LockFree`] as the plain
//! types users name (`machinery/plain.rs`), which are `repr(transparent)`
//! newtypes over them: the same object, seen through its public type.

use super::super::plain::{TxnManager, TxnSession};
use super::super::with_machinery::{self as generic, LockFree};

/// `g` as the plain [`TxnManager`] it is.
#[inline]
pub(crate) fn manager(g: &generic::TxnManager<LockFree>) -> &TxnManager {
    // SAFETY: `TxnManager` is `repr(transparent)` over its one field, a
    // `generic::TxnManager<LockFree>`, so the two have one layout and one
    // set of valid values; the reference stays shared and keeps `g`'s
    // lifetime.
    unsafe { &*(g as *const generic::TxnManager<LockFree>).cast::<TxnManager>() }
}

/// `g` as the plain [`TxnSession`] it is.
#[inline]
pub(crate) fn session<'a, 'm>(g: &'a generic::TxnSession<'m, LockFree>) -> &'a TxnSession<'m> {
    // SAFETY: `TxnSession<'m>` is `repr(transparent)` over its one field, a
    // `generic::TxnSession<'m, LockFree>`, so the two have one layout and
    // one set of valid values; the reference stays shared and keeps `g`'s
    // lifetime, and the manager borrow `'m` inside is unchanged.
    unsafe { &*(g as *const generic::TxnSession<'m, LockFree>).cast::<TxnSession<'m>>() }
}
