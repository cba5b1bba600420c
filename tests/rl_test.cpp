// The RL stack: prioritized replay, n-step returns, traces, the trainers (DQN, Ape-X, both
// encoders), checkpoints and resume, policy files and policy-driven tuning. Trainers run for a
// few hundred steps on tiny matmuls: these tests check that everything works and round-trips,
// not how well a policy tunes (docs/training.md has that, measured).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "rl/demonstrations.h"
#include "rl/episode_starts.h"
#include "rl/metrics.h"
#include "rl/replay.h"
#include "rl/trainer.h"
#include "search/trace.h"
#include "test_util.h"
#include "tune/policy.h"

using namespace looptool;
using namespace looptune;
using looptool::tests::TempDir;

namespace {

RlState state_with(float marker) {
    RlState s;
    s.flat = {marker};
    s.mask = {1};
    return s;
}

Transition transition(float marker) {
    Transition t;
    t.state = state_with(marker);
    t.next = state_with(marker);
    return t;
}

/// A dataset of small matmuls (fast to measure) in `dir`/data.
std::string tiny_dataset(const TempDir &dir) {
    auto r = tests::run_cli(
        dir, "generate --dimA 16:32:16,16:32:16 --dimB 16:32:16,16:48:16 --out data");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return dir / "data";
}

TrainConfig tiny_training(const std::string &dataset, const std::string &out) {
    TrainConfig c;
    c.dataset_dir = dataset;
    c.out_dir = out;
    c.steps = 240;
    c.max_steps = 6;
    c.learning_starts = 32;
    c.batch = 16;
    c.hidden = 32;
    c.gnn_hidden = 16;
    c.checkpoint_every = 100;
    c.eval_every = 120;
    c.eval_benchmarks = 2;
    c.replay_capacity = 1000;
    c.eps_decay_steps = 200;
    return c;
}

EnvConfig fast_env(EnvConfig c) {
    c.verify = true;
    c.measure.min_time_s = 0.001;
    c.measure.min_runs = 2;
    c.measure.warmup = 1;
    return c;
}

}  // namespace

TEST(PrioritizedReplay, SamplesInProportionToPriority) {
    PrioritizedReplay replay(8, /*alpha=*/1.0, /*seed=*/3);
    replay.add(transition(0), 1.0);
    replay.add(transition(1), 9.0);
    std::map<float, int> counts;
    ReplaySample batch;  // reused, as a learner does
    for (int i = 0; i < 2000; ++i) {
        replay.sample(4, 1.0, batch);
        for (int64_t b = 0; b < batch.size; ++b) ++counts[batch.state_feature(b, 0)];
    }
    const double ratio = double(counts[1]) / counts[0];
    EXPECT_NEAR(ratio, 9.0, 1.5);
    // Importance weights undo the bias: the rare item gets weight 1, the frequent one 1/9.
    ReplaySample s = replay.sample(64, 1.0);
    ASSERT_EQ(s.size, 64);
    for (int64_t i = 0; i < s.size; ++i)
        EXPECT_NEAR(s.weights[i], s.state_feature(i, 0) == 0 ? 1.0 : 1.0 / 9, 1e-4);
}

TEST(PrioritizedReplay, OverwritesTheOldestWhenFullAndUpdatesPriorities) {
    PrioritizedReplay replay(3, 1.0, 0);
    for (int i = 0; i < 5; ++i) replay.add(transition(float(i)));
    EXPECT_EQ(replay.size(), 3);
    EXPECT_EQ(replay.added(), 5);
    ReplaySample s = replay.sample(30, 0.4);
    for (int64_t b = 0; b < s.size; ++b)
        EXPECT_GE(s.state_feature(b, 0), 2);  // 0 and 1 were overwritten
    // Priority ~0 for every slot but one: only that one is sampled.
    replay.update_priorities({0, 1, 2}, {1e-6f, 1e-6f, 5.0f});
    for (int64_t i : replay.sample(20, 0.4).indices) EXPECT_EQ(i, 2);
}

TEST(NStepBuilder, DiscountsRewardsAndFlushesAtTheEnd) {
    NStepBuilder nstep(2, 0.5);
    RlState s0 = state_with(0), s1 = state_with(1), s2 = state_with(2), s3 = state_with(3);
    EXPECT_TRUE(nstep.push(s0, 0, 1.0f, s1, false).empty());
    auto t = nstep.push(s1, 1, 2.0f, s2, false);
    ASSERT_EQ(t.size(), 1u);
    EXPECT_FLOAT_EQ(t[0].reward, 1.0f + 0.5f * 2.0f);
    EXPECT_FLOAT_EQ(t[0].discount, 0.25f);
    EXPECT_EQ(t[0].next.flat[0], 2);
    t = nstep.push(s2, 2, 4.0f, s3, true);  // the episode ends: both open windows close
    ASSERT_EQ(t.size(), 2u);
    EXPECT_FLOAT_EQ(t[0].reward, 2.0f + 0.5f * 4.0f);
    EXPECT_FLOAT_EQ(t[0].discount, 0.0f);
    EXPECT_FLOAT_EQ(t[1].reward, 4.0f);
    EXPECT_EQ(t[1].action, 2);
}

// A demonstration cut by an illegal action: its pending steps still become transitions, which
// bootstrap from where it stopped (before, they were dropped, and a replay holding nothing
// else failed in the learner's GEMM).
TEST(NStepBuilder, ACutStreamKeepsItsPendingSteps) {
    NStepBuilder nstep(3, 0.5);
    EXPECT_TRUE(nstep.push(state_with(0), 0, 1.0f, state_with(1), false).empty());
    EXPECT_TRUE(nstep.push(state_with(1), 1, 2.0f, state_with(2), false).empty());
    auto t = nstep.cut(state_with(2));
    ASSERT_EQ(t.size(), 2u);
    EXPECT_FLOAT_EQ(t[0].reward, 1.0f + 0.5f * 2.0f);
    EXPECT_FLOAT_EQ(t[0].discount, 0.25f);  // not terminal: the episode could have gone on
    EXPECT_EQ(t[0].next.flat[0], 2);
    EXPECT_FLOAT_EQ(t[1].reward, 2.0f);
    EXPECT_FLOAT_EQ(t[1].discount, 0.5f);
    EXPECT_TRUE(nstep.cut(state_with(2)).empty());
}

TEST(Train, AWarmStartTraceCutByAnIllegalActionStillPretrains) {
    TempDir dir("warm_cut");
    const std::string data = tiny_dataset(dir);
    const std::string bench = data + "/mm16_16_16";
    // The second `up` (on the first loop) is illegal: the trace is cut after two steps, before
    // a 3-step window fills.
    append_traces(
        dir / "traces.csv",
        {{bench, "greedy2", 2, 1, {Action::Down, Action::Up, Action::Up, Action::Vectorize}}});
    TrainConfig c = tiny_training(data, dir / "run");
    c.warmstart = dir / "traces.csv";
    c.warmstart_updates = 20;
    c.steps = 20;
    c.learning_starts = 1000;
    c.warmstart_min_speedup = 1;
    EXPECT_EQ(train(c).env_steps, 20);
    EXPECT_TRUE(std::filesystem::exists(dir / "run/trained.policy"));
}

// A trace longer than an episode goes on in fresh episodes from where each one ended (as the
// guided search chains rollouts): every step is a demonstration, and the step after an episode's
// end is seen with a whole episode left and no previous actions.
TEST(Train, AWarmStartTraceLongerThanAnEpisodeGoesOnInFreshEpisodes) {
    TempDir dir("warm_long");
    const std::string data = tiny_dataset(dir);
    const std::string bench = data + "/mm16_16_16";
    const std::vector<Action> actions = {Action::Down,  Action::Split2, Action::Down,
                                         Action::Down,  Action::Split2, Action::SwapUp,
                                         Action::Unroll};
    append_traces(dir / "traces.csv", {{bench, "tile", 2, 1, actions}});
    TrainConfig c = tiny_training(data, dir / "run");
    c.warmstart = dir / "traces.csv";
    c.warmstart_min_speedup = 1;
    c.n_step = 3;
    EnvConfig e = fast_env({});
    e.action_space = "full";
    e.max_steps = 3;
    Environment env(e);
    PrioritizedReplay replay(100, 0.6, 1);
    const std::vector<Demo> demos = load_demonstrations(c, env, replay, false);
    ASSERT_EQ(demos.size(), actions.size());
    // Three episodes of 3, 3 and 1 steps, each ending its n-step windows.
    EXPECT_EQ(replay.size(), int64_t(actions.size()));
    for (size_t i = 0; i < demos.size(); ++i) {
        EXPECT_EQ(env.action_space().actions[size_t(demos[i].action)], actions[i]) << i;
        // steps left / max_steps: the last global before the machine vector
        const std::vector<float> &flat = demos[i].state.flat;
        EXPECT_FLOAT_EQ(flat[flat.size() - 1 - kMachineFeatures], float(3 - i % 3) / 3) << i;
    }
    Program p = Program::naive(load_program_file(bench).comp);
    for (Action a : actions) p = looptool::apply(p, a);
    EXPECT_EQ(schedule_key(env.program()), schedule_key(p));
}

// A NaN GFLOPS compared as a trace worth imitating, a base of 0 made any trace infinitely so.
TEST(Trace, NonFiniteOrZeroFiguresAreRefused) {
    TempDir dir("trace_nan");
    const std::string header = "benchmark,algo,gflops,base_gflops,actions\n";
    for (const char *row : {"x,y,nan,1,down", "x,y,inf,1,down", "x,y,5,0,down", "x,y,-5,1,down",
                            "x,y,5,1e999,down", "x,y,5abc,1,down"}) {
        tests::write(dir, "t.csv", header + row + "\n");
        try {
            load_traces(dir / "t.csv");
            ADD_FAILURE() << row << " accepted";
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find("t.csv:2: "), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("is not a finite number > 0"), std::string::npos)
                << e.what();
        }
    }
}

TEST(Trace, RoundTripsAndRejectsMalformedFiles) {
    TempDir dir("trace");
    const std::string path = dir / "traces.csv";
    append_traces(path, {{"a/mm1", "greedy2", 10.5, 5.25, {Action::Down, Action::Split8}}});
    append_traces(path, {{"a/mm2", "beam2dfs", 3, 1, {}}});
    auto traces = load_traces(path);
    ASSERT_EQ(traces.size(), 2u);
    EXPECT_EQ(traces[0].benchmark, "a/mm1");
    EXPECT_EQ(traces[0].actions, (std::vector<Action>{Action::Down, Action::Split8}));
    EXPECT_DOUBLE_EQ(traces[0].base_gflops, 5.25);
    EXPECT_TRUE(traces[1].actions.empty());
    tests::write(dir, "bad.csv", "benchmark,algo,gflops,base_gflops,actions\nx,y,1,2,down fly\n");
    try {
        load_traces(dir / "bad.csv");
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("bad.csv:2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(load_traces(dir / "missing.csv"), Error);
    tests::write(dir, "other.csv", "a,b\n");
    EXPECT_THROW(load_traces(dir / "other.csv"), Error);
}

TEST(Trace, DropsCancellingCursorMovesButKeepsTheSchedule) {
    Program p = tests::matmul_program(32, 48, 16);
    std::vector<Action> wander{Action::Down,   Action::Up, Action::Down, Action::Down,
                               Action::Split8, Action::Up, Action::Down};
    std::vector<Action> short_path = drop_cancelling_moves(p, wander);
    EXPECT_EQ(short_path, (std::vector<Action>{Action::Down, Action::Down, Action::Split8}));
    Program a = p, b = p;
    for (Action x : wander) a = apply(a, x);
    for (Action x : short_path) b = apply(b, x);
    EXPECT_EQ(schedule_key(a), schedule_key(b));
    EXPECT_EQ(a.cursor, b.cursor);
}

TEST(Train, DqnCheckpointsResumesAndItsPolicyTunes) {
    TempDir dir("dqn");
    TrainConfig c = tiny_training(tiny_dataset(dir), dir / "run");
    TrainSummary s = train(c);
    EXPECT_FALSE(s.resumed);
    EXPECT_EQ(s.env_steps, 240);
    EXPECT_GT(s.episodes, 0);
    EXPECT_GT(s.updates, 0);
    EXPECT_GT(s.eval_speedup, 0);
    for (const char *f : {"checkpoint.pt", "trained.policy", "metrics.csv", "store.sqlite"})
        EXPECT_TRUE(std::filesystem::exists(dir / ("run/" + std::string(f)))) << f;

    // Starting over in the same run directory is refused; --resume continues the counters.
    EXPECT_THROW(train(c), Error);
    // What a run killed after its checkpoint at 240 leaves: a metrics row past it and a
    // checkpoint write cut short. The resume drops both.
    {
        std::ofstream(dir / "run/metrics.csv", std::ios::app)
            << "99.0,290,50,145,0.1,0.1,1.1,0.01,,1,1\n";
        std::ofstream(dir / "run/checkpoint.pt.tmp.99999") << "half a checkpoint";
    }
    c.resume = true;
    c.steps = 300;
    TrainSummary r = train(c);
    EXPECT_TRUE(r.resumed);
    EXPECT_EQ(r.env_steps, 300);
    EXPECT_GE(r.updates, s.updates);
    EXPECT_GT(r.episodes, s.episodes);
    EXPECT_FALSE(std::filesystem::exists(dir / "run/checkpoint.pt.tmp.99999"));
    const MetricsTable metrics = MetricsTable::read(dir / "run/metrics.csv");
    std::vector<double> steps, updates;
    metrics.series("env_steps", "updates", &steps, &updates);
    ASSERT_FALSE(steps.empty());
    EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()))
        << "a row past the checkpoint survived the resume";
    EXPECT_EQ(steps.back(), 300);
    EXPECT_EQ(std::count(steps.begin(), steps.end(), 240.0), 1);

    // The policy file drives a rollout whose best schedule replays and verifies.
    Policy policy = Policy::load(dir / "run/trained.policy");
    EXPECT_EQ(policy.info().max_steps, 6);
    EXPECT_EQ(policy.info().action_space, "full");
    Environment env(policy.env_config(fast_env({})));
    Program start = tests::matmul_program(32, 48, 16);
    PolicyTuneResult t = tune_with_policy(policy, env, start);
    EXPECT_LE(t.actions.size(), 6u);
    EXPECT_EQ(t.step_gflops.size(), t.actions.size());
    EXPECT_GE(t.best_gflops, t.base_gflops);
    Program replayed = start;
    for (Action a : t.best_actions) replayed = apply(replayed, a);
    EXPECT_EQ(schedule_key(replayed), schedule_key(t.best));
    EXPECT_TRUE(env.verify(t.best).ok);
}

TEST(Train, ApexWithTwoActorsAndTheGraphEncoderHoldsTheReplayRatio) {
    TempDir dir("apex");
    TrainConfig c = tiny_training(tiny_dataset(dir), dir / "run");
    c.trainer = Trainer::Apex;
    c.actors = 2;
    c.encoder = Encoder::Gnn;
    c.updates_per_step = 0.25;
    TrainSummary s = train(c);
    EXPECT_EQ(s.env_steps, 240);
    // Pacing, not timing: the learner never runs ahead of 0.25 updates per step, and actors
    // wait once they are 4 steps each past what the updates pay for, whatever the load.
    EXPECT_LE(s.updates, 0.25 * 240);
    EXPECT_GE(s.updates, 0.25 * (240 - 4 * 2));
    Policy policy = Policy::load(dir / "run/trained.policy");
    EXPECT_EQ(policy.info().encoder, "gnn");
    Environment env(policy.env_config(fast_env({})));
    PolicyTuneResult t = tune_with_policy(policy, env, tests::matmul_program(16, 32, 16));
    EXPECT_GE(t.best_gflops, t.base_gflops);
    EXPECT_TRUE(env.verify(t.best).ok);
}

TEST(Train, WarmStartFromTraces) {
    TempDir dir("warm");
    const std::string data = tiny_dataset(dir);
    const std::string bench = data + "/mm16_16_16";
    ASSERT_TRUE(std::filesystem::exists(bench));
    append_traces(dir / "traces.csv",
                  {{bench, "greedy2", 1, 1, {Action::Down, Action::Down, Action::Vectorize}}});
    // A worse trace of the same benchmark is ignored: only the best one per benchmark is cloned.
    append_traces(dir / "traces.csv", {{bench, "random", 0.5, 1, {Action::Split2}}});
    TrainConfig c = tiny_training(data, dir / "run");
    c.warmstart = dir / "traces.csv";
    c.warmstart_updates = 300;
    c.steps = 40;
    c.learning_starts = 1000;  // no RL updates: the policy is what the warm start taught
    c.demo_margin = 0.5;
    c.warmstart_min_speedup = 1;
    train(c);
    Policy policy = Policy::load(dir / "run/trained.policy");
    Environment env(policy.env_config(fast_env({})));
    PolicyTuneResult t = tune_with_policy(policy, env, load_program_file(bench));
    ASSERT_GE(t.actions.size(), 3u);
    EXPECT_EQ(std::vector<Action>(t.actions.begin(), t.actions.begin() + 3),
              (std::vector<Action>{Action::Down, Action::Down, Action::Vectorize}));
}

// Episodes may start where tune's rollouts start: at the state one of its seeds (a `tile`
// member) reaches. The evaluation then also measures what the policy adds to those seeds.
TEST(Train, EpisodesStartAtTuneSeedsAndTheEvaluationMeasuresTheGainOverThem) {
    TempDir dir("seedstarts");
    TrainConfig c = tiny_training(tiny_dataset(dir), dir / "run");
    c.max_steps = 16;  // a tile seed is ~12 actions
    const Dataset data = Dataset::load(c.dataset_dir);
    EnvConfig e = fast_env({});
    e.action_space = c.action_space;
    e.max_steps = c.max_steps;
    Environment env(e);
    EpisodeStarts starts(c, data);
    std::set<std::string> seed_keys, naive_keys;
    for (const std::string &f : data.train) {
        naive_keys.insert(schedule_key(Program::naive(load_program_file(f).comp)));
        for (const auto &[name, state] : starts.seed_states(f, env.action_space())) {
            EXPECT_NE(name.find("tile"), std::string::npos) << name;
            seed_keys.insert(schedule_key(state));
        }
    }
    ASSERT_FALSE(seed_keys.empty());
    std::mt19937_64 rng(1);
    // seed_starts 0 (the default): always the naive nest.
    for (int i = 0; i < 5; ++i) {
        starts.reset(env, rng);
        EXPECT_TRUE(naive_keys.count(schedule_key(env.program())));
        EXPECT_EQ(env.steps_taken(), 0);
    }
    // seed_starts 1: a seed's state wherever the benchmark has seeds.
    c.seed_starts = 1;
    int at_seed = 0;
    for (int i = 0; i < 20; ++i) {
        starts.reset(env, rng);
        const std::string key = schedule_key(env.program());
        EXPECT_TRUE(seed_keys.count(key) || naive_keys.count(key)) << key;
        at_seed += int(seed_keys.count(key));
        EXPECT_EQ(env.steps_taken(), 0);  // a fresh episode from there
        EXPECT_GT(env.gflops(), 0);
    }
    EXPECT_GT(at_seed, 0);

    c.seed_starts = 0.5;
    c.steps = 120;
    c.eval_every = 60;
    const TrainSummary s = train(c);
    EXPECT_GT(s.eval_speedup, 0);
    EXPECT_GE(s.eval_seed_gain, 1);  // the seeds are among what it takes the best of
    const MetricsTable t = MetricsTable::read(dir / "run/metrics.csv");
    int evaluated_rows = 0;
    for (size_t r = 0; r < t.rows(); ++r)
        if (t.value(r, "eval_speedup")) {
            ++evaluated_rows;
            EXPECT_GE(t.value(r, "eval_seed_gain").value_or(0), 1);
        }
    EXPECT_GE(evaluated_rows, 2);
    c.seed_starts = 1.5;
    c.out_dir = dir / "run2";
    EXPECT_THROW(train(c), Error);
}

TEST(Train, BadSettingsAreErrorsAndLeaveNothingBehind) {
    TempDir dir("badtrain");
    TrainConfig c = tiny_training(tiny_dataset(dir), dir / "run");
    c.steps = 0;
    EXPECT_THROW(train(c), Error);
    c.steps = 10;
    c.dataset_dir = dir / "nowhere";
    EXPECT_THROW(train(c), Error);
    std::filesystem::create_directories(dir / "empty");
    c.dataset_dir = dir / "empty";
    EXPECT_THROW(train(c), Error);
    c.dataset_dir = dir / "data";
    c.warmstart = dir / "no_traces.csv";
    EXPECT_THROW(train(c), Error);
    // Every input is read before the run directory (and its store and metrics) is created.
    EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(Policy, MissingOrForeignFilesAreClearErrors) {
    TempDir dir("policy");
    try {
        Policy::load(dir / "none.pt");
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("none.pt"), std::string::npos);
    }
    tests::write(dir, "junk.pt", "this is not a policy");
    try {
        Policy::load(dir / "junk.pt");
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("junk.pt"), std::string::npos);
    }
}

TEST(PolicyCli, TuneAndCompareUseAPolicyFile) {
    TempDir dir("tunecli");
    TrainConfig c = tiny_training(tiny_dataset(dir), dir / "run");
    c.steps = 60;
    train(c);
    auto r = tests::run_cli(dir, "tune --bench data/mm32_48_16 --policy run/trained.policy --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"speedup\""), std::string::npos);
    r = tests::run_cli(dir, "tune --bench data/mm32_48_16 --policy run/missing.pt");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("missing.pt"), std::string::npos);
    // The policy was trained for 6 steps: a step limit given for every method must be that.
    r = tests::run_cli(
        dir,
        "compare --dataset data --split all --methods base,policy --policy run/trained.policy "
        "--steps 10 --out cmp --no-plots");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--steps 6"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path / "cmp"));
    // Without --steps it rolls out for its own 6.
    r = tests::run_cli(dir,
                       "compare --dataset data --split all --limit 2 --methods base,policy "
                       "--policy run/trained.policy "
                       "--out cmp --no-plots --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(tests::slurp(dir.path / "cmp/results.csv").find(",policy,"), std::string::npos);
}
