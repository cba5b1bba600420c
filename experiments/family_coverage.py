#!/usr/bin/python3
"""Which `tile` members should `tune` seed? Every member side by side, per shape.

For each matmul shape, every member of the schedule family (with the packed ones) and oneDNN
are timed in alternating rounds in one `matmul_bench --schedules` process, and that is done in
`--processes` separate processes (buffer placement moves some kernels by 30% from one process
to the next). A member's figure on a shape is its worst over the processes, relative to
oneDNN in the same process; members are ranked by the geomean over shapes of that figure over
the best member's. `--seeds` names a seed set ("8x32 mn;4x64 mn;..."), or `--tune-json` gives
`looptool tune --json`'s output for the shapes (each shape's own seeds), and the report says how
close the best seed comes to the best of all, per shape and in geomean.

    experiments/family_coverage.py --shapes mm45_233_1963,mm72_400_1314 --out OUT \\
        [--processes 2] [--rounds 3] [--core 1] [--seeds "8x32 mn;16x16 mn" | --tune-json T]

Writes OUT/<shape>.<process>.json (matmul_bench's figures) and OUT/coverage.md; a shape
whose files exist is not measured again.
"""
import argparse
import json
import statistics
import os
import subprocess
import sys
import time

from tune_results import load as load_tune


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="mm{m}_{n}_{k},... ")
    ap.add_argument("--out", required=True)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--core", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--seeds", default="", help="member names separated by ';'")
    ap.add_argument("--tune-json", default="",
                    help="`looptool tune --json` output for these shapes: each shape's own seeds "
                         "(instead of --seeds)")
    a = ap.parse_args()
    per_shape = {}  # shape -> its seeds, from tune's JSON
    for shape, r in (load_tune(a.tune_json) if a.tune_json else {}).items():
        per_shape[shape] = {x["name"].removeprefix("tile ") for x in r.get("seeds", [])}
    bench = os.path.join(a.build, "benchmarks", "matmul_bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"error: {bench}: not built")
    shapes = [s for s in a.shapes.split(",") if s]
    os.makedirs(a.out, exist_ok=True)

    def run(cmd):
        r = subprocess.run(cmd, text=True, capture_output=True)
        if r.returncode != 0:
            raise RuntimeError((r.stderr.strip().splitlines() or ["no message"])[-1])
        return r.stdout

    t0, total, done, failed = time.time(), len(shapes) * a.processes, 0, set()
    for p in range(a.processes):
        for s in shapes:
            js = os.path.join(a.out, f"{s}.{p}.json")
            if s not in failed and not os.path.exists(js):
                try:
                    fam = run([bench, "--list-family", "--layout", "--shapes", s])
                except RuntimeError as e:  # one shape's failure is reported, not the end
                    print(f"warning: {s}: {e}; skipped", file=sys.stderr)
                    failed.add(s)
                    continue
                lines = [l[len(s) + 1:] for l in fam.splitlines()
                         if l.startswith(s + " ") and "not reachable" not in l]
                lst = os.path.join(a.out, f"{s}.schedules")
                with open(lst, "w") as f:
                    f.write("\n".join(lines) + "\n")
                try:
                    run(["taskset", "-c", str(a.core), bench, "--schedules", lst, "--shapes", s,
                         "--rounds", str(a.rounds), "--pin", str(a.core), "--json", js + ".tmp"])
                except RuntimeError as e:
                    print(f"warning: {s}: {e}; skipped", file=sys.stderr)
                    failed.add(s)
                    continue
                os.replace(js + ".tmp", js)
            done += 1
            el = time.time() - t0
            print(f"[{done}/{total}] {s} process {p} | elapsed {el:.0f}s | ETA "
                  f"{el / done * (total - done):.0f}s", flush=True)

    def medians(path):
        out = {}
        for g in json.load(open(path)).get("given", []):
            v = sorted(g["gflops"])
            out[g["schedule"]] = v[len(v) // 2]
        return out

    shapes = [s for s in shapes if s not in failed]
    if not shapes:
        sys.exit("error: no shape was measured")
    rel = {}  # shape -> member -> worst over processes of member / oneDNN
    for s in shapes:
        runs = [medians(os.path.join(a.out, f"{s}.{p}.json")) for p in range(a.processes)]
        members = [m for m in runs[0] if m != "oneDNN" and all(m in r for r in runs)]
        rel[s] = {m: min(r[m] / r["oneDNN"] for r in runs) for m in members}
    gm = statistics.geometric_mean
    names = sorted({m for r in rel.values() for m in r})
    rank = []
    for m in names:
        v = [rel[s][m] / max(rel[s].values()) for s in shapes if m in rel[s]]
        if len(v) == len(shapes):
            rank.append((gm(v), min(v), sum(rel[s][m] == max(rel[s].values()) for s in shapes), m))
    rank.sort(reverse=True)
    seeds = {x.strip() for x in a.seeds.split(";") if x.strip()}
    def seeds_of(shape):
        return per_shape.get(shape, set()) if per_shape else seeds
    with open(os.path.join(a.out, "coverage.md"), "w") as f:
        f.write(f"# Members side by side on {len(shapes)} shapes ({a.processes} processes, "
                f"{a.rounds} rounds each; worst process, over oneDNN)\n\n")
        f.write("| member | geomean / best member | worst shape | fastest on |\n"
                "|---|---:|---:|---:|\n")
        for g, w, wins, m in rank:
            f.write(f"| {m} | {g:.3f} | {w:.3f} | {wins} |\n")
        report = bool(seeds or per_shape)
        f.write("\n| shape | best member | / oneDNN |" + (" best seed | seed / best |" if report else "")
                + "\n|---|---|---:|" + ("---|---:|" if report else "") + "\n")
        cover = []
        for s in shapes:
            best = max(rel[s], key=rel[s].get)
            row = f"| {s} | {best} | {rel[s][best]:.2f} |"
            if report:
                sd = [m for m in rel[s] if m in seeds_of(s)]
                b = max(sd, key=rel[s].get) if sd else "-"
                c = rel[s][b] / rel[s][best] if sd else 0.0
                cover.append(max(c, 1e-3))
                row += f" {b} | {c:.3f} |"
            f.write(row + "\n")
        if report:
            which = f"each shape's seeds in {a.tune_json}" if per_shape else f"Seeds {sorted(seeds)}"
            f.write(f"\n{which}: best seed / best member, geomean {gm(cover):.3f}, "
                    f"worst {min(cover):.3f}, below 0.95 on {sum(c < 0.95 for c in cover)}\n")
    print(open(os.path.join(a.out, "coverage.md")).read())


if __name__ == "__main__":
    main()
