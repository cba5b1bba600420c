#!/usr/bin/python3
"""The kernels two `tune` runs chose, measured side by side with oneDNN, shape by shape.

`tune --json` of two builds (or two configurations) on the same shapes gives each shape two
chosen schedules; for every shape both and oneDNN are timed in alternating rounds in one
`matmul_bench --schedules` process, so the comparison does not depend on which phase of the
machine each `tune` ran in. Prints per shape both ratios over oneDNN and which seed each run
took, then the geomeans.

    experiments/chosen_side_by_side.py --a OLD.json --b NEW.json --out DIR \\
        [--rounds 3] [--core 1] [--build build] [--neighbour-core 0]

With --neighbour-core, another core copies 64 MB buffers meanwhile (matmul_bench's
--neighbour-core): the kernels as they run while other cores use the shared L3.

Writes DIR/<shape>.schedules, DIR/<shape>.json (matmul_bench's figures) and DIR/side_by_side.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tune_results import load


def actions(r):
    a = r["best_actions"]
    return ",".join(a) if isinstance(a, list) else a.replace(" ", ",")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="the first `tune --json` output")
    ap.add_argument("--b", required=True, help="the second")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--core", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--neighbour-core", type=int, default=-1,
                    help="a core streaming through the shared L3 meanwhile (-1: none)")
    a = ap.parse_args()
    bench = os.path.join(a.build, "benchmarks", "matmul_bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"error: {bench}: not built")
    first, second = load(a.a), load(a.b)
    shapes = sorted(set(first) & set(second))
    if not shapes:
        sys.exit(f"error: {a.a} and {a.b} have no shape in common")
    os.makedirs(a.out, exist_ok=True)
    rows, t0 = [], time.time()
    for i, s in enumerate(shapes):
        lst, js = os.path.join(a.out, f"{s}.schedules"), os.path.join(a.out, f"{s}.json")
        with open(lst, "w") as f:
            f.write(f"a: {actions(first[s])}\nb: {actions(second[s])}\n")
        r = subprocess.run(["taskset", "-c", str(a.core), bench, "--schedules", lst, "--shapes",
                            s, "--rounds", str(a.rounds), "--pin", str(a.core), "--json",
                            js + ".tmp"] +
                           (["--neighbour-core", str(a.neighbour_core)]
                            if a.neighbour_core >= 0 else []), text=True, capture_output=True)
        if r.returncode != 0:  # one shape's failure is reported, not the end
            msg = (r.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"warning: {s}: {msg}; skipped", file=sys.stderr)
            continue
        os.replace(js + ".tmp", js)
        med = {}
        for g in json.load(open(js)).get("given", []):
            v = sorted(g["gflops"])
            med[g["schedule"]] = v[len(v) // 2]
        if not {"a", "b", "oneDNN"} <= set(med):
            print(f"warning: {s}: a schedule did not apply; skipped", file=sys.stderr)
            continue
        rows.append((s, med["a"] / med["oneDNN"], med["b"] / med["oneDNN"],
                     first[s].get("found_by", ""), second[s].get("found_by", "")))
        el = time.time() - t0
        print(f"[{i + 1}/{len(shapes)}] {s} | elapsed {el:.0f}s | ETA "
              f"{el / (i + 1) * (len(shapes) - i - 1):.0f}s", file=sys.stderr, flush=True)
    if not rows:
        sys.exit("error: no shape was measured")
    gm = statistics.geometric_mean
    with open(os.path.join(a.out, "side_by_side.md"), "w") as f:
        f.write(f"# The kernels chosen by {a.a} (a) and {a.b} (b), side by side with oneDNN "
                f"({a.rounds} alternating rounds, one process per shape"
                + (f"; core {a.neighbour_core} streaming through the L3 meanwhile"
                   if a.neighbour_core >= 0 else "") + ")\n\n"
                "| shape | a / oneDNN | b / oneDNN | a found by | b found by |\n"
                "|---|---:|---:|---|---|\n")
        for s, x, y, fa, fb in rows:
            f.write(f"| {s} | {x:.3f} | {y:.3f} | {fa} | {fb} |\n")
        f.write(f"\n{len(rows)} shapes: geomean a {gm([r[1] for r in rows]):.3f}, "
                f"b {gm([r[2] for r in rows]):.3f}; worst a {min(r[1] for r in rows):.3f}, "
                f"b {min(r[2] for r in rows):.3f}\n")
    print(open(os.path.join(a.out, "side_by_side.md")).read())


if __name__ == "__main__":
    main()
