#!/usr/bin/env bash
# One-command set-up for a fresh Debian 12 machine, then the main job or the test suite.
#
#   scripts/setup.sh run    install missing packages, build, run the main job
#   scripts/setup.sh test   install missing packages, build, run every test through CTest
#                           (Gymnasium from PyPI into <build>/venv first, when PyPI answers)
#   scripts/setup.sh deps   only install missing packages
#   scripts/setup.sh build  only install and build
#   scripts/setup.sh tvm    install and build, TVM from PyPI into <build>/venv-tvm, then
#                           experiments/tvm_peer.py on its default shapes into <build>/tvm_peer
#                           (hours: 1,000 TVM trials a shape; `run` and `test` download no TVM)
#
# Environment: LOOPTUNE_BUILD_DIR (default <repo>/build), LOOPTUNE_JOBS (build jobs, default:
# cores). The tests read LoopTune's corpus from ../shared/corpus/looptune beside the clone.
# Packages already installed are never reinstalled (checked with dpkg-query first).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LOOPTUNE_BUILD_DIR:-$ROOT/build}"
JOBS="${LOOPTUNE_JOBS:-$(nproc)}"
# Relative paths in ccache's hash, so clones in other directories share the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"

PACKAGES=(
  cmake g++ ninja-build lld ccache
  llvm-19-dev libzstd-dev libtorch-dev
  libopenblas0 libopenblas-dev libdnnl-dev libboost-graph-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libsqlite3-dev libgtest-dev libbenchmark-dev gnuplot-nox
  libopenmpi-dev openmpi-bin
  slurm-wlm munge libpmix-dev
  clang-19 libclang-rt-19-dev clang-format
  pybind11-dev python3-dev python3-numpy python3-torch python3-venv
)

log() { printf '==> %s\n' "$*" >&2; }

install_deps() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "all ${#PACKAGES[@]} Debian packages present"
    return
  fi
  log "installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "error: not root and no sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo -n)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
}

build() {
  log "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  log "building with $JOBS jobs"
  ninja -C "$BUILD" -j "$JOBS" "$@"
}

# The main job, the one place to change when the project's headline changes. For now: make a
# small matmul dataset, load one benchmark, apply a demo action sequence, print the loop tree
# before, during and after, and check the result against the reference interpreter.
main_job() {
  local cli="$BUILD/cli/looptool" data="$BUILD/data/mm_demo"
  "$cli" generate --dimA 64:128:32,100 --dimB 100,64:128:32 --out "$data"
  # m 96, k 100, n 128: tile m by 8 and n by 16 around k, unroll m', vectorize n', and split k
  # by 16 (100 = 6 * 16 + 4: a tail).
  "$cli" read --bench "$data/mm96_128_100" \
    --actions split_8,down,swap_down,down,split_16,swap_up,down,unroll,down,vectorize,up,up,up,split_16
  # Tune one of LoopTune's test benchmarks with the shipped policy (policies/default.policy) in a
  # fraction of a second (a search each run: --retune), ask again (answered from the schedule
  # library), then tune with a search baseline (10 s budget, 16 actions) for contrast.
  local bench="$ROOT/../shared/corpus/looptune/mm64_256_16_range/mm112_208_256"
  "$cli" tune --bench "$bench" --verify --retune
  "$cli" tune --bench "$bench"
  "$cli" search --bench "$bench" --algo beam4bfs --steps 16 --budget-s 10
}

# Gymnasium, for the tests that run its env checker (CTest PythonGymnasium): Debian 12 does not
# package it, so it comes from PyPI into a venv of Debian's python3 that also sees Debian's
# numpy and torch. Optional: without PyPI that test is reported as skipped, never a failure.
install_gymnasium() {
  local venv="$BUILD/venv"
  if "$venv/bin/python" -c 'import gymnasium' 2>/dev/null; then
    log "Gymnasium present in $venv"
    return
  fi
  if /usr/bin/python3 -m venv --system-site-packages "$venv" >/dev/null 2>&1 &&
    timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check --timeout 20 --retries 1 \
      gymnasium >/dev/null 2>&1; then
    log "Gymnasium installed into $venv"
  else
    log "Gymnasium skipped (no venv or no PyPI): its tests will be reported as skipped"
  fi
}

# TVM (apache-tvm, about 100 MB, with XGBoost for MetaSchedule's cost model), for
# experiments/tvm_peer.py and CTest TvmPeer: in a venv of its own that does not see Debian's
# packages. Its ml_dtypes needs numpy 2, which would shadow the numpy 1.24 that the looptune
# module and torch were built against; and where torch is importable, TVM and each of its
# builder and runner processes compile a PyTorch extension at import (minutes). tvm-ffi is
# pinned: 0.27.0.post1's tuner crashes with the newer 0.1.15. Optional: without PyPI, TvmPeer
# is reported as skipped.
install_tvm() {
  local venv="$BUILD/venv-tvm"
  if "$venv/bin/python" -c 'import tvm, xgboost, cloudpickle, psutil' 2>/dev/null; then
    log "TVM present in $venv"
    return
  fi
  if /usr/bin/python3 -m venv "$venv" >/dev/null 2>&1 &&
    timeout 900 "$venv/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 1 \
      apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost-cpu cloudpickle psutil \
      >/dev/null 2>&1; then
    log "TVM installed into $venv"
  else
    log "TVM skipped (no venv or no PyPI): experiments/tvm_peer.py and CTest TvmPeer cannot run"
  fi
}

# Two test processes at a time: the target machines have 2 cores, and the measurement tests
# want a core each.
run_tests() {
  if [ ! -d "$ROOT/../shared/corpus/looptune" ]; then
    echo "warning: $ROOT/../shared/corpus/looptune is missing; the corpus tests will fail" >&2
  fi
  log "running the test suite"
  ctest --test-dir "$BUILD" --output-on-failure -j 2
}

case "${1:-}" in
  run) install_deps; build; main_job ;;
  test) install_deps; build; install_gymnasium; run_tests ;;
  deps) install_deps ;;
  build) install_deps; build ;;
  tvm)
    install_deps; build; install_tvm
    /usr/bin/python3 "$ROOT/experiments/tvm_peer.py" --build "$BUILD" --out "$BUILD/tvm_peer" ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
