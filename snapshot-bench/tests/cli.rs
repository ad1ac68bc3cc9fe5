//! Drives the built `snapshot-bench` binary: every bad flag is refused with
//! one line naming the flag, the value and the allowed range, exit code 2,
//! before any thread starts; a panic ends the process; a tiny real run
//! prints its verdicts; `--plot` writes an SVG that names every engine.
//!
//! Every child runs under [`run`], which kills it and fails the test if it
//! has not exited within [`BOUND`]: a bound against hangs, not a timing
//! threshold on performance.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long any child may take before the test kills it and fails.
const BOUND: Duration = Duration::from_secs(60);

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the driver with `args` (and `env`), waits at most [`BOUND`], and
/// fails the test if it had to kill the child.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_snapshot-bench"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the driver starts");
    // Drain both pipes on their own threads so a chatty child never blocks.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).expect("stdout is UTF-8");
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).expect("stderr is UTF-8");
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("snapshot-bench {args:?} still running after {BOUND:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        code: status.code(),
        stdout: to.join().expect("stdout reader"),
        stderr: te.join().expect("stderr reader"),
    }
}

fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

/// Asserts a refusal: exit code 2, nothing on stdout, one line on stderr
/// that names the flag and the value and says what is allowed.
fn refused(args: &[&str], flag: &str, value: &str) {
    let o = run(args);
    assert_eq!(o.code, Some(2), "{args:?}: exit code; stderr: {}", o.stderr);
    assert!(o.stdout.is_empty(), "{args:?}: stdout {:?}", o.stdout);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line, got {:?}", o.stderr);
    let line = lines[0];
    assert!(line.starts_with("error: "), "{args:?}: {line}");
    assert!(line.contains(flag), "{args:?}: flag {flag} not in {line}");
    assert!(
        line.contains(&format!("'{value}'")),
        "{args:?}: value '{value}' not in {line}"
    );
    let says_allowed = [
        "want ",
        "at most",
        "possible values",
        "only",
        "needs",
        "name ",
    ]
    .iter()
    .any(|w| line.contains(w));
    assert!(says_allowed, "{args:?}: no allowed range in {line}");
    assert!(!line.contains("panicked"), "{args:?}: {line}");
}

#[test]
fn the_issue_10_inputs_are_refused() {
    refused(&["--seconds=-1"], "--seconds", "-1");
    refused(&["--warmup=-1"], "--warmup", "-1");
    refused(&["--seconds", "-1"], "--seconds", "-1");
    refused(&["--seconds", "nan"], "--seconds", "nan");
    refused(&["--seconds", "inf"], "--seconds", "inf");
    refused(&["--configs", "8x4"], "--configs", "8x4");
    refused(&["--configs", ","], "--configs", "");
    refused(&["--value-size", "0"], "--value-size", "0");
    refused(&["--rounds", "0"], "--rounds", "0");
    refused(
        &["--engines", "lock-free,lock-free"],
        "--engines",
        "lock-free,lock-free",
    );
    refused(
        &["--readers", "0", "--writers", "0"],
        "--readers/--writers",
        "0/0",
    );
    refused(&["--seconds", "0"], "--seconds", "0");
    refused(&["--keys", "0"], "--keys", "0");
}

#[test]
fn every_other_flag_out_of_range_is_refused() {
    refused(&["--keys", "-1"], "--keys", "-1");
    refused(&["--keys", "10000001"], "--keys", "10000001");
    refused(&["--keys", "many"], "--keys", "many");
    refused(&["--value-size", "65537"], "--value-size", "65537");
    refused(
        &["--keys", "10000000", "--value-size", "65536"],
        "--keys",
        "10000000",
    );
    refused(&["--readers", "513"], "--readers", "513");
    refused(&["--writers", "-1"], "--writers", "-1");
    refused(
        &["tail", "--readers", "0", "--writers", "0"],
        "--readers/--writers",
        "0/0",
    );
    refused(&["--configs", "0/0"], "--configs", "0/0");
    refused(&["--configs", "4/4,4/4"], "--configs", "4/4");
    refused(&["--configs", "4/513"], "--configs", "4/513");
    refused(&["--threads", "0"], "--threads", "0");
    refused(&["--seconds", "3601"], "--seconds", "3601");
    refused(&["--warmup", "inf"], "--warmup", "inf");
    refused(&["--warmup", "nan"], "--warmup", "nan");
    refused(&["--rounds", "51"], "--rounds", "51");
    refused(&["--rounds", "1.5"], "--rounds", "1.5");
    refused(&["--stable-lag", "-1"], "--stable-lag", "-1");
    refused(&["--oldest-lag", "x"], "--oldest-lag", "x");
    refused(&["--worst", "10001"], "--worst", "10001");
    refused(&["--engines", "frob"], "--engines", "frob");
    refused(&["frob"], "WORKLOAD", "frob");
    refused(&["--plot", "picture.png"], "--plot", "picture.png");
    refused(&["begin", "--plot", "b.svg"], "--plot", "b.svg");
    refused(&["begin", "--stable-sweep"], "--stable-sweep", "begin");
    refused(
        &["--plot", "/nonexistent-dir/w1.svg"],
        "--plot",
        "/nonexistent-dir/w1.svg",
    );
    if !cfg!(feature = "peers") {
        refused(
            &["--engines", "lock-free,lmdb"],
            "--engines",
            "lock-free,lmdb",
        );
    }
    refused(&["begin", "--engines", "lmdb"], "--engines", "lmdb");
    refused(&["--raft-log", "none"], "--raft-log", "none");
    refused(&["replicated", "--raft-log", "fast"], "--raft-log", "fast");
    refused(&["--warmup", "frob"], "--warmup", "frob");
    refused(&["--warmup", "Steady"], "--warmup", "Steady");
    refused(&["--key-size", "7"], "--key-size", "7");
    refused(&["--key-size", "512"], "--key-size", "512");
    refused(&["--key-size", "24.5"], "--key-size", "24.5");
    refused(&["begin", "--key-size", "24"], "--key-size", "24");
    refused(&["ro-mix", "--key-size", "8"], "--key-size", "8");
    refused(
        &["--key-size", "24", "--engines", "lock-free,ceiling"],
        "--key-size",
        "24",
    );
    // The key bytes count toward the load bound: 10,000,000 keys of
    // 400 + 65 bytes pass 4 GiB where 8 + 65 bytes do not.
    refused(
        &[
            "--keys",
            "10000000",
            "--key-size",
            "400",
            "--value-size",
            "65",
        ],
        "--keys",
        "10000000",
    );
    refused(&["--batch", "0"], "--batch", "0");
    refused(&["--batch", "1025"], "--batch", "1025");
    refused(&["ro-mix", "--batch", "4"], "--batch", "4");
    refused(&["memory", "--engines", "rwlock3"], "--engines", "rwlock3");
}

#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let o = run(&["--bogus"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{:?}", o.stderr);
    assert!(o.stderr.contains("--bogus"), "{}", o.stderr);
    let o = run(&["--keys"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{:?}", o.stderr);
    assert!(o.stderr.contains("--keys"), "{}", o.stderr);
    let o = run(&["--help"]);
    assert_eq!(o.code, Some(0));
    assert!(o.stdout.contains("--plot"), "{}", o.stdout);
}

#[test]
fn a_panic_with_workers_running_ends_the_process() {
    let o = run_env(
        &[
            "--keys",
            "100",
            "--seconds",
            "5",
            "--warmup",
            "5",
            "--readers",
            "2",
            "--writers",
            "2",
        ],
        &[("SNAPSHOT_BENCH_TEST_PANIC", "1")],
    );
    assert_eq!(o.code, Some(101), "{}", o.stderr);
    assert!(
        o.stderr.contains("SNAPSHOT_BENCH_TEST_PANIC"),
        "{}",
        o.stderr
    );
}

/// The tiny read-ts run every output test shares.
const TINY: &[&str] = &[
    "--keys",
    "1000",
    "--seconds",
    "0.05",
    "--warmup",
    "0.01",
    "--rounds",
    "2",
];

/// One reader and one writer.
const RW: &[&str] = &["--readers", "1", "--writers", "1"];

#[test]
fn a_tiny_run_prints_verdicts_headline_and_per_round_lines() {
    let o = run(&[TINY, RW].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let verdicts: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("verdict: "))
        .collect();
    // lock-free against rwlock3 and rwlock2, for readers and for writers.
    assert_eq!(verdicts.len(), 4, "{}", o.stdout);
    for v in &verdicts {
        assert!(
            v.contains("FASTER than")
                || v.contains("SLOWER than")
                || v.contains("no difference this sample can show"),
            "{v}"
        );
        assert!(v.contains("p = ") && v.contains("rounds"), "{v}");
    }
    assert!(
        o.stdout.contains("Reading the read-ts table"),
        "{}",
        o.stdout
    );
    // The headline every build prints (lock-word RMWs from the session
    // counters) and, in a count-rmw build, the shim-counted one too.
    let heads: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("headline: "))
        .collect();
    assert_eq!(
        heads.len(),
        if cfg!(feature = "count-rmw") { 2 } else { 1 },
        "{}",
        o.stdout
    );
    for h in &heads {
        assert!(h.contains("lock-free 0.00 vs rwlock3 "), "{h}");
    }
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);
    // stderr is a pipe here, not a terminal: one line per run.
    let per_run = o
        .stderr
        .lines()
        .filter(|l| l.starts_with('[') && l.contains(" round "))
        .count();
    assert_eq!(per_run, 2 * 3, "{}", o.stderr);
    let quiet = run(&[TINY, RW, &["--no-progress"]].concat());
    assert_eq!(quiet.code, Some(0), "{}", quiet.stderr);
    // No progress; only warnings (a round in which no transaction of a
    // side finished, which a 0.05 s window on a loaded machine can give).
    assert!(
        quiet.stderr.lines().all(|l| l.starts_with("warning: ")),
        "{}",
        quiet.stderr
    );
}

/// A run whose measured window opens before the writers have committed
/// `--stable-lag` timestamps is flagged: its readers read the load, with
/// nothing pruned, not a moving stable. Once the warm-up passes the lag,
/// the warning goes.
#[test]
fn a_window_that_opens_with_stable_at_its_clamp_is_flagged() {
    const FLAG: &str = "stable was still at its clamp";
    let base = ["--keys", "1000", "--seconds", "0.05", "--rounds", "1"];
    let one = ["--engines", "lock-free", "--no-progress"];
    // The default lag (1,000,000) is far more than 0.06 s of commits.
    let o = run(&[&base[..], RW, &one, &["--warmup", "0.01"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let flagged: Vec<&str> = o.stderr.lines().filter(|l| l.contains(FLAG)).collect();
    assert_eq!(flagged.len(), 1, "{}", o.stderr);
    assert!(
        flagged[0].starts_with("warning: 1/1: in 1 of 1 runs "),
        "{}",
        flagged[0]
    );
    assert!(
        flagged[0].contains("--stable-lag 1000000"),
        "{}",
        flagged[0]
    );
    // With no lag, a warm-up in which the writer commits once moves stable.
    let o = run(&[
        &base[..],
        RW,
        &one,
        &["--warmup", "0.5", "--stable-lag", "0"],
    ]
    .concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stderr.contains(FLAG), "{}", o.stderr);
    // Without writers there is nothing to wait for.
    let o = run(&[
        &base[..],
        &["--readers", "1", "--writers", "0"],
        &one,
        &["--warmup", "0.01"],
    ]
    .concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stderr.contains(FLAG), "{}", o.stderr);
}

#[test]
fn edge_configurations_print_no_nan() {
    for extra in [
        &["--readers", "0", "--writers", "1"][..],
        &["--readers", "1", "--writers", "0"][..],
        &["--readers", "1", "--writers", "1", "--engines", "rwlock2"][..],
    ] {
        let o = run(&[TINY, extra, &["--no-progress"]].concat());
        assert_eq!(o.code, Some(0), "{extra:?}: {}", o.stderr);
        assert!(!o.stdout.contains("NaN"), "{extra:?}: {}", o.stdout);
        assert!(!o.stdout.contains("inf"), "{extra:?}: {}", o.stdout);
    }
    let o = run(&[
        "--keys",
        "1000",
        "--seconds",
        "0.05",
        "--warmup",
        "0.01",
        "--rounds",
        "1",
        "--readers",
        "1",
        "--writers",
        "1",
        "--no-progress",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("smallest possible p = 1.000"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);
    let o = run(&[
        "begin",
        "--rounds",
        "1",
        "--seconds",
        "0.001",
        "--no-progress",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);
    let o = run(&[
        "ro-mix",
        "--rounds",
        "1",
        "--seconds",
        "0.05",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--keys",
        "100",
        "--no-progress",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);
}

#[test]
fn plot_writes_an_svg_that_names_every_engine() {
    let dir = std::env::temp_dir().join(format!("snapshot-bench-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("w1.svg");
    let p = path.to_str().expect("UTF-8 temp path");
    let o = run(&[
        TINY,
        &["--configs", "1/1,2/1", "--plot", p, "--no-progress"],
    ]
    .concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let svg = std::fs::read_to_string(&path).expect("the picture was written");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "text")
        .filter_map(|n| n.text().map(str::trim))
        .collect();
    for engine in ["lock-free", "rwlock3", "rwlock2"] {
        assert!(
            texts.iter().any(|t| t.starts_with(engine)),
            "{engine} not named in the SVG's text: {texts:?}"
        );
    }
    for axis in [
        "percentile",
        "latency",
        "reader transactions/s",
        "writer transactions/s",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(axis)),
            "{axis} not in the SVG's text: {texts:?}"
        );
    }
    // Both configurations are labelled on the throughput axes.
    assert!(
        texts.iter().any(|t| t.contains("2 readers / 1 writers")),
        "{texts:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `replicated` needs the `replication` feature; the default build refuses
/// it, and every build bounds its per-node thread count.
#[test]
fn replicated_is_refused_without_its_feature_and_bounds_threads() {
    if cfg!(feature = "replication") {
        refused(&["replicated", "--threads", "65"], "--threads", "65");
    } else {
        refused(&["replicated"], "WORKLOAD", "replicated");
    }
}

/// `replicated` runs every mode, the node-process one too: its three
/// children report one leader and two followers with their staleness, and
/// the table has its rows and verdicts.
#[cfg(feature = "replication")]
#[test]
fn replicated_runs_its_nodes_as_processes_too() {
    let table = [
        "replicated",
        "--rounds",
        "1",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
        "--threads",
        "1",
    ];
    let o = run(&[&table[..], &["--json"]].concat());
    assert_eq!(o.code, Some(0), "stderr: {}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    let rounds = v["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 5, "{rounds:?}");
    let procs = rounds
        .iter()
        .find(|r| r["mode"] == "leader + 2 followers, processes")
        .expect("the processes mode ran");
    let nodes = procs["nodes"].as_array().expect("nodes");
    let roles: Vec<&str> = nodes.iter().map(|n| n["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["leader", "follower", "follower"]);
    for f in &nodes[1..] {
        assert!(f["staleness_ns"].is_object(), "{f}");
        assert_eq!(f["new_order_per_s"], 0.0, "{f}");
    }
    let o = run(&table);
    assert_eq!(o.code, Some(0), "stderr: {}", o.stderr);
    assert!(
        o.stdout
            .contains("verdict leader + 2 followers, processes: leader NewOrder/s"),
        "{}",
        o.stdout
    );
}

/// The node-process mode's internal entry point refuses bad arguments with
/// one line and exit code 2.
#[cfg(feature = "replication")]
#[test]
fn a_node_process_refuses_bad_arguments() {
    let addrs = "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3";
    for bad in [
        &["__replicated-node"][..],
        &["__replicated-node", "4", "1", addrs, "/tmp/x", "sync"],
        &["__replicated-node", "1", "0", addrs, "/tmp/x", "sync"],
        &[
            "__replicated-node",
            "1",
            "1",
            "127.0.0.1:1",
            "/tmp/x",
            "sync",
        ],
        &["__replicated-node", "1", "1", addrs, "/tmp/x", "fast"],
        &["__replicated-node", "1", "1", addrs, "/tmp/x"],
    ] {
        let o = run(bad);
        assert_eq!(o.code, Some(2), "{bad:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{bad:?}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{bad:?}");
    }
}

/// Every bad `--sweep` is refused with one line naming the flag, the value
/// as given and the allowed range, exit code 2.
#[test]
fn bad_sweeps_are_refused() {
    for bad in [
        "readers",
        "threads=1..4",
        "readers=4..1",
        "readers=2..2",
        "readers=1..513",
        "readers=0..64",
        "readers=-1..2",
        "readers=4,2",
        "readers=1,x",
    ] {
        refused(&["--sweep", bad], "--sweep", bad);
    }
    refused(
        &["--sweep", "readers=1..4", "--readers", "2"],
        "--sweep",
        "readers=1..4",
    );
    refused(
        &["--sweep", "readers=1..4", "--configs", "1/1"],
        "--sweep",
        "readers=1..4",
    );
    refused(
        &["--sweep", "readers=0..2", "--writers", "0"],
        "--sweep",
        "readers=0..2",
    );
    refused(
        &["begin", "--sweep", "readers=1..2"],
        "--sweep",
        "readers=1..2",
    );
    refused(
        &["ro-mix", "--sweep", "writers=1..2"],
        "--sweep",
        "writers=1..2",
    );
}

/// A tiny sweep: the table has one row per point, the JSON names the axis,
/// the points and one curve per engine with a value per point, and the
/// picture labels the swept axis and every engine.
#[test]
fn a_tiny_sweep_prints_its_table_json_and_picture() {
    let sweep = &["--sweep", "readers=1..3", "--writers", "1", "--no-progress"][..];
    let o = run(&[TINY, sweep, &["--engines", "lock-free,rwlock3"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("sweep: readers from 1 to 3 with 1 writers"))
        .unwrap_or_else(|| panic!("no sweep table: {}", o.stdout));
    for (i, p) in ["1", "2", "3"].iter().enumerate() {
        let row = lines[head + 2 + i].trim_start();
        assert!(row.starts_with(p), "row {i}: {row}");
        // point, then per engine "readers (min-max) writers (min-max)",
        // then the reader ratio: `x1.23`, or `-` when an engine's reader
        // median is 0. In a 50 ms window on a loaded machine a reader can
        // be descheduled for the whole window in every round, which is a
        // legal run (found as "row 0 has no ratio" under load), so only a
        // zero median excuses a missing ratio.
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 10, "row {i}: {row}");
        let zero = cells[1] == "0" || cells[5] == "0";
        let ratio = cells[9];
        match ratio.strip_prefix('x') {
            Some(r) => assert!(
                r.parse::<f64>().is_ok_and(|r| r > 0.0),
                "row {i}: ratio {ratio}: {row}"
            ),
            None => assert!(
                ratio == "-" && zero,
                "row {i} has no ratio but both reader medians: {row}"
            ),
        }
    }
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);

    let o = run(&[TINY, sweep, &["--json"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("one JSON object");
    let sw = &v["sweep"];
    assert_eq!(sw["axis"], "readers");
    assert_eq!(sw["fixed"], 1);
    assert_eq!(sw["points"], serde_json::json!([1, 2, 3]));
    let curves = sw["curves"].as_array().expect("curves");
    assert_eq!(curves.len(), 3, "one per engine");
    for c in curves {
        assert_eq!(c["readers"].as_array().map(Vec::len), Some(3), "{c}");
        assert_eq!(c["writers"].as_array().map(Vec::len), Some(3), "{c}");
    }
    assert_eq!(v["configs"].as_array().map(Vec::len), Some(3));

    let dir = std::env::temp_dir().join(format!("snapshot-bench-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("sweep.svg");
    let p = path.to_str().expect("UTF-8 temp path");
    let o = run(&[TINY, sweep, &["--plot", p]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let svg = std::fs::read_to_string(&path).expect("the picture was written");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "text")
        .filter_map(|n| n.text().map(str::trim))
        .collect();
    for want in ["lock-free", "rwlock3", "rwlock2", "readers", "ratio"] {
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with(want) || t.contains(want)),
            "{want} not in the SVG's text: {texts:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tail report says what the driver saw around the engines (the
/// timekeeper's set_timestamps and sleep overshoot, and on Linux the
/// scheduler counters), and the JSON carries them with the per-write RMW
/// figure (`null` unless counted).
#[test]
fn tail_reports_timekeeper_and_scheduler_lines() {
    let args = [
        "tail",
        "--keys",
        "1000",
        "--seconds",
        "0.1",
        "--warmup",
        "0.01",
        "--rounds",
        "1",
        "--engines",
        "lock-free,rwlock3",
        "--no-progress",
    ];
    let o = run(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("what the driver saw around the engines"),
        "{}",
        o.stdout
    );
    for engine in ["lock-free", "rwlock3"] {
        let tk = o
            .stdout
            .lines()
            .filter(|l| l.contains(engine) && l.contains("timekeeper set_timestamps:"))
            .count();
        assert_eq!(tk, 1, "{engine}: {}", o.stdout);
        if cfg!(target_os = "linux") {
            assert!(
                o.stdout
                    .lines()
                    .any(|l| l.contains(engine) && l.contains("runnable but waiting for one")),
                "{engine}: {}",
                o.stdout
            );
        }
    }
    assert!(o.stdout.contains("rmw/wtxn"), "{}", o.stdout);
    let o = run(&[&args[..], &["--json"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("one JSON object");
    for e in ["lock-free", "rwlock3"] {
        let round = &v["engines"][e][0];
        assert!(round["timekeeper"]["calls"].is_u64(), "{e}: {round}");
        assert!(
            round["timekeeper"]["late_ns"]["max"].is_u64(),
            "{e}: {round}"
        );
        let w = &round["shared_rmw_per_write_txn"];
        if cfg!(feature = "count-rmw") {
            assert!(w.as_f64().is_some_and(|x| x > 0.0), "{e}: {w}");
        } else {
            assert!(w.is_null(), "{e}: {w}");
        }
        if cfg!(target_os = "linux") {
            assert!(round["sched"]["on_cpu_ns"].is_u64(), "{e}: {round}");
        }
    }
}

/// The default warm-up waits until stable has left its clamp: no clamp
/// warning, a line saying how long each engine waited, and the wait in the
/// JSON. A small `--stable-lag` keeps the wait short; the cap keeps it
/// bounded either way.
#[test]
fn the_steady_warm_up_waits_for_stable_and_says_how_long() {
    const FLAG: &str = "stable was still at its clamp";
    let args = [
        "--keys",
        "1000",
        "--seconds",
        "0.05",
        "--rounds",
        "1",
        "--engines",
        "lock-free,rwlock3",
        "--stable-lag",
        "1000",
        "--no-progress",
    ];
    let o = run(&[&args[..], RW].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stderr.contains(FLAG), "{}", o.stderr);
    let lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("warm-up: "))
        .collect();
    assert_eq!(lines.len(), 1, "{}", o.stdout);
    assert!(
        lines[0].contains("until stable left its clamp (the writers' first 1,000 commits)"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("lock-free ") && lines[0].contains("rwlock3 "),
        "{}",
        lines[0]
    );
    assert!(
        o.stdout.contains("after a steady-state warm-up"),
        "{}",
        o.stdout
    );
    let o = run(&[&args[..], RW, &["--json"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    assert_eq!(v["warmup"], "steady");
    for e in ["lock-free", "rwlock3"] {
        let w = &v["engines"][e][0]["warmup"];
        assert_eq!(w["waited_for_stable"], true, "{e}: {w}");
        assert_eq!(w["capped"], false, "{e}: {w}");
        assert!(w["seconds"].as_f64().expect("seconds") >= 1.0, "{e}: {w}");
    }
    // With no writers nothing moves stable: the floor alone, said so.
    let o = run(&[&args[..], &["--readers", "1", "--writers", "0"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("(nothing moves stable: the floor)"),
        "{}",
        o.stdout
    );
    // An explicit --warmup is a fixed time, named as such.
    let o = run(&[&args[..], RW, &["--warmup", "0.5"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("warm-up: 0.5 s per run (--warmup 0.5)"),
        "{}",
        o.stdout
    );
}

/// `memory` runs the memory pass alone, in the shape asked for: bytes per
/// key over the raw key + value bytes.
#[test]
fn memory_reports_the_shape_it_was_given() {
    let o = run(&[
        "memory",
        "--keys",
        "2000",
        "--key-size",
        "24",
        "--value-size",
        "150",
        "--json",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    assert_eq!(v["workload"], "memory");
    let m = &v["memory"][0];
    assert_eq!(m["engine"], "lock-free");
    assert_eq!(m["key_size"], 24);
    assert_eq!(m["value_size"], 150);
    let per_key = m["bytes_per_key"].as_f64().expect("bytes per key");
    let raw = m["times_raw"].as_f64().expect("times raw");
    assert!((per_key / 174.0 - raw).abs() < 1e-9, "{m}");
    // A key holds at least its own key and value bytes.
    assert!(per_key >= 174.0, "{m}");
    let o = run(&[
        "memory",
        "--keys",
        "2000",
        "--key-size",
        "24",
        "--value-size",
        "150",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .contains("2,000 keys of 24 bytes with 150-byte values (raw 174 bytes a key)"),
        "{}",
        o.stdout
    );
}

/// `--batch N` reads N keys per reader transaction and reports keys per
/// second per reader thread and per reader CPU-second against the ceiling.
#[test]
fn batch_reports_keys_per_thread_against_the_ceiling() {
    let o = run(&[
        TINY,
        &[
            "--readers",
            "1",
            "--writers",
            "0",
            "--batch",
            "16",
            "--engines",
            "lock-free,ceiling",
            "--no-progress",
        ],
    ]
    .concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .contains("16 keys per reader transaction (get_many_with)"),
        "{}",
        o.stdout
    );
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("keys read (16 per transaction)"))
        .unwrap_or_else(|| panic!("no batch line in {}", o.stdout));
    let (wall, cpu) = line
        .split_once("per reader CPU-second: ")
        .unwrap_or_else(|| panic!("no CPU-second part in {line}"));
    for part in [wall, cpu] {
        assert!(
            part.contains("lock-free ") && part.contains("ceiling "),
            "{line}"
        );
    }
    assert!(wall.contains("x ceiling)"), "{line}");
}

#[test]
fn rw_mix_refuses_bad_flags() {
    refused(&["rw-mix", "--rmw-reads", "0"], "--rmw-reads", "0");
    refused(&["rw-mix", "--rmw-reads", "17"], "--rmw-reads", "17");
    refused(&["rw-mix", "--rmw-writes", "0"], "--rmw-writes", "0");
    // The default --rmw-reads is 2: a writer updates only keys it read.
    refused(&["rw-mix", "--rmw-writes", "3"], "--rmw-writes", "3");
    refused(
        &["rw-mix", "--rmw-reads", "3", "--rmw-writes", "4"],
        "--rmw-writes",
        "4",
    );
    refused(&["--rmw-reads", "2"], "--rmw-reads", "2");
    refused(&["ro-mix", "--rmw-writes", "1"], "--rmw-writes", "1");
    refused(
        &["rw-mix", "--readers", "0", "--writers", "0"],
        "--readers/--writers",
        "0/0",
    );
    refused(&["rw-mix", "--key-size", "24"], "--key-size", "24");
    refused(&["rw-mix", "--batch", "1025"], "--batch", "1025");
    refused(
        &["rw-mix", "--sweep", "writers=1..2"],
        "--sweep",
        "writers=1..2",
    );
    refused(&["rw-mix", "--engines", "ceiling"], "--engines", "ceiling");
}

/// A short lock-free rw-mix table (2 rounds, 1 reader, 2 writers, 100
/// keys) of the writers' `shape` flags: it exits 0, prints `header`, a
/// row for each isolation level and the writers' and readers' ratios.
fn rw_mix_table(shape: &[&str], header: &str) -> Output {
    let mut args = vec![
        "rw-mix",
        "--engines",
        "lock-free",
        "--rounds",
        "2",
        "--seconds",
        "0.05",
        "--warmup",
        "0",
        "--readers",
        "1",
        "--writers",
        "2",
        "--keys",
        "100",
    ];
    args.extend_from_slice(shape);
    let o = run(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);
    assert!(o.stdout.contains(header), "{}", o.stdout);
    for level in ["snapshot", "serializable"] {
        let row = format!("lock-free           {level}");
        assert!(o.stdout.contains(&row), "no {level} row: {}", o.stdout);
    }
    for side in ["writer commits/s: x", "reader txn/s: x"] {
        let line = format!("lock-free serializable/snapshot {side}");
        assert!(o.stdout.contains(&line), "no {side} ratio: {}", o.stdout);
    }
    o
}

#[test]
fn rw_mix_prints_both_isolation_levels_and_their_ratios() {
    let o = rw_mix_table(
        &["--rmw-reads", "3", "--rmw-writes", "2"],
        "writers read 3 keys and update 2 of them",
    );
    // Commits per writer CPU-second: a ratio, unless a round's writers
    // got no CPU time in its window (then its row shows "-").
    let per_cpu = "lock-free serializable/snapshot writer commits per writer CPU-s: x";
    let rows: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("lock-free "))
        .collect();
    assert_eq!(rows.len(), 2, "{}", o.stdout);
    assert!(
        o.stdout.contains(per_cpu) || rows.iter().any(|r| r.contains(" - ")),
        "{}",
        o.stdout
    );
    // One run per round and level, in alternating order: snapshot first
    // in round 1, serializable first in round 2.
    let runs: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.contains("commits/s"))
        .collect();
    assert_eq!(runs.len(), 4, "{}", o.stderr);
    assert!(runs[0].contains("snapshot") && runs[1].contains("serializable"));
    assert!(runs[2].contains("serializable") && runs[3].contains("snapshot"));
    let o = run(&[
        "rw-mix",
        "--engines",
        "lock-free",
        "--rounds",
        "1",
        "--seconds",
        "0.02",
        "--warmup",
        "0",
        "--configs",
        "0/1",
        "--keys",
        "10",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    assert_eq!(v["workload"], "rw-mix");
    let ratios = v["configs"][0]["ratios"].as_array().expect("ratios");
    // No readers: only the writers' ratios (the per-CPU one where every
    // round's writers got CPU time in their window).
    assert!(matches!(ratios.len(), 1 | 2), "{ratios:?}");
    assert_eq!(ratios[0]["side"], "writer commits/s");
    for r in &v["configs"][0]["engines"]["lock-free"]["serializable"]
        .as_array()
        .expect("rounds")[..]
    {
        let share = &r["writer_cpu_share"];
        assert!(
            share.is_null() || share.as_f64().is_some_and(|c| c >= 0.0),
            "{r}"
        );
        for f in ["gate_waits_per_commit", "gate_wait_us_per_commit"] {
            assert!(r[f].as_f64().is_some_and(|x| x >= 0.0), "{f}: {r}");
        }
    }
}

#[test]
fn rw_mix_refuses_bad_scans() {
    refused(&["rw-mix", "--rmw-scan", "1025"], "--rmw-scan", "1025");
    refused(&["rw-mix", "--rmw-scan", "-1"], "--rmw-scan", "-1");
    // A scan covers consecutive loaded keys.
    refused(
        &["rw-mix", "--keys", "10", "--rmw-scan", "11"],
        "--rmw-scan",
        "11",
    );
    // A writer updates keys it scanned.
    refused(
        &["rw-mix", "--rmw-scan", "3", "--rmw-writes", "4"],
        "--rmw-writes",
        "4",
    );
    // The scan replaces the point reads.
    refused(
        &["rw-mix", "--rmw-scan", "3", "--rmw-reads", "2"],
        "--rmw-reads",
        "2",
    );
    refused(&["ro-mix", "--rmw-scan", "3"], "--rmw-scan", "3");
    refused(&["--rmw-scan", "0"], "--rmw-scan", "0");
}

/// One rw-mix run with `args` on top of a short lock-free one, as JSON.
fn rw_mix_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec![
        "rw-mix",
        "--engines",
        "lock-free",
        "--rounds",
        "1",
        "--seconds",
        "0.05",
        "--warmup",
        "0",
        "--configs",
        "1/2",
        "--keys",
        "100",
        "--json",
        "--no-progress",
    ];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_eq!(o.code, Some(0), "{args:?}: {}", o.stderr);
    serde_json::from_str(o.stdout.trim()).expect("one JSON object")
}

/// The median tracked bytes per commit at `level` (every writer
/// transaction of a run tracks the same bytes, so the one round's mean is
/// that figure).
fn tracked(v: &serde_json::Value, level: &str) -> f64 {
    let rounds = v["configs"][0]["engines"]["lock-free"][level]
        .as_array()
        .expect("rounds");
    assert_eq!(rounds.len(), 1, "{v}");
    let r = &rounds[0];
    assert!(
        r["writer_commits_per_s"].as_f64().is_some_and(|c| c > 0.0),
        "{level}: no writer committed: {r}"
    );
    r["tracked_bytes_per_commit"].as_f64().expect("a number")
}

#[test]
fn rw_mix_scan_variant_tracks_each_scan_as_one_range() {
    rw_mix_table(
        &["--rmw-scan", "10", "--rmw-writes", "2"],
        "range-scan variant: writers scan 10 consecutive keys from a random start and update the first 2 of them",
    );

    // The writer asserts that each scan returned all its keys (a panic
    // exits non-zero above). Under serializable a scan is tracked as one
    // range, with the entries its scan kept for the validation (up to 32:
    // a longer scan keeps none), and point reads as one entry per key: the
    // tracked bytes do not grow with --rmw-scan; snapshot isolation tracks
    // nothing.
    let short = rw_mix_json(&["--rmw-scan", "4"]);
    let long = rw_mix_json(&["--rmw-scan", "40"]);
    let point = rw_mix_json(&["--rmw-reads", "4"]);
    assert_eq!(short["variant"], "scan");
    assert_eq!(short["rmw_scan"], 4);
    assert!(short["rmw_reads"].is_null(), "{short}");
    assert_eq!(point["variant"], "point");
    assert_eq!(point["rmw_scan"], 0);
    assert_eq!(point["rmw_reads"], 4);
    for v in [&short, &long, &point] {
        assert_eq!(tracked(v, "snapshot"), 0.0, "{v}");
        let r = &v["configs"][0]["engines"]["lock-free"]["serializable"][0];
        let (serial, range) = (
            r["serialization_conflicts_per_commit"]
                .as_f64()
                .expect("a number"),
            r["range_conflicts_per_commit"].as_f64().expect("a number"),
        );
        assert!((0.0..=serial).contains(&range), "{r}");
    }
    let (s, l, p) = (
        tracked(&short, "serializable"),
        tracked(&long, "serializable"),
        tracked(&point, "serializable"),
    );
    assert!(s > 0.0 && l > 0.0 && p > 0.0, "{short} {long} {point}");
    assert!(
        l < s,
        "a scan of 40 keys, past the cap, keeps no entries ({l} B): less than one of 4 ({s} B)"
    );
    // Point reads never give a range conflict.
    let r = &point["configs"][0]["engines"]["lock-free"]["serializable"][0];
    assert_eq!(r["range_conflicts_per_commit"], 0.0, "{r}");
}

#[test]
fn bad_tables_flags_are_refused() {
    refused(&["--tables", "-1"], "--tables", "-1");
    refused(&["--tables", "1000001"], "--tables", "1000001");
    refused(&["--tables", "0,4,4"], "--tables", "0,4,4");
    refused(
        &["--tables", "0,1,2,3,4,5,6,7,8", "--keys", "100"],
        "--tables",
        "0,1,2,3,4,5,6,7,8",
    );
    refused(&["--tables", "5", "--keys", "4"], "--tables", "5");
    refused(
        &["--engines", "lock-free,ceiling", "--tables", "0,4"],
        "--tables",
        "0,4",
    );
    refused(
        &["--engines", "lock-free", "--tables", "4", "--batch", "2"],
        "--tables",
        "4",
    );
    refused(&["rw-mix", "--tables", "2"], "--tables", "2");
    refused(&["begin", "--tables", "2"], "--tables", "2");
    refused(
        &["memory", "--engines", "lock-free,ceiling", "--tables", "2"],
        "--tables",
        "2",
    );
    refused(&["tables", "--tables", "0"], "--tables", "0");
    refused(&["tables", "--tables", "10,20"], "--tables", "10,20");
    refused(&["tables", "--engines", "rwlock3"], "--engines", "rwlock3");
}

#[test]
fn read_ts_tables_rows_alternate_and_print_their_ratios() {
    let o = run(&[
        "--engines",
        "lock-free",
        "--tables",
        "0,1,4",
        "--rounds",
        "2",
        // Long enough that, on a loaded machine, every reader and writer
        // gets CPU time in every round (a round without any has no
        // per-CPU-second figure, and its ratio is left out).
        "--seconds",
        "0.25",
        "--warmup",
        "0",
        "--configs",
        "1/1",
        "--keys",
        "100",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stdout.contains("NaN"), "{}", o.stdout);
    for row in ["lock-free/1t ", "lock-free/4t "] {
        assert!(o.stdout.contains(row), "no {row} row: {}", o.stdout);
        let line = o
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{}/ lock-free", row)))
            .unwrap_or_else(|| panic!("no ratio line for {row}: {}", o.stdout));
        for m in [
            "readers/s x",
            "readers/CPU-s x",
            "writers/s x",
            "writers/CPU-s x",
        ] {
            assert!(line.contains(m), "no {m} in {line}");
        }
        assert!(line.contains("over 2 rounds"), "{line}");
    }
    // One run per row per round, the order reversed in round 2.
    let runs: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.contains("readers ") && l.contains("round "))
        .collect();
    assert_eq!(runs.len(), 6, "{}", o.stderr);
    // "... R/W round I/N ROW readers ...": the row follows the round.
    let row_of = |l: &str| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let at = w.iter().position(|&x| x == "round")?;
        w.get(at + 2).map(|x| x.to_string())
    };
    let order: Vec<_> = runs.iter().filter_map(|l| row_of(l)).collect();
    assert_eq!(
        order,
        [
            "lock-free",
            "lock-free/1t",
            "lock-free/4t",
            "lock-free/4t",
            "lock-free/1t",
            "lock-free"
        ],
        "{}",
        o.stderr
    );
    let o = run(&[
        "read-ts",
        "--engines",
        "lock-free",
        "--tables",
        "0,3",
        "--rounds",
        "1",
        "--seconds",
        "0.02",
        "--warmup",
        "0",
        "--configs",
        "2/0",
        "--keys",
        "10",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    assert_eq!(v["tables"], serde_json::json!([0, 3]));
    let ratios = v["configs"][0]["table_ratios"]
        .as_array()
        .expect("table_ratios");
    // No writers: the readers' two measures only.
    let measures: Vec<&str> = ratios
        .iter()
        .map(|r| r["measure"].as_str().expect("a measure"))
        .collect();
    assert_eq!(measures, ["readers/s", "readers/CPU-s"], "{ratios:?}");
    assert_eq!(ratios[0]["row"], "lock-free/3t");
    assert_eq!(ratios[0]["default_row"], "lock-free");
    // Every read found its key in its table: one version per read.
    let rounds = v["configs"][0]["engines"]["lock-free/3t"]
        .as_array()
        .expect("the named-table row's rounds");
    assert_eq!(rounds[0]["versions_per_read"], 1.0, "{rounds:?}");
}

#[test]
fn tables_reports_time_bytes_and_memory_back() {
    let o = run(&["tables", "--tables", "50", "--rounds", "2"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for row in [
        "create_table (per table)",
        "drop_table (per table)",
        "bytes per empty table",
        "rss per empty table",
        "bytes back after the drops",
    ] {
        assert!(o.stdout.contains(row), "no {row}: {}", o.stdout);
    }
    assert!(o.stdout.contains("create 50 tables"), "{}", o.stdout);
    let o = run(&["tables", "--tables", "50", "--rounds", "2", "--json"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    assert_eq!(v["workload"], "tables");
    assert_eq!(v["tables"], 50);
    let rounds = v["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2);
    for r in rounds {
        let bytes = r["bytes_per_table"].as_f64().expect("bytes per table");
        assert!(bytes > 0.0, "an empty table holds something: {r}");
        // A dropped table's memory comes back once the collector ran (the
        // registry keeps a little: its maps' capacity).
        let back = r["bytes_back"].as_f64().expect("bytes back");
        assert!(back > 0.9 && back <= 1.0, "{r}");
    }
}

#[test]
fn memory_gives_one_lock_free_row_per_tables_value() {
    let o = run(&[
        "memory",
        "--engines",
        "lock-free",
        "--tables",
        "0,4",
        "--keys",
        "2000",
        "--json",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON object");
    let rows = v["memory"].as_array().expect("memory rows");
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["engine"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["lock-free", "lock-free/4t"], "{rows:?}");
    for r in rows {
        assert!(r["bytes_per_key"].as_f64().expect("bytes") > 0.0, "{r}");
        assert!(
            r["bytes_per_extra_version"].as_f64().expect("bytes") > 0.0,
            "{r}"
        );
    }
}
