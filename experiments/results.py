#!/usr/bin/python3
"""Writes docs/results.md from the `looptool compare` runs kept in docs/results/.

Each run is a folder holding compare's results.csv and a run.txt of `key: value` lines:
`set` (what was tuned), `cpu` (the machine, named), `build` (the commit measured), `command`
(how to run it again) and optionally `parts: primes, large` (report the matmuls whose every
side is prime, and those of 2^30 multiply-adds or more, apart), `load` (what else ran) and
`table: ablations` (a run shown only in the ablation table). `tune` is compare's `policy`
method; its reference is oneDNN (`onednn`, or on conv2d `onednn-conv-best` and
`onednn-conv-plain`) measured in the same run. Figures are compare's `gflops` column: the
median of the judge's alternating rounds.

It also rewrites the summary table of README.md between its `<!-- results:begin -->` and
`<!-- results:end -->` lines (`--readme ''`: leave README.md alone).

    experiments/results.py [--results docs/results] [--out docs/results.md] [--readme README.md]
"""
import argparse
import csv
import math
import os
import re
import statistics
import sys
import textwrap

TINY_MACS = 10_000  # below this a library call's own overhead is most of its time
LARGE_MACS = 1 << 30


def fail(msg):
    sys.exit(f"error: {msg}")


def read_run(folder):
    about = {}
    path = os.path.join(folder, "run.txt")
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    key, sep, value = line.partition(":")
                    if not sep:
                        fail(f"{path}:{n}: expected `key: value`")
                    about[key.strip()] = value.strip()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    for key in ("set", "cpu", "build", "command"):
        if not about.get(key):
            fail(f"{path}: no `{key}:` line")
    rows = {}
    path = os.path.join(folder, "results.csv")
    try:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rows.setdefault(r["benchmark"], {})[r["method"]] = r
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except KeyError:
        fail(f"{path}: not compare's results.csv (no benchmark or method column)")
    return about, rows


def figure(row):
    """GFLOPS of a measured row, or None for a failed or missing one."""
    if row is None or row.get("error"):
        return None
    try:
        g = float(row["gflops"])
    except (KeyError, ValueError):
        return None
    return g if g > 0 else None


def macs(name):
    m = re.fullmatch(r"mm(\d+)_(\d+)_(\d+)", name)
    return math.prod(int(x) for x in m.groups()) if m else None


def is_prime(x):
    return x >= 2 and all(x % d for d in range(2, math.isqrt(x) + 1))


def part_of(name):
    m = re.fullmatch(r"mm(\d+)_(\d+)_(\d+)", name)
    if m and all(is_prime(int(x)) for x in m.groups()):
        return "every side prime"
    if macs(name) and macs(name) >= LARGE_MACS:
        return "2^30 multiply-adds or more"
    return "other"


def ratios(rows, ref, method="policy"):
    """(shape, method / ref, method's seconds) per shape where both were measured; failed shapes."""
    out, failed = [], []
    for shape, methods in sorted(rows.items()):
        ours, theirs = figure(methods.get(method)), figure(methods.get(ref))
        if method not in methods:
            continue
        if ours is None or theirs is None:
            failed.append(shape)
            continue
        out.append((shape, ours / theirs, float(methods[method]["seconds"] or 0)))
    return out, failed


def geomean(xs):
    return statistics.geometric_mean(xs) if xs else float("nan")


def summary_row(label, rows, ref, method="policy"):
    got, failed = ratios(rows, ref, method)
    if not got:
        fail(f"{label}: no shape with both `{method}` and `{ref}` measured")
    got.sort(key=lambda r: r[1])
    secs = [s for *_, s in got]
    cells = [f"{geomean([r for _, r, _ in got]):.3f}x"]
    tiny = [r for shape, r, _ in got if (macs(shape) or TINY_MACS) < TINY_MACS]
    rest = [r for shape, r, _ in got if (macs(shape) or TINY_MACS) >= TINY_MACS]
    if tiny and rest:
        cells[0] += f" ({geomean(rest):.3f}x without the {len(tiny)} under {TINY_MACS:,} MACs)"
    greedy = [figure(m.get("policy-greedy")) / figure(m.get(ref))
              for m in rows.values() if figure(m.get("policy-greedy")) and figure(m.get(ref))]
    cells.append(f"{geomean(greedy):.3f}x" if greedy else "-")
    cells.append(", ".join(f"{s} {r:.3f}" for s, r, _ in got[:2]))
    cells.append(str(sum(r < 0.9 for _, r, _ in got)))
    cells.append(f"{statistics.median(secs):.2f} / {max(secs):.2f}")
    shapes = f"{len(got)}" + (f" ({len(failed)} failed)" if failed else "")
    return f"| {label} | {shapes} | " + " | ".join(cells) + " |"


ABLATIONS = (("seeds", "policy", "seed rules alone vs `tune`"),
             ("policy-noseeds", "policy", "policy without seed rules vs `tune`"),
             ("policy-noseeds", "untrained-noseeds", "trained vs untrained, both without seeds"),
             ("untrained", "policy", "untrained network with seed rules vs `tune`"))


def ratio_cell(rows, method, ref):
    """`geomean (lowest shape ratio)` of method / ref over shapes where both were measured."""
    got = sorted((figure(m.get(method)) / figure(m.get(ref)), s) for s, m in rows.items()
                 if figure(m.get(method)) and figure(m.get(ref)))
    if not got:
        return None
    return f"{geomean([r for r, _ in got]):.3f}x ({got[0][1]} {got[0][0]:.3f})"


def ablation_table(runs):
    """What the learning and the seed rules each carry: compare's ablation methods against
    `tune` and against each other, for the runs that have them."""
    lines = []
    for _, about, rows in runs:
        cells = [ratio_cell(rows, m, ref) for m, ref, _ in ABLATIONS]
        if any(cells):
            lines.append(f"| {about['set']} | " + " | ".join(c or "-" for c in cells) + " |")
    if not lines:
        return []
    head = "| set | " + " | ".join(label for *_, label in ABLATIONS) + " |"
    return (["Ablations, geomean (lowest shape):", "", head,
             "|---" * (len(ABLATIONS) + 1) + "|"] + lines + [""])


def runs_of(results_dir):
    try:
        names = sorted(os.listdir(results_dir))
    except OSError as e:
        fail(f"{results_dir}: {e.strerror}")
    folders = [os.path.join(results_dir, n) for n in names
               if os.path.isfile(os.path.join(results_dir, n, "results.csv"))]
    if not folders:
        fail(f"{results_dir}: no compare run (a folder with results.csv)")
    return folders


def section(cpu, runs):
    lines = [f"## {cpu}", "",
             "| set | shapes | `tune` vs oneDNN, geomean | greedy rollout alone | lowest | "
             "under 0.9x | tuning s median / max |", "|---|---|---|---|---|---|---|"]
    notes = []
    for folder, about, rows in runs:
        name = os.path.basename(folder)
        load = f" ({about['load']})" if about.get("load") else ""
        notes.append(f"- `{name}/`: build {about['build']}{load}; `{about['command']}`")
        if about.get("table") == "ablations":
            continue
        conv = any(m.startswith("onednn-conv") for r in rows.values() for m in r)
        refs = [("onednn-conv-best", "vs oneDNN's best layout"),
                ("onednn-conv-plain", "vs oneDNN on our layout")] if conv else [("onednn", "")]
        for ref, how in refs:
            label = about["set"] + (f", {how}" if how else "")
            if about.get("parts") and not conv:
                lines.append(summary_row(label + ", all", rows, ref))
                for part in ("every side prime", "2^30 multiply-adds or more"):
                    sub = {s: m for s, m in rows.items() if part_of(s) == part}
                    if sub:
                        lines.append(summary_row(f"{about['set']}: {part}", sub, ref))
            else:
                lines.append(summary_row(label, rows, ref))
        if conv and any("policy-prepacked" in r for r in rows.values()):
            lines.append(summary_row(f"{about['set']}, weights packed once (`policy-prepacked`), "
                                     "vs oneDNN's best layout", rows, "onednn-conv-best",
                                     "policy-prepacked"))
    return lines + [""] + ablation_table(runs) + notes + [""]


def short_geomean(rows, ref):
    got, _ = ratios(rows, ref)
    return geomean([r for _, r, _ in got]), [s for *_, s in got]


def readme_rows(cpu, runs):
    """README's lines for one CPU: each set's `tune` vs oneDNN geomean and median tuning time."""
    lines = []
    for _, about, rows in runs:
        if about.get("table") == "ablations":
            continue
        if any(m.startswith("onednn-conv") for r in rows.values() for m in r):
            best, secs = short_geomean(rows, "onednn-conv-best")
            plain, _ = short_geomean(rows, "onednn-conv-plain")
            cell = f"{best:.3f}x its best layout, {plain:.3f}x ours"
        else:
            g, secs = short_geomean(rows, "onednn")
            cell = f"{g:.3f}x"
        if secs:
            lines.append(f"| {cpu} | {about['set']} | {cell} | {statistics.median(secs):.2f} s "
                         f"| {re.match(r'[0-9a-f]*', about['build']).group()} |")
    return lines


def write_readme(path, by_cpu):
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        fail(f"{path}: expected one `{begin}` line before one `{end}` line")
    table = ["| CPU | set | `tune` vs oneDNN | tuning time, median | build |",
             "|---|---|---:|---:|---|"]
    for cpu, runs in by_cpu.items():
        table += readme_rows(cpu.split(":")[0], runs)
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    new = head + begin + "\n" + "\n".join(table) + "\n" + end + tail
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, path)
    except OSError as e:
        fail(f"{path}: {e.strerror}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="docs/results", help="folder of compare runs")
    ap.add_argument("--out", default="docs/results.md")
    ap.add_argument("--readme", default="README.md", help="its summary table is rewritten ('': not)")
    a = ap.parse_args()
    by_cpu = {}
    for folder in runs_of(a.results):
        about, rows = read_run(folder)
        by_cpu.setdefault(about["cpu"], []).append((folder, about, rows))
    intro = ("Generated by `experiments/results.py` from the `looptool compare` runs in "
             "[results/](results/) (a folder per set and CPU, with its `run.txt`): regenerate, "
             "do not edit. `tune` (docs/tune.md) against oneDNN 2.6 (`dnnl_sgemm`, or its "
             "convolution), one thread, pinned, same run, every kernel verified; medians of "
             "the judge's rounds. Greedy rollout alone: compare's `policy-greedy`; the ablations: "
             "its `seeds`, `policy-noseeds`, `untrained` and `untrained-noseeds` (docs/"
             "searches.md). Tuning time excludes process start.")
    text = ["# Results", "", textwrap.fill(intro, 100), ""]
    for cpu, runs in by_cpu.items():
        # Matmul sets first, then conv2d (whose reference is oneDNN's convolution).
        runs.sort(key=lambda r: any(m.startswith("onednn-conv") for x in r[2].values() for m in x))
        text += section(cpu, runs)
    tmp = a.out + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write("\n".join(text).rstrip("\n") + "\n")
        os.replace(tmp, a.out)
    except OSError as e:
        fail(f"{a.out}: {e.strerror}")
    if a.readme:
        write_readme(a.readme, by_cpu)
    print(f"wrote {a.out}: {sum(len(r) for r in by_cpu.values())} runs on {len(by_cpu)} CPUs")


if __name__ == "__main__":
    main()
