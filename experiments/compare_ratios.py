#!/usr/bin/python3
"""Per-shape ratios of one `compare` method over another, from compare's results.csv.

A method's figure on a shape is the median of its judged rounds (the `judged_gflops` column:
compare's alternating rounds, every method in the same ones), else its `gflops`. Shapes are
listed worst first with both figures, the ratio and the method's tuning seconds; then the
geomean of the ratios and the median and maximum seconds.

    experiments/compare_ratios.py OUT/results.csv [--method policy] [--over onednn]
"""
import argparse
import csv
import signal
import statistics
import sys


def figure(row):
    judged = row.get("judged_gflops", "").split()
    return statistics.median(map(float, judged)) if judged else float(row["gflops"] or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="compare's results.csv")
    ap.add_argument("--method", default="policy")
    ap.add_argument("--over", default="onednn", help="the reference method")
    a = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    try:
        with open(a.results, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"error: {a.results}: {e.strerror}")
    need = {"benchmark", "method", "gflops", "seconds", "error"}
    if not rows or not need <= set(rows[0]):
        sys.exit(f"error: {a.results}: not compare's results.csv (columns {sorted(need)} expected)")
    by = {}
    try:
        for r in rows:
            by.setdefault(r["benchmark"], {})[r["method"]] = r
        lines = []
        for shape, methods in by.items():
            if a.method not in methods or a.over not in methods:
                print(f"warning: {shape}: no {a.method} or {a.over} row; skipped", file=sys.stderr)
                continue
            ours, ref = figure(methods[a.method]), figure(methods[a.over])
            if ours <= 0 or ref <= 0:
                err = methods[a.method]["error"] or methods[a.over]["error"] or "no figure"
                print(f"warning: {shape}: {err}; skipped", file=sys.stderr)
                continue
            lines.append((ours / ref, shape, ours, ref, float(methods[a.method]["seconds"] or 0)))
    except ValueError as e:
        sys.exit(f"error: {a.results}: a figure is not a number ({e})")
    if not lines:
        sys.exit(f"error: {a.results}: no shape has both {a.method} and {a.over}")
    lines.sort()
    print(f"{'shape':22s} {a.method:>9s} {a.over:>9s} {'ratio':>7s} {'s':>7s}")
    for ratio, shape, ours, ref, s in lines:
        print(f"{shape:22s} {ours:9.1f} {ref:9.1f} {ratio:7.3f} {s:7.3f}")
    secs = [s for *_, s in lines]
    print(f"{len(lines)} shapes: {a.method} / {a.over} geomean "
          f"{statistics.geometric_mean([r for r, *_ in lines]):.3f}, lowest {lines[0][0]:.3f} "
          f"({lines[0][1]}); {a.method} seconds median {statistics.median(secs):.3f}, "
          f"max {max(secs):.3f}")


if __name__ == "__main__":
    main()
