#!/usr/bin/env bash
# Writes the training dataset of the shipped policy (docs/training.md): matmuls of every kind a
# user brings and small conv2d layers, none of them in the held-out sets.
#
#   scripts/training_mix.sh OUT_DIR [LOOPTOOL]
#
# - 300 seeded random matmul shapes (`generate --random`: log-uniform, skinny, ragged, larger
#   than L2), at most 2^27 multiply-adds so an environment step stays cheap;
# - 90 batch-1 conv2d layers drawn (seed 3) from a grid of 16..256 channels, 9..58-pixel
#   images, 32..256 output channels, 1x1, 3x3 and 5x5 kernels, between 1e6 and 1.2e8
#   multiply-adds; datasets/conv_layers (the held-out real layers) are left out;
# - 100 of LoopTune's 64..256 grid (its 25 test benchmarks land in the test split, as always).
# datasets/models (the held-out real-model matmuls) and datasets/unlike_training are left out.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: training_mix.sh OUT_DIR [LOOPTOOL]}"
LOOPTOOL="${2:-$ROOT/build/cli/looptool}"
GRID="$ROOT/../shared/corpus/looptune/mm64_256_16_range"
[ -e "$OUT" ] && { echo "error: $OUT exists; give a new directory" >&2; exit 1; }
[ -d "$GRID" ] || { echo "error: LoopTune's corpus is not at $GRID" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$LOOPTOOL" generate --random 300 --seed 5 --max-macs 134217728 --out "$TMP/mm" >/dev/null
mkdir -p "$TMP/conv"
for k in 1 3 5; do  # square kernels
  "$LOOPTOOL" generate --kind conv --dimA "1,16|32|64|128|256,9|16|30|58" \
    --dimB "32|64|128|256,16|32|64|128|256,$k,$k" --out "$TMP/k$k" >/dev/null
  mv "$TMP/k$k"/* "$TMP/conv/"
done
/usr/bin/python3 - "$TMP" "$OUT" "$ROOT" "$GRID" <<'PY'
import os, random, re, shutil, sys
tmp, out, root, grid = sys.argv[1:]
held_out = set().union(*(os.listdir(f"{root}/datasets/{d}") for d in ("models", "conv_layers", "unlike_training")))
os.makedirs(out)
for f in sorted(os.listdir(f"{tmp}/mm")):
    if f not in held_out:
        shutil.copy(f"{tmp}/mm/{f}", f"{out}/{f}")
convs = []
for f in sorted(os.listdir(f"{tmp}/conv")):
    n, c, h, w, m, c2, kh, kw = map(int, re.match(r"conv(\d+)_(\d+)_(\d+)_(\d+)__(\d+)_(\d+)_(\d+)_(\d+)$", f).groups())
    ho = h - kh + 1
    if kh == kw and f not in held_out and 1e6 <= c * m * ho * ho * kh * kw <= 1.2e8:
        convs.append(f)
random.seed(3)
random.shuffle(convs)
for f in convs[:90]:
    shutil.copy(f"{tmp}/conv/{f}", f"{out}/{f}")
names = sorted(os.listdir(grid))
random.shuffle(names)
taken = 0
for f in names:
    if taken == 100:
        break
    if not os.path.exists(f"{out}/{f}"):
        shutil.copy(f"{grid}/{f}", f"{out}/{f}")
        taken += 1
print(f"{out}: {len(os.listdir(out))} benchmarks")
PY
