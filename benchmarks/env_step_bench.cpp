// Environment steps per second, on a cache hit (the schedule was measured before: apply +
// schedule key + lookup) and on a cache miss (apply + JIT compile + measurement), for matmul
// 128^3 and 256^3. Targets: >= 100,000 steps/s on hits; a miss within ~25 ms.
//   taskset -c 1 build/benchmarks/env_step_bench
#include <benchmark/benchmark.h>

#include <random>
#include <unordered_set>

#include "env/environment.h"

using namespace looptool;
using namespace looptune;

namespace {

EnvConfig config() {
    EnvConfig c;
    c.action_space = "full";
    c.max_steps = 1 << 30;
    c.max_gflops = 200;  // the roof only scales rewards; keep peak measurement out of the run
    return c;
}

Program matmul(int64_t n) {
    return Program::naive(std::make_shared<Computation>(make_matmul(n, n, n)));
}

// Alternates swap_down / swap_up on the first loop: two schedules, both cached after the
// first round, so every timed step is a hit; `read(env)` runs after each step.
template <class Read>
void alternate_cached_swaps(benchmark::State &state, Environment &env, Read read) {
    env.reset(matmul(state.range(0)));
    env.step(Action::SwapDown);
    env.step(Action::SwapUp);
    bool down = true;
    for (auto _ : state) {
        StepResult r = env.step(down ? Action::SwapDown : Action::SwapUp);
        benchmark::DoNotOptimize(r.reward);
        read(env);
        down = !down;
    }
    state.counters["steps/s"] =
        benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_StepCacheHit(benchmark::State &state) {
    Environment env(config());
    alternate_cached_swaps(state, env, [](Environment &) {});
    state.counters["compiles"] = double(env.counters().compiles);
}

// The same hits, plus what an agent reads after each step (the three tensor observations
// and the action mask): the C++ side of the Python step comparison
// (benchmarks/python_step_bench.py), whose `step` returns all of that.
void BM_StepCacheHitObserved(benchmark::State &state) {
    Environment env(config());
    alternate_cached_swaps(state, env, [](Environment &e) {
        Observation a = e.observe("loops_tensor"), b = e.observe("stride_tensor"),
                    c = e.observe("prev_actions_tensor");
        std::vector<bool> mask = e.action_mask();
        benchmark::DoNotOptimize(a.values.data());
        benchmark::DoNotOptimize(b.values.data());
        benchmark::DoNotOptimize(c.values.data());
        benchmark::DoNotOptimize(mask);
    });
}

// Each timed step applies an action whose result was never seen: the parent is reset (not
// timed), then the step compiles and measures a new schedule with the env's short protocol.
void BM_StepCacheMiss(benchmark::State &state) {
    Environment env(config());
    const Program start = matmul(state.range(0));
    // Distinct (parent, action) pairs from seeded random walks.
    std::vector<std::pair<Program, Action>> todo;
    std::unordered_set<std::string> seen{schedule_key(start)};
    std::mt19937_64 rng(1);
    while (todo.size() < 400) {
        Program p = start;
        for (int i = 0; i < 4; ++i) {
            std::vector<Action> legal;
            for (Action a : all_actions())
                if (is_legal(p, a)) legal.push_back(a);
            Action a = legal[rng() % legal.size()];
            Program q = apply(p, a);
            if (a != Action::Up && a != Action::Down && seen.insert(schedule_key(q)).second) {
                todo.emplace_back(p, a);
                break;
            }
            p = q;
        }
    }
    size_t i = 0;
    for (auto _ : state) {
        state.PauseTiming();
        env.reset(todo[i % todo.size()].first);
        state.ResumeTiming();
        StepResult r = env.step(todo[i % todo.size()].second);
        benchmark::DoNotOptimize(r.reward);
        ++i;
    }
    state.counters["steps/s"] =
        benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_StepCacheHit)->Arg(128)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepCacheHitObserved)->Arg(128)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepCacheMiss)->Arg(128)->Arg(256)->Iterations(60)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
