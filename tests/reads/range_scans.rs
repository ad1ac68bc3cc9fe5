//! Range scans: ordered, newest visible version of each key, tombstones
//! hidden, snapshot-consistent.

use snapshot_engine::*;

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn range_returns_the_newest_visible_version_of_each_key_in_order_without_tombstones() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for k in ["a", "b", "c", "d", "e"] {
        t.put(k.as_bytes(), b"1").unwrap();
    }
    t.commit(CommitOptions::at(10)).unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"b", b"2").unwrap();
    t.delete(b"c").unwrap();
    t.put(b"cc", b"new").unwrap();
    t.commit(CommitOptions::at(20)).unwrap();

    let mut t = s.begin(&TxnOptions::default()).unwrap();
    assert_eq!(
        t.range(b"b".as_slice()..b"e".as_slice()).unwrap(),
        vec![kv("b", "2"), kv("cc", "new"), kv("d", "1")]
    );
    assert_eq!(
        t.range(b"d".as_slice()..).unwrap(),
        vec![kv("d", "1"), kv("e", "1")]
    );
    drop(t);

    // At read timestamp 15 the delete and the updates are not visible yet.
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.set_read_timestamp(Timestamp::new(15)).unwrap();
    assert_eq!(
        t.range(b"b".as_slice()..=b"d".as_slice()).unwrap(),
        vec![kv("b", "1"), kv("c", "1"), kv("d", "1")]
    );
}

#[test]
fn a_scan_stops_when_the_visitor_says_so() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let mut s = e.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    for i in 0u8..10 {
        t.put([i], [i]).unwrap();
    }
    let mut seen = Vec::new();
    t.scan(.., |k, _| {
        seen.push(k[0]);
        seen.len() < 3
    })
    .unwrap();
    assert_eq!(seen, vec![0, 1, 2]);
}

#[test]
fn a_scan_is_not_disturbed_by_commits_after_its_snapshot() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    let (mut s, mut w) = (e.session().unwrap(), e.session().unwrap());
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    t.put(b"a", b"1").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    let mut r = s.begin(&TxnOptions::default()).unwrap();
    // The snapshot is otherwise taken at the first read.
    r.take_snapshot().unwrap();
    let mut t = w.begin(&TxnOptions::default()).unwrap();
    t.delete(b"a").unwrap();
    t.put(b"b", b"2").unwrap();
    t.commit(CommitOptions::default()).unwrap();
    assert_eq!(r.range(..).unwrap(), vec![kv("a", "1")]);
}

/// A seek moves one end of a cursor; the other end keeps yielding what lies
/// between it and where the moved end now is, whether it was untouched,
/// partly consumed or finished. Every step is checked against a model: a
/// `BTreeMap` of the visible pairs and the two bounds the cursor's docs
/// state (the front yields the first key above its floor and below the
/// back's ceiling, the back the last key below its ceiling and above the
/// front's floor; a seek sets one of the two).
mod seek_leaves_the_other_end_stale {
    use snapshot_engine::*;
    use std::collections::BTreeMap;
    use std::ops::Bound;

    type Rows = BTreeMap<Vec<u8>, Vec<u8>>;
    type Row = (Vec<u8>, Vec<u8>);

    #[derive(Clone, Copy, Debug)]
    enum Step {
        Next,
        NextBack,
        NextRef,
        NextBackRef,
        Seek(&'static str),
        SeekBack(&'static str),
    }
    use Step::*;

    fn owned(b: Bound<&str>) -> Bound<Vec<u8>> {
        b.map(|k| k.as_bytes().to_vec())
    }

    /// Does `k` satisfy the lower bound `lo`?
    fn above(lo: &Bound<Vec<u8>>, k: &[u8]) -> bool {
        match lo {
            Bound::Included(b) => b.as_slice() <= k,
            Bound::Excluded(b) => b.as_slice() < k,
            Bound::Unbounded => true,
        }
    }

    /// Does `k` satisfy the upper bound `hi`?
    fn below(hi: &Bound<Vec<u8>>, k: &[u8]) -> bool {
        match hi {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// The cursor as documented, over `rows`.
    struct Model<'m> {
        rows: &'m Rows,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        /// What the front may still yield starts here.
        floor: Bound<Vec<u8>>,
        /// What the back may still yield ends here.
        ceil: Bound<Vec<u8>>,
    }

    impl Model<'_> {
        fn step(&mut self, s: Step) -> Option<Row> {
            match s {
                Next | NextRef => {
                    let (k, v) = self
                        .rows
                        .range((self.floor.clone(), Bound::Unbounded))
                        .next()?;
                    if !below(&self.ceil, k) {
                        return None;
                    }
                    self.floor = Bound::Excluded(k.clone());
                    Some((k.clone(), v.clone()))
                }
                NextBack | NextBackRef => {
                    let (k, v) = self
                        .rows
                        .range((Bound::Unbounded, self.ceil.clone()))
                        .next_back()?;
                    if !above(&self.floor, k) {
                        return None;
                    }
                    self.ceil = Bound::Excluded(k.clone());
                    Some((k.clone(), v.clone()))
                }
                Seek(k) => {
                    let k = k.as_bytes();
                    // Within the cursor's range.
                    self.floor = if above(&self.lo, k) {
                        Bound::Included(k.to_vec())
                    } else {
                        self.lo.clone()
                    };
                    None
                }
                SeekBack(k) => {
                    let k = k.as_bytes();
                    self.ceil = if below(&self.hi, k) {
                        Bound::Included(k.to_vec())
                    } else {
                        self.hi.clone()
                    };
                    None
                }
            }
        }
    }

    /// `steps` with runs of one step written once, `NextBack*300`.
    fn show(steps: &[Step]) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < steps.len() {
            let n = steps[i..]
                .iter()
                .take_while(|s| format!("{s:?}") == format!("{:?}", steps[i]))
                .count();
            out.push(match n {
                1 => format!("{:?}", steps[i]),
                _ => format!("{:?}*{n}", steps[i]),
            });
            i += n;
        }
        out.join(", ")
    }

    /// Runs `steps` on a cursor over `(lo, hi)` and on the model; panics
    /// at the first step whose result differs.
    fn check(t: &mut Txn<'_, '_>, rows: &Rows, lo: Bound<&str>, hi: Bound<&str>, steps: &[Step]) {
        let mut model = Model {
            rows,
            lo: owned(lo),
            hi: owned(hi),
            floor: owned(lo),
            ceil: owned(hi),
        };
        let mut c = t.iter((lo, hi));
        for (i, &s) in steps.iter().enumerate() {
            let got: Option<Row> = match s {
                Next => c.next().map(|r| r.map(|(k, v)| (k.to_vec(), v)).unwrap()),
                NextBack => c
                    .next_back()
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v)).unwrap()),
                NextRef => c
                    .next_ref()
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()),
                NextBackRef => c
                    .next_back_ref()
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()),
                Seek(k) => {
                    c.seek(k);
                    None
                }
                SeekBack(k) => {
                    c.seek_back(k);
                    None
                }
            };
            let want = model.step(s);
            let key = |r: &Option<Row>| {
                r.as_ref()
                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            };
            assert_eq!(
                key(&got),
                key(&want),
                "range ({lo:?}, {hi:?}), step {i} ({s:?}) of [{}]",
                show(steps)
            );
            assert_eq!(got, want, "values at step {i} of [{}]", show(steps));
        }
    }

    /// Committed `keys`, each valued its upper case.
    fn engine_with(keys: &[&str]) -> Engine {
        let e = Engine::new(EngineConfig::default()).unwrap();
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        for k in keys {
            t.put(k, k.to_uppercase()).unwrap();
        }
        t.commit(CommitOptions::default()).unwrap();
        drop(s);
        e
    }

    #[test]
    fn seek_back_past_a_finished_back_yields_the_keys_below_where_it_stopped() {
        let e = engine_with(&["a", "b", "c", "d"]);
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let mut c = t.cursor();
        c.seek("d");
        assert_eq!(c.next_back().unwrap().unwrap().0, b"d");
        c.seek("a");
        assert_eq!(c.next_back().unwrap().unwrap().0, b"c");
        assert_eq!(c.next().unwrap().unwrap().0, b"a");
        assert_eq!(c.next_back().unwrap().unwrap().0, b"b");
        assert!(c.next().is_none());
    }

    #[test]
    fn seek_back_forwards_past_a_finished_front_yields_the_keys_above_where_it_stopped() {
        let e = engine_with(&["a", "b", "c", "d"]);
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let mut c = t.cursor();
        c.seek_back("a");
        assert_eq!(c.next().unwrap().unwrap().0, b"a");
        c.seek_back("d");
        assert_eq!(c.next().unwrap().unwrap().0, b"b");
        assert_eq!(c.next_back().unwrap().unwrap().0, b"d");
        assert_eq!(c.next().unwrap().unwrap().0, b"c");
        assert!(c.next_back().is_none());
    }

    /// The front meets the back (its next key lies past it) and stops;
    /// a seek back further on lets it go on from the key it stopped at.
    #[test]
    fn a_front_stopped_by_the_back_resumes_at_the_key_it_stopped_at() {
        let e = engine_with(&["a", "b", "c", "d", "e"]);
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let mut c = t.cursor();
        assert_eq!(c.next().unwrap().unwrap().0, b"a");
        c.seek_back("b");
        assert_eq!(c.next().unwrap().unwrap().0, b"b");
        assert!(c.next().is_none());
        c.seek_back("e");
        assert_eq!(c.next().unwrap().unwrap().0, b"c");
        // And the mirror: the back stopped by the front.
        let mut c = t.cursor();
        assert_eq!(c.next_back().unwrap().unwrap().0, b"e");
        c.seek("d");
        assert_eq!(c.next_back().unwrap().unwrap().0, b"d");
        assert!(c.next_back().is_none());
        c.seek("a");
        assert_eq!(c.next_back().unwrap().unwrap().0, b"c");
    }

    /// The other end before the seek: how many steps it takes (`usize::MAX`:
    /// until it yields nothing, i.e. finished).
    const OTHER: [usize; 4] = [0, 1, 2, usize::MAX];

    /// Every pairing over `rows` (the visible pairs of `t`): a `seek` or
    /// `seek_back` to each of `seek_keys`, the moved end untouched, partly
    /// consumed or sought to `mid` (and then stepped) before, the other end
    /// untouched, partly consumed or finished, under every kind of range
    /// bound; then both ends drained (the other end first, the moved end
    /// first, or in turn).
    fn every_pairing(
        t: &mut Txn<'_, '_>,
        rows: &Rows,
        bounds: [&'static str; 2],
        mid: &'static str,
        seek_keys: &[&'static str],
        partly: usize,
    ) -> usize {
        let bound = |kind: usize, k| match kind {
            0 => Bound::Unbounded,
            1 => Bound::Included(k),
            _ => Bound::Excluded(k),
        };
        let n = rows.len() + 1;
        let mut runs = 0;
        for (lo, hi) in (0..9).map(|i| (bound(i / 3, bounds[0]), bound(i % 3, bounds[1]))) {
            for front_moves in [true, false] {
                let (mv, other, seek): (Step, Step, fn(&'static str) -> Step) = if front_moves {
                    (Next, NextBack, Seek)
                } else {
                    (NextBack, Next, SeekBack)
                };
                for before in 0..4 {
                    let mut head = Vec::new();
                    match before {
                        0 => {}
                        1 => head.push(mv),
                        2 => head.push(seek(mid)),
                        _ => head.extend([seek(mid), mv]),
                    }
                    for other_steps in OTHER.map(|o| if o == 2 { partly } else { o.min(n) }) {
                        let mut pre = head.clone();
                        pre.extend(std::iter::repeat_n(other, other_steps));
                        for &k in seek_keys {
                            let mut steps = pre.clone();
                            steps.push(seek(k));
                            for drain in 0..3 {
                                let mut all = steps.clone();
                                match drain {
                                    0 => all
                                        .extend((0..2 * n).map(|i| if i < n { other } else { mv })),
                                    1 => all
                                        .extend((0..2 * n).map(|i| if i < n { mv } else { other })),
                                    _ => all.extend((0..n).flat_map(|_| [NextRef, NextBackRef])),
                                }
                                check(t, rows, lo, hi, &all);
                                runs += 1;
                            }
                        }
                    }
                }
            }
        }
        runs
    }

    /// Committed `b d f h j`; the reading transaction deletes `f` and
    /// writes `g`, so the cursor passes a tombstone and its own write.
    #[test]
    fn every_seek_against_an_untouched_partly_consumed_or_finished_other_end() {
        let e = engine_with(&["b", "d", "f", "h", "j"]);
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        t.delete("f").unwrap();
        t.put("g", "own").unwrap();
        let rows: Rows = [("b", "B"), ("d", "D"), ("g", "own"), ("h", "H"), ("j", "J")]
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"];
        let runs = every_pairing(&mut t, &rows, ["d", "h"], "f", &keys, 2);
        assert_eq!(runs, 9 * 2 * 4 * 4 * keys.len() * 3);
    }

    /// As above over 300 keys, so the ends refill in several batches (a
    /// batch is 64 pairs) and a partly consumed end is past its first batch.
    #[test]
    fn every_seek_against_the_other_end_across_batches() {
        let keys: Vec<String> = (0..300).map(|i| format!("k{i:03}")).collect();
        let names: Vec<&str> = keys.iter().map(String::as_str).collect();
        let e = engine_with(&names);
        let mut s = e.session().unwrap();
        let mut t = s.begin(&TxnOptions::default()).unwrap();
        let rows: Rows = keys
            .iter()
            .map(|k| (k.as_bytes().to_vec(), k.to_uppercase().into_bytes()))
            .collect();
        let seek_keys = [
            "a", "k000", "k010", "k050", "k100", "k1005", "k149", "k150", "k299", "z",
        ];
        let runs = every_pairing(&mut t, &rows, ["k050", "k150"], "k120", &seek_keys, 70);
        assert_eq!(runs, 9 * 2 * 4 * 4 * seek_keys.len() * 3);
    }
}
