// A prefix of a kernel's outermost loop (looptool/measure/prefix.h): the same schedule on the first
// iterations of the loop its main nest starts with, every prefix kernel checked against the
// reference of its computation, and the environment measuring large kernels on prefixes.
#include "looptool/measure/prefix.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "env/environment.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

// The prefix computes its own computation right (its JIT kernel against the reference, twice on
// the same buffers), and runs on the whole kernel's buffers: the same tensors, none larger.
void expect_correct_prefix(const Program &whole, const OuterPrefix &x) {
    const Computation &c = *x.program.comp, &w = *whole.comp;
    ASSERT_EQ(c.tensors.size(), w.tensors.size());
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        EXPECT_EQ(c.tensors[t].kind, w.tensors[t].kind);
        EXPECT_LE(c.tensors[t].num_elements(), w.tensors[t].num_elements()) << c.tensors[t].name;
    }
    EXPECT_EQ(c.vars[size_t(x.var)].extent, x.elements);
    EXPECT_LT(x.elements, x.extent);
    EXPECT_TRUE(tests::matches_reference(tests::shared_jit(), x.program));
}

}  // namespace

TEST(OuterPrefix, CutsTheMainNestsOutermostLoopAndEveryNestWithIt) {
    // 8x32 mn: m_o (5 iterations of 8 rows) is the outermost loop; the write nest walks m too.
    const Program p = tests::tiled_matmul(40, 200, 300, looptune::TileSchedule{8, 32, 0, "mn"});
    ASSERT_EQ(prefix_loop_depth(p), 0);
    const auto x = outer_prefix(p, 2);
    ASSERT_TRUE(x);
    EXPECT_EQ(x->var, p.comp->var_index("m"));
    EXPECT_EQ(x->elements, 16);
    EXPECT_EQ(x->iterations, 2);
    EXPECT_EQ(x->of_iterations, 5);
    EXPECT_FALSE(x->has_fixed_work);
    // A and B keep their shapes (their strides are the whole kernel's); C and T lose rows.
    const Computation &c = *x->program.comp;
    EXPECT_EQ(c.tensors[size_t(c.tensor_index("A"))].shape, (std::vector<int64_t>{40, 300}));
    EXPECT_EQ(c.tensors[size_t(c.tensor_index("C"))].shape, (std::vector<int64_t>{16, 200}));
    for (const Nest &n : x->program.tree.nests) EXPECT_EQ(coverage(n, 0), 16);
    expect_correct_prefix(p, *x);
    // As many iterations as the loop has, or none: no prefix.
    EXPECT_FALSE(outer_prefix(p, 5));
    EXPECT_FALSE(outer_prefix(p, 0));
}

TEST(OuterPrefix, WorkOutsideTheCutLoopIsFlaggedForTwoLengths) {
    // B packed whole before an mn order's row loop: the copy does not shrink with the rows.
    const Program packed =
        tests::tiled_matmul(40, 256, 300, looptune::TileSchedule{8, 32, 0, "mn", true, 0, true});
    const auto a = outer_prefix(packed, 2);
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->has_fixed_work);
    expect_correct_prefix(packed, *a);
    // A k-block order cuts the reduction: the output is zeroed whole at entry.
    const Program kmn =
        tests::tiled_matmul(40, 64, 1024, looptune::TileSchedule{8, 32, 128, "kmn"});
    const auto b = outer_prefix(kmn, 2);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->var, kmn.comp->var_index("k"));
    EXPECT_TRUE(b->has_fixed_work);
    expect_correct_prefix(kmn, *b);
}

TEST(OuterPrefix, EveryTileFamilyMemberAndConvTileGivesACorrectPrefix) {
    int checked = 0;
    for (const looptune::TileSchedule &s : looptune::schedule_family(40, 200, 300, true)) {
        Program p;
        try {
            p = tests::tiled_matmul(40, 200, 300, s);
        } catch (const Error &) {
            continue;  // a packed member this shape does not allow
        }
        for (int64_t r : {1, 2, 3}) {
            SCOPED_TRACE(fmt::format("{}, {} iterations", s.name(), r));
            if (const auto x = outer_prefix(p, r)) {
                expect_correct_prefix(p, *x);
                ++checked;
            }
        }
    }
    const auto conv = std::make_shared<Computation>(make_conv2d(1, 8, 12, 40, 32, 3, 3));
    for (const looptune::ConvTileSchedule &s : looptune::conv_schedule_family(32, 38, 0, true)) {
        Program p = Program::naive(conv);
        try {
            for (Action a : looptune::conv_tile_actions(*conv, s)) p = apply(p, a);
        } catch (const Error &) {
            continue;
        }
        SCOPED_TRACE(s.name());
        if (const auto x = outer_prefix(p, 2)) {
            expect_correct_prefix(p, *x);
            ++checked;
        }
    }
    EXPECT_GE(checked, 40);
}

TEST(OuterPrefix, RandomSchedulesGiveACorrectPrefixOrNone) {
    std::mt19937_64 rng(115);
    int checked = 0;
    for (int i = 0; i < 60; ++i) {
        const Program p = tests::random_walk(tests::random_matmul(rng, 40000), rng, 12);
        if (const auto x = outer_prefix(p, 2)) {
            SCOPED_TRACE(dump(p, false));
            expect_correct_prefix(p, *x);
            ++checked;
        }
    }
    EXPECT_GE(checked, 10);
}

TEST(OuterPrefix, IterationsForATargetAreAtLeastTwoAndAnEighthAtMost) {
    const Program p = tests::matmul_program(256, 64, 64);  // m, k, n: 256 iterations of m
    const double whole = p.comp->flops();                  // 2 MFLOP
    EXPECT_EQ(prefix_iterations(p, whole / 64), 4);
    EXPECT_EQ(prefix_iterations(p, 1), 2);
    EXPECT_EQ(prefix_iterations(p, whole / 8), 32);
    EXPECT_EQ(prefix_iterations(p, whole / 4), 0);  // a quarter: the whole kernel is cheap
    EXPECT_EQ(prefix_iterations(p, whole / 4, 0.5), 64);
    EXPECT_EQ(prefix_iterations(p, 1e300), 0);
}

TEST(OuterPrefix, TheEnvironmentMeasuresLargeKernelsOnPrefixesOnlyWhileASearchAsks) {
    looptune::EnvConfig cfg;
    cfg.max_gflops = 100;
    cfg.verify = true;  // the whole kernel is verified, the prefix measured
    cfg.measure.min_time_s = 0.001;
    cfg.measure.min_runs = 2;
    cfg.measure.warmup = 1;
    looptune::Environment env(cfg);
    const Program p = tests::tiled_matmul(128, 64, 64, looptune::TileSchedule{8, 32, 0, "mn"});
    env.reset(tests::matmul_program(128, 64, 64));
    env.set_measure_options(cfg.measure);
    env.set_prefix_flops(p.comp->flops() / 16);  // 16 row tiles: 1 of them, at least 2
    const int64_t verified = env.counters().verified;
    EXPECT_GT(env.evaluate(p), 0);
    EXPECT_EQ(env.prefix_measurements(), 1);
    EXPECT_EQ(env.counters().verified, verified + 1);
    // The prefix's figure leaves the cache with the search's protocol: measured whole again.
    env.reset_measure_options();
    EXPECT_GT(env.evaluate(p), 0);
    EXPECT_EQ(env.prefix_measurements(), 1);
    EXPECT_THROW(env.set_prefix_flops(-1), Error);
}
