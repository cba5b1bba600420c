// The lowering's planning steps, without LLVM: copy elision and the per-nest plans that
// emission reads (lower_elide.h, lower_plan.h). The kernels these plans become are checked
// against the interpreter in jit_test.cpp.
#include "looptool/lower/lower_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "looptool/actions/actions.h"
#include "looptool/formats/text_format.h"
#include "looptool/lower/lower.h"
#include "looptool/lower/lower_elide.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;
using namespace looptool::detail;
using looptool::tests::matmul_program;

namespace {

// [m_o, n_o, k, m_i (unrolled, 8), n_i (vectorized, 32)]: LoopTune's best-known matmul tile.
const char *kTile8x32 =
    "split_8, down, down, down, split_32, swap_up, swap_up, down, swap_down, unroll, down, "
    "vectorize";

Program apply_all(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

struct Planned {
    ElidedProgram prog;
    std::vector<NestPlan> plans;
};

// Plans keep pointers into the computation they were made for, so it travels with them.
std::unique_ptr<Planned> plan(const Program &p, LowerOptions options = {}) {
    auto r = std::make_unique<Planned>();
    r->prog = options.elide_copies ? elide_copies(p.computation(), p.tree)
                                   : ElidedProgram{p.computation(), p.tree, false};
    r->plans = plan_nests(r->prog.comp, r->prog.tree, options);
    return r;
}

// The accumulators of a nest's first register-tile region, every loop outside it at its start.
std::optional<std::vector<AccKey>> first_region_keys(const Computation &c, const NestPlan &np) {
    std::vector<int64_t> avail, stat(c.vars.size(), 0);
    for (const auto &v : c.vars) avail.push_back(v.extent);
    for (size_t d = 0; d < size_t(np.region[0]); ++d)
        avail[size_t(np.nest.loops[d].var)] = np.inner[d];
    return tile_keys(np, 0, size_t(np.region[0]), avail, stat);
}

}  // namespace

TEST(LowerPlan, TheExpansionRule) {
    Loop plain{0, 4, 0, false, false}, unrolled{0, 4, 0, true, false}, vec{0, 16, 0, false, true};
    // A plain loop with several full chunks is a run-time loop; with one, a static copy.
    EXPECT_EQ(expand(plain, 64, 16, true), Expansion::Loop);
    EXPECT_EQ(expand(plain, 20, 16, true), Expansion::Unrolled);
    EXPECT_EQ(expand(unrolled, 64, 16, true), Expansion::Unrolled);
    // Vector code needs more than one lane and a vector-safe nest; otherwise static copies.
    EXPECT_EQ(expand(vec, 16, 1, true), Expansion::Vector);
    EXPECT_EQ(expand(vec, 1, 1, true), Expansion::Unrolled);
    EXPECT_EQ(expand(vec, 16, 1, false), Expansion::Unrolled);
}

TEST(LowerPlan, CopyElisionFoldsTheCopyNestOfAMatmul) {
    Program p = matmul_program(16, 24, 8);
    ElidedProgram e = elide_copies(p.computation(), p.tree);
    EXPECT_TRUE(e.elided);
    ASSERT_EQ(e.tree.nests.size(), 1u);
    EXPECT_EQ(e.tree.nests[0].stmts, std::vector<int>{0});
    // T += A*B now writes C; the copy statement stays in the computation (ids are stable).
    EXPECT_EQ(e.comp.stmts.size(), 2u);
    EXPECT_EQ(e.comp.stmts[0].out.tensor, e.comp.tensor_index("C"));
    // An elementwise add has no copy to fold.
    Program add = Program::naive(std::make_shared<Computation>(make_elementwise_add(4, 5)));
    EXPECT_FALSE(elide_copies(add.computation(), add.tree).elided);
}

TEST(LowerPlan, Tile8x32IsOneStaticNestWithAZeroStartRegisterTile) {
    auto r = plan(apply_all(matmul_program(112, 208, 256), kTile8x32));
    ASSERT_EQ(r->plans.size(), 1u);
    const NestPlan &p = r->plans[0];
    EXPECT_EQ(p.mode, NestMode::Static);
    EXPECT_LE(p.cost, LowerOptions{}.max_emission_cost);
    EXPECT_TRUE(p.vector_safe);
    ASSERT_EQ(p.nest.loops.size(), 5u);
    EXPECT_EQ(p.inner, (std::vector<int64_t>{8, 32, 1, 1, 1}));
    // C[m, n] += A[m, k] * B[k, n]: the output slot first, then the reads in order.
    const Computation &c = r->prog.comp;
    const int m = c.var_index("m"), n = c.var_index("n"), k = c.var_index("k");
    ASSERT_EQ(p.slots.size(), 3u);
    EXPECT_EQ(p.out_slot, std::vector<int>{0});
    EXPECT_EQ(p.slots[0].tensor, c.tensor_index("C"));
    EXPECT_EQ(p.slots[0].coef[size_t(m)], 208);
    EXPECT_EQ(p.slots[0].coef[size_t(n)], 1);
    EXPECT_EQ(p.slots[0].coef[size_t(k)], 0);
    EXPECT_EQ(p.slots[1].tensor, c.tensor_index("A"));
    EXPECT_EQ(p.slots[2].tensor, c.tensor_index("B"));
    EXPECT_EQ(p.slot(c.stmts[0].out), 0);
    // The tile starts at the k loop (depth 2): everything below is unrolled or vectorized.
    EXPECT_EQ(p.region, std::vector<int>{2});
    EXPECT_EQ(p.zero_start, std::vector<bool>{true});
    // Its accumulators: 8 rows of C, one <32 x float> each.
    std::vector<int64_t> avail{8, 256, 32}, stat{0, 0, 0};
    auto keys = tile_keys(p, 0, 2, avail, stat);
    ASSERT_TRUE(keys.has_value());
    ASSERT_EQ(keys->size(), 8u);
    for (int64_t row = 0; row < 8; ++row)
        EXPECT_EQ((*keys)[size_t(row)], (AccKey{row * 208, 32, 1, 32}));
    EXPECT_NE(describe(c, p).find("tiles [s0 at k from zero]"), std::string::npos)
        << describe(c, p);
}

TEST(LowerPlan, KBlockedOutsideTheTileLoadsItsAccumulators) {
    // [k_o, m_o, n_o, k_i, m_i, n_i]: each tile is revisited once per k_o block.
    auto r = plan(apply_all(matmul_program(48, 96, 600),
                            std::string(kTile8x32) + ", up, up, split_256, swap_up, swap_up"));
    ASSERT_EQ(r->plans.size(), 1u);
    EXPECT_EQ(r->plans[0].region, std::vector<int>{3});
    EXPECT_EQ(r->plans[0].zero_start, std::vector<bool>{false});
}

TEST(LowerPlan, WithoutCopyElisionTheTemporaryStillStartsAtZero) {
    auto r = plan(apply_all(matmul_program(16, 64, 5), kTile8x32), LowerOptions{false, 1024});
    ASSERT_EQ(r->plans.size(), 2u);                              // T += A*B, then C = T
    EXPECT_EQ(r->plans[0].zero_start, std::vector<bool>{true});  // T is read in a later nest only
    EXPECT_EQ(r->plans[1].region, std::vector<int>{-1});         // a copy has no reduction to tile
}

TEST(LowerPlan, OverTheBudgetNestsAreRelaxedThenGeneric) {
    // k unrolled 200 times around a plain n loop: the unrolling only copies loops; dropped.
    auto relaxed = plan(apply_all(matmul_program(20, 30, 200), "down, unroll"));
    ASSERT_EQ(relaxed->plans.size(), 1u);
    EXPECT_EQ(relaxed->plans[0].mode, NestMode::Relaxed);
    EXPECT_FALSE(relaxed->plans[0].nest.loops[1].unroll);
    EXPECT_LE(relaxed->plans[0].cost, LowerOptions{}.max_emission_cost);
    // With a budget of 1 nothing fits: plain loops.
    auto generic = plan(apply_all(matmul_program(37, 100, 29), kTile8x32), LowerOptions{true, 1});
    EXPECT_EQ(generic->plans[0].mode, NestMode::Generic);
    // Under a large budget the copies stay.
    auto full =
        plan(apply_all(matmul_program(20, 30, 200), "down, unroll"), LowerOptions{true, 1 << 20});
    EXPECT_EQ(full->plans[0].mode, NestMode::Static);
    EXPECT_TRUE(full->plans[0].nest.loops[1].unroll);
}

TEST(LowerPlan, AVectorizedReductionVarWithATailHoldsNoTile) {
    // k innermost, vectorized by 16 over 37 = 2*16 + 5: two partial-sum widths for one
    // element of C cannot share one accumulator.
    Program red =
        apply_all(matmul_program(9, 11, 37), "down, swap_down, split_16, down, vectorize");
    auto r = plan(red);
    ASSERT_EQ(r->plans.size(), 1u);
    const NestPlan &p = r->plans[0];
    ASSERT_GE(p.region[0], 0);
    std::vector<int64_t> avail, stat(r->prog.comp.vars.size(), 0);
    for (const auto &v : r->prog.comp.vars) avail.push_back(v.extent);
    // The region is entered with one m and one n element left.
    for (size_t d = 0; d < size_t(p.region[0]); ++d)
        avail[size_t(p.nest.loops[d].var)] = p.inner[d];
    EXPECT_FALSE(tile_keys(p, 0, size_t(p.region[0]), avail, stat).has_value());
}

TEST(LowerPlan, VectorLoopsAreCutIntoPowerOfTwoPieces) {
    auto widths = [](int64_t total) {
        std::vector<int64_t> w;
        int64_t next = 0;
        for (const VectorPiece &p : vector_pieces(total)) {
            EXPECT_EQ(p.start, next) << total;
            next += p.width;
            w.push_back(p.width);
        }
        EXPECT_EQ(next, total);
        return w;
    };
    EXPECT_EQ(widths(32), (std::vector<int64_t>{32}));
    EXPECT_EQ(widths(24), (std::vector<int64_t>{16, 8}));
    EXPECT_EQ(widths(19), (std::vector<int64_t>{16, 2, 1}));
    EXPECT_EQ(widths(2), (std::vector<int64_t>{2}));
    // Masked: the narrow pieces at the end (two or more) become one masked piece.
    auto masked = [](int64_t total) {
        std::vector<std::pair<int64_t, int64_t>> w;  // (width, lanes)
        int64_t next = 0;
        for (const VectorPiece &p : vector_pieces(total, true)) {
            EXPECT_EQ(p.start, next) << total;
            EXPECT_LE(p.lanes, p.width) << total;
            next += p.lanes;
            w.push_back({p.width, p.lanes});
        }
        EXPECT_EQ(next, total);
        return w;
    };
    using W = std::vector<std::pair<int64_t, int64_t>>;
    EXPECT_EQ(masked(14), (W{{16, 14}}));
    EXPECT_EQ(masked(7), (W{{8, 7}}));
    EXPECT_EQ(masked(27), (W{{16, 16}, {16, 11}}));
    EXPECT_EQ(masked(24), (W{{16, 16}, {8, 8}}));  // one narrow piece: as it was
    EXPECT_EQ(masked(56), (W{{32, 32}, {16, 16}, {8, 8}}));
    EXPECT_EQ(masked(19), (W{{16, 16}, {4, 3}}));
    EXPECT_EQ(masked(3), (W{{4, 3}}));
    EXPECT_EQ(masked(32), (W{{32, 32}}));
}

// A 14-column conv row is one masked <16 x float> accumulator per output channel (the kernels
// are checked against the reference in jit_test).
TEST(LowerPlan, AConvTileWith14ColumnsHasOneMaskedAccumulatorPerChannel) {
    Program p =
        Program::naive(std::make_shared<const Computation>(make_conv2d(1, 3, 6, 16, 4, 3, 3)));
    for (Action a : looptune::conv_tile_actions(*p.comp, {4, 32, "hm"})) p = apply(p, a);
    auto r = plan(p);
    const NestPlan &np = r->plans[0];
    const Computation &c = r->prog.comp;
    EXPECT_TRUE(np.masked_tails);
    ASSERT_GE(np.region[0], 0) << describe(c, np);
    auto keys = first_region_keys(c, np);
    ASSERT_TRUE(keys.has_value());
    const int64_t plane = 4 * 14;
    EXPECT_EQ(
        *keys,
        (std::vector<AccKey>{
            {0, 16, 1, 14}, {plane, 16, 1, 14}, {2 * plane, 16, 1, 14}, {3 * plane, 16, 1, 14}}));
    // A vectorized reduction var (stride 0 in the output) keeps exact pieces.
    Program mm = matmul_program(3, 2, 14);  // m, k, n: k innermost after one swap
    mm = apply(apply(apply(mm, Action::Down), Action::SwapDown), Action::Vectorize);
    auto rm = plan(mm);
    EXPECT_FALSE(rm->plans[0].masked_tails) << dump(mm);
}

TEST(LowerPlan, AConvTileWithA24ColumnTailHasOneAccumulatorPerPiece) {
    // conv 1x2x6x26 -> 2 channels, 3x3: wo = 24 vectorized whole under m unrolled, c, kh, kw
    // outside: the tile's accumulators are per output channel one <16> and one <8> piece.
    Program p =
        Program::naive(std::make_shared<const Computation>(make_conv2d(1, 2, 6, 26, 2, 3, 3)));
    // The conv template's 2x32 tile in order n, ho, c, kh, kw, m (unrolled), wo (vectorized):
    // neither split applies (2 channels, 24 columns), so the tile is the whole m x wo.
    for (Action a : looptune::conv_tile_actions(*p.comp, {2, 32, "hm"})) p = apply(p, a);
    auto r = plan(p);
    const NestPlan &np = r->plans[0];
    const Computation &c = r->prog.comp;
    ASSERT_EQ(c.vars[size_t(np.nest.loops.back().var)].name, "wo") << dump(p);
    ASSERT_GE(np.region[0], 0) << describe(c, np);
    auto keys = first_region_keys(c, np);
    ASSERT_TRUE(keys.has_value());
    const int64_t plane = 4 * 24;  // T[n, m, ho, wo]: one output channel
    EXPECT_EQ(*keys,
              (std::vector<AccKey>{
                  {0, 16, 1, 16}, {16, 8, 1, 8}, {plane, 16, 1, 16}, {plane + 16, 8, 1, 8}}));
}

TEST(LowerPlan, LoweringLogsEveryStepWhenAsked) {
    ::setenv("LOOPTOOL_LOG_LOWERING", "1", 1);
    testing::internal::CaptureStderr();
    lower_to_llvm_ir(apply_all(matmul_program(112, 208, 256), kTile8x32), "tile");
    const std::string log = testing::internal::GetCapturedStderr();
    ::unsetenv("LOOPTOOL_LOG_LOWERING");
    size_t at = 0;
    for (const char *step : {"validate", "elide copies: folded", "plan: nest 0: static",
                             "emit: ", "zero outputs: none", "wrapper", "verify: ok"}) {
        const size_t next = log.find(std::string("lower tile: ") + step, at);
        EXPECT_NE(next, std::string::npos) << step << " missing or out of order in\n" << log;
        if (next != std::string::npos) at = next;
    }
    // Off by default.
    testing::internal::CaptureStderr();
    lower_to_llvm_ir(matmul_program(8, 8, 8));
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}
