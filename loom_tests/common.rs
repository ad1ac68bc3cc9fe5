//! Shared model plumbing: serialization (the mutant switch is one
//! process-wide static), execution counting and engine set-up helpers.

use loom::model::Builder;
use snapshot_engine::{
    mutant, CommitOptions, Engine, EngineConfig, Timestamp, TimestampUpdate, TxnOptions,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Models run one at a time: the mutant switch is process-global, so a model
/// running next to a mutant twin would see the broken code.
static SERIAL: Mutex<()> = Mutex::new(());

/// Turns the mutant off again, also when a should_panic model unwinds.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        mutant::set(mutant::NONE);
    }
}

/// Explores every execution of `model` (within the preemption bound from
/// `LOOM_MAX_PREEMPTIONS`) with mutant `m` switched on ([`mutant::NONE`]:
/// the real code), and prints how many executions it explored.
pub fn check<F>(name: &str, m: u32, model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    mutant::set(m);
    let _reset = Reset;
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let mut b = Builder::new();
    // Engine-level models take more branches than loom's default of 1,000
    // per execution; the preemption bound, not this, bounds the search.
    b.max_branches = b.max_branches.max(20_000);
    let start = Instant::now();
    b.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        model();
    });
    eprintln!(
        "loom model {name}: {} executions in {:.2?} (preemption bound {:?})",
        runs.load(Ordering::Relaxed),
        start.elapsed(),
        b.preemption_bound,
    );
}

/// An engine with `max_sessions` slots, shared with loom's `Arc` (which
/// checks it is dropped).
pub fn engine(max_sessions: usize) -> loom::sync::Arc<Engine> {
    loom::sync::Arc::new(
        Engine::new(EngineConfig {
            max_sessions,
            ..EngineConfig::default()
        })
        .unwrap(),
    )
}

/// One committed transaction writing `kvs` at commit timestamp `ts` (0:
/// untimestamped), on a session of its own.
pub fn commit(e: &Engine, kvs: &[(&[u8], &[u8])], ts: u64) {
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for (k, v) in kvs {
        t.put(k, v).unwrap();
    }
    let opts = if ts == 0 {
        CommitOptions::default()
    } else {
        CommitOptions::at(ts)
    };
    t.commit(opts).unwrap();
}

/// `Timestamp::new`, shorter.
pub fn ts(v: u64) -> Timestamp {
    Timestamp::new(v)
}

/// An update that sets only stable, to `v`.
pub fn stable(v: u64) -> TimestampUpdate {
    TimestampUpdate {
        stable: Some(ts(v)),
        ..TimestampUpdate::default()
    }
}

/// Lets the real epoch collector (tier 2, `--cfg crossbeam_loom`) try to
/// advance and free retired memory inside the model, so frees race with
/// readers; a no-op with the stand-in collector, which frees only when it
/// drops.
pub fn reclaim_now() {
    // Garbage sealed in epoch e is freed once the global epoch reaches e + 2:
    // two flushes (each tries to advance the epoch once) can free it.
    #[cfg(crossbeam_loom)]
    for _ in 0..2 {
        crossbeam_epoch::pin().flush();
    }
}
