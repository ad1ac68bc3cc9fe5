//! The chain's unit tests: reads around the finger and the hint,
//! first updater wins, the safe point, pruning's amortized cost, unordered
//! keys and the version layout's size.

use super::*;
use crate::machinery::epoch::Collector;
use crate::machinery::{TxnManager, TxnSession};
use crate::{CommitOptions, TimestampUpdate, TxnOptions};

/// One transaction on `s` writing `val` to `e`, committed at `ts` (0:
/// untimestamped) as `kv/txn.rs` commits; returns the versions the
/// commit examined.
fn put(e: &KeyEntry, collector: &Collector, s: &mut TxnSession<'_>, val: &[u8], ts: u64) -> u64 {
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let (status, view) = t.new_version().unwrap();
    let g = collector.pin();
    let v = Version::alloc(status, Some(val));
    let (v, _) = e.prepend(v, &view, &g).ok().unwrap();
    let opts = if ts == 0 {
        CommitOptions::default()
    } else {
        CommitOptions::at(ts)
    };
    let mut examined = 0;
    t.commit(opts, |d| {
        // SAFETY: our own version, linked and unfinished; we hold `g`.
        examined = unsafe { e.commit_version(v, ts, |st| assert!(d.flip(st))) };
    })
    .unwrap();
    examined
}

/// Reads at `at` (0: no read timestamp): the value and the versions
/// examined.
fn read_n(
    e: &KeyEntry,
    collector: &Collector,
    s: &mut TxnSession<'_>,
    at: u64,
) -> (Option<Vec<u8>>, u64) {
    let opts = TxnOptions {
        read_timestamp: (at != 0).then(|| Timestamp::new(at)),
        ..TxnOptions::default()
    };
    let mut t = s.begin(&opts).unwrap();
    let g = collector.pin();
    let mut n = 0;
    let v = match e.read_counted(&t.read_view().unwrap(), &g, &mut n) {
        Found::Value(v) => Some(v.to_vec()),
        _ => None,
    };
    (v, n)
}

fn read(e: &KeyEntry, collector: &Collector, s: &mut TxnSession<'_>, at: u64) -> Option<Vec<u8>> {
    read_n(e, collector, s, at).0
}

fn at(o: u64, s: u64) -> TimestampUpdate {
    TimestampUpdate {
        // 0: leave it unset (0 is not a valid timestamp).
        oldest: Timestamp::new(o).to_option(),
        stable: Timestamp::new(s).to_option(),
        ..TimestampUpdate::default()
    }
}

/// Sets oldest/stable, recomputes the horizon and prunes `e` with it.
fn prune_at(e: &KeyEntry, collector: &Collector, mgr: &TxnManager, o: u64, s: u64) -> Pruned {
    mgr.set_timestamps(at(o, s)).unwrap();
    mgr.advance_horizon();
    let g = collector.pin();
    e.prune(mgr.horizon(), s, collector, &g, || |_| {})
}

#[test]
fn readers_see_the_newest_version_their_view_accepts() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    put(&e, &collector, &mut w, b"a", 10);
    put(&e, &collector, &mut w, b"b", 20);
    assert_eq!(read(&e, &collector, &mut r, 0), Some(b"b".to_vec()));
    assert_eq!(read(&e, &collector, &mut r, 15), Some(b"a".to_vec()));
    assert_eq!(read(&e, &collector, &mut r, 5), None);
}

#[test]
fn a_second_writer_conflicts_until_the_first_is_visible() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut s1, mut s2) = (mgr.session().unwrap(), mgr.session().unwrap());
    let g = collector.pin();
    let mut t1 = s1.begin(&TxnOptions::default()).unwrap();
    let (st1, view1) = t1.new_version().unwrap();
    let (v1, _) = e
        .prepend(Version::alloc(st1, None), &view1, &g)
        .ok()
        .unwrap();
    let mut t2 = s2.begin(&TxnOptions::default()).unwrap();
    let (st2, view2) = t2.new_version().unwrap();
    let v2 = Version::alloc(st2, None);
    let (v2, _) = e.prepend(v2, &view2, &g).err().unwrap();
    t1.commit(CommitOptions::default(), |d| {
        // SAFETY: t1's own version, linked and unfinished; we hold `g`.
        unsafe { e.commit_version(v1, 0, |st| assert!(d.flip(st))) };
    })
    .unwrap();
    // Committed, but after the second writer's snapshot: still a conflict.
    let (_, view2) = t2.new_version().unwrap();
    assert!(e.prepend(v2, &view2, &g).is_err());
    drop(t2);
    let mut t3 = s2.begin(&TxnOptions::default()).unwrap();
    let (st3, view3) = t3.new_version().unwrap();
    assert!(e.prepend(Version::alloc(st3, None), &view3, &g).is_ok());
}

#[test]
fn pruning_keeps_the_newest_version_at_or_below_the_horizon() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
        put(&e, &collector, &mut w, &[v], ts);
    }
    // Horizon at ts 25: the version at 20 is the safe point; 10 goes.
    assert_eq!(prune_at(&e, &collector, &mgr, 25, 30).cut, 1);
    let g = collector.pin();
    assert_eq!(e.chain_len(&g), 2);
    assert_eq!(read(&e, &collector, &mut r, 25), Some(vec![2]));
    // The same horizon again cuts nothing.
    assert_eq!(prune_at(&e, &collector, &mgr, 25, 30).cut, 0);
    assert_eq!(prune_at(&e, &collector, &mgr, 30, 30).cut, 1);
    assert_eq!(e.chain_len(&g), 1);
    assert!(e.finger_linked(&g));
}

#[test]
fn an_old_read_timestamp_costs_one_version_from_the_finger() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    put(&e, &collector, &mut w, &[1], 10);
    put(&e, &collector, &mut w, &[2], 20);
    // Stable 15: the finger goes to the version at 10; the horizon (5)
    // covers nothing, so nothing is cut.
    prune_at(&e, &collector, &mgr, 5, 15);
    for i in 3..=40u64 {
        put(&e, &collector, &mut w, &[i as u8], i * 10);
        prune_at(&e, &collector, &mgr, 5, 15);
    }
    let g = collector.pin();
    assert_eq!(e.chain_len(&g), 40);
    // The head summary (400) says the head is too new without loading
    // it; the finger (10) answers.
    assert_eq!(read_n(&e, &collector, &mut r, 15), (Some(vec![1]), 1));
    // At the head's own timestamp the summary does not reject it: the
    // head alone.
    assert_eq!(read_n(&e, &collector, &mut r, 400), (Some(vec![40]), 1));
    // Between: the climb from the finger, still correct.
    assert_eq!(read(&e, &collector, &mut r, 35), Some(vec![3]));
    assert_eq!(read(&e, &collector, &mut r, 399), Some(vec![39]));
    // Below every version: the floor and finger reject it; the walk
    // from the head finds nothing.
    assert_eq!(read(&e, &collector, &mut r, 5), None);
    assert!(e.finger_linked(&g));
}

#[test]
fn a_read_at_a_stable_past_the_finger_takes_the_hint() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    // Stable 15 keeps the finger on the version at 10; nothing is cut.
    // The hint names the version above it, at 20.
    for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
        put(&e, &collector, &mut w, &[v], ts);
        prune_at(&e, &collector, &mgr, 5, 15);
    }
    // The summary (30) rejects the head; the hint's gap (10) puts its
    // version at or below 25: one version, no climb from the finger.
    assert_eq!(read_n(&e, &collector, &mut r, 25), (Some(vec![2]), 1));
    assert_eq!(read_n(&e, &collector, &mut r, 20), (Some(vec![2]), 1));
    // Below the hint's version: the finger answers, after the hint was
    // passed over unread (its gap says it is too new).
    assert_eq!(read_n(&e, &collector, &mut r, 19), (Some(vec![1]), 1));
    // Two versions past the finger: from the hint, one climb.
    put(&e, &collector, &mut w, &[4], 40);
    prune_at(&e, &collector, &mgr, 5, 15);
    assert_eq!(read_n(&e, &collector, &mut r, 35), (Some(vec![3]), 2));
    let g = collector.pin();
    assert!(e.hint_linked(&g));
}

#[test]
fn every_cut_leaves_the_hint_at_or_above_the_floor() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    for (v, ts) in [(1u8, 10u64), (2, 20), (3, 30)] {
        put(&e, &collector, &mut w, &[v], ts);
    }
    let g = collector.pin();
    // The safe point is 20: the finger moves there, the hint above it.
    assert_eq!(prune_at(&e, &collector, &mgr, 25, 25).cut, 1);
    assert!(!hint::version(e.hint.load(Ordering::Relaxed)).is_null());
    assert!(e.hint_linked(&g));
    // The safe point is the head (30): nothing above the finger.
    assert_eq!(prune_at(&e, &collector, &mgr, 30, 30).cut, 1);
    assert!(hint::version(e.hint.load(Ordering::Relaxed)).is_null());
    assert!(e.hint_linked(&g));
    assert_eq!(read(&e, &collector, &mut r, 30), Some(vec![3]));
    // An out-of-order commit sets the flag; a later cut keeps it.
    put(&e, &collector, &mut w, &[4], 40);
    put(&e, &collector, &mut w, &[5], 35);
    put(&e, &collector, &mut w, &[6], 50);
    assert!(e.is_unordered());
    prune_at(&e, &collector, &mgr, 50, 50);
    assert!(e.is_unordered());
    assert!(e.hint_linked(&g));
}

#[test]
fn pruning_climbs_from_the_floor_without_walking_the_chain() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    let mut examined = 0;
    for i in 1..=1000u64 {
        examined += put(&e, &collector, &mut w, &[i as u8], i * 10);
        // The horizon trails the newest commit by 100 versions.
        let h = i.saturating_sub(100) * 10;
        examined += prune_at(&e, &collector, &mgr, h, h).examined;
    }
    // About 100 versions kept; a full walk per commit would have
    // examined ~100 versions per commit. Per commit: one to link, and
    // for each of floor and finger one per version passed plus the one
    // that stops it: at most 5.
    let g = collector.pin();
    assert!(e.chain_len(&g) <= 102, "chain {}", e.chain_len(&g));
    assert!(examined <= 5 * 1000, "examined {examined} for 1000 commits");
    assert_eq!(
        read(&e, &collector, &mut r, 9000),
        Some(vec![(900 % 256) as u8])
    );
    assert!(e.finger_linked(&g));
}

#[test]
fn an_out_of_order_commit_sends_readers_back_to_the_head_walk() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    // 10, 50, then 30 (below 50: the key becomes unordered), then 70.
    for (v, ts) in [(1u8, 10u64), (2, 50), (3, 30), (4, 70)] {
        put(&e, &collector, &mut w, &[v], ts);
    }
    prune_at(&e, &collector, &mgr, 5, 10);
    // At 40 the newest accepted version from the head is the one at 30,
    // above the rejected one at 50: a climb from the finger (10) would
    // stop at 50 and answer the one at 10.
    assert_eq!(read(&e, &collector, &mut r, 40), Some(vec![3]));
}

#[test]
fn an_untimestamped_commit_over_timestamped_ones_is_read_from_the_head() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let (mut w, mut r) = (mgr.session().unwrap(), mgr.session().unwrap());
    for (v, ts) in [(1u8, 10u64), (2, 50), (3, 0), (4, 70)] {
        put(&e, &collector, &mut w, &[v], ts);
    }
    prune_at(&e, &collector, &mgr, 5, 10);
    assert_eq!(read(&e, &collector, &mut r, 40), Some(vec![3]));
}

#[test]
#[cfg(target_pointer_width = "64")]
fn memory_per_version_and_per_key_entry() {
    // A version: 40-byte header (status 16, next, newer with the length
    // code, stop) + the value, one block in 8-byte granules. A key's entry
    // (inside its index node, beside the key): head, summary, finger,
    // floor, hint.
    assert_eq!(std::mem::size_of::<Version>(), 40);
    assert_eq!(layout_for(100).size(), 144);
    assert_eq!(layout_for(150).size(), 192);
    assert_eq!(layout_for(TOMBSTONE).size(), 40);
    // A long value pays its 8-byte length word.
    assert_eq!(
        layout_for(0xFFFD).size(),
        (40 + 0xFFFD_usize).next_multiple_of(8)
    );
    assert_eq!(
        layout_for(0xFFFE).size(),
        (48 + 0xFFFE_usize).next_multiple_of(8)
    );
    assert_eq!(std::mem::size_of::<KeyEntry>(), 40);
}

#[test]
fn a_value_lives_in_its_version_allocation() {
    let mgr = TxnManager::new(2).unwrap();
    let mut s = mgr.session().unwrap();
    let mut t = s.begin(&TxnOptions::default()).unwrap();
    let mut status = || t.new_version().unwrap().0;
    let v = Version::alloc(status(), Some(&[1, 2, 3][..]));
    // SAFETY: test-local owned version.
    let r = unsafe { v.0.as_ref() };
    assert_eq!(r.value(), Some(&[1u8, 2, 3][..]));
    let p = r.value().unwrap().as_ptr() as usize;
    let h = r as *const Version as usize;
    assert_eq!(p, h + std::mem::size_of::<Version>());
    let tomb = Version::alloc(status(), None);
    // SAFETY: as above.
    assert_eq!(unsafe { tomb.0.as_ref() }.value(), None);
    let empty = Version::alloc(status(), Some(&[][..]));
    // SAFETY: as above.
    assert_eq!(unsafe { empty.0.as_ref() }.value(), Some(&[][..]));
    // Lengths about the length code's bounds: each value whole, its length
    // kept when a newer version is linked above it, and (tombstones aside)
    // never mistaken for a tombstone.
    let above = Version::alloc(status(), Some(&[7][..]));
    for len in [
        1, 0xFFF0, 0xFFFC, 0xFFFD, 0xFFFE, 0xFFFF, 0x1_0000, 0x1_0001, 300_001,
    ] {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let v = Version::alloc(status(), Some(&bytes));
        // SAFETY: as above.
        let r = unsafe { v.0.as_ref() };
        assert_eq!(r.value(), Some(&bytes[..]), "len {len}");
        assert_eq!(r.len(), len, "len {len}");
        r.set_newer(above.0.as_ptr(), Ordering::Relaxed);
        assert_eq!(r.newer_ptr(), above.0.as_ptr(), "len {len}: the link");
        assert_eq!(r.value(), Some(&bytes[..]), "len {len}: linked");
        assert_eq!(layout_for(len).size(), layout_for(r.len()).size());
    }
}

/// The value of the version `p` (for the hint tests).
fn value_of(p: *mut Version, _g: &crate::machinery::epoch::Guard) -> Vec<u8> {
    // SAFETY: `p` is linked in the test's chain and we hold `_g`.
    unsafe { &*p }.value().expect("a value").to_vec()
}

#[test]
fn the_slot_hints_name_the_head_and_the_version_at_the_pruned_stable() {
    let (mgr, collector, e) = (
        TxnManager::new(4).unwrap(),
        Collector::new(),
        KeyEntry::new(),
    );
    let mut w = mgr.session().unwrap();
    for ts in [10u64, 20, 30] {
        put(&e, &collector, &mut w, &[ts as u8], ts);
    }
    let g = collector.pin();
    // Before any prune with a stable: the floor (the first commit).
    let (head, stable) = e.hinted();
    assert_eq!(
        (value_of(head, &g), value_of(stable, &g)),
        (vec![30], vec![10])
    );
    drop(g);
    prune_at(&e, &collector, &mgr, 5, 25);
    let g = collector.pin();
    let (head, stable) = e.hinted();
    assert_eq!(
        (value_of(head, &g), value_of(stable, &g)),
        (vec![30], vec![20])
    );
    drop(g);
    // A commit below the newest: readers walk from the head, no stable hint.
    put(&e, &collector, &mut w, &[27], 27);
    let (head, stable) = e.hinted();
    assert_eq!(value_of(head, &collector.pin()), vec![27]);
    assert!(stable.is_null());
}
