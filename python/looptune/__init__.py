"""looptune: the loop-nest tuning environment of looptune (C++) from Python.

    env = looptune.LoopToolEnv(benchmark="mm.txt")       # or dataset=DIR, split="train"
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample(env.action_masks()))

A gymnasium.Env with Gymnasium's own spaces and registration (`looptune/LoopTool-v0`) when
gymnasium is importable, small stand-ins otherwise. Everything runs in the C++ core
(`looptune._core`); this file only adapts it. Errors raise `looptune.Error` with the tool's
message. See docs/python.md.
"""

import operator

import numpy as np

from . import _core
from ._core import Error, action_names
from .spaces import Box, Dict, Discrete, Env, HAVE_GYMNASIUM
from .kernels import KernelError, KernelLibrary, aligned_arrays, aligned_empty, load_library

__all__ = ["LoopToolEnv", "Error", "tune", "measure", "export", "action_names", "default_threads",
           "HAVE_GYMNASIUM", "load_library", "KernelLibrary", "KernelError", "aligned_empty",
           "aligned_arrays"]

ENV_ID = "looptune/LoopTool-v0"


class LoopToolEnv(Env):
    """An episode tunes one benchmark: it starts from the naive loop nest with the cursor on
    the first loop; each step applies one action of `action_space` (an index); the reward is
    the change in measured GFLOPS divided by the machine's peak. `truncated` after `max_steps`
    actions; `terminated` when no action is legal; a step after either raises looptune.Error
    until reset(). `action_masks()` and `info["action_mask"]` (numpy int8, as
    `Discrete.sample(mask=)` takes it) say which actions are legal now. An illegal one raises
    looptune.Error, or with illegal_action="penalty" costs `illegal_penalty` as its reward and
    leaves the state unchanged (info["illegal_action"] says so; it counts toward max_steps).

    benchmark: a benchmark file (ours or LoopTune's format); or dataset: a directory of them,
    split "train" | "test" | "all" (LoopTune's 90/10 split), one drawn per reset with
    np_random; or matmul=(M, N, K) / conv=(N, CI, H, W, CO, KH, KW) by shape.
    store: an SQLite measurement store shared with the CLI. graph=True adds the loop tree as
    arrays to the observation (graph_nodes [V, 10] float32, graph_edges [E, 2] int64; variable
    size, so not part of observation_space; graph_features [8], the machine vector as the
    graph's own features). machine_tensor [8] describes the machine (caches, vector width, peak,
    cores, threads; docs/observations.md), so one agent can act differently on different CPUs.
    """

    # Text frames have no natural rate; 4 as Gymnasium's own text environments.
    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, benchmark=None, dataset=None, split="train", action_space="full", max_steps=16,
                 store=None, max_loops=10, verify=False, measure=True, graph=False, render_mode=None,
                 matmul=None, conv=None, illegal_action="raise", illegal_penalty=-1.0, threads=None):
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, "
                             f"not {render_mode!r}")

        def shape(s):
            return None if s is None else [operator.index(v) for v in s]
        self._core = _core.Core(benchmark=None if benchmark is None else str(benchmark),
                                dataset=None if dataset is None else str(dataset), split=split,
                                matmul=shape(matmul), conv=shape(conv),
                                action_space=action_space, max_steps=max_steps,
                                store=None if store is None else str(store), max_loops=max_loops,
                                verify=verify, measure=measure, graph=graph,
                                illegal_action=illegal_action, illegal_penalty=float(illegal_penalty),
                                threads=_threads(threads))
        self.render_mode = render_mode
        self.action_names = self._core.action_names()
        n = len(self.action_names)
        self.action_space = Discrete(n)
        # Every feature is at least 0; loops_tensor's highs come from the C++ that makes them.
        obs = {
            "loops_tensor": Box(0.0, np.tile(_core.LOOP_FEATURE_HIGH, (max_loops, 1)),
                                (max_loops, _core.LOOP_FEATURES)),
            "stride_tensor": Box(0.0, 1.0, (_core.STRIDE_BUCKETS,)),
            "prev_actions_tensor": Box(0.0, 1.0, (_core.PREV_ACTIONS, n)),
            "machine_tensor": Box(0.0, _core.MACHINE_FEATURE_HIGH, (_core.MACHINE_FEATURES,)),
        }
        self.observation_space = Dict(obs)

    def reset(self, *, seed=None, options=None):
        """options may name the benchmark: {"benchmark": FILE}; otherwise one of `benchmarks`
        is drawn with np_random (seeded by `seed`)."""
        super().reset(seed=seed)
        options = dict(options or {})
        bench = options.pop("benchmark", None)
        if options:
            raise ValueError(f"reset(): unknown options {sorted(options)}; the one option is 'benchmark'")
        files = self._core.benchmarks()
        if bench is None and files:
            bench = files[int(self.np_random.integers(len(files)))]
        return self._core.reset(None if bench is None else str(bench))

    def step(self, action):
        """`action`: an integer index into `action_space` (int or numpy integer; a float such as
        1.7 raises TypeError rather than being truncated to another action)."""
        try:
            index = operator.index(action)
        except TypeError:
            raise TypeError(f"step(): the action must be an integer index, got {action!r}") from None
        return self._core.step(index)

    def action_masks(self):
        """The legal actions now: numpy int8 of shape (n,), 1 for legal, as
        `action_space.sample(mask=)` and maskable agents take it."""
        return self._core.action_mask()

    def render(self):
        """The loop tree as text (render_mode "ansi"; also without a render_mode)."""
        return self._core.loop_tree()

    def close(self):
        pass

    # Beyond Gymnasium: the state, as the CLI's files have it.
    @property
    def gflops(self):
        return self._core.gflops

    @property
    def max_gflops(self):
        return self._core.max_gflops

    @property
    def threads(self):
        """Threads parallel loops run on (the roof is this many times the single-core peak)."""
        return self._core.threads

    @property
    def benchmarks(self):
        return self._core.benchmarks()

    def program(self):
        """The current schedule in our program format (loadable by every looptool command)."""
        return self._core.program()

    def history(self):
        return self._core.history()

    def verify(self, tolerance=1.0):
        """Runs the current kernel and compares it with the double-precision reference: (ok, max_error_ratio), the largest error as a fraction of its forward error bound times `tolerance` (docs/measurement.md)."""
        return self._core.verify(tolerance)


__version__ = _core.__version__


def default_threads():
    """The threads parallel loops run on when none is given: every core this process may use
    (sched_getaffinity), as the CLI's --threads default."""
    return _core.default_threads()


def _threads(threads):
    """threads= of Env, tune, measure and export: None or 0 (every usable core:
    default_threads()), or an int >= 1 (1: single-thread kernels)."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise Error(f"threads={threads!r}: give an int, 1 or more (0: every usable core)")
    return default_threads() if threads == 0 else threads


def tune(benchmark=None, policy=None, store=None, budget_s=0.5, greedy=False, matmul=None,
         conv=None, library=None, retune=False, bmm=None, threads=None):
    """`looptool tune`: a trained policy (default: the shipped one) guides a measured search of
    `budget_s` seconds (`greedy`: its greedy rollout only) on a benchmark file, or on a matmul
    `matmul=(M, N, K)`, a batched matmul `bmm=(B, M, N, K)` or a conv2d
    `conv=(N, CI, H, W, CO, KH, KW[, STRIDE[, PAD]])` given by its shape; a dict
    with the best schedule ("program"), "gflops", "base_gflops", "speedup", "best_actions",
    "found_by", "greedy_gflops", "greedy_actions", "seconds", "call_seconds" (docs/python.md).
    A computation tuned before on this machine is answered from the schedule library (`library`:
    a store path or "off"; default as `looptool tune`), "from_library" True, unless `retune`.
    `threads`: the threads parallel loops run on (default: every usable core; 1: single-thread
    kernels), as `tune --threads`."""
    def extents(shape):
        return None if shape is None else [int(v) for v in shape]
    if bmm is not None:
        if matmul is not None:
            raise Error("tune: give matmul=(M, N, K) or bmm=(B, M, N, K), not both")
        if len(bmm) != 4:
            raise Error(f"tune: bmm takes 4 extents (B, M, N, K), not {len(bmm)}")
        matmul = bmm
    return _core.tune(None if benchmark is None else str(benchmark),
                      None if policy is None else str(policy),
                      None if store is None else str(store), float(budget_s), bool(greedy),
                      extents(matmul), extents(conv),
                      None if library is None else str(library), bool(retune), _threads(threads))


def measure(benchmark, actions=None, schedule=None, verify=True, threads=None):
    """GFLOPS of a schedule: the benchmark's own, or after `actions` ("split_8,down,..."), or
    the one in `schedule` (a program file); checked against the reference when verify."""
    return _core.measure(str(benchmark), actions, None if schedule is None else str(schedule), verify,
                         _threads(threads))


def export(benchmark, out, actions=None, schedule=None, cpu=None, name=None, threads=None):
    """`looptool export`: writes NAME.o, .h, .ll, .s and .program into `out` (and
    looptool_threads.c for a kernel whose parallel loops run on `threads` > 1)."""
    return _core.export(str(benchmark), str(out), actions, None if schedule is None else str(schedule), cpu, name,
                        _threads(threads))


def _make_registered(**kwargs):
    """gymnasium.make's entry point: LoopToolEnv with an illegal action costing a penalty (every
    element of action_space is then a valid step, as Gymnasium's checker and samplers assume)
    and, when no computation is named, a 64x64x64 matmul."""
    kwargs.setdefault("illegal_action", "penalty")
    if all(kwargs.get(k) is None for k in ("benchmark", "dataset", "matmul", "conv")):
        kwargs["matmul"] = (64, 64, 64)
    return LoopToolEnv(**kwargs)


_make_registered.metadata = LoopToolEnv.metadata

if HAVE_GYMNASIUM:
    import gymnasium as _gym

    # nondeterministic: rewards are measured times.
    if ENV_ID not in _gym.registry:
        _gym.register(id=ENV_ID, entry_point="looptune:_make_registered", nondeterministic=True)
