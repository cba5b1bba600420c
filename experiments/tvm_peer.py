#!/usr/bin/python3
"""TVM MetaSchedule as a peer: the same matmuls tuned by TVM and by `looptool tune`.

For every shape C[M,N] = A[M,K] B[K,N] (float32), TVM's MetaSchedule tunes the TE matmul with
each trial count of --trials (XGBoost cost model, evolutionary search, one builder and one
runner worker) for an LLVM target of this machine's CPU as LLVM names it; `looptool tune`
tunes the same shape (one thread, the schedule library off). Everything runs pinned to
--core. Reported per shape: each side's kernel GFLOPS as its own tool measures it (TVM:
median of its time_evaluator's repeats; ours: tune's figure), each side's tuning wall time,
and both kernels timed again side by side: alternating rounds of TVM's time_evaluator and
`matmul_bench --schedules` (our kernel, JIT-compiled as tune measured it), the median of the
rounds each, so both see the same phases of the machine's load.

    build/venv-tvm/bin/python experiments/tvm_peer.py --out OUT [--shapes "M,N,K;..." |
        --dataset DIR] [--trials 64,1000] [--core 1] [--rounds 5] [--build build]

Run by another interpreter, it restarts itself under BUILD/venv-tvm/bin/python when that has
TVM (`scripts/setup.sh tvm` makes it). Without TVM: an error and exit 1 (77 with --skip-code
77, as CTest wants a skip). Writes OUT/tvm_peer.csv, OUT/tvm_peer.md and OUT/tvm_peer.png
(with gnuplot); TVM's logs and tuning records under OUT/tvm/.
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

# A few real-model shapes (datasets/models) and two of LoopTune's 25 test benchmarks.
DEFAULT_SHAPES = "128,768,768;128,3072,768;8,4096,4096;112,208,256;224,224,256"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--shapes", help=f"M,N,K;M,N,K;... (default {DEFAULT_SHAPES})")
    ap.add_argument("--dataset", help="a directory of matmul benchmarks mm{M}_{N}_{K}")
    ap.add_argument("--trials", default="64,1000", help="TVM trial counts, comma separated")
    ap.add_argument("--core", type=int, default=1, help="the core everything is pinned to")
    ap.add_argument("--rounds", type=int, default=5, help="side-by-side rounds per shape")
    ap.add_argument("--build", default="build", help="build directory")
    ap.add_argument("--timeout-s", type=float, default=300,
                    help="TVM's builder and runner timeout (a batch, with the worker's start)")
    ap.add_argument("--skip-code", type=int, default=1, help="exit code when TVM is missing")
    return ap.parse_args()


def import_tvm(a):
    """Returns (tvm, te, meta_schedule), restarting under BUILD/venv-tvm when that has TVM;
    exits with --skip-code and a clear message when no interpreter has it."""
    # TVM's import compiles a PyTorch extension (minutes) whenever torch is importable; this
    # script does not use torch, so it is hidden here (TVM's worker processes do not inherit
    # this: scripts/setup.sh's venv-tvm has no torch).
    sys.modules["torch"] = None
    os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")
    # One thread, as ours: TVM's runtime otherwise sizes its pool to the machine's cores, and
    # on the one core everything is pinned to its threads would take turns.
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    try:
        import tvm
        from tvm import te
        from tvm.s_tir import meta_schedule as ms
        return tvm, te, ms
    except ImportError as e:
        why = str(e)
    venv_py = os.path.join(os.path.abspath(a.build), "venv-tvm", "bin", "python")
    if os.access(venv_py, os.X_OK) and os.path.realpath(sys.prefix) != os.path.realpath(
            os.path.dirname(os.path.dirname(venv_py))):
        os.execv(venv_py, [venv_py, os.path.abspath(__file__)] + sys.argv[1:])
    print(f"error: TVM is not importable ({why}); `scripts/setup.sh tvm` installs apache-tvm "
          f"into {os.path.dirname(os.path.dirname(venv_py))} when PyPI answers", file=sys.stderr)
    sys.exit(a.skip_code)


def shapes_of(a):
    """[(M, N, K)] from --dataset, --shapes or the default; exits on a bad one."""
    if a.dataset:
        if not os.path.isdir(a.dataset):
            sys.exit(f"error: {a.dataset}: not a directory")
        got = sorted(tuple(int(x) for x in m.groups()) for f in os.listdir(a.dataset)
                     if (m := re.fullmatch(r"mm(\d+)_(\d+)_(\d+)", f)))
        if not got:
            sys.exit(f"error: {a.dataset}: no matmul benchmark (files named mm{{M}}_{{N}}_{{K}})")
        return got
    out = []
    for s in (a.shapes or DEFAULT_SHAPES).split(";"):
        if not re.fullmatch(r"\s*\d+,\d+,\d+\s*", s) or 0 in (v := tuple(map(int, s.split(",")))):
            sys.exit(f"error: bad shape '{s}': want M,N,K (positive integers), ';' between shapes")
        out.append(v)
    return out


def trials_of(a):
    try:
        t = [int(x) for x in a.trials.split(",")]
    except ValueError:
        t = []
    if not t or min(t) < 1:
        sys.exit(f"error: bad --trials '{a.trials}': want positive integers, comma separated")
    return t


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], text=True, capture_output=True).stdout
        return re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except (OSError, AttributeError):
        return "unknown CPU"


class Tvm:
    """TVM's side: tuning one shape, its best kernel, and timing that kernel."""

    def __init__(self, tvm, te, ms, workdir, timeout_s):
        import numpy as np
        self.tvm, self.te, self.ms, self.np, self.workdir = tvm, te, ms, np, workdir
        self.timeout_s = timeout_s
        self.cpu = tvm.target.codegen.llvm_get_system_cpu()
        self.target = tvm.target.Target({"kind": "llvm", "mcpu": self.cpu, "num-cores": 1})
        self.dev = tvm.cpu(0)
        # Registered once per process at the first tuning (TVMScript parses every tensor
        # intrinsic: minutes under load); done here so that no shape's tuning time holds it.
        import tvm.s_tir.tensor_intrin  # noqa: F401

    def module(self, m, n, k):
        te = self.te
        A = te.placeholder((m, k), "float32", name="A")
        B = te.placeholder((k, n), "float32", name="B")
        r = te.reduce_axis((0, k), name="k")
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
        return self.tvm.IRModule({"main": te.create_prim_func([A, B, C])})

    def tune(self, shape, trials):
        """(compiled kernel, tuning wall seconds, max |error| / |C|max against numpy)."""
        mod = self.module(*shape)
        wd = os.path.join(self.workdir, "mm{}_{}_{}".format(*shape), str(trials))
        shutil.rmtree(wd, ignore_errors=True)
        t0 = time.perf_counter()
        # One builder and one runner process; their timeouts are per batch of candidates and
        # include each new worker's import of TVM, which takes minutes on a loaded machine.
        builder = self.ms.builder.LocalBuilder(max_workers=1, timeout_sec=self.timeout_s)
        runner = self.ms.runner.LocalRunner(timeout_sec=self.timeout_s)
        db = self.ms.tune_tir(mod, self.target, wd, max_trials_global=trials,
                              num_trials_per_iter=min(64, trials), num_tuning_cores=1,
                              builder=builder, runner=runner)
        sch = self.ms.tir_integration.compile_tir(db, mod, self.target)
        seconds = time.perf_counter() - t0
        if sch is None:
            raise RuntimeError("no valid schedule among the trials")
        lib = self.tvm.compile(sch.mod, target=self.target).jit()
        args, want = self.arrays(shape)
        lib["main"](*args)
        err = float(self.np.abs(args[2].numpy() - want).max() / max(abs(want).max(), 1e-30))
        return lib, seconds, err

    def arrays(self, shape):
        np, (m, n, k) = self.np, shape
        rng = np.random.default_rng(0)
        a = rng.uniform(-1, 1, (m, k)).astype("float32")
        b = rng.uniform(-1, 1, (k, n)).astype("float32")
        t = self.tvm.runtime.tensor
        return ([t(a, self.dev), t(b, self.dev), t(np.zeros((m, n), "float32"), self.dev)],
                a.astype("float64") @ b.astype("float64"))

    def gflops(self, lib, shape, repeat):
        """Median GFLOPS of `repeat` repeats of time_evaluator (each at least 100 ms)."""
        args, _ = self.arrays(shape)
        ev = lib.time_evaluator("main", self.dev, number=1, repeat=repeat, min_repeat_ms=100)
        return 2e-9 * shape[0] * shape[1] * shape[2] / statistics.median(ev(*args).results)


def run_tool(cmd):
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"{os.path.basename(cmd[3])} exited with {r.returncode}: {last}")
    return r.stdout


def ours(a, shape):
    """looptool tune on the shape: its --json result and the process's wall seconds."""
    t0 = time.perf_counter()
    out = run_tool(["taskset", "-c", str(a.core), a.looptool, "tune", "--matmul",
                    "{},{},{}".format(*shape), "--threads", "1", "--library", "off", "--json"])
    return json.loads(out), time.perf_counter() - t0


def ours_side_by_side(a, shape, actions):
    """Our kernel's GFLOPS in one round of matmul_bench --schedules (median of its repeats)."""
    name = "mm{}_{}_{}".format(*shape)
    sched, js = (os.path.join(a.out, f"{name}.{x}") for x in ("schedules", "json"))
    with open(sched, "w") as f:
        f.write(f"ours: {','.join(actions)}\n")
    run_tool(["taskset", "-c", str(a.core), a.bench, "--schedules", sched, "--shapes", name,
              "--rounds", "1", "--pin", str(a.core), "--json", js])
    got = {g["schedule"]: g["gflops"] for g in json.load(open(js))["given"]}
    if "ours" not in got:
        raise RuntimeError(f"{name}: our schedule did not apply to matmul_bench's nest")
    return statistics.median(got["ours"])


def actions_of(result):
    acts = result["best_actions"]
    return acts if isinstance(acts, list) else acts.split()


class Progress:
    """Progress lines with rate and ETA, counted in TVM trials (ours counts as one)."""

    def __init__(self, total):
        self.total, self.done, self.t0 = total, 0, time.time()

    def step(self, units, what):
        self.done += units
        el = time.time() - self.t0
        eta = el / self.done * (self.total - self.done) if self.done else 0
        print(f"[{self.done}/{self.total} trials] {what} | {60 * self.done / el:.1f} trials/min "
              f"| elapsed {el:.0f}s | ETA {eta:.0f}s", flush=True)


def tune_shape(a, side, shape, trials, prog):
    """The rows of one shape, one per trial count; [] when our side failed."""
    name = "mm{}_{}_{}".format(*shape)
    try:
        res, wall = ours(a, shape)
    except (RuntimeError, ValueError) as e:
        print(f"warning: {name}: looptool tune: {e}; skipped", file=sys.stderr)
        prog.step(1 + sum(trials), f"{name}: skipped")
        return []
    prog.step(1, f"{name}: ours {res['gflops']:.1f} GFLOPS in {res['seconds']:.2f}s")
    kernels, rows = {}, []
    for t in trials:
        try:
            lib, seconds, err = side.tune(shape, t)
        except Exception as e:  # TVM raises its own error types; one failure skips one row
            print(f"warning: {name}: TVM with {t} trials: {e}; skipped", file=sys.stderr)
            prog.step(t, f"{name}: TVM {t} trials failed")
            continue
        kernels[t] = lib
        rows.append({"shape": name, "m": shape[0], "n": shape[1], "k": shape[2], "trials": t,
                     "tvm_gflops": side.gflops(lib, shape, a.rounds), "tvm_tune_s": seconds,
                     "tvm_max_rel_err": err, "ours_gflops": res["gflops"],
                     "ours_tune_s": res["seconds"], "ours_wall_s": wall})
        prog.step(t, f"{name}: TVM {t} trials {rows[-1]['tvm_gflops']:.1f} GFLOPS in "
                  f"{seconds:.0f}s (error {err:.1e})")
    sbs_tvm, sbs_ours = {t: [] for t in kernels}, []
    try:
        for _ in range(a.rounds):  # alternating: TVM's kernels, then ours
            for t, lib in kernels.items():
                sbs_tvm[t].append(side.gflops(lib, shape, 1))
            sbs_ours.append(ours_side_by_side(a, shape, actions_of(res)))
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        print(f"warning: {name}: side by side: {e}; left out", file=sys.stderr)
        sbs_ours = []
    for r in rows:
        ok = bool(sbs_ours)
        r["sbs_ours_gflops"] = statistics.median(sbs_ours) if ok else 0.0
        r["sbs_tvm_gflops"] = statistics.median(sbs_tvm[r["trials"]]) if ok else 0.0
    return rows


KEYS = ["shape", "m", "n", "k", "trials", "tvm_gflops", "tvm_tune_s", "tvm_max_rel_err",
        "ours_gflops", "ours_tune_s", "ours_wall_s", "sbs_tvm_gflops", "sbs_ours_gflops"]


def write_csv(rows, path):
    with open(path + ".tmp", "w") as f:
        f.write(",".join(KEYS) + "\n")
        for r in rows:
            f.write(",".join(f"{r[k]:.6g}" if isinstance(r[k], float) else str(r[k])
                             for k in KEYS) + "\n")
    os.replace(path + ".tmp", path)


def write_md(a, rows, trials, info, path):
    gm = statistics.geometric_mean
    lines = ["# TVM MetaSchedule and `looptool tune` on the same matmuls\n",
             f"CPU: {info['cpu']}; TVM {info['tvm']} target {info['target']}; everything "
             f"pinned to core {a.core}, one thread, one TVM builder and runner worker. Load "
             f"average (1 min) {info['load0']:.1f} at the start, {info['load1']:.1f} at the end "
             f"({os.cpu_count()} cores). Command: `{info['command']}`\n",
             "GFLOPS: each tool's own measurement (TVM: median of time_evaluator's repeats; "
             f"ours: tune's), then side by side ({a.rounds} alternating rounds of TVM's "
             "time_evaluator and `matmul_bench --schedules`, medians). Tuning time: TVM's "
             "tune_tir plus picking its best, ours: tune's search (process wall in the CSV).\n",
             "| shape | trials | TVM GFLOPS | ours GFLOPS | TVM / ours side by side | ours / TVM "
             "side by side | TVM tune s | ours tune s | TVM time / ours |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        sbs = r["sbs_ours_gflops"] > 0
        lines.append(
            f"| {r['shape']} | {r['trials']} | {r['tvm_gflops']:.1f} | {r['ours_gflops']:.1f} | "
            + (f"{r['sbs_tvm_gflops']:.1f} / {r['sbs_ours_gflops']:.1f} | "
               f"{r['sbs_ours_gflops'] / r['sbs_tvm_gflops']:.3f}" if sbs else "- | -")
            + f" | {r['tvm_tune_s']:.1f} | {r['ours_tune_s']:.2f} | "
            f"{r['tvm_tune_s'] / max(r['ours_tune_s'], 1e-9):.0f}x |")
    lines.append("")
    for t in trials:
        rs = [r for r in rows if r["trials"] == t]
        if not rs:
            continue
        own = gm([r["ours_gflops"] / r["tvm_gflops"] for r in rs])
        both = [r["sbs_ours_gflops"] / r["sbs_tvm_gflops"] for r in rs if r["sbs_ours_gflops"]]
        time_ratio = statistics.median([r["tvm_tune_s"] / max(r["ours_tune_s"], 1e-9) for r in rs])
        lines.append(
            f"{t} trials, {len(rs)} shapes: ours / TVM GFLOPS geomean {own:.3f} (own figures)"
            + (f", {gm(both):.3f} side by side (lowest {min(both):.3f})" if both else "")
            + f"; TVM's tuning time / ours, median {time_ratio:.0f}x.")
    bad = [f"{r['shape']} ({r['trials']})" for r in rows if r["tvm_max_rel_err"] > 1e-3]
    if bad:
        lines.append(f"TVM kernels off numpy's result by more than 1e-3 of |C|max: {bad}.")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def plot(rows, trials, out):
    """OUT/tvm_peer.png: per shape, ours and TVM's kernels at each trial count (side by side
    figures where measured, else each tool's own)."""
    if not rows or not shutil.which("gnuplot"):
        return
    dat = os.path.join(out, "tvm_peer.dat")
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    with open(dat, "w") as f:
        for s in shapes:
            rs = {r["trials"]: r for r in rows if r["shape"] == s}
            any_r = next(iter(rs.values()))
            sbs = all(r["sbs_ours_gflops"] > 0 for r in rs.values())
            vals = [any_r["sbs_ours_gflops"] if sbs else any_r["ours_gflops"]] + [
                (rs[t]["sbs_tvm_gflops"] if sbs else rs[t]["tvm_gflops"]) if t in rs else 0
                for t in trials]
            f.write(s + " " + " ".join(f"{v:.3f}" for v in vals) + "\n")
    cols = ", ".join([f"'{dat}' using 2:xtic(1) title 'looptool tune'"] +
                     [f"'' using {i + 3} title 'TVM MetaSchedule, {t} trials'"
                      for i, t in enumerate(trials)])
    script = ("set terminal pngcairo size 1000,520 noenhanced\n"
              f"set output '{os.path.join(out, 'tvm_peer.png')}'\n"
              "set title 'matmul kernels on one core: looptool tune and TVM MetaSchedule "
              "(side by side where timed so)'\n"
              "set ylabel 'GFLOPS'\nset style data histograms\nset style histogram clustered\n"
              "set style fill solid 0.8 border -1\nset grid ytics\nset key top left\n"
              "set xtics rotate by -30\nset yrange [0:*]\n"
              f"plot {cols}\n")
    subprocess.run(["gnuplot"], input=script, text=True, check=False)


def main():
    a = parse_args()
    shapes, trials = shapes_of(a), trials_of(a)
    a.looptool = os.path.join(a.build, "cli", "looptool")
    a.bench = os.path.join(a.build, "benchmarks", "matmul_bench")
    for tool in (a.looptool, a.bench):
        if not os.access(tool, os.X_OK):
            sys.exit(f"error: {tool}: not built (cmake --build {a.build})")
    tvm, te, ms = import_tvm(a)
    os.sched_setaffinity(0, {a.core})  # TVM's builder and runner processes inherit it
    os.makedirs(a.out, exist_ok=True)
    side = Tvm(tvm, te, ms, os.path.join(a.out, "tvm"), a.timeout_s)
    info = {"cpu": cpu_name(), "tvm": tvm.__version__, "target": str(side.target),
            "load0": os.getloadavg()[0], "command": " ".join(sys.argv)}
    print(f"{len(shapes)} shapes, TVM trials {trials}, on {info['cpu']} ({side.cpu}), core "
          f"{a.core}", flush=True)
    prog, rows = Progress(len(shapes) * (1 + sum(trials))), []
    for shape in shapes:
        rows += tune_shape(a, side, shape, trials, prog)
    if not rows:
        sys.exit("error: no shape was tuned by both sides")
    info["load1"] = os.getloadavg()[0]
    write_csv(rows, os.path.join(a.out, "tvm_peer.csv"))
    write_md(a, rows, trials, info, os.path.join(a.out, "tvm_peer.md"))
    plot(rows, trials, a.out)
    print(open(os.path.join(a.out, "tvm_peer.md")).read())


if __name__ == "__main__":
    main()
