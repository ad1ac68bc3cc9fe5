//! The key-value types users name: [`Engine`], [`Session`],
//! [`OwnedSession`], [`Txn`], [`TableTxn`], [`Cursor`] and [`CommitError`], each a
//! newtype over its generic form (`kv/engine.rs`, `kv/txn.rs`,
//! `kv/cursor.rs`) on the lock-free machinery. The generic forms take the
//! snapshot protocol as a type parameter so that the workload driver and
//! the tests can run the read-write-lock baselines through the same code
//! (`crate::with_machinery`); no user chooses one, so these carry none.
//! Every method forwards, `#[inline]`: the code that runs is the generic
//! form's.

mod cursor;
mod engine;
mod serializable;
mod table;
mod txn;

pub use cursor::Cursor;
pub use engine::{Engine, OwnedSession, Session};
pub use table::TableTxn;
pub use txn::{CommitError, Txn};
