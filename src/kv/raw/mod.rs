//! The key-value layer's `unsafe` blocks: an owned session's `'static`
//! borrow of the engine whose `Arc` it holds, and the plain [`Engine`]'s
//! views of its generic form (`kv/plain/`). Everything else in `kv/` is
//! safe code over the store's and the machinery's safe APIs.
//!
//! [`Engine`]: crate::Engine

use super::engine::{Engine, OwnedSession, Session};
use crate::error::Result;
use crate::machinery::with_machinery::{LockFree, Machinery};
use std::sync::Arc;

/// Opens a session on `engine` that keeps a clone of the `Arc` as its owner.
///
/// # Errors
/// As [`Engine::session`].
pub(super) fn open_owned<M: Machinery>(engine: &Arc<Engine<M>>) -> Result<OwnedSession<M>> {
    // SAFETY: invariant 14 (DESIGN.md): the `'static` borrow is of the
    // engine inside the `Arc` the session keeps in `owner`, which is
    // heap-allocated (it never moves) and is the session's last field, so
    // it drops after `msess` and `data`, the only holders of the borrow; no
    // method of `Session` hands a `&'static Engine` (or anything borrowed
    // from one for longer than `&self`) out of the session.
    let borrowed: &'static Engine<M> = unsafe { &*Arc::as_ptr(engine) };
    Session::open(borrowed, Some(engine.clone()))
}

/// `g` as the plain [`Engine`](crate::Engine) it is.
#[inline]
pub(super) fn plain_engine(g: &Engine<LockFree>) -> &crate::Engine {
    // SAFETY: `crate::Engine` is `repr(transparent)` over its one field, an
    // `Engine<LockFree>`, so the two have one layout and one set of valid
    // values; the reference stays shared and keeps `g`'s lifetime.
    unsafe { &*(g as *const Engine<LockFree>).cast::<crate::Engine>() }
}

/// A new `Arc` to the engine `plain` holds, as its generic form.
#[inline]
pub(super) fn generic_arc(plain: &Arc<crate::Engine>) -> Arc<Engine<LockFree>> {
    let raw = Arc::into_raw(plain.clone()).cast::<Engine<LockFree>>();
    // SAFETY: `raw` comes from `Arc::into_raw` of an `Arc<crate::Engine>`,
    // and `crate::Engine` is `repr(transparent)` over `Engine<LockFree>`:
    // the same size and alignment, as `Arc::from_raw` requires of a pointer
    // from an `Arc` of another type. The new `Arc` owns the count the clone
    // took.
    unsafe { Arc::from_raw(raw) }
}
