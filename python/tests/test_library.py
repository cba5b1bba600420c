"""looptune.load_library: a library `looptool lib build` wrote from a store with two tuned
matmuls and a tuned conv, called on numpy arrays and checked against numpy; every hostile input
(misaligned, strided, Fortran order, wrong dtype, wrong shape, 0-size, lists) runs in a child
process, so a crash fails the test instead of killing the run."""

import ctypes
import gc
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import unittest
import weakref

import numpy as np

import looptune
from looptune import _core

CLI = os.environ.get("LOOPTOOL_CLI")


def cli(*args, env=None):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600,
                       env=None if env is None else {**os.environ, **env})
    if p.returncode != 0:
        raise AssertionError(f"looptool {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p


def address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def conv_ref(X, W):
    n, ci, h, w = X.shape
    co, _, kh, kw = W.shape
    Y = np.zeros((n, co, h - kh + 1, w - kw + 1), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = X[:, :, i:i + h - kh + 1, j:j + w - kw + 1].astype(np.float64)
            Y += np.einsum("nchw,oc->nohw", patch, W[:, :, i, j].astype(np.float64))
    return Y


@unittest.skipUnless(CLI, "LOOPTOOL_CLI is not set (CTest sets it)")
class LibraryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        store = os.path.join(cls.tmp.name, "store.sqlite")
        cli("tune", "--threads", "1", "--matmul", "64,64,64", "--matmul", "33,47,29", "--conv", "1,8,10,36,16,3,3",
            "--store", store, "--budget-s", "0.2", env={"LOOPTUNE_LIBRARY": store})
        cls.dir = os.path.join(cls.tmp.name, "lib")
        cli("lib", "build", "--threads", "1", "--store", store, "--out", cls.dir, "--block", "16,32,64")
        cls.lib = looptune.load_library(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_sgemm(self, m, n, k):
        rng = np.random.default_rng(m * 10007 + n * 101 + k)
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        C = self.lib.sgemm(A, B)
        self.assertEqual(C.shape, (m, n))
        self.assertEqual(C.dtype, np.float32)
        np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4 * max(k, 1))

    def test_kernels_lists_the_tuned_ones(self):
        kinds = sorted((k["kind"], tuple(k["shape"])) for k in self.lib.kernels())
        self.assertEqual(kinds, [("conv2d", (1, 8, 10, 36, 16, 3, 3)), ("matmul", (33, 47, 29)),
                                 ("matmul", (64, 64, 64))])
        for k in self.lib.kernels():
            self.assertTrue(k["function"].startswith("lt_"))
            self.assertTrue(k["verified"])

    def test_tuned_and_unseen_shapes_match_numpy(self):
        for shape in [(64, 64, 64), (33, 47, 29), (1, 1, 1), (1, 200, 70), (13, 17, 19),
                      (67, 131, 263), (100, 37, 200), (5, 1, 3)]:
            with self.subTest(shape=shape):
                self.check_sgemm(*shape)

    def test_conv_tuned_and_unseen(self):
        rng = np.random.default_rng(3)
        for xs, ws in [((1, 8, 10, 36), (16, 8, 3, 3)), ((2, 3, 7, 9), (5, 3, 2, 4))]:
            X = rng.uniform(-1, 1, xs).astype(np.float32)
            W = rng.uniform(-1, 1, ws).astype(np.float32)
            np.testing.assert_allclose(self.lib.sconv2d(X, W), conv_ref(X, W), rtol=1e-4, atol=1e-4)

    def test_the_gil_is_released_during_a_call(self):
        A = np.ones((1001, 1005), dtype=np.float32)
        B = np.ones((1005, 1003), dtype=np.float32)
        count, stop = [0], [False]

        def spin():
            while not stop[0]:
                count[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            before = count[0]
            self.lib.sgemm(A, B)
            during = count[0] - before
        finally:
            stop[0] = True
            t.join()
        self.assertGreater(during, 1000)

    def test_tuned_kernels_on_pointers_at_every_float_offset(self):
        # The library's kernels take any 4-byte aligned pointer: views 4 to 60 bytes past a
        # 64-byte boundary go to the kernel as they are (the C entry takes them) and match.
        self.assertEqual(self.lib.manifest["alignment"], 4)
        rng = np.random.default_rng(5)
        for m, n, k in [(64, 64, 64), (33, 47, 29)]:
            A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
            B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
            want = A.astype(np.float64) @ B
            for offset in (4, 8, 12, 16, 32, 60):
                a, b = misaligned(A, offset), misaligned(B, 64 - offset)
                c = misaligned(np.full((m, n), np.nan, np.float32), offset)
                with self.subTest(shape=(m, n, k), offset=offset):
                    self.assertIsNotNone(_core._sgemm(address(self.lib._sgemm), a, b, c))
                    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * k)
                    self.assertIs(self.lib.sgemm(a, b, out=c), c)

    def test_the_c_entry_takes_only_arrays_it_can_pass_as_they_are(self):
        A, B = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
        fast, at = _core._sgemm, address(self.lib._sgemm)
        self.assertEqual(fast(at, A, B, None).shape, (4, 5))
        for a, b, out in [(A.astype(np.float64), B, None), (np.asfortranarray(A), B, None),
                          (A[:, :2], B[:2], None), (misaligned(A, 1), B, None),
                          (A.astype(">f4"), B, None), (A[None], B, None), (A, B[:2], None),
                          (A.tolist(), B, None), (A, B, np.zeros((5, 4), np.float32)),
                          (A, B, np.zeros((4, 10), np.float32)[:, ::2])]:
            self.assertIsNone(fast(at, a, b, out))
        ro = np.zeros((4, 5), np.float32)
        ro.setflags(write=False)
        self.assertIsNone(fast(at, A, B, ro))
        with self.assertRaises(TypeError):
            fast(at, A, B)
        self.assertEqual(fast(at, A, B, np.ones((4, 5), np.float32)).sum(), 60)

    def test_the_kernel_call_hands_what_it_does_not_take_to_the_checked_path(self):
        lib = looptune.load_library(self.dir)
        self.assertIsInstance(lib.sgemm, _core.KernelCall)
        self.assertEqual(lib.sgemm.__doc__, looptune.KernelLibrary.sgemm.__doc__)
        A, B = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
        self.assertEqual(lib.sgemm(A, B).sum(), 60)
        self.assertEqual(lib.sgemm(A.astype(np.float64), B, convert=True).sum(), 60)
        with self.assertRaises(TypeError):  # float64 without convert: the checked path says so
            lib.sgemm(A.astype(np.float64), B)
        with self.assertRaises(TypeError):
            lib.sgemm(A, B, colour="red")
        with self.assertRaises(TypeError):
            lib.sgemm(A)
        # A library error (the output overlaps an input) raises, whichever path ran.
        S = np.ones((4, 4), np.float32)
        for call in (lib.sgemm, looptune.KernelLibrary.sgemm.__get__(lib)):
            with self.assertRaises(looptune.KernelError):
                call(S, S, out=S)
        X, W = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
        self.assertEqual(lib.sconv2d(X, W).shape, (1, 3, 3, 3))
        self.assertEqual(lib.sconv2d(X, W, pad=1).shape, (1, 3, 5, 5))
        # The library and its calls refer to each other: the cycle is collected.
        gone = weakref.ref(lib)
        del lib, call
        gc.collect()
        self.assertIsNone(gone())

    def test_the_torch_example_matches_torch_matmul(self):
        if importlib.util.find_spec("torch") is None:
            self.skipTest("torch is not importable")
        example = os.path.join(os.path.dirname(__file__), "..", "examples", "torch_kernel.py")
        p = subprocess.run([sys.executable, example, self.dir], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("vs torch.matmul (ok)"), 2, p.stdout)

    def test_hostile_inputs_never_crash(self):
        for path in ("the C entry", "ctypes"):
            with self.subTest(path=path):
                self.hostile_inputs_never_crash(path == "ctypes")

    def hostile_inputs_never_crash(self, ctypes_only):
        # One child runs every case and prints "name: outcome"; a crash ends it early.
        code = HOSTILE.replace("LIBDIR", repr(self.dir))
        if ctypes_only:
            code = code.replace("rng = np.random", "del lib.sgemm, lib.sconv2d\nrng = np.random")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, f"child died ({p.returncode}) after:\n{p.stdout}\n{p.stderr}")
        lines = dict(line.split(": ", 1) for line in p.stdout.splitlines() if ": " in line)
        expected = {
            "misaligned by 1 byte": "ok", "misaligned by 4 bytes": "ok", "strided": "ok",
            "fortran order": "ok", "transposed view": "ok", "broadcast view": "ok",
            "read-only": "ok", "big-endian": "TypeError", "big-endian converted": "ok",
            "float64": "TypeError", "int32": "TypeError", "float64 converted": "ok",
            "int32 converted": "ok", "list": "TypeError", "list converted": "ok",
            "strings converted": "TypeError", "1-d": "ValueError", "3-d": "ValueError",
            "inner mismatch": "ValueError", "0 rows": "ok", "0 inner": "ok", "0 columns": "ok",
            "all 0": "ok", "result too big": "ValueError", "scalar": "TypeError", "None": "TypeError",
            "conv misaligned": "ok", "conv 3-d": "ValueError", "conv channels": "ValueError",
            "conv kernel too big": "ValueError", "conv 0 images": "ok", "conv float64": "TypeError",
            "out aligned": "ok", "out misaligned": "ok", "out strided": "ok",
            "out wrong shape": "ValueError", "out float64": "TypeError", "out read-only": "ValueError",
            "aligned_empty": "ok",
        }
        self.assertEqual(lines, expected)


def misaligned(x, offset):
    """A copy of x whose data starts `offset` bytes past a 64-byte boundary."""
    raw = np.zeros(x.nbytes + 64 + offset, dtype=np.uint8)
    start = (-raw.ctypes.data % 64) + offset
    v = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    v[...] = x
    return v


HOSTILE = r'''
import numpy as np
import looptune
lib = looptune.load_library(LIBDIR)
rng = np.random.default_rng(0)
A = rng.uniform(-1, 1, (13, 21)).astype(np.float32)
B = rng.uniform(-1, 1, (21, 9)).astype(np.float32)
want = A.astype(np.float64) @ B

def misaligned(x, offset):
    raw = np.zeros(x.nbytes + 64 + offset, dtype=np.uint8)
    start = (-raw.ctypes.data % 64) + offset
    v = raw[start:start + x.nbytes].view(np.float32).reshape(x.shape)
    v[...] = x
    return v

def big_endian(x):
    return x.astype(">f4")

def case(name, f, check=None):
    try:
        out = f()
        if check is not None:
            check(out)
        print(f"{name}: ok", flush=True)
    except AssertionError as e:
        print(f"{name}: wrong result {e}", flush=True)
    except Exception as e:
        print(f"{name}: {type(e).__name__}", flush=True)

def close(c, w=None):
    np.testing.assert_allclose(c, want if w is None else w, rtol=1e-4, atol=1e-3)

wide = np.zeros((13, 42), dtype=np.float32); wide[:, ::2] = A
case("misaligned by 1 byte", lambda: lib.sgemm(misaligned(A, 1), misaligned(B, 1)), close)
case("misaligned by 4 bytes", lambda: lib.sgemm(misaligned(A, 4), misaligned(B, 12)), close)
case("strided", lambda: lib.sgemm(wide[:, ::2], B), close)
case("fortran order", lambda: lib.sgemm(np.asfortranarray(A), np.asfortranarray(B)), close)
case("transposed view", lambda: lib.sgemm(np.ascontiguousarray(A.T).T, B), close)
row = rng.uniform(-1, 1, (1, 21)).astype(np.float32)
case("broadcast view", lambda: lib.sgemm(np.broadcast_to(row, (13, 21)), B),
     lambda c: close(c, np.broadcast_to(row, (13, 21)).astype(np.float64) @ B))
ro = A.copy(); ro.setflags(write=False)
case("read-only", lambda: lib.sgemm(ro, B), close)
case("big-endian", lambda: lib.sgemm(big_endian(A), B))
case("big-endian converted", lambda: lib.sgemm(big_endian(A), B, convert=True), close)
case("float64", lambda: lib.sgemm(A.astype(np.float64), B))
case("int32", lambda: lib.sgemm(A.astype(np.int32), B))
case("float64 converted", lambda: lib.sgemm(A.astype(np.float64), B, convert=True), close)
Ai, Bi = np.arange(12, dtype=np.int32).reshape(3, 4), np.ones((4, 2), dtype=np.int32)
case("int32 converted", lambda: lib.sgemm(Ai, Bi, convert=True), lambda c: close(c, Ai @ Bi))
case("list", lambda: lib.sgemm([[1.0, 2.0]], [[3.0], [4.0]]))
case("list converted", lambda: lib.sgemm([[1.0, 2.0]], [[3.0], [4.0]], convert=True),
     lambda c: close(c, np.array([[11.0]])))
case("strings converted", lambda: lib.sgemm([["a", "b"]], [["c"], ["d"]], convert=True))
case("1-d", lambda: lib.sgemm(A[0], B))
case("3-d", lambda: lib.sgemm(A[None], B))
case("inner mismatch", lambda: lib.sgemm(A, B[:20]))
case("0 rows", lambda: lib.sgemm(np.zeros((0, 21), np.float32), B), lambda c: close(c, np.zeros((0, 9))))
case("0 inner", lambda: lib.sgemm(np.zeros((13, 0), np.float32), np.zeros((0, 9), np.float32)),
     lambda c: close(c, np.zeros((13, 9))))
case("0 columns", lambda: lib.sgemm(A, np.zeros((21, 0), np.float32)), lambda c: close(c, np.zeros((13, 0))))
case("all 0", lambda: lib.sgemm(np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32)),
     lambda c: close(c, np.zeros((0, 0))))
huge = np.zeros((2**40, 0), np.float32)
case("result too big", lambda: lib.sgemm(huge, huge.T))
case("scalar", lambda: lib.sgemm(3.0, B))
case("None", lambda: lib.sgemm(None, None))
X = rng.uniform(-1, 1, (2, 3, 7, 9)).astype(np.float32)
W = rng.uniform(-1, 1, (5, 3, 2, 4)).astype(np.float32)
def conv_want():
    n, ci, h, w = X.shape; co, _, kh, kw = W.shape
    Y = np.zeros((n, co, h - kh + 1, w - kw + 1))
    for i in range(kh):
        for j in range(kw):
            Y += np.einsum("nchw,oc->nohw", X[:, :, i:i + h - kh + 1, j:j + w - kw + 1].astype(np.float64), W[:, :, i, j])
    return Y
case("conv misaligned", lambda: lib.sconv2d(misaligned(X, 4), misaligned(W, 1)), lambda y: close(y, conv_want()))
case("conv 3-d", lambda: lib.sconv2d(X[0], W))
case("conv channels", lambda: lib.sconv2d(X, W[:, :2]))
case("conv kernel too big", lambda: lib.sconv2d(X[:, :, :1], W))
case("conv 0 images", lambda: lib.sconv2d(X[:0], W), lambda y: close(y, np.zeros((0, 5, 6, 6))))
case("conv float64", lambda: lib.sconv2d(X.astype(np.float64), W))
out = looptune.aligned_empty((13, 9))
case("out aligned", lambda: lib.sgemm(A, B, out=out), lambda c: (close(c), c is out or 1 / 0))
case("out misaligned", lambda: lib.sgemm(A, B, out=misaligned(np.zeros((13, 9), np.float32), 4)), close)
case("out strided", lambda: lib.sgemm(A, B, out=np.zeros((13, 18), np.float32)[:, ::2]), close)
case("out wrong shape", lambda: lib.sgemm(A, B, out=np.zeros((9, 13), np.float32)))
case("out float64", lambda: lib.sgemm(A, B, out=np.zeros((13, 9))))
ro_out = np.zeros((13, 9), np.float32); ro_out.setflags(write=False)
case("out read-only", lambda: lib.sgemm(A, B, out=ro_out))
def check_aligned(a):
    assert a.ctypes.data % 64 == 0 and a.shape == (3, 5) and a.dtype == np.float32, a
case("aligned_empty", lambda: looptune.aligned_empty((3, 5)), check_aligned)
'''

if __name__ == "__main__":
    unittest.main()
