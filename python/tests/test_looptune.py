"""The looptune Python module, run by CTest with Debian's python3 -m unittest.

PYTHONPATH points at build/python; LOOPTUNE_CORPUS_DIR at LoopTune's corpus; LOOPTOOL_CLI at
the built command line."""

import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import looptune

CORPUS = os.environ.get("LOOPTUNE_CORPUS_DIR", os.path.join(os.path.dirname(__file__), "../../../shared/corpus/looptune"))
MM = os.path.join(CORPUS, "mm64_256_16_range")
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def bench(name="mm64_64_64"):
    return os.path.join(MM, name)


class EnvironmentTest(unittest.TestCase):
    def test_reset_and_step_follow_gymnasiums_shape(self):
        env = looptune.LoopToolEnv(benchmark=bench(), max_steps=3, threads=1)
        obs, info = env.reset(seed=0)
        self.assertEqual(set(obs), {"loops_tensor", "stride_tensor", "prev_actions_tensor", "machine_tensor"})
        for key, space in env.observation_space.spaces.items():
            self.assertEqual(obs[key].shape, space.shape, key)
            self.assertEqual(obs[key].dtype, np.float32, key)
        mask = info["action_mask"]
        self.assertEqual(mask.dtype, np.int8)  # as Gymnasium's Discrete.sample(mask=) takes it
        self.assertEqual(mask.shape, (env.action_space.n,))
        self.assertGreater(info["gflops"], 0)
        names = env.action_names
        for i in range(3):
            action = names.index("down") if i < 2 else names.index("vectorize")
            self.assertTrue(info["action_mask"][action], names[action])
            obs, reward, terminated, truncated, info = env.step(action)
            self.assertIsInstance(reward, float)
            self.assertFalse(terminated)
            self.assertEqual(truncated, i == 2)
        self.assertEqual(env.history(), ["down", "down", "vectorize"])
        self.assertEqual(obs["prev_actions_tensor"][0].argmax(), names.index("vectorize"))
        ok, err = env.verify()
        self.assertTrue(ok, err)
        self.assertIn("looptool-program", env.program())

    def test_a_random_masked_rollout_stays_correct(self):
        env = looptune.LoopToolEnv(benchmark=bench("mm64_80_64"), max_steps=8, threads=1)
        env.action_space.seed(3) if hasattr(env.action_space, "seed") else None
        obs, info = env.reset(seed=3)
        truncated = terminated = False
        while not (truncated or terminated):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample(info["action_mask"]))
        ok, err = env.verify()
        self.assertTrue(ok, err)

    def test_an_illegal_action_raises_the_tools_message(self):
        env = looptune.LoopToolEnv(benchmark=bench(), threads=1)
        obs, info = env.reset()
        illegal = int(np.flatnonzero(info["action_mask"] == 0)[0])
        with self.assertRaisesRegex(looptune.Error, "illegal action " + env.action_names[illegal]):
            env.step(illegal)
        with self.assertRaisesRegex(looptune.Error, "out of range"):
            env.step(env.action_space.n)

    def test_bad_arguments_raise_with_the_file_named(self):
        with self.assertRaisesRegex(looptune.Error, "no_such_file"):
            looptune.LoopToolEnv(benchmark="no_such_file", threads=1)
        with self.assertRaisesRegex(looptune.Error, "exactly one"):
            looptune.LoopToolEnv(threads=1)
        with self.assertRaises(looptune.Error):
            looptune.LoopToolEnv(benchmark=bench(), action_space="nonsense", threads=1)

    def test_a_dataset_draws_benchmarks_by_seed(self):
        env = looptune.LoopToolEnv(dataset=MM, split="test", measure=False, threads=1)
        # 10% of the corpus, LoopTune's 25 test benchmarks among them (env/dataset.h).
        self.assertEqual(len(env.benchmarks), round(0.1 * len(os.listdir(MM))))
        self.assertIn(bench("mm112_208_256"), env.benchmarks)
        first = [env.reset(seed=5)[1]["benchmark"] for _ in range(3)]
        again = [env.reset(seed=5)[1]["benchmark"] for _ in range(3)]
        self.assertEqual(first[0], again[0])
        self.assertIn(first[0], env.benchmarks)
        obs, info = env.reset(options={"benchmark": bench()})
        self.assertEqual(info["benchmark"], bench())

    def test_graph_observation_as_arrays(self):
        env = looptune.LoopToolEnv(benchmark=bench(), graph=True, measure=False, threads=1)
        obs, _ = env.reset()
        self.assertEqual(obs["graph_nodes"].shape[1], 10)
        self.assertEqual(obs["graph_edges"].shape, (obs["graph_nodes"].shape[0] - 1, 2))  # a tree
        np.testing.assert_array_equal(obs["graph_features"], obs["machine_tensor"])

    def test_the_machine_vector_describes_this_machine_and_the_threads(self):
        one = looptune.LoopToolEnv(benchmark=bench(), measure=False, threads=1)
        two = looptune.LoopToolEnv(benchmark=bench(), measure=False, threads=2)
        space = one.observation_space["machine_tensor"]
        self.assertEqual(space.shape, (looptune._core.MACHINE_FEATURES,))
        np.testing.assert_array_equal(space.low, 0.0)
        np.testing.assert_array_equal(space.high, 1.0)
        m1 = one.reset(seed=0)[0]["machine_tensor"]
        m2 = two.reset(seed=0)[0]["machine_tensor"]
        self.assertIn(m1, space)
        self.assertIn(m2, space)
        # Caches, vector width, peak and cores are the machine's: the same in both; the threads
        # used (the last two entries) are not. Steps keep the vector.
        np.testing.assert_array_equal(m1[:6], m2[:6])
        self.assertLess(m1[7], m2[7])
        self.assertEqual(m1[3] in (0.25, 0.5, 1.0), True)
        obs = one.step(int(np.flatnonzero(one.action_masks())[0]))[0]
        np.testing.assert_array_equal(obs["machine_tensor"], m1)

    def test_the_gil_is_released_while_measuring(self):
        ticks = 0
        errors = []

        def work():
            try:
                looptune.measure(bench("mm256_256_256"), verify=False, threads=1)
            except Exception as e:  # reported below: waiting on a flag it never set hung
                errors.append(e)

        t = threading.Thread(target=work)
        t.start()
        while t.is_alive():
            ticks += 1
            time.sleep(0.001)
        t.join()
        self.assertEqual(errors, [])
        self.assertGreater(ticks, 20)  # the main thread ran while the kernel was measured

    @unittest.skipIf(looptune.HAVE_GYMNASIUM, "Gymnasium's own spaces are in use")
    def test_stand_in_spaces_sample_within_the_mask(self):
        space = looptune.Discrete(5)
        mask = np.array([0, 0, 1, 0, 1], dtype=np.int8)
        seen = {space.sample(mask) for _ in range(50)}
        self.assertEqual(seen, {2, 4})
        self.assertIn(space.sample(), range(5))
        box = looptune.LoopToolEnv(benchmark=bench(), measure=False, threads=1).observation_space["stride_tensor"]
        self.assertEqual(box.sample().shape, (32,))


class ToolTest(unittest.TestCase):
    def test_measure_a_schedule_and_check_it(self):
        r = looptune.measure(bench(), actions="down,down,vectorize", threads=1)
        self.assertTrue(r["verified"])
        self.assertGreater(r["gflops"], 0)
        with self.assertRaisesRegex(looptune.Error, "split_7000"):
            looptune.measure(bench(), actions="split_7000", threads=1)

    def test_export_writes_the_kernel_files(self):
        with tempfile.TemporaryDirectory() as out:
            r = looptune.export(bench(), out, actions="split_8,down,down,down,vectorize", threads=1)
            self.assertEqual(r["function"], "mm64_64_64")
            for ext in (".o", ".h", ".ll", ".s", ".program"):
                self.assertTrue(os.path.getsize(os.path.join(out, "mm64_64_64" + ext)) > 0, ext)
            again = looptune.measure(bench(), schedule=os.path.join(out, "mm64_64_64.program"), threads=1)
            self.assertTrue(again["verified"])
            with self.assertRaisesRegex(looptune.Error, "pentium-9000"):
                looptune.export(bench(), out, cpu="pentium-9000", threads=1)

    def test_tune_with_the_shipped_policy(self):
        r = looptune.tune(bench("mm112_112_128"), threads=1)
        self.assertGreater(r["gflops"], r["base_gflops"])
        self.assertGreaterEqual(r["gflops"], r["greedy_gflops"])
        self.assertGreaterEqual(r["gflops"], r["best_seed_gflops"])  # the seeds, measured again
        self.assertTrue(r["program"].startswith("looptool-program"))
        # The best actions replay to a schedule that verifies.
        m = looptune.measure(bench("mm112_112_128"), actions=",".join(r["best_actions"]), threads=1)
        self.assertTrue(m["verified"])
        # So do the best seed's, a `tile` member.
        self.assertTrue(r["best_seed"].startswith("tile "), r["best_seed"])
        s = looptune.measure(bench("mm112_112_128"), actions=",".join(r["best_seed_actions"]), threads=1)
        self.assertTrue(s["verified"])
        g = looptune.tune(bench("mm112_112_128"), greedy=True, threads=1)
        self.assertEqual(g["best_actions"], g["greedy_actions"][:len(g["best_actions"])])
        with self.assertRaisesRegex(looptune.Error, "budget"):
            looptune.tune(bench("mm112_112_128"), budget_s=0, threads=1)

    def test_tune_by_shape_and_version(self):
        self.assertRegex(looptune.__version__, r"^\d+\.\d+\.\d+$")
        r = looptune.tune(matmul=(48, 64, 32), budget_s=0.2, threads=1)
        self.assertGreaterEqual(r["gflops"], r["base_gflops"])
        self.assertTrue(r["program"].startswith("looptool-program"))
        self.assertIn("name mm48_64_32", r["program"])
        b = looptune.tune(bmm=(2, 16, 32, 8), budget_s=0.2, threads=1)
        self.assertIn("name bmm2_16_32_8", b["program"])
        self.assertGreaterEqual(b["gflops"], b["base_gflops"])
        c = looptune.tune(conv=(1, 8, 10, 10, 16, 3, 3), budget_s=0.2, threads=1)
        self.assertGreater(c["gflops"], 0)
        for bad in ({"matmul": (48, 64)}, {"matmul": (48, 0, 2)}, {}, {"bmm": (2, 3, 4)},
                    {"bmm": (2, 3, 4, 5), "matmul": (3, 4, 5)},
                    {"benchmark": bench("mm112_112_128"), "matmul": (1, 2, 3)}):
            with self.assertRaises(looptune.Error):
                looptune.tune(**bad)

    def test_tune_answers_a_second_run_from_the_library(self):
        with tempfile.TemporaryDirectory() as d:
            lib = os.path.join(d, "lib.sqlite")
            first = looptune.tune(matmul=(24, 32, 48), budget_s=0.1, library=lib, threads=1)
            self.assertFalse(first["from_library"])
            self.assertEqual(first["filed"], "added")
            second = looptune.tune(matmul=(24, 32, 48), library=lib, threads=1)
            self.assertTrue(second["from_library"])
            self.assertTrue(second["verified"])
            self.assertEqual(second["best_actions"], first["best_actions"])
            again = looptune.tune(matmul=(24, 32, 48), budget_s=0.1, library=lib, retune=True, threads=1)
            self.assertFalse(again["from_library"])
            self.assertNotIn("library", looptune.tune(matmul=(8, 8, 8), budget_s=0.05,
                                                      library="off", threads=1))

    def test_threads_on_tune_env_measure_and_export(self):
        with tempfile.TemporaryDirectory() as d:
            lib = os.path.join(d, "lib.sqlite")
            r = looptune.tune(matmul=(64, 96, 48), budget_s=0.2, threads=2, library=lib)
            self.assertGreaterEqual(r["gflops"], r["base_gflops"])
            # The parallel seeds are among those measured, and a 2-thread answer is filed apart
            # from the 1-thread library.
            self.assertTrue(any(" parallel" in name for name, _ in r["seeds"]), r["seeds"])
            self.assertEqual(r["filed"], "added")
            self.assertFalse(looptune.tune(matmul=(64, 96, 48), budget_s=0.1, library=lib,
                                           threads=1)["from_library"])
            self.assertTrue(looptune.tune(matmul=(64, 96, 48), threads=2, library=lib)["from_library"])
            m = looptune.measure(bench(), actions="parallel", threads=2)
            self.assertTrue(m["verified"])
            e = looptune.export(bench(), d, actions="parallel", threads=2)
            self.assertEqual(e["threads"], 2)
            self.assertIn(os.path.join(d, "looptool_threads.c"), e["files"])
        env = looptune.LoopToolEnv(benchmark=bench(), action_space="threads", threads=2, max_steps=2)
        self.assertEqual(env.threads, 2)
        one = looptune.LoopToolEnv(benchmark=bench(), threads=1)
        self.assertEqual(one.threads, 1)
        self.assertAlmostEqual(env.max_gflops, 2 * one.max_gflops, delta=1e-6 * one.max_gflops)
        env.reset(seed=0)
        env.step(env.action_names.index("parallel"))
        self.assertTrue(env.verify()[0])
        for bad in (-1, "2", 1.5, True):
            with self.assertRaisesRegex(looptune.Error, "threads"):
                looptune.tune(matmul=(8, 8, 8), threads=bad)
            with self.assertRaisesRegex(looptune.Error, "threads"):
                looptune.LoopToolEnv(benchmark=bench(), threads=bad)


    def test_threads_default_to_the_cores_the_process_may_use(self):
        cores = len(os.sched_getaffinity(0))
        self.assertEqual(looptune.default_threads(), cores)
        self.assertEqual(looptune.LoopToolEnv(benchmark=bench(), measure=False).threads, cores)
        self.assertEqual(looptune.LoopToolEnv(benchmark=bench(), measure=False, threads=0).threads,
                         cores)
        # As `taskset -c C`: a process confined to one core defaults to one thread.
        allowed = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {min(allowed)})
            self.assertEqual(looptune.default_threads(), 1)
            self.assertEqual(looptune.LoopToolEnv(benchmark=bench(), measure=False).threads, 1)
        finally:
            os.sched_setaffinity(0, allowed)


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


class ImportOrderTest(unittest.TestCase):
    """LibTorch is inside looptune (the policy); python3-torch loads the same shared libraries."""

    CHECK = ("import numpy as np\n"
             "r = looptune.tune('{b}', threads=1)\n"
             "x = torch.nn.Linear(4, 2)(torch.ones(3, 4)).sum().item()\n"
             "print('ok', r['gflops'] > 0, np.isfinite(x))\n")

    def test_torch_then_looptune(self):
        p = run_python("import torch\nimport looptune\n" + self.CHECK.format(b=bench()))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ok True True", p.stdout)

    def test_looptune_then_torch(self):
        p = run_python("import looptune\nimport torch\n" + self.CHECK.format(b=bench()))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ok True True", p.stdout)


class ExamplesTest(unittest.TestCase):
    def test_random_agent(self):
        p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "random_agent.py"), "--benchmark", bench(),
                            "--episodes", "2", "--max-steps", "6"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("best", p.stdout)

    def test_dqn_smoke(self):
        p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "dqn.py"), "--dataset", MM, "--benchmarks", "2",
                            "--episodes", "3", "--max-steps", "4", "--eval-benchmarks", "1"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("greedy", p.stdout)


if __name__ == "__main__":
    unittest.main()
