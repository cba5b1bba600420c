"""looptune.aligned_arrays: numpy's allocations inside it start on a 64-byte boundary (every way
numpy allocates: empty, zeros (calloc), results, growth by resize (realloc), 0-size), keep their
contents, outlive the block, and numpy's own handler is back after it."""

import gc
import unittest

import numpy as np

import looptune

try:
    from numpy.core.multiarray import get_handler_name
except ImportError:  # numpy < 1.22 has no memory handlers
    get_handler_name = None


def address(a):
    return a.__array_interface__["data"][0]


@unittest.skipIf(get_handler_name is None or not hasattr(looptune._core, "_set_numpy_handler"),
                 "numpy without memory handlers, or looptune built without numpy's headers")
class AlignedArraysTest(unittest.TestCase):
    def test_every_allocation_inside_is_64_byte_aligned(self):
        with looptune.aligned_arrays():
            arrays = [np.empty(n, np.float32) for n in (0, 1, 3, 17, 1000, 123457)]
            arrays += [np.zeros((37, 5)), np.random.default_rng(0).random((9, 11)),
                       np.arange(1000, dtype=np.float32) * 2 + 1]
            grown = np.arange(10.0)
            grown.resize(50000, refcheck=False)
            arrays.append(grown)
        for a in arrays:
            self.assertEqual(address(a) % 64, 0, f"shape {a.shape}")
            self.assertEqual(get_handler_name(a), "looptune_aligned64")
        self.assertTrue((arrays[6] == 0).all())
        np.testing.assert_array_equal(grown[:10], np.arange(10.0))
        self.assertTrue((grown[10:] == 0).all())

    def test_arrays_outlive_the_block_and_the_default_is_back(self):
        with looptune.aligned_arrays():
            kept = np.full((300, 300), 3.0, np.float32)
        after = np.empty(1000, np.float32)
        self.assertEqual(get_handler_name(after), get_handler_name(np.empty(0)))
        self.assertNotEqual(get_handler_name(after), "looptune_aligned64")
        gc.collect()
        self.assertEqual(float(kept.sum()), 3.0 * 300 * 300)
        del kept
        gc.collect()

    def test_the_default_is_back_after_an_exception(self):
        with self.assertRaises(KeyError):
            with looptune.aligned_arrays():
                raise KeyError("inside")
        self.assertNotEqual(get_handler_name(np.empty(10)), "looptune_aligned64")


if __name__ == "__main__":
    unittest.main()
