//! The key-value API on top of both layers: [`Engine`], [`Session`] and
//! [`Txn`] put the bundled store (`crate::store`) behind the machinery's
//! transactions (`crate::machinery`). The types here are the generic forms,
//! on any snapshot protocol (`crate::with_machinery`); `plain/` holds the
//! types users name, on the lock-free one.

mod commit;
mod cursor;
mod engine;
mod open;
pub(crate) mod plain;
mod range;
mod raw;
mod rollback_to_stable;
mod serializable;
mod table;
mod txn;

pub use commit::CommitError;
pub use cursor::Cursor;
pub use engine::{Engine, OwnedSession, Session};
pub use range::KeyRange;
pub(crate) use rollback_to_stable::PreparedDurable;
pub use rollback_to_stable::RollbackReport;
pub use table::{Table, TableId, TableOptions, TableTxn, MAX_TABLE_NAME_LEN};
pub use txn::{Savepoint, Txn};
