#!/usr/bin/env bash
# CTest `TvmPeer`: experiments/tvm_peer.py's errors (a bad shape; no TVM: a clear message and
# the exit code asked for), then, when BUILD/venv-tvm has TVM (`scripts/setup.sh tvm`), the
# script end to end on one tiny matmul with 4 TVM trials: both kernels tuned, TVM's checked
# against numpy, both timed side by side. Exit 77 (skipped) without TVM.
# Usage: tvm_peer_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A build directory with our tools but no venv-tvm, run by Debian's python3 (no TVM there).
mkdir -p "$tmp/b/cli" "$tmp/b/benchmarks"
ln -s "$build/cli/looptool" "$tmp/b/cli/looptool"
ln -s "$build/benchmarks/matmul_bench" "$tmp/b/benchmarks/matmul_bench"
if /usr/bin/python3 -c 'import tvm' 2>/dev/null; then
  echo "note: Debian's python3 has TVM; the no-TVM check is left out"
else
  code=0
  /usr/bin/python3 "$here/tvm_peer.py" --build "$tmp/b" --out "$tmp/x" --skip-code 5 \
    > "$tmp/e0" 2>&1 || code=$?
  [ "$code" = 5 ] && grep -q "^error: TVM is not importable" "$tmp/e0" &&
    ! grep -q Traceback "$tmp/e0" && [ ! -e "$tmp/x/tvm_peer.csv" ] || fail "no TVM: $code $(cat "$tmp/e0")"
fi
if /usr/bin/python3 "$here/tvm_peer.py" --build "$tmp/b" --out "$tmp/x" --shapes "4,4" > "$tmp/e1" 2>&1; then
  fail "a bad shape was accepted"
fi
grep -q "^error: bad shape '4,4'" "$tmp/e1" && ! grep -q Traceback "$tmp/e1" || fail "$(cat "$tmp/e1")"

"$build/venv-tvm/bin/python" -c 'import tvm' 2>/dev/null || { echo "skipped: no TVM in $build/venv-tvm"; exit 77; }
/usr/bin/python3 "$here/tvm_peer.py" --build "$build" --out "$tmp/out" --shapes "16,24,8" \
  --trials 4 --rounds 1 --core 0 > "$tmp/run.log" 2>&1 || fail "tvm_peer.py: $(tail -5 "$tmp/run.log")"
grep -q "ETA" "$tmp/run.log" || fail "no progress line: $(cat "$tmp/run.log")"
/usr/bin/python3 - "$tmp/out/tvm_peer.csv" <<'PY' || fail "tvm_peer.csv: $(cat "$tmp/out/tvm_peer.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1, rows
r = rows[0]
assert (r["shape"], r["trials"]) == ("mm16_24_8", "4"), r
assert float(r["tvm_max_rel_err"]) < 1e-4, r
for k in ("tvm_gflops", "ours_gflops", "tvm_tune_s", "ours_tune_s", "sbs_tvm_gflops", "sbs_ours_gflops"):
    assert float(r[k]) > 0, k
PY
grep -q "^4 trials, 1 shapes: ours / TVM GFLOPS geomean [0-9.]* (own figures), [0-9.]* side by side" \
  "$tmp/out/tvm_peer.md" || fail "tvm_peer.md: $(cat "$tmp/out/tvm_peer.md")"
echo "tvm_peer: ok"
