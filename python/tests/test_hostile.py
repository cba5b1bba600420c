"""Misuse of the looptune module: every one is an exception with the tool's message, never a
crash (each crash case runs in a child process, so a segfault fails the test instead of the run)."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import looptune

CORPUS = os.environ.get("LOOPTUNE_CORPUS_DIR", os.path.join(os.path.dirname(__file__), "../../../shared/corpus/looptune"))
MM = os.path.join(CORPUS, "mm64_256_16_range")

# A matmul's 8x32 register tile with the cursor on the m blocks, then `pack` of B's panels.
PACKED = "split_8,down,swap_down,down,split_32,swap_up,swap_up,swap_up,down,pack"


def bench(name="mm64_64_64"):
    return os.path.join(MM, name)


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


class MisuseTest(unittest.TestCase):
    def test_state_before_reset_raises(self):
        p = run_python(
            "import looptune\n"
            f"env = looptune.LoopToolEnv(benchmark={bench()!r}, measure=False, threads=1)\n"
            "for f in (env.program, env.render, env.history, lambda: env.gflops, env.verify,\n"
            "          lambda: env.step(0)):\n"
            "    try:\n"
            "        f()\n"
            "        print('no error')\n"
            "    except looptune.Error as e:\n"
            "        print('raised:', e)\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("raised: call reset() first"), 6, p.stdout)

    def test_one_env_stepped_from_two_threads_raises_instead_of_crashing(self):
        p = run_python(
            "import threading, looptune\n"
            f"env = looptune.LoopToolEnv(benchmark={bench('mm64_80_64')!r}, max_steps=1000, threads=1)\n"
            "env.reset(seed=0)\n"
            "names = env.action_names\n"
            "acts = [names.index(a) for a in ('split_2', 'merge')]\n"
            "errors, done = [], []\n"
            "def work():\n"
            "    n = 0\n"
            "    for i in range(60):\n"
            "        try:\n"
            "            env.step(acts[i % 2])\n"
            "            n += 1\n"
            "        except looptune.Error as e:\n"
            "            errors.append(str(e))\n"
            "    done.append(n)\n"
            "ts = [threading.Thread(target=work) for _ in range(2)]\n"
            "[t.start() for t in ts]\n"
            "[t.join() for t in ts]\n"
            "print('finished', len(done), sum(done))\n"
            "print('other', [e for e in errors if 'another thread' not in e and 'illegal' not in e])\n"
            "print('verified', env.verify()[0])\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("finished 2", p.stdout)
        self.assertIn("other []", p.stdout)
        self.assertIn("verified True", p.stdout)

    def test_a_non_integer_action_is_refused_not_truncated(self):
        env = looptune.LoopToolEnv(benchmark=bench(), measure=False, threads=1)
        env.reset(seed=0)
        with self.assertRaisesRegex(TypeError, "integer"):
            env.step(1.7)
        with self.assertRaisesRegex(TypeError, "integer"):
            env.step("1")
        self.assertEqual(env.history(), [])
        env.step(np.int64(env.action_names.index("down")))  # numpy integers are indices
        self.assertEqual(env.history(), ["down"])

    def test_no_step_after_truncation(self):
        env = looptune.LoopToolEnv(benchmark=bench(), max_steps=1, measure=False, threads=1)
        env.reset(seed=0)
        down = env.action_names.index("down")
        *_, truncated, _ = env.step(down)
        self.assertTrue(truncated)
        with self.assertRaisesRegex(looptune.Error, "truncated after max_steps=1"):
            env.step(env.action_names.index("up"))
        self.assertEqual(env.history(), ["down"])
        env.reset(seed=0)  # a new episode steps again
        env.step(down)
        self.assertEqual(env.history(), ["down"])

    @unittest.skipIf(looptune.HAVE_GYMNASIUM, "Gymnasium's own spaces are in use")
    def test_stand_in_sample_refuses_a_mask_of_the_wrong_length(self):
        space = looptune.Discrete(5)
        with self.assertRaisesRegex(ValueError, "shape"):
            space.sample(np.array([1, 0], dtype=np.int8))
        with self.assertRaisesRegex(ValueError, "shape"):
            space.sample(np.ones(6, dtype=np.int8))
        self.assertEqual(space.sample(np.array([0, 0, 0, 1, 0], dtype=np.int8)), 3)


class PackedScheduleTest(unittest.TestCase):
    def test_measure_and_export_take_a_packed_program(self):
        packed = looptune.measure(bench(), actions=PACKED, threads=1)
        self.assertTrue(packed["verified"])
        self.assertIn("B_packed", packed["program"])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "packed.program")
            with open(path, "w") as f:
                f.write(packed["program"])
            again = looptune.measure(bench(), schedule=path, threads=1)
            self.assertTrue(again["verified"])
            self.assertEqual(again["program"], packed["program"])
            r = looptune.export(bench(), os.path.join(d, "out"), schedule=path, threads=1)
            self.assertEqual(r["function"], "mm64_64_64")
            # Another computation with the same tensors is still refused, saying why.
            with open(path, "w") as f:
                f.write(packed["program"].replace("+= A[m, k] * B_packed", "+= A[m, k] - B_packed"))
            with self.assertRaisesRegex(looptune.Error, "computes something else"):
                looptune.measure(bench(), schedule=path, threads=1)


if __name__ == "__main__":
    unittest.main()
