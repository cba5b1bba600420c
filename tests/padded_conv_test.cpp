// Convolutions with zero padding and strides (make_padded_conv2d): the padding statement fills a
// temporary, the conv reads it, and the seeds, the tile family and random action sequences all
// compute what the reference interpreter does; a hand-written padded conv is recognised.
#include <gtest/gtest.h>

#include <random>

#include "looptool/check/verify.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

using tests::apply_all;
using tests::naive_of;

// A padded 3x3 conv written by hand: other names, the padding over its own variables, the
// weights first, one statement for the product (no temporary), loops in another order.
const char *kHandPadded = R"(looptool-program 1
name hpad
var oc 8
var y 7
var x 9
var ic 4
var b 2
var dy 3
var dx 3
var i 2
var j 4
var r 7
var s 9
tensor In input 2 4 7 9
tensor Wt input 8 4 3 3
tensor Pad temp 2 4 9 11
tensor Out output 2 8 7 9
stmt Pad[i, j, r + 1, s + 1] += In[i, j, r, s]
stmt Out[b, oc, y, x] += Wt[oc, ic, dy, dx] * Pad[b, ic, y + dy, dx + x]
nest 0
loop i 2 0
loop j 4 0
loop r 7 0
loop s 9 0
nest 1
loop oc 8 0
loop y 7 0
loop x 9 0
loop ic 4 0
loop b 2 0
loop dy 3 0
loop dx 3 0
cursor 0
)";

// The kernel of `p` (over the generated form) on the hand-written computation's inputs,
// matched by name, compared with that computation's reference.
::testing::AssertionResult same_function(const Computation &hand, const Program &p) {
    Buffers in = make_buffers(hand, 3);
    const Reference want = compute_reference(hand, in);
    const Computation &g = p.computation();
    Buffers got = make_buffers(g, 99);
    for (size_t t = 0; t < g.tensors.size(); ++t)
        if (const int h = hand.tensor_index(g.tensors[t].name); h >= 0)
            got.data[t] = in.data[size_t(h)];
    fill_non_inputs(g, got, std::numeric_limits<float>::quiet_NaN());
    auto jit = Jit::create();
    const Kernel k = jit->compile(p);
    const int32_t cancel = 0;
    auto ptrs = got.pointers();
    k.fn(ptrs.data(), &cancel);
    for (size_t t = 0; t < hand.tensors.size(); ++t)
        in.data[t] = got.data[size_t(g.tensor_index(hand.tensors[t].name))];
    const Comparison c = compare_outputs(hand, want, in);
    if (c.ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << c.first_mismatch << "\n" << dump(p, false);
}

// The same conv (stride 2 on rows and columns, padding 2) with a temporary and a copy, the
// padding over the conv's own n and c, the variables declared in another order.
const char *kHandPaddedTemp = R"(looptool-program 1
name hpad2
var w 9
var kw 3
var m 6
var h 7
var c 3
var n 1
var ho 4
var wo 5
var kh 3
tensor X input 1 3 7 9
tensor W input 6 3 3 3
tensor Q temp 1 3 11 13
tensor Acc temp 1 6 4 5
tensor Y output 1 6 4 5
stmt Q[n, c, h + 2, w + 2] += X[n, c, h, w]
stmt Acc[n, m, ho, wo] += Q[n, c, 2*ho + kh, kw + 2*wo] * W[m, c, kh, kw]
stmt Y[n, m, ho, wo] = Acc[n, m, ho, wo]
nest 0
loop w 9 0
loop h 7 0
loop c 3 0
loop n 1 0
nest 1
loop kw 3 0
loop m 6 0
loop c 3 0
loop n 1 0
loop ho 4 0
loop wo 5 0
loop kh 3 0
nest 2
loop m 6 0
loop n 1 0
loop ho 4 0
loop wo 5 0
cursor 0
)";

}  // namespace

TEST(PaddedConv, TheBuilderPadsExactly) {
    EXPECT_TRUE(make_padded_conv2d(1, 4, 9, 9, 8, 3, 3, 2, 0) ==
                make_strided_conv2d(1, 4, 9, 9, 8, 3, 3, 2));
    const Computation c = make_padded_conv2d(2, 3, 7, 9, 5, 3, 3, 1, 1);
    EXPECT_EQ(c.name, "conv2_3_7_9__5_3_3_3_p1");
    EXPECT_EQ(c.tensors[4].shape, (std::vector<int64_t>{2, 5, 7, 9}));  // same size at stride 1
    const Computation s2 = make_padded_conv2d(1, 3, 8, 8, 4, 3, 3, 2, 1);
    EXPECT_EQ(s2.name, "conv1_3_8_8__4_3_3_3_s2_p1");
    EXPECT_EQ(s2.tensors[4].shape, (std::vector<int64_t>{1, 4, 4, 4}));
    const auto p = conv_params(s2);
    ASSERT_TRUE(p);
    EXPECT_EQ(
        std::vector<int64_t>({p->n, p->ci, p->h, p->w, p->co, p->kh, p->kw, p->stride, p->pad}),
        std::vector<int64_t>({1, 3, 8, 8, 4, 3, 3, 2, 1}));
    EXPECT_FALSE(generated_form(c));  // already generate's form
    auto jit = Jit::create();
    for (const Computation *x : {&c, &s2})
        EXPECT_TRUE(tests::matches_reference(*jit, naive_of(*x)));
    // The border: a 3x3 image of ones through a 3x3 kernel of ones is 9 at the centre only.
    const Computation one = make_padded_conv2d(1, 1, 3, 3, 1, 3, 3, 1, 1);
    Buffers b = make_buffers(one, 1);
    std::fill(b.data[0].begin(), b.data[0].end(), 1.0f);
    std::fill(b.data[1].begin(), b.data[1].end(), 1.0f);
    run_reference(one, b);
    EXPECT_EQ(b.data[4][4], 9.0f);
    EXPECT_EQ(b.data[4][0], 4.0f);
    EXPECT_EQ(b.data[4][1], 6.0f);
    EXPECT_THROW(make_padded_conv2d(1, 4, 9, 9, 8, 3, 3, 1, 3), Error);   // pad >= kernel
    EXPECT_THROW(make_padded_conv2d(1, 4, 9, 9, 8, 3, 3, 1, -1), Error);  // negative
    EXPECT_THROW(make_padded_conv2d(1, 4, 1, 1, 8, 5, 5, 1, 1), Error);   // kernel > padded
}

// Every seed and every member of the conv tile family, at stride 1 and 2: the padding nest
// vectorized, the tile applied to the conv nest, verified against the interpreter.
TEST(PaddedConv, SeedsAndTheTileFamilyApplyAndVerify) {
    auto jit = Jit::create();
    for (int64_t stride : {1, 2}) {
        const Computation c = make_padded_conv2d(1, 8, 10, 19, 32, 3, 3, stride, 1);
        const auto cs = looptune::conv_shape(c);
        ASSERT_TRUE(cs) << c.name;
        EXPECT_EQ(cs->co, 32);
        EXPECT_EQ(cs->wo, stride == 1 ? 19 : 10);
        const auto seeds =
            looptune::tune_seeds(c, looptune::kSeedSteps, ActionSpace::preset("full"));
        ASSERT_GE(seeds.size(), 4u) << c.name;
        for (const auto &seed : seeds) {
            const Program p = apply_all(naive_of(c), seed.actions);
            EXPECT_TRUE(p.tree.nests[0].loops.back().vectorize) << seed.name;
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << c.name << " " << seed.name;
        }
        int members = 0;
        for (const auto &t : looptune::conv_schedule_family(cs->co, cs->wo, cs->hw, true)) {
            std::vector<Action> actions;
            try {
                actions = looptune::conv_tile_actions(c, t);
            } catch (const Error &) {
                continue;
            }
            ++members;
            EXPECT_TRUE(verify_schedule(apply_all(naive_of(c), actions)).ok) << c.name << t.name();
        }
        EXPECT_GT(members, 10);
    }
}

TEST(PaddedConv, AnotherHandWrittenFormWithAStrideAndATemporary) {
    const Program file = parse_program(kHandPaddedTemp);
    const auto g = generated_form(file.computation());
    ASSERT_TRUE(g);
    const auto p = conv_params(*g);
    ASSERT_TRUE(p);
    EXPECT_EQ(
        std::vector<int64_t>({p->n, p->ci, p->h, p->w, p->co, p->kh, p->kw, p->stride, p->pad}),
        std::vector<int64_t>({1, 3, 7, 9, 6, 3, 3, 2, 2}));
    EXPECT_EQ(g->vars[0].name, "n");  // make_padded_conv2d's order: n, c, ho, wo, kh, kw, m, h, w
    EXPECT_EQ(g->vars[8].name, "w");
    const auto seeds = looptune::tune_seeds(*g, looptune::kSeedSteps, ActionSpace::preset("full"));
    ASSERT_FALSE(seeds.empty());
    EXPECT_TRUE(same_function(file.computation(), tuning_start(file)));
    for (const auto &seed : seeds)
        EXPECT_TRUE(same_function(file.computation(), apply_all(tuning_start(file), seed.actions)))
            << seed.name;
}

TEST(PaddedConv, AHandWrittenPaddedConvBecomesGeneratesForm) {
    const Program file = parse_program(kHandPadded);
    const auto r = conv_roles(file.computation());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->pad_h, 1);
    EXPECT_EQ(r->pad_w, 1);
    const auto g = generated_form(file.computation());
    ASSERT_TRUE(g);
    EXPECT_FALSE(generated_form(*g));
    EXPECT_EQ(g->vars.size(), 9u);  // the padding's i, j became n and c
    const auto p = conv_params(*g);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->pad, 1);
    EXPECT_EQ(p->co, 8);
    // The generated form computes the hand-written function, and so do the seeds.
    const auto seeds = looptune::tune_seeds(*g, looptune::kSeedSteps, ActionSpace::preset("full"));
    ASSERT_FALSE(seeds.empty());
    EXPECT_TRUE(same_function(file.computation(), tuning_start(file)));
    for (const auto *seed : {&seeds.front(), &seeds.back()})
        EXPECT_TRUE(same_function(file.computation(), apply_all(tuning_start(file), seed->actions)))
            << seed->name;
}

// Random legal action sequences over padded convs (both nests, every action of the full space
// and the layout actions), each schedule verified against the reference, interpreted and
// compiled.
TEST(PaddedConv, RandomActionSequencesVerify) {
    std::mt19937_64 rng(40);
    auto jit = Jit::create();
    const ActionSpace space = ActionSpace::preset("layout");
    for (int i = 0; i < 60; ++i) {
        const int64_t stride = 1 + i % 2;
        const Computation c = make_padded_conv2d(1 + i % 2, 2 + i % 3, 5 + i % 4, 6 + i % 5,
                                                 3 + i % 4, 3, 3, stride, 1 + (i % 7 == 0));
        Program p = naive_of(c);
        p.cursor = i % p.tree.num_loops();
        p = tests::random_walk(p, rng, 16, space);
        ASSERT_TRUE(verify_schedule(p).ok) << dump(p, false);
        ASSERT_TRUE(tests::matches_reference(*jit, p)) << dump(p, false);
    }
}

TEST(PaddedConv, ShapesWithPaddingAndStride) {
    EXPECT_TRUE(computation_of_shape("t", "conv", {1, 2, 9, 9, 4, 3, 3, 1, 1}) ==
                make_padded_conv2d(1, 2, 9, 9, 4, 3, 3, 1, 1));
    EXPECT_TRUE(computation_of_shape("t", "conv", {1, 2, 9, 9, 4, 3, 3, 2, 0}) ==
                make_strided_conv2d(1, 2, 9, 9, 4, 3, 3, 2));
    EXPECT_THROW(computation_of_shape("t", "conv", {1, 2, 9, 9, 4, 3, 3, 1, 3}), Error);
    EXPECT_THROW(computation_of_shape("t", "conv", {1, 2, 2, 2, 4, 5, 5, 1, 1}), Error);
    const auto shapes = conv_shapes("1,3,8", "4,3,3,3", 2, 1);
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_EQ(shapes[0].name(), "conv1_3_8_8__4_3_3_3_s2_p1");
    EXPECT_THROW(conv_shapes("1,3,8", "4,3,3,3", 0, 1), Error);
    EXPECT_THROW(conv_shapes("1,3,8", "4,3,3,3", 1, 3), Error);
    tests::TempDir dir("padded");
    const auto paths = write_conv_dataset(shapes, dir.path.string());
    ASSERT_EQ(paths.size(), 1u);
    EXPECT_TRUE(load_program_file(paths[0]).computation() ==
                make_padded_conv2d(1, 3, 8, 8, 4, 3, 3, 2, 1));
}
