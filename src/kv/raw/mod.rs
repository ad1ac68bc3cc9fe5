//! The key-value layer's one `unsafe` block: an owned session's `'static`
//! borrow of the engine whose `Arc` it holds. Everything else in `kv/` is
//! safe code over the store's and the machinery's safe APIs.

use super::engine::{Engine, OwnedSession, Session};
use crate::error::Result;
use crate::machinery::Protocol;
use std::sync::Arc;

/// Opens a session on `engine` that keeps a clone of the `Arc` as its owner.
///
/// # Errors
/// As [`Engine::session`].
pub(super) fn open_owned<P: Protocol>(engine: &Arc<Engine<P>>) -> Result<OwnedSession<P>> {
    // SAFETY: invariant 14 (DESIGN.md): the `'static` borrow is of the
    // engine inside the `Arc` the session keeps in `owner`, which is
    // heap-allocated (it never moves) and is the session's last field, so
    // it drops after `msess` and `data`, the only holders of the borrow; no
    // method of `Session` hands a `&'static Engine` (or anything borrowed
    // from one for longer than `&self`) out of the session.
    let borrowed: &'static Engine<P> = unsafe { &*Arc::as_ptr(engine) };
    Session::open(borrowed, Some(engine.clone()))
}
