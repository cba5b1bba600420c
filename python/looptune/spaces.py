"""Gymnasium's spaces and Env when gymnasium is importable; otherwise small stand-ins with the
same attributes an agent reads (.n, .shape, .dtype, .sample(), .contains(); np_random, spec,
unwrapped)."""

import numpy as np

try:
    import gymnasium as _gym

    HAVE_GYMNASIUM = True
except ImportError:
    HAVE_GYMNASIUM = False

if HAVE_GYMNASIUM:
    from gymnasium import Env
    from gymnasium.spaces import Dict, Discrete

    def Box(low, high, shape):
        def full(v):
            return np.broadcast_to(np.asarray(v, np.float32), shape).copy()
        return _gym.spaces.Box(full(low), full(high), shape, dtype=np.float32)

else:

    class Env:
        """The parts of gymnasium.Env the environment relies on. np_random is the generator
        Gymnasium would make (PCG64 from the seed), so a seed draws the same without it."""

        metadata = {"render_modes": []}
        render_mode = None
        spec = None
        _np_random = None

        @property
        def np_random(self):
            if self._np_random is None:
                self._np_random = np.random.default_rng()
            return self._np_random

        def reset(self, *, seed=None, options=None):
            if seed is not None:
                self._np_random = np.random.default_rng(seed)

        @property
        def unwrapped(self):
            return self

        def close(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *args):
            self.close()
            return False

    class Discrete:
        def __init__(self, n, seed=None):
            self.n = int(n)
            self.shape = ()
            self.dtype = np.int64
            self._rng = np.random.default_rng(seed)

        def seed(self, seed=None):
            self._rng = np.random.default_rng(seed)

        def sample(self, mask=None):
            """A uniform action; with a mask (numpy bool/int8 of length n), among the allowed ones."""
            if mask is None:
                return int(self._rng.integers(self.n))
            mask = np.asarray(mask)
            if mask.shape != (self.n,):
                raise ValueError(f"sample(): the mask has shape {mask.shape}, expected ({self.n},)")
            allowed = np.flatnonzero(mask)
            if allowed.size == 0:
                raise ValueError("sample(): the mask allows no action")
            return int(self._rng.choice(allowed))

        def contains(self, x):
            return isinstance(x, (int, np.integer)) and 0 <= int(x) < self.n

        __contains__ = contains

        def __repr__(self):
            return f"Discrete({self.n})"

    class Box:
        def __init__(self, low, high, shape):
            self.shape = tuple(shape)
            self.dtype = np.float32
            self.low = np.broadcast_to(np.asarray(low, np.float32), self.shape).copy()
            self.high = np.broadcast_to(np.asarray(high, np.float32), self.shape).copy()
            self._rng = np.random.default_rng()

        def sample(self):
            hi = np.where(np.isinf(self.high), self.low + 1.0, self.high)
            return self._rng.uniform(self.low, hi).astype(np.float32)

        def contains(self, x):
            x = np.asarray(x)
            return (x.shape == self.shape and x.dtype == self.dtype
                    and bool(np.all(x >= self.low) and np.all(x <= self.high)))

        __contains__ = contains

        def __repr__(self):
            return f"Box({self.shape}, float32)"

    class Dict:
        def __init__(self, spaces):
            self.spaces = dict(spaces)
            self.shape = None

        def __getitem__(self, key):
            return self.spaces[key]

        def keys(self):
            return self.spaces.keys()

        def sample(self):
            return {k: s.sample() for k, s in self.spaces.items()}

        def contains(self, x):
            return isinstance(x, dict) and all(k in x and s.contains(x[k]) for k, s in self.spaces.items()
                                               if hasattr(s, "contains"))

        __contains__ = contains

        def __repr__(self):
            return "Dict(" + ", ".join(f"{k}: {s!r}" for k, s in self.spaces.items()) + ")"
