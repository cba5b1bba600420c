// The guided search (tune/guided_search.h) with the shipped policy: its schedule replays from
// its actions and verifies against the reference, it is never below the greedy rollout of the
// same run, it stops near its budget, and bad options are refused. How well it tunes is in
// docs/decisions.md, measured; not here.
#include "tune/guided_search.h"
#include "looptool/measure/traffic.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "looptool/formats/text_format.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "search/tile_schedules.h"
#include "test_util.h"
#include "tune/ranked_rollout.h"
#include "util/machine.h"

using namespace looptool;
using namespace looptune;
using looptool::tests::TempDir;

namespace {

const Policy &shipped_policy() {
    static const Policy p = Policy::load(shipped_policy_path());
    return p;
}

Environment policy_env() {
    EnvConfig c = shipped_policy().env_config();
    c.verify = true;  // every new kernel is checked against the reference as it is compiled
    c.measure.min_time_s = 0.002;
    return Environment(c);
}

void expect_replays_and_verifies(Environment &env, const Program &start, const GuidedResult &r) {
    Program replayed = start;
    for (Action a : r.actions) replayed = apply(replayed, a);
    EXPECT_EQ(schedule_key(replayed), schedule_key(r.best));
    EXPECT_TRUE(env.verify(r.best).ok);
    EXPECT_LE(int(r.actions.size()), r.max_steps);
}

/// The names of tune's seeds for c (with the `full` space and room for every seed).
std::set<std::string> seed_names(const Computation &c, bool row_band = false) {
    std::set<std::string> n;
    for (const TuneSeed &s : tune_seeds(c, kSeedSteps, ActionSpace::preset("full"), row_band))
        n.insert(s.name);
    return n;
}

}  // namespace

TEST(GuidedSearch, FindsAVerifiedScheduleNoWorseThanTheGreedyRollout) {
    // A skinny shape (n = 17) off LoopTune's grid, and one on it.
    for (auto [m, n, k] : {std::tuple{96, 17, 40}, std::tuple{64, 64, 48}}) {
        Environment env = policy_env();
        const Program start = tests::matmul_program(m, n, k);
        GuidedConfig c;
        c.budget_s = 2;
        GuidedResult r = guided_search(shipped_policy(), env, start, c);
        SCOPED_TRACE(start.comp->name);
        expect_replays_and_verifies(env, start, r);
        EXPECT_GE(r.best_gflops, r.greedy.best_gflops);  // same measurements: never below it
        EXPECT_GT(r.best_gflops, r.base_gflops);
        // The winner's figure is a finalist's, measured again with the full protocol.
        EXPECT_FALSE(env.cut_short(r.best));
        EXPECT_EQ(env.evaluate(r.best),
                  r.best_rounds.empty() ? r.best_gflops : r.best_rounds.back());
        EXPECT_GT(r.rollouts, 0);  // it searched beyond the greedy rollout
        EXPECT_FALSE(r.found_by.empty());
        // The best seed was measured again beside the finalists: the winner is at least as good.
        EXPECT_EQ(r.best_seed.rfind("tile ", 0), 0u) << r.best_seed;
        EXPECT_GT(r.best_seed_gflops, 0);
        EXPECT_GE(r.best_gflops, r.best_seed_gflops);
        // Its actions replay from the start to a schedule that computes the same thing.
        Program seed = start;
        for (Action a : r.best_seed_actions) seed = apply(seed, a);
        EXPECT_TRUE(env.verify(seed).ok) << r.best_seed;
        EXPECT_TRUE(r.found_by != r.best_seed ||
                    looptool::schedule_key(seed) == looptool::schedule_key(r.best));
        // When a seed wins, it is the best seed (the full protocol ranks the seeds again).
        if (r.found_by.starts_with("tile ") && !r.found_by.ends_with(" + policy")) {
            EXPECT_EQ(r.best_seed_gflops, r.best_gflops) << r.found_by << " / " << r.best_seed;
        }
        // Loosely: the budget starts with the greedy rollout; the step in flight may overrun.
        EXPECT_LT(r.seconds, c.budget_s + 10);
        // One call of the winner: its FLOPs at its GFLOPS (what says why a search overran).
        EXPECT_DOUBLE_EQ(r.call_seconds, start.comp->flops() / (r.best_gflops * 1e9));
    }
}

TEST(GuidedSearch, SeedsADotProductWhenNIsOne) {
    // With n = 1 nothing of the tile family vectorizes; the seed vectorizes k (partial sums).
    Environment env = policy_env();
    const Program start = tests::matmul_program(32, 1, 200);
    GuidedResult r = guided_search(shipped_policy(), env, start);
    expect_replays_and_verifies(env, start, r);
    EXPECT_GE(r.best_gflops, r.greedy.best_gflops);
    const int k = start.comp->var_index("k");
    bool k_vectorized = false;
    for (const Loop &l : r.best.tree.nests[0].loops) k_vectorized |= l.var == k && l.vectorize;
    EXPECT_TRUE(k_vectorized) << dump(r.best) << "found by " << r.found_by;
    EXPECT_EQ(r.best_seed.rfind("dot k", 0), 0u) << r.best_seed;
}

TEST(GuidedSearch, SeedsConvTilesOnAConv) {
    // The policy was trained on matmuls only; the conv family's tiles (with W packed: a layout
    // action outside the policy's space, allowed in seeds) give the search its starting points.
    Environment env = policy_env();
    const Program start =
        Program::naive(std::make_shared<Computation>(make_conv2d(1, 16, 9, 18, 64, 3, 3)));
    GuidedConfig c;
    c.budget_s = 1;
    GuidedResult r = guided_search(shipped_policy(), env, start, c);
    expect_replays_and_verifies(env, start, r);
    EXPECT_GE(r.max_steps, 35 + shipped_policy().info().max_steps);  // a conv tile, an episode
    EXPECT_GE(r.best_gflops, r.greedy.best_gflops);
    EXPECT_GT(r.best_gflops, 3 * r.base_gflops) << dump(r.best) << "found by " << r.found_by;
}

TEST(GuidedSearch, SearchesABatchedConvOnTwoImagesAndAppliesTheResultToTheBatch) {
    const Program start =
        Program::naive(std::make_shared<Computation>(make_conv2d(6, 8, 9, 18, 32, 3, 3)));
    Environment env = policy_env();
    GuidedConfig c;
    c.budget_s = 1;
    GuidedResult r = guided_search(shipped_policy(), env, start, c);
    EXPECT_EQ(r.slice_images, 2);
    EXPECT_EQ(r.batch, 6);
    EXPECT_EQ(env.program().comp->vars[0].extent, 2);  // the environment measured the slice
    EXPECT_EQ(r.best.comp->vars[0].extent, 6);         // the whole batch's schedule
    Environment whole = policy_env();
    whole.reset(start);
    expect_replays_and_verifies(whole, start, r);
    EXPECT_GT(r.best_gflops, 3 * r.base_gflops) << dump(r.best) << "found by " << r.found_by;
    // batch_slice 0: the whole batch.
    c.batch_slice = 0;
    r = guided_search(shipped_policy(), whole, start, c);
    EXPECT_EQ(r.slice_images, 0);
    expect_replays_and_verifies(whole, start, r);
}

TEST(GuidedSearch, ABatchSliceIsTheSameConvOnFewerImages) {
    const Computation c = make_conv2d(6, 8, 9, 18, 32, 3, 3);
    const auto slice = conv_batch_slice(c, 2);
    ASSERT_TRUE(slice);
    EXPECT_EQ(slice->name, c.name + " (2 of 6 images)");
    EXPECT_EQ(slice->flops(), c.flops() / 3);
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        std::vector<int64_t> want = c.tensors[t].shape;
        if (c.tensors[t].name != "W") want[0] = 2;  // X, T and Y start with the batch
        EXPECT_EQ(slice->tensors[t].shape, want) << c.tensors[t].name;
    }
    EXPECT_FALSE(conv_batch_slice(c, 6));  // no smaller
    EXPECT_FALSE(conv_batch_slice(make_matmul(8, 8, 8), 2));
    EXPECT_THROW(conv_batch_slice(c, 0), Error);
}

TEST(GuidedSearch, SearchesATallConvOnABandOfRowsAndAppliesTheResultToEveryRow) {
    // 6 images of 40 x 18: two images, and of their 38 output rows a band of 14 (8 + 38 % 8).
    const Program start =
        Program::naive(std::make_shared<Computation>(make_conv2d(6, 8, 40, 18, 32, 3, 3)));
    Environment env = policy_env();
    GuidedConfig c;
    c.budget_s = 1;
    c.band_gflops = 1e-4;  // 32 x 8 x 9 x 16 x 2 x 2 = 147 KFLOP a row
    GuidedResult r = guided_search(shipped_policy(), env, start, c);
    EXPECT_EQ(r.slice_images, 2);
    EXPECT_EQ(r.band_rows, 14);
    EXPECT_EQ(r.rows, 38);
    EXPECT_EQ(env.program().comp->vars[2].extent, 14);  // the environment measured the band
    EXPECT_EQ(r.best.comp->vars[2].extent, 38);         // every row's schedule
    Environment whole = policy_env();
    whole.reset(start);
    expect_replays_and_verifies(whole, start, r);
    EXPECT_GT(r.best_gflops, 3 * r.base_gflops) << dump(r.best) << "found by " << r.found_by;
    // band_gflops 0: every row.
    c.band_gflops = 0;
    r = guided_search(shipped_policy(), env, start, c);
    EXPECT_EQ(r.band_rows, 0);
    EXPECT_EQ(r.slice_images, 2);
}

TEST(GuidedSearch, ARowBandIsTheSameConvOnFewerOutputRows) {
    const Computation c = make_conv2d(1, 8, 40, 18, 32, 3, 3);  // 38 x 16 outputs
    const auto band = conv_row_band(c, 14);
    ASSERT_TRUE(band);
    EXPECT_EQ(band->name, c.name + " (14 of 38 rows)");
    EXPECT_DOUBLE_EQ(band->flops(), c.flops() * 14 / 38);
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        std::vector<int64_t> want = c.tensors[t].shape;
        // T and Y's rows are the band's; X keeps its 40 rows (its planes stay as far apart).
        if (c.tensors[t].name == "T" || c.tensors[t].name == "Y") want[2] = 14;
        EXPECT_EQ(band->tensors[t].shape, want) << c.tensors[t].name;
    }
    EXPECT_FALSE(conv_row_band(c, 38));  // no shorter
    EXPECT_FALSE(conv_row_band(make_matmul(8, 8, 8), 2));
    EXPECT_THROW(conv_row_band(c, 0), Error);
    // The band for a search: 8 + 38 % 8 = 14 rows, more in steps of 8 until it has the
    // FLOPs asked for, none beyond half the rows.
    const double row = c.flops() / 38;
    EXPECT_EQ(conv_band_rows(c, row), 14);
    EXPECT_EQ(conv_band_rows(c, 15 * row), 0);  // 22 rows: more than half of 38
    EXPECT_EQ(conv_band_rows(make_conv2d(1, 8, 100, 18, 32, 3, 3), 15 * row), 18);  // 98 rows
    EXPECT_EQ(conv_band_rows(make_matmul(8, 8, 8), 1), 0);
}

TEST(GuidedSearch, MeasuresLargeKernelsOnPrefixesAndLeavesNoPrefixFigureBehind) {
    // 786 KFLOP: with prefixes of 20 KFLOP every state of 160 KFLOP or more is measured on the
    // first iterations of its outermost loop (looptool/measure/prefix.h).
    Environment env = policy_env();
    const Program start = tests::matmul_program(96, 64, 64);
    GuidedConfig c;
    c.budget_s = 1;
    c.prefix_gflops = 2e-5;
    GuidedResult r = guided_search(shipped_policy(), env, start, c);
    EXPECT_GT(r.prefix_measurements, 0);
    EXPECT_EQ(env.prefix_measurements(), r.prefix_measurements);
    expect_replays_and_verifies(env, start, r);
    // The search's figures were the prefixes': the environment measures the winner whole now.
    const int64_t measured = env.counters().measurements;
    EXPECT_GT(env.evaluate(r.best), 0);
    EXPECT_EQ(env.counters().measurements, measured + 1);
    EXPECT_EQ(env.prefix_measurements(), r.prefix_measurements);
    // Without prefixes, none.
    Environment whole = policy_env();
    c.prefix_gflops = 0;
    EXPECT_EQ(guided_search(shipped_policy(), whole, start, c).prefix_measurements, 0);
}

TEST(GuidedSearch, GreedyModeIsTheGreedyRolloutAlone) {
    Environment env = policy_env();
    const Program start = tests::matmul_program(48, 64, 32);
    GuidedConfig c;
    c.greedy = true;
    GuidedResult r = guided_search(shipped_policy(), env, start, c);
    EXPECT_EQ(r.rollouts, 0);
    EXPECT_EQ(r.best_gflops, r.greedy.best_gflops);
    EXPECT_EQ(r.actions, r.greedy.best_actions);
    expect_replays_and_verifies(env, start, r);
}

TEST(GuidedSearch, TheStepLimitGrowsWithLoopsLongerThan256) {
    const int episode = shipped_policy().info().max_steps;
    const ActionSpace space = ActionSpace::preset("full");
    for (const Computation &c :
         {make_matmul(64, 256, 128), make_matmul(1000, 17, 300), make_matmul(1024, 1024, 1024),
          make_conv2d(1, 16, 9, 18, 64, 3, 3)}) {
        SCOPED_TRACE(c.name);
        const int limit = guided_step_limit(c, episode);
        int long_vars = 0;
        for (const auto &v : c.vars) long_vars += v.extent > 256;
        EXPECT_GE(limit, episode + 8 * long_vars);  // a cache block per long variable
        // Every seed fits, with a whole policy episode after it.
        const std::vector<TuneSeed> seeds = tune_seeds(c, limit, space);
        EXPECT_EQ(seeds.size(), tune_seeds(c, kSeedSteps, space).size());
        ASSERT_FALSE(seeds.empty());
        for (const TuneSeed &s : seeds) EXPECT_LE(int(s.actions.size()) + episode, limit) << s.name;
    }
    // On LoopTune's grid (no loop above 256) the 8x32 tile (17 actions with its write nest)
    // makes the limit 17 + 16.
    EXPECT_GE(guided_step_limit(make_matmul(64, 256, 128), episode), 17 + episode);
}

// Above one thread the seeds' parallel variants (a GEMV's column bands are 40 actions and more)
// fit too: the limit is taken over the seeds on that many threads.
TEST(GuidedSearch, TheStepLimitMakesRoomForTheParallelSeeds) {
    const int episode = shipped_policy().info().max_steps;
    const ActionSpace space = ActionSpace::preset("full");
    for (const Computation &c : {make_matmul(1, 4096, 4096), make_matmul(8, 1024, 2048)}) {
        SCOPED_TRACE(c.name);
        const int limit = guided_step_limit(c, episode, 2);
        const std::vector<TuneSeed> all = tune_seeds(c, kSeedSteps, space, false, 2);
        EXPECT_EQ(tune_seeds(c, limit, space, false, 2).size(), all.size());
        size_t bands = 0;
        for (const TuneSeed &s : all) {
            bands += s.name.find(" nb") != std::string::npos;
            EXPECT_LE(int(s.actions.size()) + episode, limit) << s.name;
        }
        EXPECT_GT(bands, 0u);
    }
}

TEST(GuidedSearch, OnARowBandNoSeedSweepsEveryRowOncePerSmallBlockOfOutputChannels) {
    auto has = [](const Computation &c, bool row_band, const std::string &name) {
        return seed_names(c, row_band).count(name) > 0;
    };
    // 64 output channels: the 8x32 mh tile sweeps the rows 8 times, 32x8 vm twice, 64x4 once.
    const Computation c64 = make_conv2d(2, 16, 40, 40, 64, 3, 3);
    EXPECT_TRUE(has(c64, false, "tile conv 8x32 mh"));
    EXPECT_FALSE(has(c64, true, "tile conv 8x32 mh"));
    for (const char *kept : {"tile conv 4x64 hm", "tile conv 16x16 hm", "tile conv 32x8 vm pack",
                             "tile conv 64x4 vm pack"}) {
        EXPECT_TRUE(has(c64, false, kept)) << kept;
        EXPECT_TRUE(has(c64, true, kept)) << kept;
    }
    // 128 output channels: 32x8 vm sweeps them 4 times.
    const Computation c128 = make_conv2d(2, 16, 40, 40, 128, 3, 3);
    EXPECT_TRUE(has(c128, false, "tile conv 32x8 vm pack"));
    EXPECT_FALSE(has(c128, true, "tile conv 32x8 vm pack"));
    EXPECT_TRUE(has(c128, true, "tile conv 64x4 vm pack"));
}

TEST(GuidedSearch, BoundedMeasurementsTakeAFewCallsOfTheBest) {
    const MeasureOptions configured{
        .warmup = 2, .min_runs = 5, .min_time_s = 0.01, .max_runs = 1000, .time_cap_s = 1.0};
    // No best yet: the configured cap, no first-call cap, calls until the minimum time.
    MeasureOptions o = bounded_options(configured, 2e9, 0);
    EXPECT_EQ(o.warmup, 1);
    EXPECT_EQ(o.min_runs, 1);
    EXPECT_EQ(o.min_time_s, 0.01);
    EXPECT_EQ(o.time_cap_s, 1.0);
    EXPECT_EQ(o.first_call_cap_s, 0);
    // The best takes 20 ms a call, more than the minimum time: one call, no warm-up.
    o = bounded_options(configured, 2e9, 100);
    EXPECT_NEAR(o.time_cap_s, kBoundCalls * 0.02, 1e-12);
    EXPECT_NEAR(o.first_call_cap_s, kFirstCallCalls * 0.02, 1e-12);  // a first call over 40 ms
    EXPECT_EQ(o.warmup, 0);
    EXPECT_EQ(o.min_runs, 1);
    // 2 ms a call: the cap's floor is 25 ms; a warm-up and three calls.
    o = bounded_options(configured, 2e8, 100);
    EXPECT_NEAR(o.time_cap_s, 0.025, 1e-12);
    EXPECT_NEAR(o.first_call_cap_s, kFirstCallCalls * 0.002, 1e-12);  // one call: 4 ms
    EXPECT_EQ(o.warmup, 1);
    EXPECT_EQ(o.min_runs, 3);
    o = bounded_options(configured, 2e6, 100);  // 20 us a call: a cold first call is not cut
    EXPECT_EQ(o.first_call_cap_s, kMinFirstCallCapS);
    o = bounded_options(configured, 2e9, 1);  // 2 s a call: never above the configured cap
    EXPECT_EQ(o.time_cap_s, 1.0);
    o = bounded_options(configured, 2e3, 100);  // 20 ns a call: room for the minimum time
    EXPECT_NEAR(o.time_cap_s, 0.025, 1e-12);
    // Fewer calls configured than the search's: kept.
    o = bounded_options({.warmup = 0, .min_runs = 1, .max_runs = 1}, 2e9, 100);
    EXPECT_EQ(o.warmup, 0);
    EXPECT_EQ(o.min_runs, 1);
    EXPECT_EQ(o.max_runs, 1);
}

TEST(GuidedSearch, LongCallsAreMeasuredWithFewerCalls) {
    const MeasureOptions configured{.warmup = 3, .min_runs = 10, .min_time_s = 0.05};
    // 1 ms a call: ten calls take less than the minimum time; as configured.
    MeasureOptions o = fewer_long_calls(configured, 0.001, 1);
    EXPECT_EQ(o.warmup, 3);
    EXPECT_EQ(o.min_runs, 10);
    // 20 ms: three calls fill 50 ms, after one warm-up.
    o = fewer_long_calls(configured, 0.02, 1);
    EXPECT_EQ(o.warmup, 1);
    EXPECT_EQ(o.min_runs, 3);
    // 0.16 s (a 2048^3 matmul): one call, no warm-up.
    o = fewer_long_calls(configured, 0.16, 1);
    EXPECT_EQ(o.warmup, 0);
    EXPECT_EQ(o.min_runs, 1);
    EXPECT_EQ(o.time_cap_s, configured.time_cap_s);
    // A finalist's figure is a median of kFinalCalls calls at least.
    EXPECT_EQ(fewer_long_calls(configured, 0.16, kFinalCalls).min_runs, kFinalCalls);
    EXPECT_EQ(fewer_long_calls(configured, 0.16, kFinalCalls).warmup, 0);
    // Unknown (no figure yet): as configured.
    EXPECT_EQ(fewer_long_calls(configured, 0, 1).min_runs, 10);
}

TEST(GuidedSearch, TheEnvironmentGetsItsConfiguredProtocolBack) {
    Environment env = policy_env();
    const MeasureOptions before = env.measure_options();
    guided_search(shipped_policy(), env, tests::matmul_program(64, 48, 96));
    EXPECT_EQ(env.measure_options().min_runs, before.min_runs);
    EXPECT_EQ(env.measure_options().time_cap_s, before.time_cap_s);
}

TEST(GuidedSearch, BadOptionsAreRefused) {
    Environment env = policy_env();
    const Program start = tests::matmul_program(16, 16, 16);
    for (GuidedConfig c : {GuidedConfig{.budget_s = 0}, GuidedConfig{.budget_s = NAN},
                           GuidedConfig{.budget_s = INFINITY}, GuidedConfig{.branches = 0},
                           GuidedConfig{.max_steps = 3}, GuidedConfig{.batch_slice = -1},
                           GuidedConfig{.batch_slice = 1}, GuidedConfig{.band_gflops = -1},
                           GuidedConfig{.robust_margin = -0.1}, GuidedConfig{.robust_margin = 1},
                           GuidedConfig{.robust_margin = NAN}, GuidedConfig{.prefix_gflops = -1},
                           GuidedConfig{.prefix_gflops = NAN}})
        EXPECT_THROW(guided_search(shipped_policy(), env, start, c), Error);
}

// mm128_1500_1280: the 8x32 tile in the mn order reads all of B (7.7 MB, rows 6000 B apart)
// again in 32-float runs for every 8 rows of A; with another core streaming through the L3 it
// ran at 11-16 GFLOPS instead of 80-95 (docs/decisions.md). The nm order and the k-blocked
// nkm tile keep what they read again in L2; a 64^3 matmul fits whole.
TEST(GuidedSearch, KernelsThatReadAgainFromBeyondL2InShortRunsDependOnTheSharedCache) {
    using tests::tiled_matmul;
    const int64_t l2 = int64_t(1) << 20;  // Zen 4's
    EXPECT_TRUE(depends_on_shared_cache(tiled_matmul(128, 1500, 1280, {8, 32, 0, "mn"}), l2));
    EXPECT_TRUE(depends_on_shared_cache(tiled_matmul(128, 1500, 1280, {8, 16, 0, "mn"}), l2));
    EXPECT_FALSE(depends_on_shared_cache(tiled_matmul(128, 1500, 1280, {8, 32, 0, "nm"}), l2));
    EXPECT_FALSE(depends_on_shared_cache(tiled_matmul(128, 1500, 1280, {4, 64, 128, "nkm"}), l2));
    EXPECT_FALSE(depends_on_shared_cache(tiled_matmul(64, 64, 64, {8, 32, 0, "mn"}), l2));
    // An L2 that holds B (8 MiB): nothing is read again from beyond it.
    EXPECT_FALSE(depends_on_shared_cache(tiled_matmul(128, 1500, 1280, {8, 32, 0, "mn"}), 8 * l2));
}

// The fastest, unless it depends on the shared cache and a kernel that does not is within the
// margin: then the fastest of those.
TEST(GuidedSearch, TheFastestIsPassedOverForAKernelWithinTheMarginThatDoesNotDependOnTheL3) {
    const std::vector<double> gflops{100, 96, 97, 90};
    EXPECT_EQ(prefer_robust(gflops, {true, false, true, false}, 0.05), 1u);
    EXPECT_EQ(prefer_robust(gflops, {true, false, false, false}, 0.05), 2u);
    EXPECT_EQ(prefer_robust(gflops, {true, false, true, false}, 0.03), 0u);  // 96 is 4% off
    EXPECT_EQ(prefer_robust(gflops, {true, true, true, false}, 0.05), 0u);   // 90: 10% off
    EXPECT_EQ(prefer_robust(gflops, {false, false, true, false}, 0.05), 0u);
    EXPECT_EQ(prefer_robust(gflops, {true, false, true, false}, 0), 0u);
    EXPECT_THROW(prefer_robust({}, {}, 0.05), Error);
}

TEST(GuidedSearch, TheChoiceIsNeverSlowerThanTheStart) {
    // The start (index 0) fastest and dependent on the shared cache: prefer_robust() alone would
    // take the 96 GFLOPS kernel within its margin.
    const std::vector<double> gflops{100, 96, 90};
    EXPECT_EQ(prefer_robust(gflops, {true, false, false}, 0.05), 1u);
    EXPECT_EQ(choose_final(gflops, {true, false, false}, 0, 0.05), 0u);
    // Otherwise the same pick as prefer_robust().
    EXPECT_EQ(choose_final(gflops, {true, false, false}, 2, 0.05), 1u);
    EXPECT_EQ(choose_final(gflops, {false, false, false}, 1, 0.05), 0u);
}

TEST(GuidedSearch, TheStartIsMeasuredInFullBesideTheFinalists) {
    // A naive nest whose calls (tens of ms) are far past the bound set by the seeds' calls:
    // the search cuts its measurement short, the finals measure it in full (a warm-up and a
    // call fit in kStartShare of this budget).
    Environment env = policy_env();
    const Program start = tests::matmul_program(256, 256, 512);
    GuidedConfig c;
    c.budget_s = 2;
    const GuidedResult r = guided_search(shipped_policy(), env, start, c);
    EXPECT_FALSE(r.base_cut_short);
    // Not the upper bound a cut measurement gives: below 1.5x the fastest of three fresh full
    // measurements (another process loading the machine moves single figures by more, and
    // only slows them down).
    env.reset_measure_options();
    double hi = 0;
    for (int i = 0; i < 3; ++i) hi = std::max(hi, env.measure_again(start));
    EXPECT_LT(r.base_gflops, hi * 1.5);
    EXPECT_GE(r.best_gflops, r.base_gflops);
    // The best seed judged beside the chosen kernel in alternating rounds, unless it is it.
    EXPECT_FALSE(r.best_seed.empty()) << r.found_by;
    if (!r.same_as_seed) {
        EXPECT_EQ(r.seed_rounds.size(), size_t(kJudgeRounds));
        EXPECT_EQ(r.best_rounds.size(), size_t(kJudgeRounds));
        EXPECT_EQ(r.best_rounds.front(), r.best_gflops);
    }
}

TEST(GuidedSearch, AStartThatCannotWinIsMeasuredWithinAShareOfTheBudget) {
    // A conv's naive nest: a call of its band of rows takes 0.2-0.5 s, seconds under load; the
    // search cuts it short at a few ms. The finals do not measure it in full (up to the
    // environment's 1 s cap and more) but within kStartShare of the budget: its figure is then
    // an upper bound, from a call cut short there, several times its real speed.
    Environment env = policy_env();
    const Program start =
        Program::naive(std::make_shared<Computation>(make_conv2d(1, 64, 31, 31, 192, 5, 5)));
    GuidedConfig c;
    c.budget_s = 0.5;
    const GuidedResult r = guided_search(shipped_policy(), env, start, c);
    ASSERT_GT(r.band_rows, 0);
    EnvConfig unmeasured = shipped_policy().env_config();
    unmeasured.measure_enabled = false;  // the whole naive nest would take seconds a call
    Environment whole(unmeasured);
    whole.reset(start);
    expect_replays_and_verifies(whole, start, r);
    EXPECT_TRUE(r.base_cut_short);
    // Cut within 4x the share (room for a loaded machine's late cancel), not after a whole call.
    const double band_flops = r.best_gflops * 1e9 * r.call_seconds;
    EXPECT_GT(r.base_gflops, band_flops / (4 * kStartShare * c.budget_s) / 1e9);
    EXPECT_GT(r.best_gflops, 2 * r.base_gflops);
}

TEST(GuidedSearchCli, TuneTakesAShapeInsteadOfAFile) {
    TempDir dir("guidedshape");
    auto r = tests::run_cli(dir,
                            "tune --matmul 48,64,32 --conv 1,8,10,10,16,3,3 --conv "
                            "1,8,10,10,16,3,3,2,1 --budget-s 0.2 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 3u) << r.out;
    EXPECT_EQ(j[0]["benchmark"], "mm48_64_32");
    EXPECT_GE(j[0]["gflops"].get<double>(), j[0]["base_gflops"].get<double>());
    EXPECT_GT(j[1]["gflops"].get<double>(), 0);
    EXPECT_EQ(j[2]["benchmark"], "conv1_8_10_10__16_8_3_3_s2_p1");
    EXPECT_GT(j[2]["gflops"].get<double>(), j[2]["base_gflops"].get<double>());
    for (const char *bad : {"--matmul 48,64", "--matmul 48,64,0", "--matmul 48,x,2",
                            "--conv 1,8,10,10,16,3", "--conv 1,8,10,10,16,3,3,0",
                            "--conv 1,8,10,10,16,3,3,1,3", "--conv 1,8,10,10,16,3,3,1,-1",
                            "--conv 1,8,10,10,16,3,3,1,1,1", "--conv 1,8,1,1,16,5,5,1,1", ""}) {
        r = tests::run_cli(dir, std::string("tune ") + bad);
        EXPECT_EQ(r.exit_code, 1) << bad;
        EXPECT_NE(r.err.find("error:"), std::string::npos) << bad << ": " << r.err;
    }
    r = tests::run_cli(dir, "tune --conv 1,8,10,10,16,3,3,1,3");
    EXPECT_NE(r.err.find("padding 3 is not in [0, 2]"), std::string::npos) << r.err;
    r = tests::run_cli(dir, "generate --kind conv --dimA 1,8,10 --dimB 16,8,3,3 --pad 3 --out g");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: conv1_8_10_10__16_8_3_3_p3: padding 3 is not below the kernel"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path / "g" / "conv1_8_10_10__16_8_3_3_p3"));
    r = tests::run_cli(dir,
                       "generate --kind conv --dimA 1,8,10 --dimB 16,8,3,3 --pad 1 "
                       "--stride 2 --out g");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(load_program_file((dir.path / "g" / "conv1_8_10_10__16_8_3_3_s2_p1").string())
                    .computation() == make_padded_conv2d(1, 8, 10, 10, 16, 3, 3, 2, 1));
}

TEST(GuidedSearchCli, TuneTakesABudgetOrGreedyAndRefusesBadOnes) {
    TempDir dir("guidedcli");
    const std::string bench = std::string(LOOPTUNE_CORPUS_DIR) + "/mm64_256_16_range/mm64_64_64";
    auto r = tests::run_cli(dir, "tune --bench " + bench + " --greedy --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"mode\": \"greedy\""), std::string::npos) << r.out;
    r = tests::run_cli(dir, "tune --bench " + bench + " --budget-s 0.3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("greedy rollout"), std::string::npos) << r.out;
    r = tests::run_cli(dir, "tune --bench " + bench + " --budget-s 0.3 --full-measurements --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"base_cut_short\": false"), std::string::npos) << r.out;
    for (const char *bad : {"--budget-s 0", "--budget-s nan", "--steps -1", "--steps 3",
                            "--robust-margin -0.1", "--robust-margin 0.9"}) {
        r = tests::run_cli(dir, "tune --bench " + bench + " " + bad);
        EXPECT_EQ(r.exit_code, 1) << bad;
        EXPECT_NE(r.err.find("error:"), std::string::npos) << bad << ": " << r.err;
    }
}

TEST(GuidedSearchCli, CompareReportsTheGuidedSearchAndTheGreedyRolloutSideBySide) {
    TempDir dir("guidedcmp");
    auto r = tests::run_cli(dir, "generate --dimA 24,16 --dimB 16,40 --out data");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = tests::run_cli(dir,
                       "compare --dataset data --split all --methods policy,policy-greedy,"
                       "policy-full,policy-noseeds,seeds "
                       "--steps 16 --out cmp --no-plots");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string csv = tests::slurp(dir.path / "cmp/results.csv");
    EXPECT_NE(csv.find("mm24_40_16,policy,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("mm24_40_16,policy-greedy,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("mm24_40_16,policy-full,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("mm24_40_16,policy-noseeds,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("mm24_40_16,seeds,"), std::string::npos) << csv;
}

// --untrained runs the same methods with a second policy file (here the shipped one again:
// the rows exist and are named apart); a file that is not there is refused before any run.
TEST(GuidedSearchCli, CompareRunsTheUntrainedAblationWithItsOwnPolicyFile) {
    TempDir dir("guideduntrained");
    auto r = tests::run_cli(dir, "generate --dimA 24,16 --dimB 16,40 --out data");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = tests::run_cli(dir,
                       "compare --dataset data --split all --methods "
                       "policy-noseeds,untrained-noseeds,untrained --untrained " +
                           shipped_policy_path() + " --steps 16 --out cmp --no-plots");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string csv = tests::slurp(dir.path / "cmp/results.csv");
    EXPECT_NE(csv.find("mm24_40_16,untrained-noseeds,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("mm24_40_16,untrained,"), std::string::npos) << csv;
    r = tests::run_cli(dir,
                       "compare --dataset data --split all --methods untrained "
                       "--untrained no_such.policy --out cmp2 --no-plots");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no_such.policy"), std::string::npos) << r.err;
    r = tests::run_cli(dir,
                       "compare --dataset data --split all --methods untrained "
                       "--out cmp3 --no-plots");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("untrained"), std::string::npos) << r.err;
}

// The ablations: the seed rules alone give the fastest seed's actions (a verified schedule
// no slower than the naive nest); without them the guided search still tunes.
TEST(GuidedSearch, TheAblationsRunTheSeedRulesAloneAndTheSearchWithoutThem) {
    Environment env = policy_env();
    const Program start = tests::matmul_program(48, 64, 32);
    const auto seed = best_seed_actions(env, start, kSeedSteps);
    ASSERT_FALSE(seed.empty());
    Program p = start;
    for (Action a : seed) p = apply(p, a);
    EXPECT_TRUE(env.verify(p).ok);
    EXPECT_GE(env.evaluate(p), env.evaluate(start));
    bool is_a_seed = false;
    for (const TuneSeed &s : tune_seeds(*start.comp, kSeedSteps, env.action_space()))
        is_a_seed |= s.actions == seed;
    EXPECT_TRUE(is_a_seed);
    GuidedConfig c;
    c.tile_seeds = false;
    c.budget_s = 0.2;
    const GuidedResult r = guided_search(shipped_policy(), env, start, c);
    EXPECT_TRUE(r.seed_gflops.empty());
    EXPECT_TRUE(r.best_seed.empty());
    expect_replays_and_verifies(env, start, r);
}

// A row of 15-28 columns is one channel-vectorized tile (16 output channels, the whole row
// unrolled: up to 28 accumulators); narrower rows take 32 channels, wider ones neither.
TEST(GuidedSearch, ARowOfUpTo28ColumnsIsOneChannelVectorizedTile) {
    const auto w27 = seed_names(make_conv2d(1, 64, 31, 31, 192, 5, 5));
    EXPECT_TRUE(w27.count("tile conv 16x27 vm pack"));
    const auto w14 = seed_names(make_conv2d(1, 64, 16, 16, 64, 3, 3));
    EXPECT_TRUE(w14.count("tile conv 32x14 vm pack"));
    EXPECT_FALSE(w14.count("tile conv 16x14 vm pack"));
    for (const std::string &n : seed_names(make_conv2d(1, 64, 58, 58, 64, 3, 3)))
        EXPECT_EQ(n.find("x56 vm"), std::string::npos) << n;
}

// Only an image whose input outgrows half the L2 cache makes a band hide the row sweeps.
TEST(GuidedSearch, ABandHidesRowSweepsOnlyOverImagesLargerThanHalfTheL2) {
    // 64 channels of w x w outputs: 256 w^2 bytes against half of this core's L2.
    const int64_t half = looptool::private_cache_bytes() / 2;
    int64_t w = 1;
    while (256 * (w + 1) * (w + 1) <= half) ++w;
    EXPECT_FALSE(band_hides_row_sweeps(*conv_shape(make_conv2d(1, 64, w + 2, w + 2, 64, 3, 3))));
    EXPECT_TRUE(band_hides_row_sweeps(*conv_shape(make_conv2d(1, 64, w + 3, w + 3, 64, 3, 3))));
    EXPECT_TRUE(band_hides_row_sweeps(*conv_shape(make_conv2d(2, 32, 258, 258, 64, 3, 3))));
}

// From k = 1024 the 16x16 tile and 4x64 with k blocks of 128 inside column panels are seeds
// (the most often fastest and the most even members on deep random shapes); each computes
// what the naive nest does, ragged n and m included.
// k a multiple of 1024: A's rows are 4 KB apart, and the 8x16 tile with A packed (its rows
// interleaved) takes the 16x16 tile's place, where 8 divides m; the packed seed matches the
// reference and tune reports every seed's figure.
TEST(GuidedSearch, ReductionsOfWholeKibiElementsSeedATileWithAPacked) {
    EXPECT_TRUE(seed_names(make_matmul(48, 100, 2048)).count("tile 8x16 mn packA"));
    EXPECT_FALSE(seed_names(make_matmul(48, 100, 2048)).count("tile 16x16 mn"));
    EXPECT_TRUE(
        seed_names(make_matmul(45, 100, 2048)).count("tile 16x16 mn"));  // 8 does not divide m
    EXPECT_TRUE(
        seed_names(make_matmul(48, 100, 2000)).count("tile 16x16 mn"));  // rows not 4 KB apart
    Environment env = policy_env();
    const Program start = tests::matmul_program(24, 40, 1024);
    env.reset(start);
    GuidedConfig g;
    g.budget_s = 0.2;
    const GuidedResult r = guided_search(shipped_policy(), env, start, g);
    std::set<std::string> measured;
    for (const auto &[name, gflops] : r.seed_gflops) {
        EXPECT_GT(gflops, 0) << name;
        measured.insert(name);
    }
    EXPECT_EQ(measured, seed_names(*start.comp));
    for (const TuneSeed &s : tune_seeds(*start.comp, kSeedSteps, ActionSpace::preset("full"))) {
        if (s.name != "tile 8x16 mn packA") continue;
        Program p = start;
        for (Action a : s.actions) p = apply(p, a);
        EXPECT_EQ(p.comp->tensors.back().name, "A_packed") << dump(p);
        EXPECT_TRUE(env.verify(p).ok) << dump(p);
    }
}

// Wide B (n >= 1024, m >= 32) whose rows do not start lines: also 8x16 mn with B copied, its rows
// padded to a line; the seed matches the reference. Not where 16 divides n (rows start lines).
TEST(GuidedSearch, WideRowsOfBOffTheLinesSeedATileWithBsRowsPadded) {
    EXPECT_TRUE(seed_names(make_matmul(257, 2772, 391)).count("tile 8x16 mn pack"));
    EXPECT_TRUE(seed_names(make_matmul(257, 2772, 391)).count("tile 4x64 nm pack"));
    EXPECT_FALSE(seed_names(make_matmul(257, 2816, 391)).count("tile 8x16 mn pack"));
    EXPECT_FALSE(seed_names(make_matmul(16, 2772, 391)).count("tile 8x16 mn pack"));  // m < 32
    Environment env = policy_env();
    const Program start = tests::matmul_program(37, 1030, 21);
    env.reset(start);
    int found = 0;
    for (const TuneSeed &s : tune_seeds(*start.comp, kSeedSteps, ActionSpace::preset("full"))) {
        if (s.name != "tile 8x16 mn pack") continue;
        Program p = start;
        for (Action a : s.actions) p = apply(p, a);
        EXPECT_EQ(p.comp->tensors.back().shape, (std::vector<int64_t>{21, 1040})) << dump(p);
        EXPECT_TRUE(env.verify(p).ok) << dump(p);
        ++found;
    }
    EXPECT_EQ(found, 1);
}

TEST(GuidedSearch, KBlocksFitTheL1AndNBlocksHalfTheL2OfTheMachineGiven) {
    // 32 KiB: 128 rows of 4 lines, 64 of 5 (a row that does not start a line); 48 KiB: 128 both.
    EXPECT_EQ(nkm_k_block(240, 32 << 10), 128);
    EXPECT_EQ(nkm_k_block(233, 32 << 10), 64);
    EXPECT_EQ(nkm_k_block(233, 48 << 10), 128);
    EXPECT_EQ(nkm_k_block(240, 1 << 20), 256);
    EXPECT_EQ(nkm_k_block(240, 4 << 10), 16);
    // A 256 x nb block of B in half the L2: 512 columns of 1 MiB, 1024 of 2 MiB.
    EXPECT_EQ(l2_n_block(256, 1 << 20), 512);
    EXPECT_EQ(l2_n_block(256, 2 << 20), 1024);
    EXPECT_EQ(l2_n_block(256, 64 << 10), 64);
}

TEST(GuidedSearch, DeepReductionsAlsoSeedThe16x16TileAndKBlocksInsideColumnPanels) {
    const auto kb = [](int64_t n) {
        return fmt::format("tile 4x64 kb{} nkm", nkm_k_block(n, cache_sizes().l1d));
    };
    for (const std::string &name : {std::string("tile 16x16 mn"), kb(233)}) {
        EXPECT_TRUE(seed_names(make_matmul(45, 233, 1963)).count(name)) << name;
        EXPECT_FALSE(seed_names(make_matmul(8, 100, 4096)).count(name)) << name;  // decode: m <= 16
    }
    // k blocks sized to this machine's L1 (fewer rows where B's rows do not start lines).
    EXPECT_TRUE(seed_names(make_matmul(45, 240, 1963)).count(kb(240)));
    EXPECT_TRUE(seed_names(make_matmul(45, 233, 1963)).count(kb(233)));
    // Decode shapes whose B is 4 MB or more: 4x64 kb128 nkm (its next block prefetched), not
    // for m = 1 (a GEMV) or a B that stays in L2 or L3.
    EXPECT_TRUE(seed_names(make_matmul(8, 1024, 1024)).count("tile 4x64 kb128 nkm"));
    EXPECT_TRUE(seed_names(make_matmul(5, 929, 4096)).count("tile 4x64 kb128 nkm"));
    EXPECT_FALSE(seed_names(make_matmul(1, 4096, 4096)).count("tile 4x64 kb128 nkm"));
    EXPECT_FALSE(seed_names(make_matmul(8, 1000, 1000)).count("tile 4x64 kb128 nkm"));
    // They replace the 8x32 tile's k blocks of 256 there; below k = 1024, 4x64 kb128 nkm does
    // where 64 columns fit.
    EXPECT_FALSE(seed_names(make_matmul(45, 233, 1963)).count("tile 8x32 kb256 kmn"));
    EXPECT_TRUE(seed_names(make_matmul(45, 233, 1000)).count(kb(233)));
    EXPECT_TRUE(seed_names(make_matmul(45, 240, 1000)).count(kb(240)));
    EXPECT_FALSE(seed_names(make_matmul(45, 233, 1000)).count("tile 8x32 kb256 kmn"));
    EXPECT_TRUE(seed_names(make_matmul(45, 40, 1000)).count("tile 8x32 kb256 kmn"));
    // Wide rows of B: 16x16 nm for 8x16 nm, unless k is a multiple of 1024.
    const std::set<std::string> wide = seed_names(make_matmul(128, 3072, 768));
    EXPECT_TRUE(wide.count("tile 16x16 nm") && !wide.count("tile 8x16 nm"));
    EXPECT_TRUE(seed_names(make_matmul(128, 3072, 1024)).count("tile 8x16 nm"));
    // From k = 512: 4x64 in column panels (nm), and below k = 1024 16x16 mn instead of the
    // 8x32 tile's k blocks of 128; below k = 512, or for decode shapes, as before.
    const std::set<std::string> k1000 = seed_names(make_matmul(45, 233, 1000));
    EXPECT_TRUE(k1000.count("tile 4x64 nm") && k1000.count("tile 16x16 mn"));
    EXPECT_FALSE(k1000.count("tile 4x64 mn") || k1000.count("tile 8x32 kb128 kmn"));
    EXPECT_TRUE(seed_names(make_matmul(45, 233, 1963)).count("tile 8x32 kb128 kmn"));
    EXPECT_TRUE(seed_names(make_matmul(45, 233, 500)).count("tile 4x64 mn"));
    // Below k = 512, 16x16 mn only where B's rows are wide (n >= 1024).
    EXPECT_TRUE(seed_names(make_matmul(179, 2818, 346)).count("tile 16x16 mn"));
    EXPECT_FALSE(seed_names(make_matmul(179, 1000, 346)).count("tile 16x16 mn"));
    EXPECT_TRUE(seed_names(make_matmul(8, 233, 1000)).count("tile 4x64 mn"));
    Environment env = policy_env();
    const Program start = tests::matmul_program(19, 70, 1030);
    env.reset(start);
    int checked = 0;
    for (const TuneSeed &s : tune_seeds(*start.comp, kSeedSteps, ActionSpace::preset("full"))) {
        if (s.name != "tile 16x16 mn" &&
            s.name != fmt::format("tile 4x64 kb{} nkm", nkm_k_block(70, cache_sizes().l1d)))
            continue;
        Program p = start;
        for (Action a : s.actions) p = apply(p, a);
        EXPECT_TRUE(env.verify(p).ok) << s.name << "\n" << dump(p);
        ++checked;
    }
    EXPECT_EQ(checked, 2);
}

// The chained rollout is the policy's greedy episodes continued from each other's end, measured
// nowhere: its first state is the greedy rollout's last, each later one a whole episode on (or
// the step limit), each a verified schedule its actions replay to.
TEST(GuidedSearch, TheChainedRolloutContinuesThePolicysEpisodesUnmeasured) {
    Environment env = policy_env();
    const auto shadow = unmeasured_environment(env);
    const Program start = tests::matmul_program(96, 17, 40);
    const int episode = env.config().max_steps, limit = 3 * episode + 5;
    const int64_t measured = env.counters().measurements;
    const std::vector<ScoredState> chain = chained_rollout(shipped_policy(), *shadow, start, limit);
    EXPECT_EQ(env.counters().measurements, measured);
    ASSERT_FALSE(chain.empty());
    const PolicyTuneResult greedy = tune_with_policy(shipped_policy(), env, start);
    if (int(greedy.actions.size()) == episode && schedule_key(greedy.final) != schedule_key(start))
        EXPECT_EQ(chain.front().actions, greedy.actions);
    std::string previous = schedule_key(start);
    for (size_t i = 0; i < chain.size(); ++i) {
        const ScoredState &s = chain[i];
        const int n = int(s.actions.size());
        EXPECT_TRUE(n % episode == 0 || n == limit) << n;
        EXPECT_LE(n, limit);
        if (i > 0)
            EXPECT_TRUE(std::equal(chain[i - 1].actions.begin(), chain[i - 1].actions.end(),
                                   s.actions.begin()));
        Program replayed = start;
        for (Action a : s.actions) replayed = apply(replayed, a);
        EXPECT_EQ(schedule_key(replayed), schedule_key(s.program));
        EXPECT_NE(schedule_key(s.program), previous);
        previous = schedule_key(s.program);
        EXPECT_TRUE(env.verify(s.program).ok);
    }
    // Up to the step limit, and never past it.
    EXPECT_TRUE(chained_rollout(shipped_policy(), *shadow, start, 3).size() <= 1);
    for (const ScoredState &s : chained_rollout(shipped_policy(), *shadow, start, 3))
        EXPECT_EQ(s.actions.size(), 3u);
}

// A shape no seed rule applies to (n = 1, k = 10: nothing to vectorize or tile) is searched by
// the policy alone, the environment's first computation: the result verifies.
TEST(GuidedSearch, AShapeNoSeedAppliesToIsSearchedByThePolicyAlone) {
    const Program start = tests::matmul_program(334, 1, 10);
    Environment env = policy_env();
    ASSERT_TRUE(tune_seeds(*start.comp, kSeedSteps, env.action_space()).empty());
    GuidedConfig c;
    c.budget_s = 0.5;
    GuidedResult r = guided_search(shipped_policy(), env, start, c);
    expect_replays_and_verifies(env, start, r);
    EXPECT_GT(r.best_gflops, 0);
}
