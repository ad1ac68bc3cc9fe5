//! Model 2 — a read timestamp set after begin versus the oldest timestamp
//! and pruning (invariants 1 and 2 for timestamps; handshake 1 on
//! `read_ts`/`floor_ts` in `lockfree/pin_horizon.rs`).
//!
//! `k` has versions at 10 and 20. A timekeeper raises oldest to 20 (which
//! advances the horizon) and runs the collector, while a reader begins and
//! sets read timestamp 15. Either the reader is refused with
//! `ReadTimestampTooOld`, or it reads the version at 10: the collector must
//! not cut it below the version at 20 while a reader at 15 is admitted.
//!
//! A transaction takes its snapshot lazily, so the reader
//! that sets its read timestamp right after begin takes snapshot and read
//! timestamp in one handshake (`begin_at_read_ts`, mutant
//! LAZY_PINS_AFTER_CHECK); `after_read` reads first, so its snapshot is
//! already taken and `set_read_timestamp` runs the read-timestamp
//! handshake alone (mutant READ_TS_PUBLISH_AFTER_CHECK).

use super::common::{check, commit, engine, ts};
use crate::sync::mutant;
use crate::{Error, TimestampUpdate, TxnOptions};
use loom::thread;

fn model() {
    model_reading_first(false);
}

fn model_after_read() {
    model_reading_first(true);
}

fn model_reading_first(read_first: bool) {
    let e = engine(2);
    commit(&e, &[(b"k", b"v10")], 10);
    commit(&e, &[(b"k", b"v20")], 20);
    let timekeeper = {
        let e = e.clone();
        thread::spawn(move || {
            e.set_timestamps(TimestampUpdate {
                oldest: Some(ts(20)),
                ..TimestampUpdate::default()
            })
            .unwrap();
            e.collect();
        })
    };
    let reader = {
        let e = e.clone();
        thread::spawn(move || {
            let mut s = e.session().unwrap();
            let mut t = s.begin(&TxnOptions::default()).unwrap();
            if read_first {
                t.get(b"k").unwrap();
            }
            match t.set_read_timestamp(ts(15)) {
                Ok(r) => {
                    assert_eq!(r, ts(15));
                    Some(t.get(b"k").unwrap())
                }
                Err(Error::ReadTimestampTooOld { read, oldest }) => {
                    assert_eq!((read, oldest), (ts(15), ts(20)));
                    None
                }
                Err(other) => panic!("unexpected error {other:?}"),
            }
        })
    };
    timekeeper.join().unwrap();
    let got = reader.join().unwrap();
    if let Some(v) = got {
        assert_eq!(
            v.as_deref(),
            Some(&b"v10"[..]),
            "read timestamp admitted but its version was pruned"
        );
    }
}

#[test]
fn read_timestamp_versus_oldest() {
    check("read_ts_oldest", mutant::NONE, model);
}

#[test]
#[should_panic(expected = "read timestamp admitted but its version was pruned")]
fn mutant_lazy_pins_after_check() {
    check(
        "read_ts_oldest/LAZY_PINS_AFTER_CHECK",
        mutant::LAZY_PINS_AFTER_CHECK,
        model,
    );
}

#[test]
fn read_timestamp_after_a_read_versus_oldest() {
    check("read_ts_oldest/after_read", mutant::NONE, model_after_read);
}

#[test]
#[should_panic(expected = "read timestamp admitted but its version was pruned")]
fn mutant_read_ts_publish_after_check() {
    check(
        "read_ts_oldest/after_read/READ_TS_PUBLISH_AFTER_CHECK",
        mutant::READ_TS_PUBLISH_AFTER_CHECK,
        model_after_read,
    );
}
