#include "env/environment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

using namespace looptool;
using namespace looptune;

namespace {
EnvConfig test_config(const std::string &space = "full") {
    EnvConfig c;
    c.action_space = space;
    c.max_gflops = 100;  // a fixed roof keeps the test independent of this machine's peak
    c.verify = true;
    c.measure.min_time_s = 0.001;
    c.measure.min_runs = 2;
    c.measure.warmup = 1;
    return c;
}
Program matmul(int64_t m, int64_t n, int64_t k) {
    return Program::naive(std::make_shared<Computation>(make_matmul(m, n, k)));
}
}  // namespace

TEST(Environment, ResetStartsFromTheNaiveNestAndMeasures) {
    Environment env(test_config());
    env.reset(matmul(32, 48, 16));
    EXPECT_EQ(env.program().cursor, 0);
    EXPECT_EQ(env.steps_taken(), 0);
    EXPECT_GT(env.gflops(), 0);
    EXPECT_EQ(env.counters().compiles, 1);
    EXPECT_EQ(env.observe("flops").scalar, env.gflops());
    EXPECT_NEAR(env.observe("runtime").scalar, 2.0 * 32 * 48 * 16 / (env.gflops() * 1e9), 1e-12);
}

TEST(Environment, CursorMovesNeedNoMeasurement) {
    Environment env(test_config());
    env.reset(matmul(32, 48, 16));
    auto before = env.counters();
    StepResult r = env.step(Action::Down);
    EXPECT_EQ(r.reward, 0);
    EXPECT_FALSE(r.info.measured);
    EXPECT_EQ(env.counters().measurements, before.measurements);
    EXPECT_EQ(env.counters().cache_hits, before.cache_hits);
    EXPECT_EQ(env.program().cursor, 1);
}

TEST(Environment, RewardIsTheGflopsChangeOverTheRoof) {
    Environment env(test_config());
    env.reset(matmul(32, 48, 16));
    const double g0 = env.gflops();
    StepResult r = env.step(Action::Split8);
    EXPECT_TRUE(r.info.measured);
    EXPECT_DOUBLE_EQ(r.reward, (env.gflops() - g0) / 100.0);
    EXPECT_DOUBLE_EQ(r.info.gflops, env.gflops());
}

TEST(Environment, IllegalActionsAreRejectedNotIgnored) {
    Environment env(test_config("looptune"));
    env.reset(matmul(32, 48, 16));
    EXPECT_FALSE(env.action_mask()[0]);  // up at the first loop
    EXPECT_THROW(env.step(Action::Up), Error);
    EXPECT_THROW(env.step(Action::Vectorize), Error);  // not in the looptune space
    EXPECT_THROW(env.step_index(7), Error);
    EXPECT_EQ(env.steps_taken(), 0);
    EXPECT_EQ(env.program().cursor, 0);
}

TEST(Environment, EpisodesEndAfterMaxSteps) {
    EnvConfig c = test_config();
    c.max_steps = 3;
    Environment env(c);
    env.reset(matmul(16, 16, 16));
    EXPECT_FALSE(env.step(Action::Down).done);
    EXPECT_FALSE(env.step(Action::Down).done);
    EXPECT_TRUE(env.step(Action::Up).done);
}

TEST(Environment, RevisitedSchedulesAreLookups) {
    Environment env(test_config());
    env.reset(matmul(32, 48, 16));
    env.step(Action::Down);
    env.step(Action::Down);
    env.step(Action::SwapUp);  // m, n, k
    const auto compiles = env.counters().compiles;
    StepResult r = env.step(Action::SwapDown);  // back to m, k, n: seen at reset
    EXPECT_TRUE(r.info.from_cache);
    EXPECT_EQ(env.counters().compiles, compiles);
}

TEST(Environment, StoreMakesMeasurementsPersistent) {
    auto path = std::filesystem::temp_directory_path() / "looptune_env_store_test.sqlite";
    std::filesystem::remove(path);
    EnvConfig c = test_config();
    c.store_path = path.string();
    double g;
    {
        Environment env(c);
        env.reset(matmul(32, 48, 16));
        g = env.step(Action::Split4).info.gflops;
    }
    Environment env2(c);
    env2.reset(matmul(32, 48, 16));
    StepResult r = env2.step(Action::Split4);
    EXPECT_TRUE(r.info.from_cache);
    EXPECT_EQ(r.info.gflops, g);
    EXPECT_GE(env2.counters().store_hits, 2);
    EXPECT_EQ(env2.counters().compiles, 0);
    std::filesystem::remove(path);
}

TEST(Environment, AQuickerProtocolStaysOutOfTheStoreAndWhatItCutLeavesTheCache) {
    auto path = std::filesystem::temp_directory_path() / "looptune_env_quick_test.sqlite";
    std::filesystem::remove(path);
    EnvConfig c = test_config();
    c.store_path = path.string();
    c.verify = false;
    const Program naive = matmul(128, 128, 128);
    Program cut = apply(naive, Action::Split4);
    Program quick = apply(naive, Action::Split8);
    {
        Environment env(c);
        env.reset(naive);  // the configured protocol: stored
        MeasureOptions m = c.measure;
        m.time_cap_s = 1e-7;  // every call is cut
        env.set_measure_options(m);
        StepInfo info;  // a fresh one per call: evaluate() sets its flags, never clears them
        env.evaluate(cut, &info);
        EXPECT_TRUE(info.timed_out);
        EXPECT_TRUE(env.cut_short(cut));
        // A search that visits another computation (a seed's packed form) and comes back:
        // what it measured cut short is still known as such.
        env.reset(matmul(64, 64, 64));
        env.reset(naive);
        EXPECT_TRUE(env.cut_short(cut));
        env.set_measure_options(c.measure);  // the configured figures, but set by a search
        info = {};
        env.evaluate(quick, &info);
        EXPECT_FALSE(info.timed_out);
        EXPECT_FALSE(env.cut_short(quick));
        EXPECT_TRUE(env.evaluate(quick, &info) > 0 && info.from_cache);
        env.reset_measure_options();
        EXPECT_EQ(env.measure_options().time_cap_s, c.measure.time_cap_s);
        EXPECT_FALSE(env.cut_short(cut));
        info = {};
        env.evaluate(cut, &info);  // measured again: the cut figure left the cache
        EXPECT_FALSE(info.from_cache);
        EXPECT_FALSE(info.timed_out);
        info = {};
        env.evaluate(quick, &info);  // a complete quick figure stays cached
        EXPECT_TRUE(info.from_cache);
    }
    Environment env2(c);
    env2.reset(naive);
    EXPECT_EQ(env2.counters().store_hits, 1);  // the naive nest, measured as configured
    StepInfo info;
    env2.evaluate(quick, &info);  // measured under a search's protocol: not stored
    EXPECT_FALSE(info.from_cache);
    info = {};
    env2.evaluate(cut, &info);  // measured again with the configured protocol: stored
    EXPECT_TRUE(info.from_cache);
    std::filesystem::remove(path);
}

TEST(Environment, BadMeasurementOptionsAreRefused) {
    Environment env(test_config());
    for (MeasureOptions m :
         {MeasureOptions{.warmup = -1}, MeasureOptions{.min_runs = 0},
          MeasureOptions{.min_runs = 5, .max_runs = 2}, MeasureOptions{.min_time_s = NAN},
          MeasureOptions{.time_cap_s = 0}, MeasureOptions{.time_cap_s = INFINITY}})
        EXPECT_THROW(env.set_measure_options(m), Error);
    EXPECT_EQ(env.measure_options().time_cap_s, test_config().measure.time_cap_s);
}

TEST(Environment, EveryObservationSpaceHasItsDocumentedShape) {
    EnvConfig c = test_config("looptune");
    c.max_loops = 6;
    Environment env(c);
    env.reset(matmul(32, 48, 16));
    env.step(Action::Split4);
    for (const auto &name : observation_space_names()) {
        Observation o = env.observe(name);
        EXPECT_EQ(o.space, name);
        if (o.kind == Observation::Kind::Tensor) {
            int64_t n = 1;
            for (auto s : o.shape) n *= s;
            EXPECT_EQ(size_t(n), o.values.size()) << name;
        }
    }
    EXPECT_EQ(env.observe("loops_tensor").shape, (std::vector<int64_t>{6, kLoopFeatures}));
    EXPECT_EQ(env.observe("prev_actions_tensor").shape, (std::vector<int64_t>{kPrevActions, 7}));
    EXPECT_EQ(env.observe("ir").text, serialize(env.program()));
    EXPECT_EQ(env.observe("threads").scalar, env.config().threads);
    EXPECT_NE(env.observe("loop_tree").text.find("<<<<<< cursor"), std::string::npos);
    EXPECT_THROW(env.observe("no_such_space"), Error);
}

TEST(Environment, RandomEpisodesOnAwkwardShapesVerifyEveryKernel) {
    EnvConfig c = test_config();
    c.max_steps = 12;
    Environment env(c);
    std::mt19937_64 rng(7);
    const int64_t shapes[][3] = {{37, 100, 19}, {17, 33, 9}, {64, 48, 40}};
    for (const auto &s : shapes) {
        for (int ep = 0; ep < 4; ++ep) {
            env.reset(matmul(s[0], s[1], s[2]));
            bool done = false;
            while (!done) {
                auto mask = env.action_mask();
                std::vector<int> legal;
                for (size_t i = 0; i < mask.size(); ++i)
                    if (mask[i]) legal.push_back(int(i));
                ASSERT_FALSE(legal.empty());
                done = env.step_index(legal[rng() % legal.size()]).done;  // verify=true checks
            }
        }
    }
    EXPECT_GT(env.counters().verified, 10);
}
