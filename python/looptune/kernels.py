"""Kernels of a library written by `looptool lib build`, called on numpy arrays.

    lib = looptune.load_library("out/kernels")        # the directory, or the .so itself
    C = lib.sgemm(A, B)                                # float32 (M, K) @ (K, N) -> (M, N)
    Y = lib.sconv2d(X, W, stride=1, pad=0)             # NCHW input, OIHW weights
    lib.kernels()                                      # the tuned kernels it holds

The library's C functions (lt_sgemm, lt_sconv2d, lt_sconv2d_ex) are called with the GIL
released (calls of 2^20 FLOPs and more: shorter ones keep it, as numpy does), so other Python
threads run meanwhile: through looptune._core's KernelCall when the arguments are float32
arrays it takes as they are (its per-call cost is a fraction of ctypes'), else through
ctypes after the checks below. Every input is checked before the call: float32 only (anything
else raises TypeError, or is converted with convert=True), the right number of dimensions and
matching sizes (ValueError). A C-contiguous float32 array is passed as it is, with no copy: the
library's kernels take any 4-byte aligned pointer (libraries built with `lib build --align 64`:
64-byte aligned ones, as looptune.aligned_empty makes). Other arrays (strided, Fortran order,
misaligned below 4 bytes) are copied first. 0-size inputs give the empty or zero result. `out=`
writes the result into an existing array (no allocation per call; a non-contiguous `out` gets
the result through a copy). A non-zero return code of the library raises looptune.KernelError.
Arrays made inside `with looptune.aligned_arrays():` start on a 64-byte boundary, which the
kernels stream fastest (numpy's own are 16-byte aligned: each vector load then spans two lines).
"""

import contextlib
import ctypes
import json
import operator
import os
import types

import numpy as np

try:
    from . import _core
except ImportError:  # the C entries are an optimisation: ctypes does the calls too
    _core = None
_KernelCall = getattr(_core, "KernelCall", None)

__all__ = ["load_library", "KernelLibrary", "KernelError", "aligned_empty", "aligned_arrays"]

_ALIGN = 64
_LIB_NAME = "liblooptune_kernels.so"
_CODES = {1: "bad arguments", 3: "out of memory"}


class KernelError(RuntimeError):
    """The library's function returned an error code."""


def aligned_empty(shape):
    """A new C-contiguous float32 array of `shape` whose data starts on a 64-byte boundary: what
    a library built with `lib build --align 64` takes without a copy (any float32 array is
    taken as it is by one of the default, `--align 4`)."""
    shape = tuple(shape) if np.iterable(shape) else (shape,)
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(n + _ALIGN // 4, dtype=np.float32)
    offset = (-raw.ctypes.data % _ALIGN) // 4
    return raw[offset:offset + n].reshape(shape)


@contextlib.contextmanager
def aligned_arrays():
    """Within it, every array numpy allocates (np.empty, np.random.rand, results of arithmetic,
    ...) starts on a 64-byte boundary, so kernels stream whole cache lines from it: numpy's own
    arrays are 16-byte aligned, and 64-byte vector loads from them each span two cache lines
    (docs/python.md gives what that costs). Arrays made inside outlive it. numpy's handler is
    per context: other threads keep numpy's default."""
    if not hasattr(_core, "_set_numpy_handler"):
        raise RuntimeError("looptune was built without numpy's headers: aligned_arrays is unavailable")
    old = _core._set_numpy_handler(_core._aligned_numpy_handler())
    try:
        yield
    finally:
        _core._set_numpy_handler(old)


def _as_kernel_input(x, ndim, what, convert, align):
    """x as a C-contiguous, `align`-byte aligned float32 array of `ndim` dimensions (copied
    when it is not one already)."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        dtype = x.dtype if isinstance(x, np.ndarray) else type(x).__name__
        if not convert:
            raise TypeError(f"{what}: float32 numpy array expected, got {dtype} "
                            "(pass convert=True to convert)")
        try:
            x = np.asarray(x, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what}: cannot convert to float32: {e}") from None
    if x.ndim != ndim:
        raise ValueError(f"{what}: {ndim} dimensions expected, got shape {x.shape}")
    if x.flags.c_contiguous and _ptr(x) % align == 0:
        return x
    out = aligned_empty(x.shape)
    out[...] = x
    return out


def _ptr(a):
    return a.__array_interface__["data"][0]  # an int: cheaper than ctypes.data_as


def _output(out, shape, what, align):
    """`out` checked as the result's array (float32, C-contiguous, `shape`), or a new one; the
    kernel writes into the returned array, and into `out` after it when they differ."""
    if out is None:
        return aligned_empty(shape)  # aligned: split cache lines slow streaming kernels
    if not isinstance(out, np.ndarray) or out.dtype != np.float32:
        raise TypeError(f"{what}: out must be a float32 numpy array")
    if out.shape != tuple(shape):
        raise ValueError(f"{what}: out has shape {out.shape}, the result {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError(f"{what}: out is read-only")
    if out.flags.c_contiguous and _ptr(out) % align == 0:
        return out
    return aligned_empty(shape)


def _finish(result, out):
    if out is not None and result is not out:
        out[...] = result
        return out
    return result


class KernelLibrary:
    """A loaded kernel library; see the module's docstring."""

    def __init__(self, path):
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, _LIB_NAME)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no kernel library (write one with `looptool lib build`)")
        self.path = path
        self._lib = ctypes.CDLL(os.path.abspath(path))  # CDLL: the GIL is released per call
        i64, fp = ctypes.c_int64, ctypes.c_void_p
        self._sgemm = self._lib.lt_sgemm
        self._sgemm.argtypes = [i64, i64, i64, fp, fp, fp]
        self._sgemm.restype = ctypes.c_int
        self._sconv2d = self._lib.lt_sconv2d
        self._sconv2d.argtypes = [i64] * 7 + [fp, fp, fp]
        self._sconv2d.restype = ctypes.c_int
        # Libraries built before strides and padding have lt_sconv2d alone.
        self._sconv2d_ex = getattr(self._lib, "lt_sconv2d_ex", None)
        if self._sconv2d_ex is not None:
            self._sconv2d_ex.argtypes = [i64] * 9 + [fp, fp, fp]
            self._sconv2d_ex.restype = ctypes.c_int
        info = self._lib.lt_library_info
        info.restype = ctypes.c_char_p
        self.manifest = json.loads(info().decode())
        # Libraries from before the alignment was recorded need 64-byte aligned pointers.
        self._align = int(self.manifest.get("alignment", _ALIGN))
        # lib.sgemm and lib.sconv2d: the C entry (looptune._core.KernelCall) in front of the
        # methods below, which take every call it leaves (`del lib.sgemm` leaves them alone).
        # It calls the functions at these addresses; self._lib keeps them loaded.
        if _KernelCall is not None:
            for kind, name in enumerate(("sgemm", "sconv2d")):
                at = ctypes.cast(getattr(self, "_" + name), ctypes.c_void_p).value
                general = types.MethodType(getattr(KernelLibrary, name), self)
                setattr(self, name, _KernelCall(at, kind, general))

    def kernels(self):
        """The tuned kernels: a list of dicts (function, name, kind, shape, gflops, verified)."""
        keys = ("function", "name", "kind", "shape", "gflops", "verified")
        return [{k: e[k] for k in keys} for e in self.manifest["kernels"]]

    @staticmethod
    def _check(rc, what):
        if rc != 0:
            raise KernelError(f"{what}: the library returned {rc} ({_CODES.get(rc, 'unknown error')})")

    def sgemm(self, A, B, *, convert=False, out=None):
        """A @ B for float32 matrices A (M, K) and B (K, N): a new (M, N) float32 array, or
        `out` (float32, that shape) filled; reusing `out` saves allocating it."""
        A = _as_kernel_input(A, 2, "sgemm: A", convert, self._align)
        B = _as_kernel_input(B, 2, "sgemm: B", convert, self._align)
        (m, k), (k2, n) = A.shape, B.shape
        if k != k2:
            raise ValueError(f"sgemm: A is {A.shape} and B is {B.shape}: inner sizes differ")
        C = _output(out, (m, n), "sgemm", self._align)
        self._check(self._sgemm(m, n, k, _ptr(A), _ptr(B), _ptr(C)), "sgemm")
        return _finish(C, out)

    def sconv2d(self, X, W, *, stride=1, pad=0, convert=False, out=None):
        """The convolution of X (N, CI, H, W) with weights W (CO, CI, KH, KW), `stride` along
        rows and columns, X padded with `pad` zeros on each side: a new (N, CO, HO, WO) float32
        array (HO = (H + 2 pad - KH) // stride + 1, WO likewise), or `out` filled."""
        stride, pad = _conv_int(stride, "stride", 1), _conv_int(pad, "pad", 0)
        X = _as_kernel_input(X, 4, "sconv2d: X", convert, self._align)
        W = _as_kernel_input(W, 4, "sconv2d: W", convert, self._align)
        (n, ci, h, w), (co, ci2, kh, kw) = X.shape, W.shape
        if ci != ci2:
            raise ValueError(f"sconv2d: X is {X.shape} and W is {W.shape}: channels differ")
        if kh < 1 or kw < 1 or kh > h + 2 * pad or kw > w + 2 * pad:
            raise ValueError(f"sconv2d: kernel {kh}x{kw} does not fit the {h}x{w} image "
                             f"padded by {pad}")
        Y = _output(out, (n, co, (h + 2 * pad - kh) // stride + 1,
                          (w + 2 * pad - kw) // stride + 1), "sconv2d", self._align)
        if stride == 1 and pad == 0:
            rc = self._sconv2d(n, ci, h, w, co, kh, kw, _ptr(X), _ptr(W), _ptr(Y))
        elif self._sconv2d_ex is None:
            raise KernelError(f"{self.path}: built before strides and padding (no lt_sconv2d_ex); "
                              "rebuild it with `looptool lib build`")
        else:
            rc = self._sconv2d_ex(n, ci, h, w, co, kh, kw, stride, pad, _ptr(X), _ptr(W), _ptr(Y))
        self._check(rc, "sconv2d")
        return _finish(Y, out)

    def __repr__(self):
        return f"KernelLibrary({self.path!r}, {len(self.manifest['kernels'])} kernels)"


def _conv_int(v, name, low):
    """v as an int in [low, 2^40], else ValueError naming it."""
    try:
        i = operator.index(v)
    except TypeError:
        i = None
    if isinstance(v, bool) or i is None or i < low or i > 1 << 40:
        raise ValueError(f"sconv2d: {name} {v!r} is not an integer in [{low}, 2^40]")
    return i


def load_library(path):
    """The kernel library at `path`: a directory `looptool lib build --out` wrote, or its .so."""
    return KernelLibrary(path)
