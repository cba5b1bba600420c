#!/usr/bin/python3
"""Where does the policy beat the best demonstration?

`tune` reports its winner and its best seed (a `tile` member or dot product: the
demonstrations' schedules), both measured again at its end. That comparison picks the best of
a few noisy figures, so a winner a few percent "above" its seed may be noise. This script
judges the two schedules side by side instead: for every matmul of a dataset where the
policy's rollouts changed the winner, `matmul_bench --schedules` times the winner, the best
seed and oneDNN in alternating rounds in one process, and the gain is the median over rounds
of winner / seed, with its range.

    experiments/policy_gain.py --dataset datasets/models --out OUT [--rounds 7] [--core 1]

Writes OUT/tune.json, OUT/gain.csv, OUT/gain.md and OUT/gain.png (with gnuplot). Process start
is not in `tune`'s time; this measures schedules, not tuning time.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time


def run(cmd):
    """Runs a tool; raises RuntimeError with its last stderr line when it fails."""
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"{os.path.basename(cmd[0]) if cmd[0] != 'taskset' else cmd[3]} "
                           f"exited with {r.returncode}: {last}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, help="directory of matmul benchmark files")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds per shape")
    ap.add_argument("--core", type=int, default=1, help="core to pin every process to")
    ap.add_argument("--build", default="build", help="build directory")
    ap.add_argument("--policy", help="policy file (default: tune's)")
    a = ap.parse_args()

    looptool = os.path.join(a.build, "cli", "looptool")
    bench = os.path.join(a.build, "benchmarks", "matmul_bench")
    for tool in (looptool, bench):
        if not os.access(tool, os.X_OK):
            sys.exit(f"error: {tool}: not built (cmake --build {a.build})")
    if not os.path.isdir(a.dataset):
        sys.exit(f"error: {a.dataset}: not a directory")
    files = sorted(
        os.path.join(a.dataset, f) for f in os.listdir(a.dataset)
        if re.fullmatch(r"mm\d+_\d+_\d+", f))
    if not files:
        sys.exit(f"error: {a.dataset}: no matmul benchmark (files named mm{{m}}_{{n}}_{{k}})")
    os.makedirs(a.out, exist_ok=True)
    pin = ["taskset", "-c", str(a.core)]

    tune_json = os.path.join(a.out, "tune.json")
    if not os.path.exists(tune_json):
        cmd = pin + [looptool, "tune", "--threads", "1", "--json"] + (["--policy", a.policy] if a.policy else [])
        for f in files:
            cmd += ["--bench", f]
        print(f"tune on {len(files)} shapes ...", flush=True)
        try:
            res = run(cmd)
        except RuntimeError as e:
            sys.exit(f"error: tune: {e}")
        with open(tune_json + ".tmp", "w") as f:
            f.write(res.stdout)
        os.replace(tune_json + ".tmp", tune_json)
    results = json.load(open(tune_json))
    results = results if isinstance(results, list) else [results]

    rows, t0 = [], time.time()
    # (A shape without seeds has no demonstration to compare with.)
    changed = [r for r in results
               if r["best_seed"] and r["best_actions"] != r["best_seed_actions"]]
    print(f"{len(changed)} of {len(results)} winners are not their best seed", flush=True)
    for i, r in enumerate(changed):
        name = r["benchmark"]
        sched = os.path.join(a.out, f"{name}.schedules")
        with open(sched, "w") as f:
            f.write(f"policy: {','.join(r['best_actions'])}\n")
            f.write(f"seed: {','.join(r['best_seed_actions'])}\n")
        js = os.path.join(a.out, f"{name}.json")
        try:
            run([bench, "--schedules", sched, "--shapes", name, "--rounds", str(a.rounds),
                 "--pin", str(a.core), "--json", js])
        except RuntimeError as e:  # one shape's failure is reported, not the end of the run
            print(f"warning: {name}: {e}; skipped", file=sys.stderr)
            continue
        got = {g["schedule"]: g["gflops"] for g in json.load(open(js))["given"]}
        if "policy" not in got or "seed" not in got:
            print(f"warning: {name}: a schedule did not apply to matmul_bench's nest; skipped",
                  file=sys.stderr)
            continue
        ratios = [p / s for p, s in zip(got["policy"], got["seed"])]
        row = {
            "benchmark": name,
            "seed": r["best_seed"],
            "found_by": r["found_by"],
            "tune_gain": r["gflops"] / r["best_seed_gflops"],
            "policy_gflops": statistics.median(got["policy"]),
            "seed_gflops": statistics.median(got["seed"]),
            "onednn_gflops": statistics.median(got["oneDNN"]),
            "gain": statistics.median(ratios),
            "gain_min": min(ratios),
            "gain_max": max(ratios),
        }
        rows.append(row)
        el = time.time() - t0
        print(f"[{i + 1}/{len(changed)}] {name}: policy / seed {row['gain']:.3f} "
              f"({row['gain_min']:.3f}-{row['gain_max']:.3f}; tune said {row['tune_gain']:.3f}) "
              f"| {60 * (i + 1) / el:.1f} shapes/min | ETA {el / (i + 1) * (len(changed) - i - 1):.0f}s",
              flush=True)

    keys = list(rows[0].keys()) if rows else []
    with open(os.path.join(a.out, "gain.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for row in rows:
            f.write(",".join(f"{row[k]:.4f}" if isinstance(row[k], float) else row[k]
                             for k in keys) + "\n")
    better = [r for r in rows if r["gain_min"] > 1.0]
    worse = [r for r in rows if r["gain_max"] < 1.0]
    gm = lambda v: statistics.geometric_mean(v) if v else 1.0
    all_gain = gm([r["gain"] for r in rows] + [1.0] * (len(results) - len(rows)))
    with open(os.path.join(a.out, "gain.md"), "w") as f:
        f.write(f"# Policy winner against the best seed, side by side ({a.rounds} rounds)\n\n")
        f.write(f"{len(results)} shapes; on {len(results) - len(rows)} the winner is the best "
                f"seed itself. Geomean over all of them (1 where they are the same): "
                f"{all_gain:.3f}.\n")
        f.write(f"Faster in every round: {len(better)}; slower in every round: {len(worse)}.\n\n")
        f.write("| shape | best seed | winner found by | policy / seed, median (range) | "
                "tune said | policy / oneDNN |\n|---|---|---|---:|---:|---:|\n")
        for r in sorted(rows, key=lambda r: -r["gain"]):
            f.write(f"| {r['benchmark']} | {r['seed']} | {r['found_by']} | {r['gain']:.3f} "
                    f"({r['gain_min']:.3f}-{r['gain_max']:.3f}) | {r['tune_gain']:.3f} | "
                    f"{r['policy_gflops'] / r['onednn_gflops']:.2f} |\n")
    print(open(os.path.join(a.out, "gain.md")).read())

    plot(rows, a.out)


def plot(rows, out):
    """OUT/gain.png: per shape, the median and range of winner / seed over the rounds."""
    if not rows or not shutil.which("gnuplot"):
        return
    rows = sorted(rows, key=lambda r: -r["gain"])
    dat = os.path.join(out, "gain.dat")
    with open(dat, "w") as f:
        for j, r in enumerate(rows):
            f.write(f"{j} {r['gain']} {r['gain_min']} {r['gain_max']} {r['benchmark']}\n")
    script = (
        "set terminal pngcairo size 1100,520 noenhanced\n"
        f"set output '{os.path.join(out, 'gain.png')}'\n"
        "set title 'policy winner / best seed, side by side (median and range over rounds)'\n"
        f"set ylabel 'policy / seed'\nset xrange [-0.5:{len(rows) - 0.5}]\n"
        "set xtics rotate by -45 font ',8'\nset bmargin 6\n"
        "set grid ytics\nset key off\nset arrow from graph 0, first 1 to graph 1, first 1 nohead\n"
        f"plot '{dat}' using 1:2:3:4:xtic(5) with yerrorbars pt 7\n")
    subprocess.run(["gnuplot"], input=script, text=True, check=False)

if __name__ == "__main__":
    main()
