#!/usr/bin/env bash
# Runs the loom models of the snapshot protocol (loom_tests/, unit tests of
# the library compiled only under `--cfg loom`), bounded.
#
#   scripts/loom.sh                          # the bounded suite (CI)
#   LOOM_MAX_PREEMPTIONS=3 scripts/loom.sh   # a wider (slower) search
#   scripts/loom.sh descriptors              # only models whose name matches
#
# Tier 1 runs every model and its should_panic mutant twins with the
# loom-visible stand-in collector (`--cfg loom`, target/loom), at
# LOOM_MAX_PREEMPTIONS (default 2). Tier 2 runs the chain model again
# with the real crossbeam-epoch collector (`--cfg loom --cfg crossbeam_loom`,
# target/loom-epoch) at LOOM_EPOCH_MAX_PREEMPTIONS (default 1: the
# collector's own atomics multiply the state space, and bound 2 takes more
# than ten minutes). Models run one at a time (the mutant switch is
# process-wide). The script fails unless each tier really ran its models: a
# library built without `--cfg loom` has no `loom_tests::` tests and would
# otherwise "pass" with nothing checked. Unbounded runs: see README.
#
# `-p snapshot-engine --lib`: only the library's unit tests; the workload driver
# (the snapshot-bench workspace member, a default member) does not exist
# under loom.
set -euo pipefail
cd "$(dirname "$0")/.."

tier1_bound="${LOOM_MAX_PREEMPTIONS:-2}"
tier2_bound="${LOOM_EPOCH_MAX_PREEMPTIONS:-1}"
filter="${1:-}"
base_rustflags="${RUSTFLAGS:-}"

# run_tier NAME TARGET_DIR RUSTFLAGS FILTER PREEMPTION_BOUND
run_tier() {
    local name="$1" dir="$2" flags="$3" filt="$4"
    export LOOM_MAX_PREEMPTIONS="$5"
    local cmd=(cargo test --release -p snapshot-engine --lib)
    echo "== loom $name: RUSTFLAGS=\"$flags\" CARGO_TARGET_DIR=$dir LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS"
    local list
    list="$(RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir" "${cmd[@]}" -- --list $filt)"
    if grep ': test$' <<<"$list" | grep -qv '^loom_tests::'; then
        echo "loom $name: the library was built without --cfg loom (tests outside loom_tests:: listed); no model would run" >&2
        exit 1
    fi
    local listed
    listed="$(grep -c '^loom_tests::.*: test$' <<<"$list" || true)"
    if [ "$listed" -eq 0 ]; then
        if [ -n "$filter" ] && [ "$6" = optional ]; then
            echo "== loom $name: no model matches '$filt', skipped"
            return
        fi
        echo "loom $name: no loom models matched '$filt'; refusing to report success" >&2
        exit 1
    fi
    local log start end
    log="$(mktemp)"
    start=$(date +%s)
    RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir" "${cmd[@]}" -- \
        --test-threads=1 --nocapture $filt 2>&1 | tee "$log"
    end=$(date +%s)
    local passed
    passed="$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log" | tail -n1)"
    rm -f "$log"
    if [ -z "$passed" ] || [ "$passed" -ne "$listed" ]; then
        echo "loom $name: expected $listed models to pass, got '${passed:-none}'" >&2
        exit 1
    fi
    echo "== loom $name: $passed tests (models and mutant twins) passed in $((end - start)) s"
}

# Tier 1 keeps debug assertions on in the release build, so the core's
# `debug_assert!`s (e.g. the horizon never moving back, invariant 4) are
# checked in every explored execution; it costs no measurable time here.
run_tier "tier 1 (stand-in collector)" target/loom \
    "$base_rustflags --cfg loom -C debug-assertions=on" "$filter" "$tier1_bound" required
run_tier "tier 2 (crossbeam-epoch collector)" target/loom-epoch \
    "$base_rustflags --cfg loom --cfg crossbeam_loom" "loom_tests::epoch::$filter" "$tier2_bound" optional
