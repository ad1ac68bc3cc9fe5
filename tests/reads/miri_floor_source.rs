//! A completion racing a horizon advance, for Miri's data-race detector
//! (which loom cannot show: see `DescriptorCell::xmin` and
//! DESIGN.md, "How the invariants are checked").
//!
//! The advancer (`collect`) reads the current descriptor's plain `xmin`
//! field through the pointer a completer installed with a Release CAS. With
//! the pointer loaded Acquire that read happens after the completer's
//! writes of the descriptor; loaded Relaxed it is a data race, which Miri
//! reports as undefined behaviour. Under a plain `cargo test` this is a
//! quick smoke test of the same race (it asserts only the end state); the
//! check is, run by hand (CI has no Miri):
//!
//! ```text
//! MIRIFLAGS="-Zmiri-disable-stacked-borrows -Zmiri-ignore-leaks -Zmiri-many-seeds=0..32" \
//!     cargo +nightly miri test --test reads miri_floor_source
//! ```
//!
//! (crossbeam-epoch 0.9.21 trips Stacked Borrows in its own list code,
//! `internal.rs:567`, hence the first flag; the global collector's
//! deferred garbage is still queued at exit, hence the second.) With the
//! load Relaxed by hand, Miri reports "Data race detected between (1)
//! non-atomic write [the completer's `Box::new` of the next descriptor,
//! `complete`] and (2) non-atomic read [`(*p).xmin` in
//! `DescriptorCell::xmin`]".

use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};
use std::sync::Arc;
use std::thread;

#[test]
fn a_completion_racing_a_horizon_advance() {
    let e = Arc::new(
        Engine::new(EngineConfig {
            max_sessions: 2,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let writer = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            t.put(b"k", b"v").unwrap();
            t.commit(CommitOptions::default()).unwrap();
        })
    };
    let advancer = {
        let e = e.clone();
        thread::spawn(move || e.collect())
    };
    writer.join().unwrap();
    advancer.join().unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
