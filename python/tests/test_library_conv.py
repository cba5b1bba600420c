"""Strided and padded convolutions end to end: tuned by shape (`looptool tune --conv` with a
stride and a padding, and Python's tune(conv=...)), compiled by `lib build`, and called through
load_library(...).sconv2d(X, W, stride=, pad=), checked against numpy; bad strides and paddings
raise."""

import os
import subprocess
import tempfile
import unittest

import numpy as np

import looptune

CLI = os.environ.get("LOOPTOOL_CLI")


def cli(*args, env=None):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600,
                       env=None if env is None else {**os.environ, **env})
    if p.returncode != 0:
        raise AssertionError(f"looptool {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p


def conv_ref(X, W, stride, pad):
    """numpy's convolution of X padded with `pad` zeros, every `stride`-th position."""
    n, ci, h, w = X.shape
    co, _, kh, kw = W.shape
    Xp = np.pad(X.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    Y = np.zeros((n, co, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = Xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            Y += np.einsum("nchw,oc->nohw", patch, W[:, :, i, j].astype(np.float64))
    return Y


@unittest.skipUnless(CLI, "LOOPTOOL_CLI is not set (CTest sets it)")
class PaddedConvLibraryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        store = os.path.join(cls.tmp.name, "store.sqlite")
        cli("tune", "--threads", "1", "--conv", "1,4,9,20,16,3,3,2,1", "--conv", "1,3,7,9,8,3,3,1,1",
            "--store", store, "--budget-s", "0.2", env={"LOOPTUNE_LIBRARY": store})
        cls.dir = os.path.join(cls.tmp.name, "lib")
        cli("lib", "build", "--threads", "1", "--store", store, "--out", cls.dir, "--block", "16,32,64")
        cls.lib = looptune.load_library(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_tuned_kernels_are_listed_with_stride_and_padding(self):
        shapes = sorted(tuple(k["shape"]) for k in self.lib.kernels())
        self.assertEqual(shapes, [(1, 3, 7, 9, 8, 3, 3, 1, 1), (1, 4, 9, 20, 16, 3, 3, 2, 1)])

    def test_tuned_and_unseen_strides_and_paddings_match_numpy(self):
        rng = np.random.default_rng(5)
        for xs, ws, stride, pad in [((1, 4, 9, 20), (16, 4, 3, 3), 2, 1),
                                    ((1, 3, 7, 9), (8, 3, 3, 3), 1, 1),
                                    ((2, 3, 8, 7), (5, 3, 3, 3), 2, 2),
                                    ((1, 2, 6, 6), (3, 2, 5, 5), 3, 0),
                                    ((1, 2, 6, 6), (3, 2, 2, 2), 1, 0)]:
            with self.subTest(xs=xs, stride=stride, pad=pad):
                X = rng.uniform(-1, 1, xs).astype(np.float32)
                W = rng.uniform(-1, 1, ws).astype(np.float32)
                Y = self.lib.sconv2d(X, W, stride=stride, pad=pad)
                np.testing.assert_allclose(Y, conv_ref(X, W, stride, pad), rtol=1e-4, atol=1e-4)

    def test_bad_strides_and_paddings_raise(self):
        X = np.zeros((1, 2, 4, 4), np.float32)
        W = np.zeros((3, 2, 3, 3), np.float32)
        for kwargs in [{"stride": 0}, {"stride": 1.5}, {"pad": -1}, {"pad": "1"},
                       {"stride": True}, {"pad": 1 << 50}]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(ValueError):
                    self.lib.sconv2d(X, W, **kwargs)
        with self.assertRaises(ValueError):  # kernel larger than the padded image
            self.lib.sconv2d(X[:, :, :1, :1], W, pad=0)
        self.assertEqual(self.lib.sconv2d(X, W, stride=np.int64(2), pad=1).shape, (1, 3, 2, 2))


class PaddedConvTuneTest(unittest.TestCase):
    def test_tune_by_shape_takes_a_stride_and_a_padding(self):
        r = looptune.tune(conv=(1, 4, 9, 9, 8, 3, 3, 2, 1), budget_s=0.1, library="off", threads=1)
        self.assertIn("tensor P temp 1 4 11 11", r["program"])
        self.assertGreater(r["gflops"], 0)
        with self.assertRaises(Exception) as e:
            looptune.tune(conv=(1, 4, 9, 9, 8, 3, 3, 1, 3), budget_s=0.1, library="off", threads=1)
        self.assertIn("padding", str(e.exception))


if __name__ == "__main__":
    unittest.main()
