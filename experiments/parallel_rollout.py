#!/usr/bin/python3
"""Whether a threads policy's own `parallel` pays: its greedy rollout with and without it.

For each benchmark, the policy's greedy rollout alone (`tune --greedy`'s `greedy_actions`: no
seed involved, nor the schedule library) on N threads; when it has a `parallel` action, the rollout's kernel and the same
sequence without that action are measured on N threads in alternating rounds (`read --naive
--verify`, each checked against the reference), medians compared. Other processes may load the
machine: the rounds alternate so that a disturbance falls on both.

    experiments/parallel_rollout.py --policy P --out DIR [--threads 2] [--rounds 5] \\
        [--build build] BENCH...

Writes DIR/parallel_rollout.md (one row per benchmark) and DIR/parallel_rollout.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(cmd):
    # No schedule library: a kernel filed by an earlier run would stand in for the rollout.
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, LOOPTUNE_LIBRARY="off"))
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", required=True, help="a `threads` policy file")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default="build")
    ap.add_argument("benches", nargs="+", metavar="BENCH")
    a = ap.parse_args()
    tool = os.path.join(a.build, "cli", "looptool")
    if not os.access(tool, os.X_OK):
        sys.exit(f"error: {tool}: not built")
    if a.threads < 2 or a.rounds < 1:
        sys.exit("error: --threads must be at least 2 and --rounds at least 1")
    for b in a.benches + [a.policy]:
        if not os.path.isfile(b):
            sys.exit(f"error: {b}: no such file")
    os.makedirs(a.out, exist_ok=True)
    threads = ["--threads", str(a.threads)]
    rows = []
    for bench in a.benches:
        t = run([tool, "tune", "--bench", bench, "--policy", a.policy, "--greedy", "--json"] +
                threads)
        greedy = t["greedy_actions"]
        row = {"benchmark": t["benchmark"], "greedy_actions": greedy,
               "parallel": "parallel" in greedy}
        if row["parallel"]:
            without = [x for x in greedy if x != "parallel"]
            figures = {"with": [], "without": []}
            for _ in range(a.rounds):
                for side, acts in (("with", greedy), ("without", without)):
                    r = run([tool, "read", "--bench", bench, "--naive", "--space", "threads",
                             "--verify", "--quiet", "--json", "--actions", ",".join(acts)] +
                            threads)
                    if not r.get("verified"):
                        sys.exit(f"error: {bench}: the {side} kernel does not match the reference")
                    figures[side].append(r["gflops"])
            row.update({side: statistics.median(v) for side, v in figures.items()})
            row.update({side + "_best": max(v) for side, v in figures.items()})
            row["ratio"] = row["with"] / row["without"]
            row["best_ratio"] = row["with_best"] / row["without_best"]
        rows.append(row)
        print(f"{row['benchmark']}: " + (f"parallel, {row['ratio']:.2f}x without it"
                                         if row["parallel"] else "no parallel"), file=sys.stderr)
    with open(os.path.join(a.out, "parallel_rollout.json"), "w") as f:
        json.dump(rows, f, indent=1)
    # The best of the rounds too: on a loaded machine a 2-thread kernel runs at its speed only
    # while another core is free, and the median may miss that.
    lines = [f"Greedy rollouts of `{a.policy}` on {a.threads} threads, {a.rounds} alternating "
             "rounds (GFLOPS: median, best).", "",
             "| benchmark | parallel | with | without | with / without | best with / without |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['benchmark']} | " + (
            f"yes | {r['with']:.1f} | {r['without']:.1f} | {r['ratio']:.2f}x | "
            f"{r['with_best']:.1f} / {r['without_best']:.1f} = {r['best_ratio']:.2f}x |"
            if r["parallel"] else "no | - | - | - | - |"))
    paid = [r for r in rows if r["parallel"]]
    if paid:
        lines += ["", f"{len(paid)} of {len(rows)} rollouts parallel; geomean with / without: "
                  f"medians {statistics.geometric_mean([r['ratio'] for r in paid]):.2f}x, "
                  f"bests {statistics.geometric_mean([r['best_ratio'] for r in paid]):.2f}x"]
    with open(os.path.join(a.out, "parallel_rollout.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
