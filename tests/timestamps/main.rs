//! Timestamps: WiredTiger's rules and prepared transactions as tables (on
//! every machinery, through `support`), read timestamps set after begin and
//! what they see, repeatable reads at a timestamp while writers prune,
//! readers that ignore prepared updates, and the versions a read at an old
//! timestamp examines.

mod ignoring_readers_while_prepared_commits_prune;
mod prepared_transactions;
mod read_timestamp_after_begin;
mod read_timestamp_visibility;
mod reads_at_a_timestamp_repeat_while_writers_prune;
mod support;
mod timestamp_rules;
mod versions_examined_per_read;
