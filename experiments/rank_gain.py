#!/usr/bin/python3
"""What does ranking by the cost model save? `tune --rank none` against `--rank model`.

For every benchmark of each dataset, `tune` runs twice in alternation (none, then model, in
separate processes pinned to one core, no store, no schedule library): measurements (kernels
timed), tuning seconds and the chosen kernel's GFLOPS of each. The cost model should be fitted
to another set's store (`looptool cost-model --store S --out M`), so it is not judged on what it
was fitted to.

    experiments/rank_gain.py --model M --dataset DIR [--dataset DIR2] --out OUT [--core 1]

Writes OUT/runs.json and OUT/rank.md: per dataset the median and total measurements, the median
and max seconds, and the geomean of model/none GFLOPS with the lowest ratio. The machine may be
shared: the load average at the start and end is written beside the figures.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys


def tune(looptool, bench, rank, model, core):
    cmd = ["taskset", "-c", str(core), looptool, "tune", "--bench", bench, "--json",
           "--library", "off", "--rank", rank]
    if rank == "model":
        cmd += ["--cost-model", model]
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"tune {bench} --rank {rank} exited with {r.returncode}: {last}")
    return json.loads(r.stdout)


def summary(name, rows):
    g = [m["gflops"] / n["gflops"] for n, m in rows]
    geo = math.exp(sum(math.log(x) for x in g) / len(g))
    out = [f"### {name} ({len(rows)} benchmarks)", "",
           "| rank | measurements median | total | seconds median | max | GFLOPS geomean |",
           "|---|---|---|---|---|---|"]
    for i, label in enumerate(["none", "model"]):
        meas = [r[i]["measurements"] for r in rows]
        secs = [r[i]["seconds"] for r in rows]
        gf = math.exp(sum(math.log(r[i]["gflops"]) for r in rows) / len(rows))
        out.append(f"| {label} | {statistics.median(meas):.0f} | {sum(meas)} | "
                   f"{statistics.median(secs):.3f} | {max(secs):.3f} | {gf:.1f} |")
    worst = min(range(len(rows)), key=lambda i: g[i])
    out += ["", f"model/none GFLOPS geomean {geo:.3f}, lowest {g[worst]:.3f} "
            f"({rows[worst][0]['benchmark']})", ""]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="cost model file (looptool cost-model)")
    ap.add_argument("--dataset", required=True, action="append", help="benchmark directory")
    ap.add_argument("--only", help="file listing the benchmark names to keep, one a line")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--core", type=int, default=1, help="core to pin every process to")
    ap.add_argument("--build", default="build", help="build directory")
    a = ap.parse_args()
    looptool = os.path.join(a.build, "cli", "looptool")
    if not os.access(looptool, os.X_OK):
        sys.exit(f"error: {looptool}: not built (cmake --build {a.build})")
    if not os.path.isfile(a.model):
        sys.exit(f"error: {a.model}: no such cost model file")
    keep = None
    if a.only:
        with open(a.only) as f:
            keep = {line.strip() for line in f if line.strip()}
    sets = {}
    for d in a.dataset:
        if not os.path.isdir(d):
            sys.exit(f"error: {d}: not a directory")
        files = sorted(os.path.join(d, f) for f in os.listdir(d)
                       if f.startswith(("mm", "conv")) and (keep is None or f in keep))
        if not files:
            sys.exit(f"error: {d}: no benchmark files" + (" named in --only" if keep else ""))
        sets[d] = files
    os.makedirs(a.out, exist_ok=True)
    load0 = os.getloadavg()
    runs = {}
    try:
        for d, files in sets.items():
            runs[d] = []
            for b in files:
                pair = tuple(tune(looptool, b, rank, a.model, a.core) for rank in ("none", "model"))
                runs[d].append(pair)
                print(f"{os.path.basename(b)}: none {pair[0]['measurements']} meas "
                      f"{pair[0]['seconds']:.3f} s {pair[0]['gflops']:.1f}; model "
                      f"{pair[1]['measurements']} meas {pair[1]['seconds']:.3f} s "
                      f"{pair[1]['gflops']:.1f} GFLOPS", flush=True)
    except RuntimeError as e:
        sys.exit(f"error: {e}")
    load1 = os.getloadavg()
    with open(os.path.join(a.out, "runs.json"), "w") as f:
        json.dump({d: [list(p) for p in r] for d, r in runs.items()}, f, indent=1)
    md = [f"# tune --rank none vs --rank model (cost model {a.model})", "",
          f"Load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end "
          f"({os.cpu_count()} cores): figures taken on a loaded machine.", ""]
    for d, r in runs.items():
        md += summary(d, r)
    with open(os.path.join(a.out, "rank.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
