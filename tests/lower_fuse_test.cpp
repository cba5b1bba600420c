// The lowering's row fusion (lower_fuse.h): which nests run their common loops once, which
// temporaries shrink to one row, and that the kernels stay the reference's; the row seed rule
// (search/seeds.h, row_vector_actions) that reaches those kernels from generate's form.
#include "looptool/lower/lower_fuse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "looptool/ir/row_ops.h"
#include "looptool/lower/lower.h"
#include "search/seeds.h"
#include "test_util.h"

using namespace looptool;
using namespace looptool::detail;

namespace {

Program naive(Computation c) { return Program::naive(std::make_shared<Computation>(std::move(c))); }

Program apply_all(Program p, const std::vector<Action> &actions) {
    for (Action a : actions) p = apply(p, a);
    return p;
}

std::vector<int> shared_of(const LoopTree &t) {
    std::vector<int> out;
    for (const Nest &n : t.nests) out.push_back(n.shared);
    return out;
}

// The program with its rows vectorized by the seed rule (64 lanes).
Program rows_vectorized(Computation c) {
    const auto acts = looptune::row_vector_actions(c, 64);
    EXPECT_TRUE(acts.has_value());
    return apply_all(naive(std::move(c)), acts.value_or(std::vector<Action>{}));
}

}  // namespace

TEST(LowerFuse, SoftmaxPassesShareTheRowLoopAndTheExponentialsFoldToOneRow) {
    for (const Program &p :
         {naive(make_softmax(37, 100)), rows_vectorized(make_softmax(37, 100))}) {
        Computation c = *p.comp;
        LoopTree t = p.tree;
        const FusedRows f = fuse_rows(c, t);
        EXPECT_EQ(shared_of(t), (std::vector<int>{1, 1, 1, 0}));
        const int e = c.tensor_index("E");
        EXPECT_EQ(f.kernel_owned, std::vector<int>{e});
        EXPECT_EQ(c.tensors[size_t(e)].shape, (std::vector<int64_t>{1, 100}));
        // The reductions' outputs keep a slot per row: they start at the identity once.
        EXPECT_EQ(c.tensors[size_t(c.tensor_index("Mx"))].shape, std::vector<int64_t>{37});
        EXPECT_EQ(c.tensors[size_t(c.tensor_index("S"))].shape, std::vector<int64_t>{37});
        ASSERT_EQ(f.log.size(), 1u);
        EXPECT_EQ(f.log[0], "nests 0-3 share i; E: i");
    }
}

TEST(LowerFuse, LayernormRunsItsSixPassesPerRow) {
    Program p = rows_vectorized(make_layernorm(5, 768));
    Computation c = *p.comp;
    LoopTree t = p.tree;
    const FusedRows f = fuse_rows(c, t);
    EXPECT_EQ(shared_of(t), (std::vector<int>{1, 1, 1, 1, 1, 0}));
    std::vector<std::string> owned;
    for (int x : f.kernel_owned) owned.push_back(c.tensors[size_t(x)].name);
    EXPECT_EQ(owned, (std::vector<std::string>{"Mu", "D", "R"}));
    EXPECT_EQ(c.tensors[size_t(c.tensor_index("S1"))].shape, std::vector<int64_t>{5});
}

// Nests whose first loops differ, or are unrolled, run apart; the rest still fuse.
TEST(LowerFuse, OnlyEqualPlainLoopsAreShared) {
    Program p = apply_all(naive(make_softmax(16, 32)), parse_action_list("split_4"));
    Computation c = *p.comp;
    LoopTree t = p.tree;
    fuse_rows(c, t);
    EXPECT_EQ(shared_of(t), (std::vector<int>{0, 1, 1, 0}));
    // The row loop of the second nest unrolled: it runs alone.
    p = apply_all(naive(make_softmax(16, 32)), parse_action_list("down, down, unroll"));
    c = *p.comp;
    t = p.tree;
    fuse_rows(c, t);
    EXPECT_EQ(shared_of(t), (std::vector<int>{0, 0, 1, 0}));
}

// Running these nests row by row would change what they compute: a column sum the next nest
// divides by (its rows need every row of the first), and a transpose of what the first writes.
TEST(LowerFuse, DependencesAcrossRowsKeepTheNestsApart) {
    const char *kColumnSums = R"(looptool-program 1
name colsum
var i 4
var j 4
tensor X input 4 4
tensor S temp 4
tensor T temp 4 4
tensor Y output 4 4
stmt S[j] += X[i, j]
stmt T[i, j] = X[i, j] / S[j]
stmt Y[i, j] = T[j, i]
nest 0
loop i 4 0
loop j 4 0
nest 1
loop i 4 0
loop j 4 0
nest 2
loop i 4 0
loop j 4 0
cursor 0
)";
    const Program p = parse_program(kColumnSums, "colsum");
    Computation c = *p.comp;
    LoopTree t = p.tree;
    const FusedRows f = fuse_rows(c, t);
    EXPECT_EQ(shared_of(t), (std::vector<int>{0, 0, 0}));
    EXPECT_TRUE(f.log.empty());
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, p));
}

// The folded temporary lives in the kernel: the caller's buffer for E is never written, and the
// results match the reference, with and without fusion.
TEST(LowerFuse, TheKernelKeepsTheFoldedRowItself) {
    for (bool fuse : {true, false}) {
        JitOptions o;
        o.lower.fuse_rows = fuse;
        auto jit = Jit::create(o);
        for (const Program &p :
             {rows_vectorized(make_softmax(37, 100)), rows_vectorized(make_layernorm(3, 129)),
              naive(make_softmax(5, 17))}) {
            SCOPED_TRACE(fmt::format("{} fuse {}", p.comp->name, fuse));
            EXPECT_TRUE(tests::matches_reference(*jit, p));
            const Computation &c = *p.comp;
            Buffers b = make_buffers(c, 3);
            fill_non_inputs(c, b, std::numeric_limits<float>::quiet_NaN());
            const int32_t cancel = 0;
            jit->compile(p).fn(b.pointers().data(), &cancel);
            const int t = c.tensor_index(c.name.starts_with("softmax") ? "E" : "D");
            const float first = b.data[size_t(t)][0];
            EXPECT_EQ(std::isnan(first), fuse);
        }
    }
}

// Random legal action sequences from the seeded rows (the state tune's search goes on from),
// over softmax, layernorm and GELU at awkward sizes: the kernel, fused where the lowering can,
// and the scheduled interpreter against the reference each time.
TEST(LowerFuse, RandomSchedulesFromTheRowSeedMatchTheReference) {
    auto jit = Jit::create();
    std::mt19937_64 rng(57);
    const auto &ext = tests::awkward_extents();
    std::uniform_int_distribution<size_t> pick(0, ext.size() - 1);
    for (int i = 0; i < 45; ++i) {
        const int64_t r = ext[pick(rng)], cols = ext[pick(rng)];
        Computation c = i % 3 == 0   ? make_softmax(r, cols)
                        : i % 3 == 1 ? make_layernorm(r, cols)
                                     : make_gelu(r, cols, i % 2 == 0);
        const auto seed = looptune::row_vector_actions(c, i % 2 ? 32 : 64);
        Program p = naive(std::move(c));
        if (seed) p = apply_all(p, *seed);
        std::vector<Action> taken;
        p = tests::random_walk(p, rng, 8, ActionSpace::preset("full"), &taken);
        SCOPED_TRACE(p.comp->name + " after the seed and " +
                     fmt::format("{}", fmt::join(action_names(taken), ",")));
        EXPECT_TRUE(tests::matches_reference(*jit, p, uint64_t(i)));
        const Comparison s = verify_schedule(p, uint64_t(i));
        EXPECT_TRUE(s.ok) << s.first_mismatch;
    }
}

// The rule vectorizes each row pass (split when longer than the width) and leaves the row loops
// and the one-loop nests alone; a matmul's naive nest has no such nest to vectorize first.
TEST(LowerFuse, TheRowSeedVectorizesEveryContiguousPass) {
    const auto a = looptune::row_vector_actions(make_softmax(1536, 128), 64);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(fmt::format("{}", fmt::join(action_names(*a), ",")),
              "down,split_64,down,vectorize,down,down,split_64,down,vectorize,down,down,split_64,"
              "down,vectorize,down,down,split_64,down,vectorize");
    const Program ln = rows_vectorized(make_layernorm(4, 40));
    for (const Nest &n : ln.tree.nests) {
        EXPECT_FALSE(n.loops[0].vectorize);
        EXPECT_EQ(n.loops.back().vectorize, n.loops.size() > 1);
    }
    EXPECT_FALSE(looptune::row_vector_actions(make_softmax(4, 40), 48).has_value());  // no split_48
    const auto seeds = looptune::tune_seeds(make_layernorm(128, 768), looptune::kSeedSteps,
                                            ActionSpace::preset("full"));
    ASSERT_EQ(seeds.size(), 2u);
    EXPECT_EQ(seeds[0].name, fmt::format("rows v{}", 4 * looptune::simd_floats()));
}

// Rows of odd lengths and of one column, through the row seed at 16 and 64 lanes (masked tails,
// a single lane, the vector exp on pieces of 16), fused and not: the reference's results.
TEST(LowerFuse, OddAndOneColumnRowsMatchTheReference) {
    JitOptions o;
    auto fused = Jit::create(o);
    o.lower.fuse_rows = false;
    auto unfused = Jit::create(o);
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {5, 1}, {1, 1}, {3, 17}, {7, 129}, {2, 63}, {4, 200}}) {
        for (int64_t w : {16, 64}) {
            for (const Computation &c : {make_softmax(rows, cols), make_layernorm(rows, cols)}) {
                SCOPED_TRACE(fmt::format("{} at {} lanes", c.name, w));
                // One column: no nest qualifies, the naive nest runs.
                const auto acts = looptune::row_vector_actions(c, w);
                EXPECT_EQ(acts.has_value(), cols > 1);
                const Program p = apply_all(naive(c), acts.value_or(std::vector<Action>{}));
                EXPECT_TRUE(tests::matches_reference(*fused, p));
                EXPECT_TRUE(tests::matches_reference(*unfused, p));
            }
        }
    }
}
