#!/usr/bin/env bash
# A kernel library's speed against the JIT: tune LoopTune's 25 test shapes and the real-model set
# (datasets/models) into a fresh store (a short budget each), `lib build` it, then
# benchmarks/lib_bench: each kernel through the .so's lt_sgemm beside the JIT's kernel of the
# same schedule, alternating, pinned to one core, medians of thread CPU time (wall time counts
# the time slices other processes take inside a long call). Target: every ratio >= 0.97.
# From Python: experiments/lib_speed_python.py OUT/lib.
#   experiments/lib_speed.sh [--build DIR] [--out DIR] [--budget-s S] [--core N] [--shapes "M,N,K ..."]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build" out="" budget=0.2 core=1 shapes=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --budget-s) budget=$2; shift 2 ;;
    --core) core=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 1 ;;
  esac
done
[ -x "$build/cli/looptool" ] || { echo "error: no $build/cli/looptool (build first)" >&2; exit 1; }
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
if [ -z "$shapes" ]; then
  csv="$root/../shared/corpus/looptune/results/test.csv"
  [ -f "$csv" ] || { echo "error: no $csv (LoopTune's corpus beside the clone)" >&2; exit 1; }
  # mmM_N_K names -> M,N,K: the 25 test shapes, then the real-model set.
  shapes=$( (cut -d, -f2 "$csv" | grep '^mm'; ls "$root/datasets/models" | grep '^mm') |
            sed 's/^mm//; s/_/,/g' | tr '\n' ' ')
fi
args=()
for s in $shapes; do args+=(--matmul "$s"); done
echo "tuning ${#args[@]} / 2 shapes into $out/store.sqlite (budget ${budget}s each)" >&2
taskset -c "$core" "$build/cli/looptool" tune --threads 1 "${args[@]}" --store "$out/store.sqlite" \
    --library "$out/store.sqlite" \
    --budget-s "$budget" > "$out/tune.log"
"$build/cli/looptool" lib build --threads 1 --store "$out/store.sqlite" --out "$out/lib" > "$out/lib_build.log"
taskset -c "$core" "$build/benchmarks/lib_bench" --store "$out/store.sqlite" --lib "$out/lib" --cpu-time |
    tee "$out/lib_bench.txt"
