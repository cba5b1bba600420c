#!/usr/bin/env python3
"""A kernel library's kernels called from Python (looptune.load_library) beside the JIT's kernel
of the same schedule (looptune.measure of the schedule the manifest carries, the full
measurement protocol), alternating rounds, medians; results checked against numpy. Python's
per-call cost (the argument checks and the call) is part of the library's figure (calls timed
in batches, as timeit does); it is measured on its own first (a 0-size sgemm: everything but the
kernel), through the C entry and through ctypes, so the smallest kernels' shortfall can be told
from it. The inputs are numpy's default arrays (--inputs numpy: 16-byte aligned, as users have
them), numpy's arrays made inside looptune.aligned_arrays (--inputs numpy-aligned) or
looptune.aligned_empty's (--inputs aligned: 64-byte aligned, as the JIT's); the output array is
reused (out=), as the JIT's.

    PYTHONPATH=build/python taskset -c 1 /usr/bin/python3 experiments/lib_speed_python.py DIR
"""

import argparse
import os
import statistics
import tempfile
import time
import timeit

import numpy as np

import looptune


def time_calls(sgemm, A, B, C, seconds, batch_s=2e-4):
    """Seconds a call `sgemm(A, B, out=C)` takes, per batch of calls its time over its count
    (timeit's way: calls shorter than the clock's reading are timed in batches of about
    batch_s, and the loop calls sgemm itself, no lambda around it)."""
    timer = timeit.Timer("sgemm(A, B, out=C)", globals={"sgemm": sgemm, "A": A, "B": B, "C": C})
    n = max(1, int(batch_s / max(min(timer.repeat(3, 1)), 1e-9)))
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        times.append(timer.timeit(n) / n)
    return times


def per_call_overhead(lib):
    """Median seconds of a 0-size sgemm (out= given): through the C entry and through ctypes."""
    A, B, C = np.zeros((0, 8), np.float32), np.zeros((8, 8), np.float32), np.zeros((0, 8), np.float32)
    fast = statistics.median(time_calls(lib.sgemm, A, B, C, 0.2))
    plain = looptune.KernelLibrary.sgemm.__get__(lib)  # the checked path: ctypes
    slow = statistics.median(time_calls(plain, A, B, C, 0.2))
    return fast, slow


def inputs(shape, kind, rng):
    if kind == "numpy-aligned":
        with looptune.aligned_arrays():
            return rng.uniform(-1, 1, shape).astype(np.float32)
    x = looptune.aligned_empty(shape) if kind == "aligned" else np.empty(shape, np.float32)
    x[...] = rng.uniform(-1, 1, shape)
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", help="directory `looptool lib build --out` wrote")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.05, help="per round and side")
    ap.add_argument("--inputs", choices=["numpy", "numpy-aligned", "aligned"], default="numpy")
    args = ap.parse_args()
    lib = looptune.load_library(args.library)
    fast, slow = per_call_overhead(lib)
    print(f"per-call cost (0-size sgemm): {fast * 1e6:.2f} us through the C entry, "
          f"{slow * 1e6:.2f} us through ctypes; library alignment {lib.manifest.get('alignment', 64)}, "
          f"inputs: {args.inputs}")
    rng = np.random.default_rng(0)
    ratios = []
    print(f"{'kernel':<26} {'JIT us':>9} {'py us':>9} {'JIT GF/s':>9} {'py GF/s':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for k in lib.manifest["kernels"]:
            if k["kind"] != "matmul":
                continue
            m, n, kk = k["shape"]
            path = os.path.join(tmp, k["function"] + ".program")
            with open(path, "w") as f:
                f.write(k["program"])
            jit, py = [], []
            for r in range(args.rounds):
                # Fresh inputs each round on both sides (measure allocates its own): neither
                # side keeps one placement of its pages, lucky or not, for every round.
                A, B, C = inputs((m, kk), args.inputs, rng), inputs((kk, n), args.inputs, rng), \
                    inputs((m, n), args.inputs, rng)
                if r == 0:
                    np.testing.assert_allclose(lib.sgemm(A, B, out=C), A.astype(np.float64) @ B,
                                               rtol=1e-4, atol=1e-4 * kk)
                jit.append(looptune.measure(path, verify=(r == 0), threads=1)["gflops"])
                py.extend(time_calls(lib.sgemm, A, B, C, args.seconds))
                del A, B, C
            flops = 2 * m * n * kk
            g_jit = statistics.median(jit)
            g_py = flops / statistics.median(py) / 1e9
            ratios.append(g_py / g_jit)
            print(f"{k['name']:<26} {flops / g_jit / 1e3:>9.1f} {flops / g_py / 1e3:>9.1f} "
                  f"{g_jit:>9.1f} {g_py:>9.1f} {g_py / g_jit:>6.3f}x", flush=True)
    gm = float(np.exp(np.mean(np.log(ratios))))
    print(f"{len(ratios)} kernels: Python/JIT geomean {gm:.3f}x, min {min(ratios):.3f}x, "
          f"{sum(r >= 0.97 for r in ratios)} at or above 0.97x, {sum(r < 0.97 for r in ratios)} below")


if __name__ == "__main__":
    main()
