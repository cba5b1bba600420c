#!/usr/bin/env python3
"""A Python `step` on a cached schedule against the C++ step, side by side (the binding should
add no more than 20 us a step).

Both sides alternate swap_down / swap_up on the first loop of the naive matmul (both schedules
measured before timing, so every timed step is a cache hit), as env_step_bench's
BM_StepCacheHit does. Rounds alternate: Python timing in this process, then env_step_bench
(BM_StepCacheHit: the step alone; BM_StepCacheHitObserved: the step plus the three tensor
observations and the mask, which is what the Python step returns) as a subprocess.

    taskset -c 1 env PYTHONPATH=build/python /usr/bin/python3 benchmarks/python_step_bench.py
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import looptune

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_file(n, d):
    path = os.path.join(d, f"mm{n}_{n}_{n}")
    with open(path, "w") as f:
        f.write(f"looptool-program 1\nname mm{n}_{n}_{n}\nvar m {n}\nvar k {n}\nvar n {n}\n"
                f"tensor A input {n} {n}\ntensor B input {n} {n}\ntensor T temp {n} {n}\ntensor C output {n} {n}\n"
                "stmt T[m, n] += A[m, k] * B[k, n]\nstmt C[m, n] = T[m, n]\n"
                f"nest 0\nloop m {n} 0\nloop k {n} 0\nloop n {n} 0\nnest 1\nloop m {n} 0\nloop n {n} 0\ncursor 0\n")
    return path


def python_us(path, steps):
    env = looptune.LoopToolEnv(benchmark=path, max_steps=1 << 30)
    env.reset()
    down, up = env.action_names.index("swap_down"), env.action_names.index("swap_up")
    env.step(down), env.step(up)
    step = env.step
    t0 = time.perf_counter()
    for _ in range(steps // 2):
        step(down)
        step(up)
    return (time.perf_counter() - t0) / (2 * (steps // 2)) * 1e6


def cpp_us(binary, n):
    out = subprocess.run([binary, f"--benchmark_filter=BM_StepCacheHit(Observed)?/{n}$", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    r = {b["name"].split("/")[0]: b["real_time"] for b in json.loads(out)["benchmarks"]}
    return r["BM_StepCacheHit"], r["BM_StepCacheHitObserved"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-binary", default=os.path.join(ROOT, "build/benchmarks/env_step_bench"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for n in (128, 256):
            path = matmul_file(n, d)
            py, cpp, cpp_obs = [], [], []
            for _ in range(args.rounds):
                py.append(python_us(path, args.steps))
                a, b = cpp_us(args.bench_binary, n)
                cpp.append(a)
                cpp_obs.append(b)
            p, c, co = statistics.median(py), statistics.median(cpp), statistics.median(cpp_obs)
            print(f"mm{n}: Python step {p:.2f} us; C++ step {c:.2f} us, with observations and mask {co:.2f} us; "
                  f"Python adds {p - c:.2f} us over the step, {p - co:.2f} us over step+observe "
                  f"(medians of {args.rounds} alternating rounds)", flush=True)


if __name__ == "__main__":
    main()
