//! Differential fuzz target: random operations over three sessions, each
//! result checked against the reference model in `src/lib.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Decoding lives in the harness so the stable-Rust corpus replay
    // (`tests/transactions/fuzz_corpus_replay.rs`) decodes every file exactly as here.
    snapshot_engine_fuzz::run_bytes(data);
});
