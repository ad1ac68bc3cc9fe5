//! The key-value API on top of both layers: [`Engine`], [`Session`] and
//! [`Txn`] put the bundled store (`crate::store`) behind the machinery's
//! transactions (`crate::machinery`).

mod engine;
mod txn;

pub use engine::{Engine, Session};
pub use txn::Txn;
