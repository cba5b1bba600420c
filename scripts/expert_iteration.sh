#!/usr/bin/env bash
# One round of expert iteration on a policy (docs/training.md): the best schedule `tune` (the
# policy guiding a measured search, with its seeds) finds on each training benchmark of a mix
# becomes the policy's demonstration, and `train --adapt` fine-tunes the policy on them.
#
#   scripts/expert_iteration.sh OUT_DIR [INIT_POLICY] [LOOPTOOL] [SPACE]
#
# INIT_POLICY is first widened to the action space SPACE (`policy extend`; default `layout`, the
# one-thread seeds' actions: `flatten`, `pack` and `fuse` besides `full`'s), so no demonstration
# is cut at an action the policy cannot take. Writes OUT_DIR/init.policy (the widened start),
# OUT_DIR/mix (the benchmarks), OUT_DIR/tune.json and OUT_DIR/traces.csv (the
# demonstrations), OUT_DIR/store.sqlite and OUT_DIR/run (the new policy is
# OUT_DIR/run/trained.policy). The mix holds no held-out shape (datasets/models, conv_layers,
# strided_convs, unlike_training, LoopTune's test benchmarks) but shapes of their kinds:
# - 30 matmuls of 1-16 rows with 640-8192 columns and depth (GEMV-like projections);
# - 12 matmuls of 2^27-2^30 multiply-adds (their schedules need cache blocks: 20-40 actions);
# - 15 tall-skinny matmuls (1568-8192 rows, one side of 2-64);
# - 25 of `generate --random` and 20 of LoopTune's grid, so what the policy knew stays taught;
# - 36 batch-1 conv2d layers: 1x1 at stride 1 and 2, 3x3 padded, strided and unpadded, 5x5,
#   and 7x7 stems on 3-8 channels; 10-112-pixel images, 32-512 channels.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: expert_iteration.sh OUT_DIR [INIT_POLICY] [LOOPTOOL]}"
INIT="${2:-$ROOT/policies/default.policy}"
LOOPTOOL="${3:-$ROOT/build/cli/looptool}"
SPACE="${4:-layout}"
GRID="$ROOT/../shared/corpus/looptune/mm64_256_16_range"
[ -e "$OUT" ] && { echo "error: $OUT exists; give a new directory" >&2; exit 1; }
[ -d "$GRID" ] || { echo "error: LoopTune's corpus is not at $GRID" >&2; exit 1; }
[ -f "$INIT" ] || { echo "error: no policy file at $INIT" >&2; exit 1; }
mkdir -p "$OUT"
"$LOOPTOOL" policy extend "$INIT" --space "$SPACE" --out "$OUT/init.policy" >/dev/null
INIT="$OUT/init.policy"

# 1. The mix (seeded: the same benchmarks every time).
/usr/bin/python3 - "$OUT/mix" "$ROOT" "$GRID" "$LOOPTOOL" <<'PY'
import csv, os, random, shutil, subprocess, sys, tempfile
out, root, grid, looptool = sys.argv[1:]
held = set().union(*(os.listdir(f"{root}/datasets/{d}")
                     for d in ("models", "conv_layers", "strided_convs", "unlike_training")))
with open(f"{grid}/../results/test.csv") as f:  # LoopTune's 25 test benchmarks
    held |= {row[1] for row in csv.reader(f) if len(row) > 1}
rng = random.Random(17)
os.makedirs(out)
tmp = tempfile.mkdtemp()

def take(name, src=None, args=None):
    if name in held or os.path.exists(f"{out}/{name}"):
        return 0
    if args:
        subprocess.run([looptool, "generate", *args, "--out", tmp], check=True, capture_output=True)
        src = f"{tmp}/{name}"
    shutil.copy(src, f"{out}/{name}")
    return 1

def matmuls(count, draw):
    made = 0
    while made < count:
        m, n, k = draw()
        made += take(f"mm{m}_{n}_{k}", args=["--dimA", f"{m},{k}", "--dimB", f"{k},{n}"])

wide = [640, 896, 1280, 1536, 1792, 2560, 3584, 5120, 6144, 8192]
def small_m():
    while True:
        m, n, k = rng.choice([1, 2, 3, 4, 6, 8, 12, 16]), rng.choice(wide), rng.choice(wide)
        if m * n * k <= 2**28: return m, n, k
def large():
    while True:
        m, n, k = (rng.choice([384, 512, 640, 896, 1024, 1280, 1536, 2048]) for _ in range(3))
        if 2**27 < m * n * k <= 2**30: return m, n, k
def skinny():
    while True:
        m, thin = rng.choice([1568, 2048, 3136, 4096, 6272, 8192]), rng.choice([2, 4, 8, 16, 32, 48, 64])
        other = rng.choice([64, 128, 256, 384, 512, 1024, 2048])
        n, k = (thin, other) if rng.random() < 0.5 else (other, thin)
        if m * n * k <= 2**28: return m, n, k
matmuls(30, small_m)
matmuls(12, large)
matmuls(15, skinny)

subprocess.run([looptool, "generate", "--random", "60", "--seed", "11", "--max-macs", str(2**27),
                "--out", f"{tmp}/random"], check=True, capture_output=True)
for source, count in ((f"{tmp}/random", 25), (grid, 20)):
    names = sorted(os.listdir(source))
    rng.shuffle(names)
    taken = 0
    for f in names:
        if taken == count: break
        taken += take(f, src=f"{source}/{f}")

chans, images = [32, 48, 64, 96, 128, 192, 256, 384, 512], [10, 12, 16, 20, 24, 32, 40, 48]
def conv(count, kernel, stride, pad, cin=chans, img=images):
    made = 0
    while made < count:
        c, m, h = rng.choice(cin), rng.choice(chans), rng.choice(img)
        ho = (h + 2 * pad - kernel) // stride + 1
        if ho < 1 or not 1e6 <= c * m * ho * ho * kernel * kernel <= 1.5e8: continue
        name = f"conv1_{c}_{h}_{h}__{m}_{c}_{kernel}_{kernel}"
        name += (f"_s{stride}" if stride != 1 else "") + (f"_p{pad}" if pad else "")
        made += take(name, args=["--kind", "conv", "--dimA", f"1,{c},{h}", "--dimB",
                                 f"{m},{c},{kernel},{kernel}", "--stride", str(stride), "--pad", str(pad)])
conv(8, 1, 1, 0)
conv(5, 1, 2, 0)
conv(8, 3, 1, 1)
conv(6, 3, 2, 1)
conv(4, 3, 1, 0)
conv(2, 5, 1, 2)
conv(3, 7, 2, 3, cin=[3, 4, 8], img=[48, 64, 96, 112])
shutil.rmtree(tmp)
print(f"{out}: {len(os.listdir(out))} benchmarks")
PY

# 2. Demonstrations: `tune` with INIT_POLICY (its seeds, the policy's rollouts and branches),
#    1 s each, on every benchmark of the mix (the run's evaluation curve is then not held out:
#    judge the policy with `compare` on the held-out sets); each best schedule's actions become
#    a trace. One process per benchmark: a crash loses that one only.
ls -d "$OUT"/mix/* >"$OUT/benchmarks.txt"
while read -r f; do
  LOOPTUNE_LIBRARY=off "$LOOPTOOL" tune --bench "$f" --policy "$INIT" --budget-s 1 --threads 1 \
    --store "$OUT/store.sqlite" --json | tr -d '\n' >>"$OUT/tune.json" ||
    echo "warning: tune failed on $f; no demonstration of it" >&2
  echo >>"$OUT/tune.json"
done <"$OUT/benchmarks.txt"
/usr/bin/python3 - "$OUT" <<'PY'
import csv, json, os, sys
out = sys.argv[1]
path = {os.path.basename(f): f for f in open(f"{out}/benchmarks.txt").read().split()}
with open(f"{out}/traces.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["benchmark", "algo", "gflops", "base_gflops", "actions"])
    for line in open(f"{out}/tune.json"):
        if line.strip():
            r = json.loads(line)
            w.writerow([path[r["benchmark"]], "tune", r["gflops"], r["base_gflops"],
                        " ".join(r["best_actions"])])
PY

# 3. The policy fine-tuned on them for 10 minutes (docs/training.md, "Adapting"): demonstrations
#    longer than an episode are taught as chained episodes (the warm start, measured, counts in
#    the 600 s: on 2 loaded cores it took all of it); a third of the episodes start at a
#    seed's state, the rest at the naive nest (where `policy-noseeds` starts).
"$LOOPTOOL" train --adapt --init-policy "$INIT" --dataset "$OUT/mix" --out "$OUT/run" \
  --warmstart "$OUT/traces.csv" --warmstart-updates 5000 --lr 1e-4 --seed-starts 0.3 \
  --store "$OUT/store.sqlite" --max-seconds 600 --eval-benchmarks 12 --seed 1 --no-install
