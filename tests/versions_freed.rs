//! `stats().versions_freed` counts versions whose memory was freed (issue
//! 9: it stayed 0 while pruning retired tens of thousands).

use snapshot_engine::{CommitOptions, Engine, EngineConfig, TxnOptions};

#[test]
fn versions_freed_moves_once_pruned_versions_are_freed() {
    let e = Engine::new(EngineConfig::default());
    let mut s = e.session().unwrap();
    for i in 0..100_000u32 {
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.put(b"k", &i.to_le_bytes()).unwrap();
        t.commit(CommitOptions::default()).unwrap();
    }
    drop(s);
    e.collect();
    let st = e.stats();
    eprintln!("pruned {} freed {}", st.versions_pruned, st.versions_freed);
    assert!(st.versions_pruned > 1_000, "pruned {}", st.versions_pruned);
    assert!(st.versions_freed > 0, "freed {}", st.versions_freed);
}
