//! A transaction's life: write conflicts, the session table, transactions
//! dropped, leaked or panicking rolled back, serializable transactions
//! refusing the anomalies snapshot isolation allows, the read-write-lock baselines
//! answering as the lock-free engine does, and whole operation sequences
//! against the fuzzer's model (the checked-in corpus, replayed).

mod baseline_semantics;
mod dropped_transactions;
mod fuzz_corpus_replay;
mod leaked_transaction;
mod panic_safety;
mod serializable;
mod session_table;
mod tables;
mod write_conflicts;
