#include "search/search.h"
#include "search/tile_schedules.h"

#include <gtest/gtest.h>

#include <set>

#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

using namespace looptool;
using namespace looptune;

namespace {
EnvConfig fast_env() {
    EnvConfig c;
    c.action_space = "full";
    c.max_gflops = 100;
    c.verify = true;  // every schedule a search measures is checked against the reference
    c.measure.min_time_s = 0.001;
    c.measure.min_runs = 2;
    c.measure.warmup = 1;
    return c;
}
Program start_of(Environment &env, int64_t m, int64_t n, int64_t k) {
    Program p = Program::naive(std::make_shared<Computation>(make_matmul(m, n, k)));
    env.reset(p);
    return p;
}
}  // namespace

class EverySearch : public ::testing::TestWithParam<std::string> {};

TEST_P(EverySearch, ReturnsAReplayableScheduleNoWorseThanTheStart) {
    Environment env(fast_env());
    Program start = start_of(env, 24, 40, 16);
    SearchConfig cfg;
    cfg.budget_s = 30;
    cfg.max_steps = 4;
    cfg.max_schedules = 40;
    cfg.population = 6;
    cfg.generations = 4;
    SearchResult r = run_search(GetParam(), env, start, cfg);
    EXPECT_EQ(r.algo, GetParam());
    EXPECT_GE(r.best_gflops, r.base_gflops);
    EXPECT_LE(int(r.actions.size()), cfg.max_steps);
    EXPECT_GE(r.schedules_measured, 1);
    EXPECT_LE(r.schedules_measured, cfg.max_schedules);
    Program p = start;
    for (Action a : r.actions) p = apply(p, a);  // throws if the sequence is illegal
    EXPECT_EQ(schedule_key(p), schedule_key(r.best));
    EXPECT_EQ(env.evaluate(p), r.best_gflops);
    ASSERT_FALSE(r.curve.empty());
    for (size_t i = 1; i < r.curve.size(); ++i) {
        EXPECT_GE(r.curve[i].best_gflops, r.curve[i - 1].best_gflops);
        EXPECT_GE(r.curve[i].seconds, r.curve[i - 1].seconds);
    }
    EXPECT_EQ(r.curve.back().best_gflops, r.best_gflops);
}

TEST_P(EverySearch, IsDeterministicGivenTheSameMeasurements) {
    // A second run in the same environment sees identical GFLOPS (the cache), so the search
    // must make identical choices.
    Environment env(fast_env());
    Program start = start_of(env, 16, 32, 8);
    SearchConfig cfg;
    cfg.budget_s = 30;
    cfg.max_steps = 3;
    cfg.max_schedules = 25;
    cfg.population = 5;
    cfg.generations = 3;
    cfg.seed = 42;
    SearchResult a = run_search(GetParam(), env, start, cfg);
    SearchResult b = run_search(GetParam(), env, start, cfg);
    EXPECT_EQ(a.actions, b.actions);
    EXPECT_EQ(a.best_gflops, b.best_gflops);
    EXPECT_EQ(a.schedules_measured, b.schedules_measured);
}

INSTANTIATE_TEST_SUITE_P(Search, EverySearch, ::testing::ValuesIn(search_algorithms()));

TEST(Search, BeamRanksChildrenByMeasuredGflops) {
    // With a width-1 effective beam at depth 1, beam4bfs must keep the best child: the best
    // one-action schedule it reports is the maximum over all legal children.
    Environment env(fast_env());
    Program start = start_of(env, 32, 32, 32);
    SearchConfig cfg;
    cfg.budget_s = 30;
    cfg.max_steps = 1;
    SearchResult r = run_search("beam4bfs", env, start, cfg);
    double best_child = env.evaluate(start);
    for (Action a : env.action_space().actions)
        if (is_legal(start, a)) best_child = std::max(best_child, env.evaluate(apply(start, a)));
    EXPECT_EQ(r.best_gflops, best_child);
}

TEST(Search, BadArgumentsAreErrors) {
    Environment env(fast_env());
    Program start = start_of(env, 8, 8, 8);
    SearchConfig cfg;
    EXPECT_THROW(run_search("annealing", env, start, cfg), Error);
    cfg.max_steps = -1;  // 0: the algorithm's own
    EXPECT_THROW(run_search("greedy1", env, start, cfg), Error);
}

// Without a step limit each search runs with what it needs: `tile` the template's whole
// sequences (every register tile of a 128x128x64 matmul takes more than 10 actions), the blind
// searches LoopTune's 10.
TEST(Search, WithoutAStepLimitTileRunsItsWholeSequences) {
    Environment env(fast_env());
    Program start = start_of(env, 128, 128, 64);
    SearchConfig cfg;
    ASSERT_EQ(cfg.max_steps, 0);
    EXPECT_EQ(default_steps("greedy1"), kLoopTuneSteps);
    const SearchResult r = run_search("tile", env, start, cfg);
    EXPECT_GT(r.actions.size(), 10u) << format_actions(r.actions);
    bool whole = false;
    for (const TileSchedule &s : schedule_family(128, 128, 64))
        whole = whole || tile_actions(*start.comp, s) == r.actions;
    EXPECT_TRUE(whole) << "actions: " << format_actions(r.actions);
    cfg.budget_s = 2;
    EXPECT_LE(run_search("random", env, start, cfg).actions.size(), 10u);
}

TEST(Search, TileTemplateFindsARegisterTileWithinTheStepLimit) {
    Environment env(fast_env());  // verify: each template schedule is checked by the interpreter
    Program start = start_of(env, 64, 64, 32);
    SearchConfig cfg;
    cfg.max_steps = 16;
    SearchResult r = run_search("tile", env, start, cfg);
    // One of the family's sequences, whole (the 8x32 ones are 12 compute-nest actions plus the
    // write nest's), so its best schedule vectorizes the tile's columns and unrolls its rows.
    bool from_family = false;
    for (const TileSchedule &s : schedule_family(64, 64, 32)) {
        auto a = tile_actions(*start.comp, s);
        if (a.size() > 16) a.resize(16);
        from_family = from_family || a == r.actions;
    }
    EXPECT_TRUE(from_family) << "actions: " << format_actions(r.actions);
    EXPECT_NE(dump(r.best).find("vectorize"), std::string::npos) << dump(r.best);
    EXPECT_GT(r.schedules_measured, 10);

    Program moved = apply(start, Action::Split8);
    EXPECT_THROW(run_search("tile", env, moved, cfg), Error);
}

// Above one thread, in an action space with `parallel`, the template also measures each member
// with the naive nest's outermost loop made parallel first (every one checked against the
// reference): more schedules than on one thread, and the parallel ones among them.
TEST(Search, TileTemplateAboveOneThreadAlsoMeasuresParallelMembers) {
    SearchConfig cfg;
    cfg.max_steps = 16;
    int64_t measured[2] = {0, 0};
    for (int threads : {1, 2}) {
        EnvConfig c = fast_env();
        c.action_space = "threads";
        c.threads = threads;
        Environment env(c);
        const Program start = start_of(env, 128, 96, 64);
        const SearchResult r = run_search("tile", env, start, cfg);
        measured[threads - 1] = r.schedules_measured;
        if (threads == 1) EXPECT_EQ(dump(r.best).find("parallel"), std::string::npos);
    }
    std::set<std::string> parallel_members;  // distinct schedules: cut members may coincide
    const Program naive = Program::naive(std::make_shared<Computation>(make_matmul(128, 96, 64)));
    for (const TileSchedule &s : schedule_family(128, 96, 64, true)) {
        Program p = naive;
        try {
            std::vector<Action> a = tile_actions(*naive.comp, s);
            a.insert(a.begin(), Action::Parallel);
            a.resize(std::min<size_t>(a.size(), 16));
            for (Action x : a) p = apply(p, x);
        } catch (const Error &) {
            continue;  // not expressible, or the member moves the parallel loop down
        }
        parallel_members.insert(schedule_key(p));
    }
    EXPECT_GT(parallel_members.size(), 4u);
    EXPECT_EQ(measured[1], measured[0] + int64_t(parallel_members.size()));
}

TEST(Search, ConvTileSchedulesAreRegisterTilesThatMatchTheReference) {
    // Awkward sizes: 10 output channels (tiles of 4, 8, 16 leave tails or cover all), 19
    // output columns (tails after 16 and 32), a 3x3 kernel.
    auto comp = std::make_shared<Computation>(make_conv2d(1, 3, 9, 21, 10, 3, 3));
    const auto family = conv_schedule_family(10, 19);
    ASSERT_GE(family.size(), 4u);
    Environment env(fast_env());  // verify: each kernel the JIT runs is checked too
    for (const ConvTileSchedule &s : family) {
        Program p = Program::naive(comp);
        for (Action a : conv_tile_actions(*comp, s)) p = apply(p, a);
        const auto &loops = p.tree.nests[0].loops;
        ASSERT_GE(loops.size(), 2u) << s.name();
        // The innermost two loops are the tile: output channels unrolled, columns vectorized.
        EXPECT_TRUE(loops.back().vectorize) << s.name() << "\n" << dump(p);
        EXPECT_EQ(comp->vars[size_t(loops.back().var)].name, "wo") << s.name();
        EXPECT_EQ(comp->vars[size_t(loops[loops.size() - 2].var)].name, "m") << s.name();
        Comparison cmp = verify_schedule(p);
        EXPECT_TRUE(cmp.ok) << s.name() << ": " << cmp.first_mismatch << "\n" << dump(p);
        env.reset(p);
        EXPECT_GT(env.gflops(), 0) << s.name();
    }
    EXPECT_THROW(conv_tile_actions(make_matmul(8, 8, 8), family[0]), Error);
}

// 1x1 convs: the flat members `flatten` ho and wo, so the tile's vector columns run over the
// 7 * 9 = 63 outputs of a channel (contiguous in X and Y) instead of rows of 9.
TEST(Search, ConvFlatTilesOnA1x1ConvMatchTheReference) {
    auto comp = std::make_shared<Computation>(make_conv2d(1, 6, 7, 9, 10, 1, 1));
    const auto family = conv_schedule_family(10, 9, 63);
    EnvConfig cfg = fast_env();
    cfg.action_space = "layout";
    Environment env(cfg);
    int flat = 0;
    for (const ConvTileSchedule &s : family) {
        if (!s.flat) continue;
        ++flat;
        Program p = Program::naive(comp);
        const auto actions = conv_tile_actions(*comp, s);
        EXPECT_EQ(std::count(actions.begin(), actions.end(), Action::Flatten), 1) << s.name();
        for (Action a : actions) p = apply(p, a);
        const auto &loops = p.tree.nests[0].loops;
        EXPECT_TRUE(loops.back().vectorize) << s.name() << "\n" << dump(p);
        EXPECT_EQ(p.comp->vars[size_t(loops.back().var)].name, "ho_wo") << s.name();
        EXPECT_EQ(p.comp->vars[size_t(loops[loops.size() - 2].var)].name, "m") << s.name();
        Comparison cmp = verify_schedule(p);
        EXPECT_TRUE(cmp.ok) << s.name() << ": " << cmp.first_mismatch << "\n" << dump(p);
        env.reset(p);
        EXPECT_GT(env.gflops(), 0) << s.name();
    }
    EXPECT_GE(flat, 3);
    // Not on a 3x3 conv (X's columns are wo + kw): the flatten step is illegal.
    EXPECT_THROW(
        conv_tile_actions(make_conv2d(1, 3, 9, 21, 10, 3, 3), ConvTileSchedule{8, 32, "mh", true}),
        Error);
    // The `tile` search measures them only in an action space that has `flatten`.
    Program start = Program::naive(comp);
    env.reset(start);
    SearchConfig sc;
    sc.max_steps = 60;
    SearchResult r = run_search("tile", env, start, sc);
    EXPECT_GE(r.schedules_measured, int64_t(family.size()));
}

TEST(Search, TileTemplateTunesAConvFromItsFamily) {
    Environment env(fast_env());
    // Big enough (0.6 MFLOP) that a register tile beats the naive nest by far.
    Program start =
        Program::naive(std::make_shared<Computation>(make_conv2d(1, 8, 10, 34, 16, 3, 3)));
    env.reset(start);
    SearchConfig cfg;
    cfg.max_steps = 60;  // the conv sequences are 40-50 actions long
    SearchResult r = run_search("tile", env, start, cfg);
    bool from_family = false;
    for (const ConvTileSchedule &s : conv_schedule_family(16, 32))
        from_family = from_family || conv_tile_actions(*start.comp, s) == r.actions;
    EXPECT_TRUE(from_family) << "actions: " << format_actions(r.actions);
}
