#!/usr/bin/env python3
"""A kernel library's kernels called from Python (looptune.load_library, through ctypes) beside
the JIT's kernel of the same schedule (looptune.measure of the schedule the manifest carries,
the full measurement protocol), alternating rounds, medians; results checked against numpy.
Python's per-call cost (argument checks, the output array, ctypes: a few microseconds) is part
of the library's figure, so the smallest kernels fall below the JIT's. The inputs are 64-byte
aligned (looptune.aligned_empty), as the JIT's are (others are copied on each call), and the
output array is reused (out=), as the JIT's is.

    PYTHONPATH=build/python taskset -c 1 /usr/bin/python3 experiments/lib_speed_python.py DIR
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import looptune


def time_calls(f, seconds):
    f()
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", help="directory `looptool lib build --out` wrote")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.05, help="per round and side")
    args = ap.parse_args()
    lib = looptune.load_library(args.library)
    rng = np.random.default_rng(0)
    ratios = []
    print(f"{'kernel':<26} {'JIT GF/s':>9} {'py GF/s':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for k in lib.manifest["kernels"]:
            if k["kind"] != "matmul":
                continue
            m, n, kk = k["shape"]
            A, B = looptune.aligned_empty((m, kk)), looptune.aligned_empty((kk, n))
            A[...] = rng.uniform(-1, 1, A.shape)
            B[...] = rng.uniform(-1, 1, B.shape)
            C = lib.sgemm(A, B, out=looptune.aligned_empty((m, n)))
            np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4 * kk)
            path = os.path.join(tmp, k["function"] + ".program")
            with open(path, "w") as f:
                f.write(k["program"])
            jit, py = [], []
            for r in range(args.rounds):
                jit.append(looptune.measure(path, verify=(r == 0))["gflops"])
                py.extend(time_calls(lambda: lib.sgemm(A, B, out=C), args.seconds))
            g_jit = statistics.median(jit)
            g_py = 2 * m * n * kk / statistics.median(py) / 1e9
            ratios.append(g_py / g_jit)
            print(f"{k['name']:<26} {g_jit:>9.1f} {g_py:>9.1f} {g_py / g_jit:>6.3f}x", flush=True)
    gm = float(np.exp(np.mean(np.log(ratios))))
    print(f"{len(ratios)} kernels: Python/JIT geomean {gm:.3f}x, min {min(ratios):.3f}x, "
          f"{sum(r < 0.97 for r in ratios)} below 0.97x")


if __name__ == "__main__":
    main()
