#!/usr/bin/env bash
# Mechanical mutation check of the protocol: generates mutants from src/
# (scripts/mutants.py: every fence(SeqCst) removed or weakened, every call
# of the fence pair swapped for the other side's, every ordering stronger
# than Relaxed weakened one step, every `<`/`<=`/`>`/`>=` flipped, `!=` and
# `>` swapped and tag masks dropped on tag-carrying words, every
# store-fence-load reordered where one line moves), runs the tier-1 loom
# models on each and prints the survivors.
#
#   scripts/mutants.sh --list              list the mutants (fast; CI)
#   scripts/mutants.sh                     run every mutant (slow: hours)
#   scripts/mutants.sh --tests             also run the library's unit and
#                                          integration tests (release) on
#                                          the loom survivors
#   scripts/mutants.sh --tests-first       run those tests before loom (a
#                                          mutant they kill skips loom): for
#                                          kinds loom cannot see, such as the
#                                          fence-pair swaps and the timestamp
#                                          rules' comparisons
#   scripts/mutants.sh --only REGEX        only mutants whose list line (ID,
#                                          file:line, description) matches
#   scripts/mutants.sh --models REGEX      only the loom models whose name
#                                          (loom_tests::module::test) matches
#   scripts/mutants.sh --test-args ARGS    cargo test's target selection and
#                                          filter for --tests (default
#                                          "--lib --tests"), e.g.
#                                          "--lib store::raw::slab"
#   scripts/mutants.sh --report FILE       also write the report table to
#                                          FILE (scripts/mutants-report.md
#                                          keeps the last recorded run)
#   scripts/mutants.sh [opts] FILE...      mutate these files (default: the
#                                          protocol files below)
#
# Each mutant is applied to a scratch copy of the working tree under
# $MUTANTS_DIR (default /tmp/snapshot-engine-mutants), never to the tree
# itself, and built there with one target dir reused across mutants, so
# rebuilds are incremental. The models (not their should_panic twins, which
# expect a mutant switch) run one at a time in the order below, and a mutant
# counts as killed at the first model that fails (or times out). A mutant's
# ID names its file, function, kind and ordinal in the function
# (scripts/mutants.py), so it stays put when lines move. Results
# go to $MUTANTS_DIR/results.tsv as they come (ID, file:line, outcome, what
# killed it),
# and at the end to the report, $MUTANTS_DIR/report.md: a table with one
# row per mutant, the check that killed it or, for a survivor, the comment
# at its line. Every survivor gets a check that kills it or a one-line
# reason at its line ("stronger than needed: ...", "required: ...",
# "equivalent: ..."); the results themselves live in the report, not in
# comments.
set -euo pipefail
cd "$(dirname "$0")/.."

list=0 tests=0 tests_first=0 only="" report="" models_re="" test_args="--lib --tests"
files=()
while [ $# -gt 0 ]; do
    case "$1" in
    --list) list=1 ;;
    --tests) tests=1 ;;
    --tests-first) tests=1 tests_first=1 ;;
    --only) only="$2"; shift ;;
    --report) report="$2"; shift ;;
    --models) models_re="$2"; shift ;;
    --test-args) test_args="$2"; shift ;;
    -*) echo "mutants.sh: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1") ;;
    esac
    shift
done
# slab/global.rs and slab/region.rs are not compiled under loom (stand-ins
# replace them): only --tests can kill their mutants.
if [ ${#files[@]} -eq 0 ]; then
    files=(src/machinery/lockfree/*.rs src/machinery/raw/descriptor.rs
        src/machinery/raw/slots.rs src/machinery/raw/reclaim.rs src/machinery/raw/all_durable.rs
        src/machinery/version.rs src/machinery/txn/*.rs src/machinery/rules.rs
        src/store/raw/chain.rs src/store/raw/chain/read.rs src/store/raw/chain/write.rs
        src/store/raw/chain/prune.rs src/store/raw/hint.rs
        src/store/raw/hashindex.rs src/store/raw/index.rs src/store/raw/slab.rs
        src/store/raw/slab/global.rs src/store/raw/slab/region.rs src/kv/txn.rs src/kv/commit.rs src/sync/mod.rs src/sync/fences.rs)
fi

if [ "$list" -eq 1 ]; then
    all="$(python3 scripts/mutants.py list "${files[@]}")"
fi
filter() {
    if [ -n "$only" ]; then grep -E -- "$only" || true; else cat; fi
}
if [ "$list" -eq 1 ]; then
    all="$(filter <<<"$all")"
    if [ -z "$all" ]; then
        echo "mutants.sh: no mutants generated" >&2
        exit 1
    fi
    printf '%s\n' "$all"
    echo "== $(wc -l <<<"$all") mutants" >&2
    exit 0
fi

dir="${MUTANTS_DIR:-/tmp/snapshot-engine-mutants}"
# The tree the mutants are made from, for the report (HEAD may move while
# the run goes on).
base="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' + uncommitted src changes')"
tree="$dir/tree"
pristine="$dir/pristine"
results="$dir/results.tsv"
mkdir -p "$dir/target"
# Two copies of the working tree as it is now (tracked and untracked, not
# ignored): `pristine` is what mutants are made from (edits to the working
# tree during the run do not leak in), `tree` is where they are built.
rm -rf "$tree" "$pristine" && mkdir -p "$tree" "$pristine"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tree"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$pristine"
all="$(cd "$pristine" && python3 scripts/mutants.py list "${files[@]}" | filter)"
if [ -z "$all" ]; then
    echo "mutants.sh: no mutants generated" >&2
    exit 1
fi
if [ ! -d "$dir/target/loom" ] && [ -d target/loom ]; then
    cp -r target/loom "$dir/target/loom"
fi
# Warm the tests' target from this tree's release build (the dependencies
# carry over; the crate itself rebuilds per mutant).
if [ "$tests" -eq 1 ] && [ ! -d "$dir/target/tests/release" ] && [ -d target/release ]; then
    mkdir -p "$dir/target/tests"
    cp -r target/release "$dir/target/tests/release"
fi
: >"$results"

flags="${RUSTFLAGS:-} --cfg loom -C debug-assertions=on"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
loom_cmd=(cargo test --release --no-default-features --lib)
# Fast models first: most mutants die in the first few.
order=(slots:: hash_index:: slab:: descriptors:: pin_horizon:: read_ts_oldest:: read_ts_refresh::
    prepared:: all_durable_report:: dropped_prepared:: announce_stable::
    stable_view:: rollback:: floor_source:: lazy_snapshot::
    finger:: prepare_stable:: chains:: stable::)
order=("${order[@]/#/loom_tests::}")

# Sets outcome/by when the loom models kill the mutant in $tree (or it
# does not build).
run_loom() {
    if ! (cd "$tree" && RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir/target/loom" \
        "${loom_cmd[@]}" --no-run -q >"$dir/build.log" 2>&1); then
        outcome=build-failed
        by="$(grep -m1 '^error' "$dir/build.log" || true)"
        return
    fi
    models="$(cd "$tree" && RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir/target/loom" \
        "${loom_cmd[@]}" -q -- --list 2>/dev/null | sed -n 's/: test$//p' |
        grep '^loom_tests::' | grep -v '::mutant_' | grep -v '^loom_tests::epoch::' |
        grep -E -- "${models_re:-.}" || true)"
    ordered="$(for p in "${order[@]}"; do grep "^$p" <<<"$models" || true; done
        grep -v -E "^($(IFS='|'; echo "${order[*]}"))" <<<"$models" || true)"
    for model in $ordered; do
        rc=0
        (cd "$tree" && RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir/target/loom" \
            timeout 600 "${loom_cmd[@]}" -q -- --exact "$model" --test-threads=1 \
            >"$dir/model.log" 2>&1) || rc=$?
        if [ "$rc" -ne 0 ]; then
            outcome=killed
            by="loom $model"
            if [ "$rc" -eq 124 ]; then by="$by (timeout)"; fi
            by="$by: $(grep -m1 -E "panicked|assertion|violated" "$dir/model.log" | cut -c1-160 || true)"
            return
        fi
    done
}

# Sets outcome/by when the library's unit and integration tests (no doc
# tests, no driver; the fence-pair counts and the timestamp tables live
# there) kill the mutant in $tree. The first failing binary decides.
run_tests() {
    if (cd "$tree" && CARGO_TARGET_DIR="$dir/target/tests" \
        timeout 1800 cargo test --release -q -p snapshot-engine --features baseline $test_args \
        >"$dir/tests.log" 2>&1); then
        return
    fi
    outcome=killed
    by="cargo test: $(grep -m1 -E '^test .* FAILED|panicked|timed out' "$dir/tests.log" | cut -c1-160 || true)"
    first="$(grep -m1 -A2 -E 'panicked at' "$dir/tests.log" | tail -n +2 | tr '\n' ' ' | cut -c1-200 || true)"
    if [ -n "$first" ]; then by="$by: $first"; fi
}

survivors=()
n=0 total=$(wc -l <<<"$all")
while IFS=$'\t' read -r id loc desc; do
    n=$((n + 1))
    f="${id%%:*}"
    cp "$pristine/$f" "$tree/$f"
    python3 "$pristine/scripts/mutants.py" apply "$id" "$pristine" "$tree"
    start=$(date +%s)
    outcome="" by=""
    if [ "$tests_first" -eq 1 ]; then run_tests; fi
    if [ -z "$outcome" ]; then run_loom; fi
    if [ -z "$outcome" ] && [ "$tests" -eq 1 ] && [ "$tests_first" -eq 0 ]; then run_tests; fi
    if [ -z "$outcome" ]; then outcome=SURVIVED; fi
    cp "$pristine/$f" "$tree/$f"
    printf '%s\t%s\t%s\t%s\t%s s\t%s\n' "$id" "$loc" "$outcome" "$by" "$(($(date +%s) - start))" "$desc" >>"$results"
    echo "[$n/$total] $id: $outcome ${by:+($by)}"
    if [ "$outcome" = SURVIVED ]; then survivors+=("$id ($loc)	$desc"); fi
done <<<"$all"

python3 "$pristine/scripts/mutants.py" report "$results" "$pristine" \
    "LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, tests: $([ "$tests_first" -eq 1 ] && echo "first" || { [ "$tests" -eq 1 ] && echo "on loom survivors" || echo no; })$([ "$tests" -eq 1 ] && echo " ($test_args)")${models_re:+, models matching $models_re}, base $base" \
    >"$dir/report.md"
if [ -n "$report" ]; then cp "$dir/report.md" "$report"; fi
echo "== $(grep -c $'\tkilled\t' "$results" || true) killed, ${#survivors[@]} survived," \
    "$(grep -c $'\tbuild-failed\t' "$results" || true) did not build; results: $results; report: $dir/report.md"
if [ ${#survivors[@]} -gt 0 ]; then
    echo "== survivors:"
    printf '  %s\n' "${survivors[@]}"
fi
