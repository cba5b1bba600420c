#!/usr/bin/env python3
"""A random agent: legal actions drawn uniformly under the action mask.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/random_agent.py \
        --benchmark ../shared/corpus/looptune/mm64_256_16_range/mm112_112_128
"""

import argparse

import looptune


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", required=True, help="benchmark file (ours or LoopTune's format)")
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    env = looptune.LoopToolEnv(benchmark=args.benchmark, max_steps=args.max_steps)
    env.action_space.seed(args.seed)
    best = (0.0, None, None)
    for episode in range(args.episodes):
        obs, info = env.reset(seed=args.seed + episode)
        start = info["gflops"]
        total, done = 0.0, False
        while not done:
            action = env.action_space.sample(env.action_masks())
            obs, reward, terminated, truncated, info = env.step(action)
            total += reward
            done = terminated or truncated
            if info["gflops"] > best[0]:
                best = (info["gflops"], env.history(), env.program())
        print(f"episode {episode}: {start:.1f} -> {info['gflops']:.1f} GFLOPS, return {total:+.3f}, "
              f"actions {','.join(env.history())}")
    gflops, actions, _ = best
    print(f"best {gflops:.1f} GFLOPS ({100 * gflops / env.max_gflops:.1f}% of peak) after {','.join(actions)}")


if __name__ == "__main__":
    main()
