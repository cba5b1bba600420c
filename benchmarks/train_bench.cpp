// Where a training run's time goes: one learner update (sample + double-Q n-step
// update + new priorities) for the MLP and GNN encoders at batch 64, encoding a state, one
// greedy action, and a whole DQN run at the default replay ratio (0.5 updates per step) on a
// warm measurement store, with its time split by phase (TrainSummary::profile).
//   taskset -c 1 build/benchmarks/train_bench [--benchmark_filter=...]
// Targets: update (batch 64, MLP 256) <= 1 ms median; GNN <= 5 ms; DQN on a warm store
// >= 1,000 steps/s. LOOPTUNE_CORPUS (default ../shared/corpus/looptune next to the source tree)
// gives the benchmarks of the run.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include <unistd.h>

#include "looptool/formats/text_format.h"
#include "rl/learner.h"
#include "rl/trainer.h"

using namespace looptool;
using namespace looptune;
namespace fs = std::filesystem;

namespace {

std::string corpus_dir() {
    if (const char *d = std::getenv("LOOPTUNE_CORPUS")) return d;
    return LOOPTUNE_SOURCE_DIR "/../shared/corpus/looptune";
}

const std::vector<std::string> &bench_names() {
    static const std::vector<std::string> names = {"mm112_208_256", "mm128_160_224",
                                                   "mm176_144_160", "mm96_240_128"};
    return names;
}

std::string bench_file(const std::string &name) {
    return corpus_dir() + "/mm64_256_16_range/" + name;
}

/// Real states from seeded random walks (no measurement: the network does not care).
std::vector<RlState> random_walk_states(Environment &env, bool graph, int count, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<RlState> out;
    while (static_cast<int>(out.size()) < count) {
        env.reset(bench_file(bench_names()[out.size() % bench_names().size()]));
        while (env.steps_taken() < env.config().max_steps && static_cast<int>(out.size()) < count) {
            RlState s = encode_state(env, graph);
            out.push_back(s);
            std::vector<int> legal;
            for (size_t i = 0; i < s.mask.size(); ++i)
                if (s.mask[i]) legal.push_back(static_cast<int>(i));
            if (legal.empty()) break;
            env.step_index(legal[rng() % legal.size()]);
        }
    }
    return out;
}

EnvConfig unmeasured_env() {
    EnvConfig e;
    e.action_space = "full";
    e.max_steps = 16;
    e.measure_enabled = false;
    return e;
}

/// The default DQN settings (TrainConfig's), as `looptool train` uses them.
TrainConfig default_config(bool gnn) {
    TrainConfig c;
    c.encoder = gnn ? Encoder::Gnn : Encoder::Mlp;
    c.max_steps = 16;
    return c;
}

// One Learner::replay_step: prioritized sample of 64 from 5,000 transitions, the update, the
// priorities written back, on the dense path (rl/dense_qnet.h). Arg 0: MLP (256), 1: GNN (3
// rounds of 64, readout 256); 2 and 3: the same through LibTorch's autograd (what the dense path
// replaced, side by side).
void BM_LearnerUpdate(benchmark::State &state) {
    const bool gnn = state.range(0) % 2 == 1;
    torch::set_num_threads(1);
    Environment env(unmeasured_env());
    const std::vector<RlState> states = random_walk_states(env, gnn, 2000, 1);
    TrainConfig config = default_config(gnn);
    config.autograd_learner = state.range(0) >= 2;
    Learner learner(config, net_config_for(config, env));
    PrioritizedReplay replay(config.replay_capacity, config.per_alpha, config.seed);
    std::mt19937_64 rng(2);
    for (int i = 0; i < 5000; ++i) {
        Transition t;
        t.state = states[rng() % states.size()];
        t.next = states[rng() % states.size()];
        t.action = static_cast<int>(rng() % t.state.mask.size());
        t.reward = static_cast<float>(rng() % 100) / 1000;
        t.discount = rng() % 8 == 0 ? 0.f : 0.97f;
        replay.add(std::move(t));
    }
    for (int i = 0; i < 5; ++i) learner.replay_step(replay, 1000, nullptr);  // warm-up
    for (auto _ : state) benchmark::DoNotOptimize(learner.replay_step(replay, 1000, nullptr));
    state.counters["updates/s"] =
        benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

// encode_state of a mid-episode state: Arg 0 flat tensors only, 1 with the loop-tree graph.
void BM_EncodeState(benchmark::State &state) {
    Environment env(unmeasured_env());
    env.reset(bench_file(bench_names()[0]));
    for (const char *a : {"split_8", "down", "down", "down", "split_32", "swap_up"})
        env.step(*looptool::parse_action(a));
    for (auto _ : state) benchmark::DoNotOptimize(encode_state(env, state.range(0) == 1));
}

// One greedy action (a batch-1 forward under the mask), MLP 256.
void BM_GreedyAction(benchmark::State &state) {
    torch::set_num_threads(1);
    Environment env(unmeasured_env());
    const TrainConfig config = default_config(false);
    Learner learner(config, net_config_for(config, env));
    env.reset(bench_file(bench_names()[0]));
    const RlState s = encode_state(env, false);
    for (auto _ : state) benchmark::DoNotOptimize(greedy_action(learner.online, s));
}

/// Four matmuls of the same sizes from the train split (LoopTune's 25 test benchmarks, which
/// bench_names() are, always fall in the test split and leave a run nothing to train on).
const std::vector<std::string> &train_split_names() {
    static const std::vector<std::string> names = {"mm112_192_240", "mm128_176_208",
                                                   "mm160_144_176", "mm96_224_128"};
    return names;
}

// A DQN run of 4,000 steps on 4 benchmarks at 0.5 updates per step. It runs twice with the same
// seed and store: the first run measures every schedule it visits, the second (timed) one
// retraces it (same seed, same rewards from the store) and finds them all in the store.
// Arg 0: the learner's dense path, 1: LibTorch's autograd (side by side).
void BM_DqnWarmStore(benchmark::State &state) {
    const fs::path dir = fs::temp_directory_path() / ("train_bench." + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "data");
    for (const std::string &n : train_split_names()) fs::copy_file(bench_file(n), dir / "data" / n);
    TrainConfig c = default_config(false);
    c.autograd_learner = state.range(0) == 1;
    c.dataset_dir = (dir / "data").string();
    c.store_path = (dir / "store.sqlite").string();
    c.steps = 4000;
    c.eval_every = 0;
    c.eval_benchmarks = 0;
    c.out_dir = (dir / "warmup").string();
    const TrainSummary warm = train(c);
    TrainSummary timed;
    c.profile = true;  // the timed run's split by phase, as `train --profile` prints it
    for (auto _ : state) {
        c.out_dir = (dir / ("timed" + std::to_string(state.iterations()))).string();
        timed = train(c);
        state.SetIterationTime(timed.seconds);
    }
    state.counters["steps/s"] = timed.env_steps / timed.seconds;
    state.counters["updates"] = double(timed.updates);
    state.counters["warmup_steps/s"] = warm.env_steps / warm.seconds;
    state.counters["updates/s"] = timed.updates / timed.seconds;
    for (const ProfileEntry &e : timed.profile) state.counters["s:" + e.phase] = e.seconds;
    fs::remove_all(dir);
}

}  // namespace

BENCHMARK(BM_LearnerUpdate)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeState)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyAction)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DqnWarmStore)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
