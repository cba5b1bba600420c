#!/usr/bin/python3
"""Does a matmul written by hand tune as well as `generate`'s form of it?

For seeded random shapes (`looptool generate --random`, shapes nobody chose), each matmul is
written in four other forms (one statement with other names; operands swapped with B declared
first; generate's two statements with the temporary after the output; a tensor already named
T), `tune` runs on each file and on the generated one, and `matmul_bench --schedules` times the
five chosen schedules side by side with oneDNN in alternating rounds in one process (every form
is tuned in generate's form, so each schedule applies to the generated nest).

    experiments/program_forms.py --out OUT [--shapes 8] [--seed 1] [--rounds 5] [--core 0]

Writes OUT/forms.csv and OUT/forms.md: per shape and form, the median GFLOPS and the ratio to
the generated form's, then each form's geomean and lowest ratio.
"""
import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys

FORMS = {
    "one-statement": """looptool-program 1
name {name}
var i {m}
var r {k}
var j {n}
tensor X input {m} {k}
tensor Y input {k} {n}
tensor Z output {m} {n}
stmt Z[i, j] += X[i, r] * Y[r, j]
nest 0
loop i {m} 0
loop r {k} 0
loop j {n} 0
cursor 0
""",
    "swapped": """looptool-program 1
name {name}
var n {n}
var m {m}
var k {k}
tensor B input {k} {n}
tensor A input {m} {k}
tensor C output {m} {n}
stmt C[m, n] += B[k, n] * A[m, k]
nest 0
loop n {n} 0
loop m {m} 0
loop k {k} 0
cursor 0
""",
    "temp-last": """looptool-program 1
name {name}
var k {k}
var m {m}
var n {n}
tensor A input {m} {k}
tensor B input {k} {n}
tensor C output {m} {n}
tensor T temp {m} {n}
stmt T[m, n] += A[m, k] * B[k, n]
stmt C[m, n] = T[m, n]
nest 0
loop k {k} 0
loop m {m} 0
loop n {n} 0
nest 1
loop m {m} 0
loop n {n} 0
cursor 0
""",
    "T-taken": """looptool-program 1
name {name}
var a {m}
var b {n}
var c {k}
tensor T input {m} {k}
tensor U input {k} {n}
tensor V output {m} {n}
stmt V[a, b] += T[a, c] * U[c, b]
nest 0
loop a {m} 0
loop b {n} 0
loop c {k} 0
cursor 0
""",
}


def run(cmd):
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"{' '.join(cmd[:4])} exited with {r.returncode}: {last}")
    return r


def tune(looptool, pin, path):
    r = run(pin + [looptool, "tune", "--threads", "1", "--bench", path, "--json", "--library", "off"])
    return json.loads(r.stdout)["best_actions"]


def shape_of(name):
    m, n, k = (int(v) for v in name[2:].split("_"))
    return m, n, k


def judge(bench, pin, out, name, actions, rounds):
    sched = os.path.join(out, f"{name}.schedules")
    with open(sched, "w") as f:
        for form, acts in actions.items():
            f.write(f"{form}: {','.join(acts)}\n")
    js = os.path.join(out, f"{name}.json")
    run([bench, "--schedules", sched, "--shapes", name, "--rounds", str(rounds), "--pin",
         pin[2], "--json", js])
    return {g["schedule"]: statistics.median(g["gflops"]) for g in json.load(open(js))["given"]}


def report(out, rows):
    gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    with open(os.path.join(out, "forms.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "form", "gflops", "ratio_to_generated"])
        for r in rows:
            w.writerow([r["shape"], r["form"], f"{r['gflops']:.2f}", f"{r['ratio']:.3f}"])
    lines = ["| form | shapes | geomean ratio to generated | lowest (shape) |", "|---|---|---|---|"]
    for form in FORMS:
        rs = [r for r in rows if r["form"] == form]
        if rs:
            low = min(rs, key=lambda r: r["ratio"])
            lines.append(f"| {form} | {len(rs)} | {gm([r['ratio'] for r in rs]):.3f} | "
                         f"{low['ratio']:.3f} ({low['shape']}) |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "forms.md"), "w").write(text)
    print(text, end="")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", type=int, default=8, help="random shapes to draw")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-macs", type=int, default=1 << 27)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--core", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    a = ap.parse_args()
    looptool = os.path.join(a.build, "cli", "looptool")
    bench = os.path.join(a.build, "benchmarks", "matmul_bench")
    pin = ["taskset", "-c", str(a.core)]
    gen = os.path.join(a.out, "generated")
    os.makedirs(a.out, exist_ok=True)
    run([looptool, "generate", "--random", str(a.shapes), "--seed", str(a.seed), "--max-macs",
         str(a.max_macs), "--out", gen])
    rows = []
    for i, name in enumerate(sorted(os.listdir(gen))):
        m, n, k = shape_of(name)
        try:
            actions = {"generated": tune(looptool, pin, os.path.join(gen, name))}
            for form, text in FORMS.items():
                path = os.path.join(a.out, f"{name}.{form}.lt")
                with open(path, "w") as f:
                    f.write(text.format(name=name, m=m, n=n, k=k))
                actions[form] = tune(looptool, pin, path)
            got = judge(bench, pin, a.out, name, actions, a.rounds)
        except (RuntimeError, KeyError, ValueError) as e:  # reported, then the next shape
            print(f"warning: {name}: {e}; skipped", file=sys.stderr)
            continue
        for form in FORMS:
            if form in got and "generated" in got:
                rows.append({"shape": name, "form": form, "gflops": got[form],
                             "ratio": got[form] / got["generated"]})
        print(f"[{i + 1}] {name}: " + ", ".join(f"{f} {g:.1f}" for f, g in got.items()),
              file=sys.stderr)
    if not rows:
        sys.exit("program_forms: no shape could be judged")
    report(a.out, rows)


if __name__ == "__main__":
    main()
