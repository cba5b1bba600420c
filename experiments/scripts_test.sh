#!/usr/bin/env bash
# CTest `ExperimentScripts`: experiments/policy_gain.py, family_coverage.py and program_forms.py end to end on tiny
# shapes, compare_ratios.py on a small results.csv, chosen_side_by_side.py on one tuned shape,
# neighbour_keep.py on two small runs, results.py on two small compare runs (and a README), lib_speed.sh on two
# tiny shapes, parallel_rollout.py on one matmul, and their errors. Usage: scripts_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }

"$build/cli/looptool" generate --dimA 24:40:16,48 --dimB 48,32 --out "$tmp/data" > /dev/null
"$py" "$here/policy_gain.py" --dataset "$tmp/data" --out "$tmp/gain" --rounds 2 --core 0 \
    --build "$build" > "$tmp/gain.log" 2>&1 || fail "policy_gain.py: $(tail -1 "$tmp/gain.log")"
grep -q "^2 shapes; on [0-2] the winner is the best seed itself" "$tmp/gain/gain.md" ||
    fail "policy_gain.py: gain.md: $(head -3 "$tmp/gain/gain.md")"
"$py" - "$tmp/gain/tune.json" <<'PY' || fail "policy_gain.py: tune.json lacks the seeds' actions"
import json, sys
rs = json.load(open(sys.argv[1]))
bad = [{k: r.get(k) for k in ("benchmark", "best_seed", "best_seed_actions", "found_by")}
       for r in rs if not (r["best_seed"] and r["best_seed_actions"])]
assert len(rs) == 2 and not bad, f"{len(rs)} results; without a seed: {bad}"
PY

"$py" "$here/family_coverage.py" --shapes mm24_32_48 --out "$tmp/cov" --processes 1 --rounds 1 \
    --core 0 --build "$build" --seeds "8x32 mn;4x32 mn" > "$tmp/cov.log" 2>&1 ||
    fail "family_coverage.py: $(tail -1 "$tmp/cov.log")"
grep -q "^| 8x32 mn | " "$tmp/cov/coverage.md" || fail "family_coverage.py: no 8x32 mn row"
grep -q "^Seeds \['4x32 mn', '8x32 mn'\]: best seed / best member, geomean" "$tmp/cov/coverage.md" ||
    fail "family_coverage.py: no seed summary"
# Each shape's own seeds from tune's --json (the figures are on file: not measured again).
echo '{"results": [{"benchmark": "mm24_32_48", "seeds": [{"name": "tile 8x32 mn", "gflops": 1}]}]}' \
    > "$tmp/tune.json"
"$py" "$here/family_coverage.py" --shapes mm24_32_48 --out "$tmp/cov" --processes 1 \
    --build "$build" --tune-json "$tmp/tune.json" > "$tmp/cov2.log" 2>&1 ||
    fail "family_coverage.py --tune-json: $(tail -1 "$tmp/cov2.log")"
grep -q "^| mm24_32_48 | .* | 8x32 mn | " "$tmp/cov/coverage.md" &&
    grep -q "^each shape's seeds in $tmp/tune.json: best seed / best member" "$tmp/cov/coverage.md" ||
    fail "family_coverage.py --tune-json: $(tail -3 "$tmp/cov/coverage.md")"

# program_forms.py: one random shape in four hand-written forms, each tuned and judged beside
# the generated form's schedule.
"$py" "$here/program_forms.py" --out "$tmp/forms" --shapes 1 --max-macs 134217728 --rounds 1 \
    --core 0 --build "$build" > "$tmp/forms.log" 2>&1 || fail "program_forms.py: $(tail -1 "$tmp/forms.log")"
grep -q "^| swapped | 1 | [0-9.]* | " "$tmp/forms/forms.md" || fail "program_forms.py: $(cat "$tmp/forms/forms.md")"

# compare_ratios.py on a results.csv of two shapes: medians of the judged rounds, worst first.
cat > "$tmp/results.csv" <<'CSV'
benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,judged_gflops,error
mmA,policy,50,0,0,0.4,1,,,40 50 60,
mmA,onednn,100,0,0,0,0,,,100 100 90,
mmB,policy,90,0,0,0.6,1,,,90 80 95,
mmB,onednn,45,0,0,0,0,,,45 45 45,
CSV
"$py" "$here/compare_ratios.py" "$tmp/results.csv" > "$tmp/ratios" 2>&1 ||
    fail "compare_ratios.py: $(tail -1 "$tmp/ratios")"
sed -n 2p "$tmp/ratios" | grep -q "^mmA .* 0.500 " || fail "compare_ratios.py: $(cat "$tmp/ratios")"
grep -q "^2 shapes: policy / onednn geomean 1.000, lowest 0.500 (mmA); policy seconds median 0.500, max 0.600$" \
    "$tmp/ratios" || fail "compare_ratios.py: $(tail -1 "$tmp/ratios")"

# chosen_side_by_side.py: one tune run against itself, the chosen kernel timed twice beside oneDNN.
"$build/cli/looptool" tune --threads 1 --bench "$tmp/data/mm24_32_48" --json > "$tmp/t.json" 2> /dev/null ||
    fail "tune --json failed"
"$py" "$here/chosen_side_by_side.py" --a "$tmp/t.json" --b "$tmp/t.json" --out "$tmp/sbs" \
    --rounds 1 --core 0 --build "$build" > "$tmp/sbs.log" 2>&1 ||
    fail "chosen_side_by_side.py: $(tail -1 "$tmp/sbs.log")"
grep -q "^1 shapes: geomean a [0-9.]*, b [0-9.]*; worst a" "$tmp/sbs/side_by_side.md" ||
    fail "chosen_side_by_side.py: $(cat "$tmp/sbs/side_by_side.md")"

# neighbour_keep.py on a quiet and a neighbour run of two schedules: the model's verdicts and
# what each kept.
mkdir "$tmp/nk"
echo '{"given": [{"schedule": "8x32 mn", "gflops": [90, 100, 95], "shared_cache_ratio": 11.7,
  "l2_traffic_ratio": 12.8}, {"schedule": "4x64 nm", "gflops": [88, 90, 89],
  "shared_cache_ratio": 0, "l2_traffic_ratio": 2.8}, {"schedule": "oneDNN", "gflops": [107]}]}' \
    > "$tmp/nk/mm128_1500_1280_quiet.json"
echo '{"given": [{"schedule": "8x32 mn", "gflops": [14, 15, 16]}, {"schedule": "4x64 nm",
  "gflops": [86, 85, 84]}, {"schedule": "oneDNN", "gflops": [104]}]}' \
    > "$tmp/nk/mm128_1500_1280_neighbour.json"
"$py" "$here/neighbour_keep.py" "$tmp/nk" > "$tmp/nk.log" 2>&1 ||
    fail "neighbour_keep.py: $(tail -1 "$tmp/nk.log")"
grep -q "^Depends on the shared L3 (shared_cache_ratio > 2.0): 1 kernels, kept 0.16 of their speed in geomean, 1 below half; the others: 1, kept 0.96, 0 below half" \
    "$tmp/nk/neighbour_keep.md" &&
    grep -q "^| mm128_1500_1280 | 8x32 mn | 95.0 / 15.0 | 4x64 nm | 89.0 / 85.0 | 0.937 |" \
    "$tmp/nk/neighbour_keep.md" || fail "neighbour_keep.py: $(head -8 "$tmp/nk/neighbour_keep.md")"
if "$py" "$here/neighbour_keep.py" "$tmp/nowhere" > "$tmp/e3" 2>&1; then
    fail "neighbour_keep.py accepted a directory without runs"
fi
grep -q "no SHAPE_quiet.json" "$tmp/e3" && ! grep -q Traceback "$tmp/e3" || fail "$(cat "$tmp/e3")"

# results.py on two compare runs of one CPU: geomeans, the parts of a split set, the lowest shape.
mkdir -p "$tmp/res/a" "$tmp/res/b"
cp "$tmp/results.csv" "$tmp/res/a/results.csv"
printf 'set: two shapes\ncpu: CPU X\nbuild: abc\ncommand: looptool compare ...\n' > "$tmp/res/a/run.txt"
cat > "$tmp/res/b/results.csv" <<'CSV'
benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,judged_gflops,error
mm2_3_5,policy,20,0,0,0.4,1,,,,
mm2_3_5,onednn,2,0,0,0,0,,,,
mm1024_1024_1024,policy,90,0,0,2.0,1,,,,
mm1024_1024_1024,onednn,100,0,0,0,0,,,,
CSV
printf 'set: unlike\ncpu: CPU X\nbuild: abc\ncommand: c\nparts: primes, large\n' > "$tmp/res/b/run.txt"
mkdir -p "$tmp/res/c"
cat > "$tmp/res/c/results.csv" <<'CSV'
benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,judged_gflops,error
mm8_8_8,policy,10,0,0,0.4,1,,,,
mm8_8_8,policy-noseeds,5,0,0,0.4,1,,,,
mm8_8_8,untrained-noseeds,2,0,0,0.4,1,,,,
mm9_9_9,policy,10,0,0,0.4,1,,,,
mm9_9_9,policy-noseeds,20,0,0,0.4,1,,,,
mm9_9_9,untrained-noseeds,5,0,0,0.4,1,,,,
CSV
printf 'set: abl\ntable: ablations\ncpu: CPU X\nbuild: abc\nload: busy\ncommand: c\n' > "$tmp/res/c/run.txt"
printf '# R\n\n<!-- results:begin -->\nold\n<!-- results:end -->\n\nafter\n' > "$tmp/readme.md"
"$py" "$here/results.py" --results "$tmp/res" --out "$tmp/res.md" --readme "$tmp/readme.md" \
    > "$tmp/res.log" 2>&1 || fail "results.py: $(tail -1 "$tmp/res.log")"
# README's table between its markers: one row per set (not the ablation run), the rest kept.
grep -q "^| CPU X | two shapes | 1.000x | 0.50 s | abc |$" "$tmp/readme.md" &&
    grep -q "^| CPU X | unlike | 3.000x | " "$tmp/readme.md" && ! grep -q "abl\|^old" "$tmp/readme.md" &&
    grep -q "^after$" "$tmp/readme.md" || fail "results.py --readme: $(cat "$tmp/readme.md")"
printf '# R\n' > "$tmp/readme2.md"
if "$py" "$here/results.py" --results "$tmp/res" --out "$tmp/res3.md" --readme "$tmp/readme2.md" \
    > "$tmp/e5" 2>&1; then fail "results.py accepted a README without the markers"; fi
grep -q "^error: .*readme2.md: expected one" "$tmp/e5" || fail "$(cat "$tmp/e5")"
grep -q "^## CPU X$" "$tmp/res.md" &&
    grep -q "^| two shapes | 2 | 1.000x | - | mmA 0.500, mmB 2.000 | 1 | 0.50 / 0.60 |$" "$tmp/res.md" &&
    grep -q "^| unlike, all | 2 | 3.000x (0.900x without the 1 under 10,000 MACs) | " "$tmp/res.md" &&
    grep -q "^| unlike: every side prime | 1 | 10.000x | - | mm2_3_5 10.000 | 0 | 0.40 / 0.40 |$" "$tmp/res.md" &&
    grep -q "^| unlike: 2^30 multiply-adds or more | 1 | 0.900x | - | mm1024_1024_1024 0.900 | 0 | 2.00 / 2.00 |$" \
    "$tmp/res.md" || fail "results.py: $(cat "$tmp/res.md")"
# The ablation run: only in the ablation table (noseeds/tune 0.5 and 2: geomean 1; trained over
# untrained 2.5 and 4), with its load named.
grep -q "^| abl | - | 1.000x (mm8_8_8 0.500) | 3.162x (mm8_8_8 2.500) | - |$" "$tmp/res.md" &&
    ! grep -q "^| abl | 2 |" "$tmp/res.md" && grep -q "build abc (busy)" "$tmp/res.md" ||
    fail "results.py ablations: $(cat "$tmp/res.md")"
rm "$tmp/res/a/run.txt"
if "$py" "$here/results.py" --results "$tmp/res" --out "$tmp/res2.md" --readme "" > "$tmp/e4" 2>&1; then
    fail "results.py accepted a run without run.txt"
fi
grep -q "run.txt: No such file" "$tmp/e4" && ! grep -q Traceback "$tmp/e4" && [ ! -e "$tmp/res2.md" ] ||
    fail "$(cat "$tmp/e4")"

# Errors: one line, a non-zero exit, no traceback.
if "$py" "$here/compare_ratios.py" "$here/scripts_test.sh" > "$tmp/e0" 2>&1; then
    fail "compare_ratios.py accepted a file that is not a results.csv"
fi
grep -q "not compare's results.csv" "$tmp/e0" && ! grep -q Traceback "$tmp/e0" || fail "$(cat "$tmp/e0")"
if "$py" "$here/policy_gain.py" --dataset "$tmp/nowhere" --out "$tmp/x" --build "$build" \
    > "$tmp/e1" 2>&1; then fail "a missing dataset was accepted"; fi
grep -q "not a directory" "$tmp/e1" && ! grep -q Traceback "$tmp/e1" || fail "$(cat "$tmp/e1")"
if "$py" "$here/family_coverage.py" --shapes bogus --out "$tmp/y" --build "$build" \
    > "$tmp/e2" 2>&1; then fail "a bad shape was accepted"; fi
grep -q "bogus: error: bad shape" "$tmp/e2" && ! grep -q Traceback "$tmp/e2" || fail "$(cat "$tmp/e2")"
if "$py" "$here/rank_gain.py" --model "$tmp/none.json" --dataset "$tmp" --out "$tmp/z" \
    --build "$build" > "$tmp/e3" 2>&1; then fail "rank_gain.py took a missing model"; fi
grep -q "none.json: no such cost model file" "$tmp/e3" && ! grep -q Traceback "$tmp/e3" ||
    fail "$(cat "$tmp/e3")"
# lib_speed.sh end to end on two tiny shapes: tune, lib build, both sides checked and timed.
"$here/lib_speed.sh" --build "$build" --out "$tmp/lib" --shapes "32,48,64 17,33,9" \
    --budget-s 0.1 --core 0 > "$tmp/lib.log" 2>&1 || fail "lib_speed.sh: $(tail -3 "$tmp/lib.log")"
grep -q "^2 kernels: .so/JIT geomean" "$tmp/lib/lib_bench.txt" &&
    [ -f "$tmp/lib/lib/liblooptune_kernels.so" ] || fail "lib_speed.sh: $(cat "$tmp/lib.log")"
PYTHONPATH="$build/python" "$py" "$here/lib_speed_python.py" "$tmp/lib/lib" --rounds 1 \
    --seconds 0.01 > "$tmp/libpy.log" 2>&1 || fail "lib_speed_python.py: $(tail -3 "$tmp/libpy.log")"
grep -q "^2 kernels: Python/JIT geomean" "$tmp/libpy.log" || fail "$(cat "$tmp/libpy.log")"
if "$here/lib_speed.sh" --bogus > "$tmp/e5" 2>&1; then fail "lib_speed.sh took --bogus"; fi
grep -q "error: unknown option --bogus" "$tmp/e5" || fail "$(cat "$tmp/e5")"
# parallel_rollout.py: the threads policy's rollout of a 128^3 matmul, with and without parallel.
"$build/cli/looptool" generate --dimA 128,128 --dimB 128,128 --out "$tmp/pr_data" > /dev/null
"$py" "$here/parallel_rollout.py" --policy "$here/../policies/threads.policy" --out "$tmp/pr" \
    --rounds 1 --build "$build" "$tmp/pr_data/mm128_128_128" > "$tmp/pr.log" 2>&1 ||
    fail "parallel_rollout.py: $(tail -1 "$tmp/pr.log")"
grep -q "^| mm128_128_128 | yes | " "$tmp/pr/parallel_rollout.md" || fail "$(cat "$tmp/pr.log")"
if "$py" "$here/parallel_rollout.py" --policy "$tmp/none.policy" --out "$tmp/pr" \
    --build "$build" "$tmp/pr_data/mm128_128_128" > "$tmp/e6" 2>&1; then
    fail "parallel_rollout.py took a missing policy"; fi
grep -q "none.policy: no such file" "$tmp/e6" && ! grep -q Traceback "$tmp/e6" || fail "$(cat "$tmp/e6")"
echo "experiment scripts: ok"
