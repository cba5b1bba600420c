#!/usr/bin/env python3
"""A small DQN in PyTorch (CleanRL's layout: config -> env -> network -> buffer -> one loop ->
evaluation) that learns to tune a handful of matmuls with looptune's environment.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/dqn.py \
        --dataset ../shared/corpus/looptune/mm64_256_16_range

Observation: loops_tensor, stride_tensor and prev_actions_tensor, flattened. Actions: the full
space (cursor moves, swaps, split_2..split_1024, merge, unroll, vectorize; `--action-space
looptune` for LoopTune's seven, which cannot unroll or vectorize),
chosen under the action mask. Reward: the GFLOPS gained, over the machine's peak.
At the end the greedy policy and a random agent each get one episode per benchmark; the
speedup is the best schedule's GFLOPS over the naive nest's.
"""

import argparse
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

import looptune


@dataclass
class Config:
    dataset: str = ""              # directory of benchmarks (LoopTune's format or ours)
    benchmarks: int = 4            # how many train-split benchmarks to learn on
    eval_benchmarks: int = 4       # how many of those to evaluate on at the end
    episodes: int = 3000           # training episodes (one benchmark each, drawn at random)
    minutes: float = 3.0           # stop training after this long, whatever `episodes` says
    max_steps: int = 10            # actions per episode (LoopTune's 10)
    action_space: str = "full"     # preset: full (docs/actions.md) or looptune (7 actions)
    lr: float = 1e-3               # Adam's learning rate
    gamma: float = 0.9             # discount
    batch: int = 64                # minibatch size
    buffer: int = 20000            # replay capacity (transitions)
    learn_start: int = 200         # transitions before the first update
    target_sync: int = 200         # updates between target-network copies
    eps_start: float = 1.0         # epsilon at the start ...
    eps_end: float = 0.05          # ... and after eps_fraction of the episodes
    eps_fraction: float = 0.6
    seed: int = 0


def flatten(obs):
    return np.concatenate([obs["loops_tensor"].ravel(), obs["stride_tensor"].ravel(),
                           obs["prev_actions_tensor"].ravel(), obs["machine_tensor"]]).astype(np.float32)


class QNet(nn.Module):
    def __init__(self, n_obs, n_actions):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_obs, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, n_actions))

    def forward(self, x):
        return self.net(x)


def masked_argmax(q, mask):
    return int(torch.where(torch.as_tensor(mask).bool(), q, torch.full_like(q, -1e9)).argmax())


class Replay:
    def __init__(self, capacity, n_obs, n_actions):
        self.obs = np.zeros((capacity, n_obs), np.float32)
        self.next_obs = np.zeros((capacity, n_obs), np.float32)
        self.next_mask = np.zeros((capacity, n_actions), bool)
        self.action = np.zeros(capacity, np.int64)
        self.reward = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.size, self.pos, self.capacity = 0, 0, capacity

    def add(self, o, a, r, o2, m2, d):
        i = self.pos
        self.obs[i], self.action[i], self.reward[i], self.next_obs[i], self.next_mask[i], self.done[i] = o, a, r, o2, m2, d
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n):
        idx = np.random.randint(0, self.size, n)
        return (torch.as_tensor(self.obs[idx]), torch.as_tensor(self.action[idx]), torch.as_tensor(self.reward[idx]),
                torch.as_tensor(self.next_obs[idx]), torch.as_tensor(self.next_mask[idx]), torch.as_tensor(self.done[idx]))


def rollout(env, bench, choose):
    """One episode on `bench`; returns (naive GFLOPS, best GFLOPS seen, actions)."""
    obs, info = env.reset(options={"benchmark": bench})
    base = best = info["gflops"]
    done = False
    while not done and info["action_mask"].any():
        obs, _, terminated, truncated, info = env.step(choose(obs, info["action_mask"]))
        best = max(best, info["gflops"])
        done = terminated or truncated
    return base, best, env.history()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for field, default in vars(Config()).items():
        ap.add_argument("--" + field.replace("_", "-"), type=type(default), default=default)
    cfg = Config(**vars(ap.parse_args()))
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(1)

    # A handful of the train split, the smallest first so that episodes stay quick.
    pool = looptune.LoopToolEnv(dataset=cfg.dataset, split="train", measure=False).benchmarks
    pool = sorted(pool, key=lambda p: np.prod([int(x) for x in p.rsplit("/", 1)[-1][2:].split("_")]))
    benches = pool[:: max(1, len(pool) // (4 * cfg.benchmarks))][: cfg.benchmarks]
    env = looptune.LoopToolEnv(benchmark=benches[0], action_space=cfg.action_space, max_steps=cfg.max_steps)
    n_actions = env.action_space.n
    obs, info = env.reset(options={"benchmark": benches[0]})
    n_obs = flatten(obs).size
    q, target = QNet(n_obs, n_actions), QNet(n_obs, n_actions)
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr)
    rb = Replay(cfg.buffer, n_obs, n_actions)
    print(f"learning on {len(benches)} benchmarks: {', '.join(b.rsplit('/', 1)[-1] for b in benches)}; "
          f"{n_actions} actions ({', '.join(env.action_names)})")

    t0, updates, steps = time.time(), 0, 0
    for episode in range(cfg.episodes):
        if time.time() - t0 > 60 * cfg.minutes:
            break
        eps = max(cfg.eps_end, cfg.eps_start - (cfg.eps_start - cfg.eps_end) * episode / (cfg.eps_fraction * cfg.episodes))
        obs, info = env.reset(options={"benchmark": random.choice(benches)})
        o, ret, done = flatten(obs), 0.0, False
        while not done and info["action_mask"].any():
            mask = info["action_mask"]
            if random.random() < eps:
                a = int(np.random.choice(np.flatnonzero(mask)))
            else:
                with torch.no_grad():
                    a = masked_argmax(q(torch.as_tensor(o)), mask)
            obs, r, terminated, truncated, info = env.step(a)
            o2 = flatten(obs)
            done = terminated or truncated
            # Truncation is no terminal state: bootstrap through it.
            rb.add(o, a, r, o2, info["action_mask"], float(terminated))
            o, ret, steps = o2, ret + r, steps + 1
            if rb.size >= cfg.learn_start:
                ob, ab, rwd, ob2, mb2, db = rb.sample(cfg.batch)
                with torch.no_grad():
                    # Double DQN under the next state's mask.
                    a2 = torch.where(mb2, q(ob2), torch.full((cfg.batch, n_actions), -1e9)).argmax(1, keepdim=True)
                    y = rwd + cfg.gamma * (1 - db) * target(ob2).gather(1, a2).squeeze(1) * mb2.any(1)
                loss = nn.functional.smooth_l1_loss(q(ob).gather(1, ab.unsqueeze(1)).squeeze(1), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                updates += 1
                if updates % cfg.target_sync == 0:
                    target.load_state_dict(q.state_dict())
        if episode % 20 == 0:
            print(f"episode {episode:4d}  eps {eps:.2f}  return {ret:+.4f}  gflops {info['gflops']:.1f}  "
                  f"steps {steps}  updates {updates}  {time.time() - t0:.0f} s", flush=True)
    train_s = time.time() - t0

    def greedy(obs, mask):
        with torch.no_grad():
            return masked_argmax(q(torch.as_tensor(flatten(obs))), mask)

    rng = np.random.default_rng(cfg.seed + 1)

    def uniform(obs, mask):
        return int(rng.choice(np.flatnonzero(mask)))

    print(f"trained {steps} steps, {updates} updates in {train_s:.0f} s; evaluation (one episode each):")
    g_speed, r_speed = [], []
    for b in benches[: cfg.eval_benchmarks]:
        base, best_g, acts = rollout(env, b, greedy)
        _, best_r, _ = rollout(env, b, uniform)
        g_speed.append(best_g / base)
        r_speed.append(best_r / base)
        print(f"  {b.rsplit('/', 1)[-1]:<16} naive {base:6.1f}  greedy {best_g:6.1f} ({best_g / base:.2f}x)  "
              f"random {best_r:6.1f} ({best_r / base:.2f}x)  greedy actions {','.join(acts)}")
    gm = lambda v: float(np.exp(np.mean(np.log(v))))
    print(f"geomean speedup over the naive nest: greedy {gm(g_speed):.2f}x, random {gm(r_speed):.2f}x")


if __name__ == "__main__":
    main()
