// `pack` of an input read with a stride (PackPlan::subsample, action_pack.h): the subsample
// copied into a dense scratch tensor, `flatten` after it, the flat tiles of strided 1x1 convs,
// and random action sequences over strided convs, each verified against the interpreter.
#include <gtest/gtest.h>

#include <random>

#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

using tests::apply_all;
using tests::naive_of;

// `p` with the cursor on the loop over variable `name` in nest `nest`.
Program at_loop(Program p, int nest, const std::string &name) {
    const Nest &n = p.tree.nests[size_t(nest)];
    for (size_t d = 0; d < n.loops.size(); ++d)
        if (p.computation().vars[size_t(n.loops[d].var)].name == name)
            p.cursor = p.tree.flat({nest, int(d)});
    return p;
}

// A strided read with offsets and a variable of extent 1 beside each strided one: X's odd
// rows and every third column from the second, [c][2 y + 1 + a][3 x + 1 + b].
const char *kOffsets = R"(looptool-program 1
name offsets
var m 5
var c 3
var y 4
var x 6
var a 1
var b 1
tensor X input 3 10 19
tensor W input 5 3
tensor Y output 5 4 6
stmt Y[m, y, x] += X[c, 2*y + a + 1, 3*x + b + 1] * W[m, c]
nest 0
loop y 4 0
loop x 6 0
loop a 1 0
loop b 1 0
loop c 3 0
loop m 5 0
cursor 0
)";

}  // namespace

// A 1x1 stride-2 conv packed under m: X's subsample in a dense tensor of X's order, copied by
// a nest of its own variables before the conv, which then reads it as a unit-stride conv.
TEST(Subsample, PacksTheSubsampleOfA1x1StridedConv) {
    const Computation c = make_strided_conv2d(1, 8, 10, 13, 16, 1, 1, 2);
    const Program p = at_loop(naive_of(c), 0, "m");
    ASSERT_TRUE(is_legal(p, Action::Pack)) << why_illegal(p, Action::Pack);
    const Program q = apply(p, Action::Pack);
    const Computation &qc = q.computation();
    const int x = qc.tensor_index("X_packed");
    ASSERT_GE(x, 0);
    EXPECT_EQ(qc.tensors[size_t(x)].kind, TensorKind::Scratch);
    EXPECT_EQ(qc.tensors[size_t(x)].shape, std::vector<int64_t>({1, 8, 5, 7}));
    EXPECT_LE(qc.tensors[size_t(x)].num_elements(), c.tensors[0].num_elements());
    EXPECT_GE(qc.var_index("ho_s"), 0);
    EXPECT_GE(qc.var_index("wo_s"), 0);
    ASSERT_EQ(q.tree.nests.size(), 3u);
    EXPECT_EQ(q.tree.nests[0].stmts, std::vector<int>({0}));
    EXPECT_EQ(q.tree.pos(q.cursor).nest, 1);  // still on m, in the conv nest
    EXPECT_EQ(qc.vars[size_t(q.tree.nests[1].loops[size_t(q.tree.pos(q.cursor).depth)].var)].name,
              "m");
    EXPECT_TRUE(same_storage(c, qc));
    EXPECT_FALSE(is_legal(q, Action::Pack));  // X is packed already: W is the one left
    auto jit = Jit::create();
    EXPECT_TRUE(verify_schedule(q).ok) << dump(q, false);
    EXPECT_TRUE(tests::matches_reference(*jit, q));
    // The conv's rows are dense now: ho and wo flatten (the copy's access merges too).
    const Program f = apply(at_loop(q, 1, "ho"), Action::Flatten);
    EXPECT_GE(f.computation().var_index("ho_wo"), 0);
    EXPECT_EQ(f.computation().tensors[size_t(x)].shape, std::vector<int64_t>({1, 8, 35}));
    EXPECT_TRUE(verify_schedule(f).ok) << dump(f, false);
    EXPECT_TRUE(tests::matches_reference(*jit, f));
    // Without the subsample, a strided conv does not flatten.
    EXPECT_FALSE(is_legal(at_loop(naive_of(c), 0, "ho"), Action::Flatten));
}

TEST(Subsample, OffsetsAndVariablesOfExtentOneCopyWhatTheNestReads) {
    const Program file = parse_program(kOffsets);
    const Program p = at_loop(file, 0, "m");
    ASSERT_TRUE(is_legal(p, Action::Pack)) << why_illegal(p, Action::Pack);
    const Program q = apply(p, Action::Pack);
    EXPECT_EQ(q.computation().tensors.back().shape, std::vector<int64_t>({3, 4, 6}));
    auto jit = Jit::create();
    EXPECT_TRUE(verify_schedule(q).ok) << dump(q, false);
    EXPECT_TRUE(tests::matches_reference(*jit, q));
    EXPECT_TRUE(verify_schedule(apply(at_loop(q, 1, "y"), Action::Flatten)).ok);
}

// Where a dimension is walked by two variables of extent > 1 (a 3x3 conv's 2 ho + kh, or ho +
// kh at stride 1), the copy would be larger than X or is not a subsample: `pack` stays illegal.
TEST(Subsample, IllegalWhereTwoVariablesWalkADimension) {
    for (const Computation &c :
         {make_strided_conv2d(1, 4, 11, 11, 8, 3, 3, 2), make_conv2d(1, 4, 9, 9, 8, 3, 3)}) {
        const Program p = at_loop(naive_of(c), 0, "m");
        const char *why = why_illegal(p, Action::Pack);
        ASSERT_NE(why, nullptr) << c.name;
        EXPECT_NE(std::string(why).find("stride"), std::string::npos) << why;
    }
}

// The flat tiles of a strided 1x1 conv (X's subsample packed first, then ho and wo flattened),
// with and without W packed, and every seed, verified against the interpreter.
TEST(Subsample, FlatTilesOfStrided1x1ConvsVerify) {
    auto jit = Jit::create();
    for (const Computation &c : {make_strided_conv2d(1, 16, 14, 14, 32, 1, 1, 2),
                                 make_strided_conv2d(2, 8, 9, 17, 24, 1, 1, 2)}) {
        const auto cs = looptune::conv_shape(c);
        ASSERT_TRUE(cs);
        int flat = 0;
        for (const auto &t : looptune::conv_schedule_family(cs->co, cs->wo, cs->hw, true)) {
            if (!t.flat) continue;
            const Program p = apply_all(naive_of(c), looptune::conv_tile_actions(c, t));
            EXPECT_GE(p.computation().tensor_index("X_packed"), 0) << t.name();
            EXPECT_TRUE(p.tree.nests[0].loops.back().vectorize) << t.name();
            EXPECT_TRUE(verify_schedule(p).ok) << c.name << " " << t.name() << dump(p, false);
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << c.name << " " << t.name();
            ++flat;
        }
        EXPECT_GE(flat, 4) << c.name;
        bool seeded = false;
        for (const auto &s :
             looptune::tune_seeds(c, looptune::kSeedSteps, ActionSpace::preset("full"))) {
            const Program p = apply_all(naive_of(c), s.actions);
            seeded |= p.computation().tensor_index("X_packed") >= 0;
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << c.name << " " << s.name;
        }
        EXPECT_TRUE(seeded) << c.name;
    }
}

// Random legal action sequences of the layout space over strided convs (1x1 and 3x3, awkward
// extents), from the naive nest and from the subsample, each verified against the interpreter
// and compiled.
TEST(Subsample, RandomActionSequencesOverStridedConvsVerify) {
    std::mt19937_64 rng(41);
    auto jit = Jit::create();
    const ActionSpace space = ActionSpace::preset("layout");
    const auto &ext = tests::awkward_extents();
    int subsampled = 0;
    for (int i = 0; i < 80; ++i) {
        const int64_t k = i % 3 == 0 ? 3 : 1, stride = 2 + (i % 5 == 0);
        const int64_t h = k + 2 * (1 + int64_t(i % 4)), w = k + ext[size_t(i) % 8] + 1;
        const Computation c =
            make_strided_conv2d(1 + i % 2, 1 + i % 5, h, w, ext[size_t(i) % 9], k, k, stride);
        Program p = naive_of(c);
        if (i % 2 == 0 && k == 1) {
            p = at_loop(p, 0, "m");
            if (is_legal(p, Action::Pack)) {
                p = apply(p, Action::Pack);
                ++subsampled;
            }
        }
        p.cursor = int(rng() % uint64_t(p.tree.num_loops()));
        p = tests::random_walk(p, rng, 20, space);
        ASSERT_TRUE(verify_schedule(p).ok) << dump(p, false);
        ASSERT_TRUE(tests::matches_reference(*jit, p)) << dump(p, false);
    }
    EXPECT_GE(subsampled, 10);
}

// A read at constant indices written with a variable of coefficient 0 (`0*m + 8`) stays where
// it was when m and n are flattened (the merged variable's coefficient 1 is for reads that
// use it); found by fuzz_program.
TEST(Subsample, FlattenKeepsAZeroCoefficientTermAtZero) {
    const Program p = parse_program(R"(looptool-program 1
name zero_coef
var m 4
var n 5
tensor A input 4 5
tensor B input 9 7
tensor C output 4 5
stmt C[m, n] = A[m, n] + B[0*m + 8, 4]
nest 0
loop m 4 0
loop n 5 0
cursor 0
)");
    ASSERT_TRUE(is_legal(p, Action::Flatten)) << why_illegal(p, Action::Flatten);
    const Program q = apply(p, Action::Flatten);
    EXPECT_TRUE(verify_schedule(q).ok) << dump(q, false);
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, q));
}
