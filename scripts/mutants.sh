#!/usr/bin/env bash
# Mechanical mutation check of the protocol: generates mutants from src/
# (scripts/mutants.py: every fence(SeqCst) removed or weakened, every
# ordering stronger than Relaxed weakened one step, every `<`/`<=`/`>`/`>=`
# flipped, every store-fence-load reordered where one line moves), runs the
# tier-1 loom models on each and prints the survivors.
#
#   scripts/mutants.sh --list              list the mutants (fast; CI)
#   scripts/mutants.sh                     run every mutant (slow: hours)
#   scripts/mutants.sh --tests             also run `cargo test --release`
#                                          on the loom survivors
#   scripts/mutants.sh --only REGEX        only mutants whose ID matches
#   scripts/mutants.sh [opts] FILE...      mutate these files (default: the
#                                          protocol files below)
#
# Each mutant is applied to a scratch copy of the working tree under
# $MUTANTS_DIR (default /tmp/snapshot-engine-mutants), never to the tree
# itself, and built there with one target dir reused across mutants, so
# rebuilds are incremental. The models (not their should_panic twins, which
# expect a mutant switch) run one at a time in the order below, and a mutant
# counts as killed at the first model that fails (or times out). Results
# go to $MUTANTS_DIR/results.tsv as they come (ID, outcome, what killed it).
# Every survivor is either caught by a model added for it or has a comment
# "belt and braces: ..." at its line saying why the ordering is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

list=0 tests=0 only=""
files=()
while [ $# -gt 0 ]; do
    case "$1" in
    --list) list=1 ;;
    --tests) tests=1 ;;
    --only) only="$2"; shift ;;
    -*) echo "mutants.sh: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1") ;;
    esac
    shift
done
if [ ${#files[@]} -eq 0 ]; then
    files=(src/machinery/lockfree.rs src/machinery/raw/descriptor.rs
        src/machinery/raw/slots.rs src/machinery/raw/reclaim.rs
        src/machinery/version.rs src/machinery/txn.rs src/machinery/protocol.rs
        src/store/raw/chain.rs
        src/store/raw/hashindex.rs src/kv/txn.rs src/sync.rs)
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
: >"$results"

flags="${RUSTFLAGS:-} --cfg loom -C debug-assertions=on"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
loom_cmd=(cargo test --release --no-default-features --test loom)
# Fast models first: most mutants die in the first few.
order=(slots:: descriptors:: pin_horizon:: read_ts_oldest:: read_ts_refresh::
    prepared:: announce_stable:: stable_view:: rollback:: floor_source::
    finger:: prepare_stable:: chains:: stable::)

survivors=()
n=0 total=$(wc -l <<<"$all")
while IFS=$'\t' read -r id desc; do
    n=$((n + 1))
    f="${id%%:*}"
    cp "$pristine/$f" "$tree/$f"
    python3 "$pristine/scripts/mutants.py" apply "$id" "$pristine" "$tree"
    start=$(date +%s)
    outcome="" by=""
    if ! (cd "$tree" && RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir/target/loom" \
        "${loom_cmd[@]}" --no-run -q >"$dir/build.log" 2>&1); then
        outcome=build-failed
        by="$(grep -m1 '^error' "$dir/build.log" || true)"
    else
        models="$(cd "$tree" && RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir/target/loom" \
            "${loom_cmd[@]}" -q -- --list 2>/dev/null | sed -n 's/: test$//p' |
            grep -v '::mutant_' | grep -v '^epoch::')"
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
                break
            fi
        done
        if [ -z "$outcome" ] && [ "$tests" -eq 1 ]; then
            if (cd "$tree" && CARGO_TARGET_DIR="$dir/target/tests" \
                timeout 1200 cargo test --release -q >"$dir/tests.log" 2>&1); then
                :
            else
                outcome=killed
                by="cargo test: $(grep -m1 -E '^test .* FAILED|panicked' "$dir/tests.log" | cut -c1-160 || true)"
            fi
        fi
        if [ -z "$outcome" ]; then outcome=SURVIVED; fi
    fi
    cp "$pristine/$f" "$tree/$f"
    printf '%s\t%s\t%s\t%s s\t%s\n' "$id" "$outcome" "$by" "$(($(date +%s) - start))" "$desc" >>"$results"
    echo "[$n/$total] $id: $outcome ${by:+($by)}"
    if [ "$outcome" = SURVIVED ]; then survivors+=("$id	$desc"); fi
done <<<"$all"

echo "== $(grep -c $'\tkilled\t' "$results" || true) killed, ${#survivors[@]} survived," \
    "$(grep -c $'\tbuild-failed\t' "$results" || true) did not build; results: $results"
if [ ${#survivors[@]} -gt 0 ]; then
    echo "== survivors:"
    printf '  %s\n' "${survivors[@]}"
fi
