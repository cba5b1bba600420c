#!/usr/bin/python3
"""What a neighbour on the shared L3 does to each kernel, against the traffic model's verdict.

Reads pairs of `matmul_bench --schedules ... --json` files of the same shape, one run quiet and
one with `--neighbour-core`, named SHAPE_quiet.json and SHAPE_neighbour.json in DIR. For every
schedule: its median GFLOPS in both, the fraction it keeps, and the model's figures
(`l2_traffic_ratio`, `shared_cache_ratio`; looptool/measure/traffic.h). Then, over all shapes, how
the kernels the model says depend on the shared L3 (shared_cache_ratio > --threshold, as
tune/guided_search.h's kFragileShortRuns) fared against the others, and per shape the
fastest kernel against the fastest that does not depend on it.

    experiments/neighbour_keep.py DIR [--threshold 2] [--top 10]

Writes DIR/neighbour_keep.md and prints it.
"""
import argparse
import glob
import math
import os
import statistics
import sys


def load(path):
    import json
    with open(path) as f:
        return {g["schedule"]: g for g in json.load(f).get("given", [])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--threshold", type=float, default=2.0)
    ap.add_argument("--top", type=int, default=10, help="schedules listed per shape")
    a = ap.parse_args()
    pairs = []
    for q in sorted(glob.glob(os.path.join(a.dir, "*_quiet.json"))):
        n = q[:-len("_quiet.json")] + "_neighbour.json"
        if os.path.exists(n):
            pairs.append((os.path.basename(q)[:-len("_quiet.json")], q, n))
    if not pairs:
        sys.exit(f"error: {a.dir}: no SHAPE_quiet.json with its SHAPE_neighbour.json")
    med = statistics.median
    out, fragile, robust, best_rows = [], [], [], []
    for shape, qf, nf in pairs:
        q, n = load(qf), load(nf)
        if "oneDNN" not in q or "oneDNN" not in n:
            print(f"warning: {shape}: no oneDNN figure; skipped", file=sys.stderr)
            continue
        rows = []
        for name, g in q.items():
            if name == "oneDNN" or name not in n:
                continue
            quiet, busy = med(g["gflops"]), med(n[name]["gflops"])
            shared = g.get("shared_cache_ratio", 0.0)
            rows.append((name, quiet, busy, g.get("l2_traffic_ratio", 0.0), shared))
            (fragile if shared > a.threshold else robust).append(busy / quiet)
        rows.sort(key=lambda r: -r[1])
        dq, dn = med(q["oneDNN"]["gflops"]), med(n["oneDNN"]["gflops"])
        out.append(f"\n### {shape} (oneDNN {dq:.1f} quiet, {dn:.1f} beside the neighbour)\n\n"
                   "| schedule | quiet GFLOPS | beside the neighbour | kept | L2 traffic / "
                   "compulsory | read again in short runs from the shared L3 |\n"
                   "|---|---:|---:|---:|---:|---:|\n")
        for name, quiet, busy, traffic, shared in rows[:a.top]:
            out.append(f"| {name} | {quiet:.1f} | {busy:.1f} | {busy / quiet:.2f} | "
                       f"{traffic:.2f} | {shared:.2f}{' (depends)' if shared > a.threshold else ''} |\n")
        ok = [r for r in rows if r[4] <= a.threshold]
        if rows and ok:
            best_rows.append((shape, rows[0], ok[0]))
    gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
    head = [f"# Kernels beside a neighbour on the shared L3 ({len(best_rows)} shapes)\n\n",
            f"Depends on the shared L3 (shared_cache_ratio > {a.threshold}): {len(fragile)} "
            f"kernels, kept {gm(fragile):.2f} of their speed in geomean, "
            f"{sum(k < 0.5 for k in fragile)} below half; the others: {len(robust)}, kept "
            f"{gm(robust):.2f}, {sum(k < 0.5 for k in robust)} below half.\n\n",
            "| shape | fastest quiet | its GFLOPS quiet / beside | fastest that does not "
            "depend | its GFLOPS quiet / beside | quiet ratio |\n|---|---|---:|---|---:|---:|\n"]
    for shape, b, r in best_rows:
        head.append(f"| {shape} | {b[0]} | {b[1]:.1f} / {b[2]:.1f} | {r[0]} | "
                    f"{r[1]:.1f} / {r[2]:.1f} | {r[1] / b[1]:.3f} |\n")
    text = "".join(head + out)
    with open(os.path.join(a.dir, "neighbour_keep.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
