"""Gymnasium conformance of looptune.LoopToolEnv.

Run twice by CTest: as part of PythonModule under Debian's python3 (no Gymnasium: the stand-in
spaces, and the Gymnasium tests skip), and as PythonGymnasium under the venv scripts/setup.sh
makes with Gymnasium from PyPI, where Gymnasium's own env checker runs."""

import os
import unittest
import warnings

import numpy as np

import looptune

try:
    import gymnasium
    from gymnasium.utils.env_checker import check_env
except ImportError:
    gymnasium = None

CORPUS = os.environ.get("LOOPTUNE_CORPUS_DIR", os.path.join(os.path.dirname(__file__), "../../../shared/corpus/looptune"))
MM = os.path.join(CORPUS, "mm64_256_16_range")


def bench(name="mm64_64_64"):
    return os.path.join(MM, name)


def same_obs(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


class MasksPenaltyAndEndTest(unittest.TestCase):
    """With or without Gymnasium (then with the stand-in spaces)."""

    def test_sampling_under_the_mask_only_draws_legal_actions(self):
        env = looptune.LoopToolEnv(benchmark=bench("mm64_80_64"), max_steps=12, measure=False, threads=1)
        env.action_space.seed(11)
        obs, info = env.reset(seed=11)
        episodes = 0
        for _ in range(300):
            mask = env.action_masks()
            self.assertEqual(mask.dtype, np.int8)
            self.assertEqual(mask.shape, (env.action_space.n,))
            np.testing.assert_array_equal(mask, info["action_mask"])
            action = env.action_space.sample(mask=mask)
            self.assertEqual(mask[action], 1)
            # An illegal action would raise here (illegal_action="raise", the default).
            obs, reward, terminated, truncated, info = env.step(action)
            self.assertIn(obs, env.observation_space)
            if terminated or truncated:
                episodes += 1
                obs, info = env.reset()
        self.assertGreaterEqual(episodes, 20)

    def test_penalty_mode_leaves_the_state_unchanged(self):
        env = looptune.LoopToolEnv(benchmark=bench(), max_steps=200, measure=False,
                                   illegal_action="penalty", illegal_penalty=-0.5, threads=1)
        rng = np.random.default_rng(4)
        obs, info = env.reset(seed=4)
        illegal_seen = legal_seen = 0
        for step in range(1, 201):
            mask = env.action_masks()
            action = int(rng.integers(env.action_space.n))  # not under the mask
            history, program = env.history(), env.program()
            new_obs, reward, terminated, truncated, info = env.step(action)
            self.assertEqual(info["step"], step)  # refused actions count toward max_steps
            if mask[action]:
                legal_seen += 1
                self.assertFalse(info["illegal_action"])
                self.assertNotIn("illegal_reason", info)
                self.assertEqual(env.history(), history + [env.action_names[action]])
            else:
                illegal_seen += 1
                self.assertTrue(info["illegal_action"])
                self.assertTrue(info["illegal_reason"])
                self.assertEqual(reward, -0.5)
                self.assertTrue(same_obs(new_obs, obs))
                self.assertEqual(env.history(), history)
                self.assertEqual(env.program(), program)
                np.testing.assert_array_equal(info["action_mask"], mask)
            self.assertEqual(truncated, step == 200)
            obs = new_obs
        self.assertGreater(illegal_seen, 10)
        self.assertGreater(legal_seen, 10)

    def test_raise_mode_refuses_an_illegal_action_and_bad_options_are_named(self):
        env = looptune.LoopToolEnv(benchmark=bench(), measure=False, threads=1)
        obs, info = env.reset()
        illegal = int(np.flatnonzero(env.action_masks() == 0)[0])
        with self.assertRaisesRegex(looptune.Error, "illegal action"):
            env.step(illegal)
        self.assertEqual(env.history(), [])
        penalty = looptune.LoopToolEnv(benchmark=bench(), measure=False, illegal_action="penalty", threads=1)
        penalty.reset()
        for e in (env, penalty):  # an index outside the space raises in either mode
            with self.assertRaisesRegex(looptune.Error, "out of range"):
                e.step(e.action_space.n)
        with self.assertRaisesRegex(looptune.Error, "illegal_action must be"):
            looptune.LoopToolEnv(benchmark=bench(), illegal_action="ignore", threads=1)
        for bad in (0.5, 0.0, float("nan")):
            with self.assertRaisesRegex(looptune.Error, "illegal_penalty"):
                looptune.LoopToolEnv(benchmark=bench(), illegal_action="penalty", illegal_penalty=bad, threads=1)
        with self.assertRaisesRegex(ValueError, "render_mode"):
            looptune.LoopToolEnv(benchmark=bench(), render_mode="human", threads=1)
        with self.assertRaisesRegex(ValueError, "unknown options"):
            env.reset(options={"benchmrk": bench()})

    def test_no_step_after_the_episode_ends_until_reset(self):
        for mode in ("raise", "penalty"):
            env = looptune.LoopToolEnv(benchmark=bench(), max_steps=2, measure=False, illegal_action=mode, threads=1)
            env.reset(seed=0)
            down = env.action_names.index("down")
            self.assertFalse(env.step(down)[3])
            self.assertTrue(env.step(down)[3])
            for action in (down, env.action_names.index("up")):
                with self.assertRaisesRegex(looptune.Error, "truncated after max_steps=2.*reset"):
                    env.step(action)
            self.assertEqual(env.history(), ["down", "down"])
            env.reset()
            self.assertFalse(env.step(down)[3])

    def test_a_seed_draws_as_gymnasiums_generator_does(self):
        env = looptune.LoopToolEnv(dataset=MM, split="test", measure=False, threads=1)
        files = env.benchmarks
        draws = lambda seed: [env.reset(seed=seed if i == 0 else None)[1]["benchmark"] for i in range(6)]
        first = draws(7)
        self.assertEqual(first, draws(7))
        self.assertNotEqual(first, draws(8))
        expect = np.random.default_rng(7)  # Gymnasium's np_random: PCG64 seeded by SeedSequence(7)
        self.assertEqual(first, [files[int(expect.integers(len(files)))] for _ in range(6)])
        obs_a, _ = env.reset(seed=7)
        obs_b, _ = env.reset(seed=7)
        self.assertTrue(same_obs(obs_a, obs_b))
        self.assertIsInstance(env.np_random, np.random.Generator)
        self.assertIs(env.unwrapped, env)

    def test_a_computation_by_its_shape(self):
        env = looptune.LoopToolEnv(matmul=(32, 48, 16), measure=False, threads=1)
        obs, info = env.reset(seed=0)
        self.assertEqual(env.benchmarks, [])
        self.assertIn("m", env.render())
        self.assertIn(obs, env.observation_space)
        with self.assertRaisesRegex(looptune.Error, "LoopToolEnv: matmul takes 3 "):
            looptune.LoopToolEnv(matmul=(32, 48), threads=1)
        with self.assertRaisesRegex(looptune.Error, "exactly one"):
            looptune.LoopToolEnv(benchmark=bench(), matmul=(32, 48, 16), threads=1)
        conv = looptune.LoopToolEnv(conv=(1, 3, 8, 8, 4, 3, 3), measure=False, threads=1)
        self.assertIn(conv.reset()[0], conv.observation_space)


@unittest.skipIf(gymnasium is None, "gymnasium is not importable (scripts/setup.sh test installs it into build/venv)")
class GymnasiumTest(unittest.TestCase):
    def check(self, env):
        """check_env's warnings, as strings."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
        return [str(w.message) for w in caught]

    def test_check_env_passes_on_the_made_env(self):
        env = gymnasium.make(looptune.ENV_ID, benchmark=bench(), max_steps=8)
        self.assertEqual(env.spec.id, looptune.ENV_ID)
        self.assertEqual(self.check(env.unwrapped), [])
        # On the wrapped env, only the checker's advice to check the unwrapped one.
        self.assertEqual([w for w in self.check(env) if "different from the unwrapped" not in w], [])
        env.close()

    def test_check_env_runs_its_step_determinism_check_without_measurements(self):
        # No spec (made directly), so check_env also steps twice from one seed and compares;
        # unmeasured, the rewards and infos are deterministic.
        env = looptune.LoopToolEnv(benchmark=bench(), measure=False, illegal_action="penalty", threads=1)
        warned = self.check(env)
        self.assertEqual([w for w in warned if "not having a spec" not in w], [])

    def test_make_without_arguments(self):
        env = gymnasium.make(looptune.ENV_ID)
        self.assertIsInstance(env.unwrapped, looptune.LoopToolEnv)
        self.assertIsInstance(env.action_space, gymnasium.spaces.Discrete)
        self.assertIsInstance(env.observation_space, gymnasium.spaces.Dict)
        obs, info = env.reset(seed=1)
        self.assertIn(obs, env.observation_space)
        # The registered env gives a penalty for an illegal action rather than raising.
        illegal = int(np.flatnonzero(info["action_mask"] == 0)[0])
        obs2, reward, terminated, truncated, info = env.step(illegal)
        self.assertTrue(info["illegal_action"])
        self.assertLess(reward, 0)
        self.assertTrue(same_obs(obs, obs2))

    def test_masks_as_they_come_through_the_wrappers(self):
        env = gymnasium.make(looptune.ENV_ID, benchmark=bench("mm64_80_64"), max_steps=10, measure=False)
        env.action_space.seed(5)
        obs, info = env.reset(seed=5)
        for _ in range(300):
            np.testing.assert_array_equal(info["action_mask"], env.unwrapped.action_masks())
            action = env.action_space.sample(mask=info["action_mask"])
            obs, reward, terminated, truncated, info = env.step(action)
            self.assertFalse(info["illegal_action"], env.unwrapped.action_names[action])
            if terminated or truncated:
                obs, info = env.reset()

    def test_same_seeds_same_episode(self):
        def episode():
            env = gymnasium.make(looptune.ENV_ID, dataset=MM, split="test", max_steps=6, measure=False)
            env.action_space.seed(9)
            obs, info = env.reset(seed=9)
            trace = [info["benchmark"]]
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(env.action_space.sample(mask=info["action_mask"]))
                trace.append((obs["loops_tensor"].tobytes(), info["action_mask"].tobytes()))
                done = terminated or truncated
            return trace, env.unwrapped.history()

        self.assertEqual(episode(), episode())


if __name__ == "__main__":
    unittest.main()
