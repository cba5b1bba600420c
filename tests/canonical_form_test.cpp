// Program forms: a matmul written by hand in another form is rewritten as `generate` writes it,
// the same function of the same arguments (checked against the hand-written computation's own
// reference), so the seed rules and the tile search apply to it.
#include <gtest/gtest.h>

#include "looptool/gen/canonical_form.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "search/seeds.h"
#include "test_util.h"

using namespace looptool;

namespace {

// C = A B (24 x 40 x 32) in four hand-written forms.
const char *kForms[] = {
    // One statement, other names, declared in the written loop order i, r, j.
    R"(looptool-program 1
name f1
var i 24
var r 32
var j 40
tensor X input 24 32
tensor Y input 32 40
tensor Z output 24 40
stmt Z[i, j] += X[i, r] * Y[r, j]
nest 0
loop i 24 0
loop r 32 0
loop j 40 0
cursor 0
)",
    // Operands the other way round, B declared first, variables n, m, k.
    R"(looptool-program 1
name f2
var n 40
var m 24
var k 32
tensor B input 32 40
tensor A input 24 32
tensor C output 24 40
stmt C[m, n] += B[k, n] * A[m, k]
nest 0
loop n 40 0
loop m 24 0
loop k 32 0
cursor 0
)",
    // generate's two statements, the temporary declared after the output, k declared first.
    R"(looptool-program 1
name f3
var k 32
var m 24
var n 40
tensor A input 24 32
tensor B input 32 40
tensor C output 24 40
tensor T temp 24 40
stmt T[m, n] += A[m, k] * B[k, n]
stmt C[m, n] = T[m, n]
nest 0
loop k 32 0
loop m 24 0
loop n 40 0
nest 1
loop m 24 0
loop n 40 0
cursor 0
)",
    // A tensor named T already: the new temporary takes another name.
    R"(looptool-program 1
name f4
var a 24
var b 40
var c 32
tensor T input 24 32
tensor U input 32 40
tensor V output 24 40
stmt V[a, b] += T[a, c] * U[c, b]
nest 0
loop a 24 0
loop b 40 0
loop c 32 0
cursor 0
)"};

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

looptune::TileSchedule tiny_tile() {
    looptune::TileSchedule s;
    s.tm = 8;
    s.tn = 16;
    return s;
}

TEST(CanonicalForm, EveryHandWrittenMatmulBecomesGeneratesForm) {
    for (const char *text : kForms) {
        const Program file = parse_program(text);
        const auto g = generated_form(file.computation());
        ASSERT_TRUE(g) << text;
        ASSERT_TRUE(generated_matmul(*g)) << text;
        EXPECT_EQ(g->name, file.computation().name);
        // The same arguments: inputs and outputs by name, shape and order.
        std::vector<std::string> args_hand, args_gen;
        for (const Tensor &t : file.computation().tensors)
            if (t.kind != TensorKind::Temp) args_hand.push_back(t.name);
        for (const Tensor &t : g->tensors)
            if (t.kind != TensorKind::Temp) args_gen.push_back(t.name);
        EXPECT_EQ(args_hand, args_gen);
        const auto shape = looptune::matmul_shape(*g);
        ASSERT_TRUE(shape);
        EXPECT_EQ(shape->m, 24);
        EXPECT_EQ(shape->n, 40);
        EXPECT_EQ(shape->k, 32);
        // The naive nest and a tile schedule compute the hand-written function.
        const Program start = tuning_start(file);
        EXPECT_TRUE(same_function(file.computation(), start));
        Program tiled = start;
        for (Action a : looptune::tile_actions(start.computation(), tiny_tile()))
            tiled = apply(tiled, a);
        EXPECT_TRUE(same_function(file.computation(), tiled));
        EXPECT_FALSE(looptune::tune_seeds(*g, 200, ActionSpace::preset("full")).empty());
    }
}

// A 3x3 conv written by hand: one statement, weights first, the variables in another order.
TEST(CanonicalForm, AHandWrittenConvBecomesGeneratesForm) {
    const Program file = parse_program(R"(looptool-program 1
name hconv
var oc 16
var y 6
var x 7
var ic 8
var b 2
var dy 3
var dx 3
tensor In input 2 8 8 9
tensor Wt input 16 8 3 3
tensor Out output 2 16 6 7
stmt Out[b, oc, y, x] += Wt[oc, ic, dy, dx] * In[b, ic, y + dy, dx + x]
nest 0
loop oc 16 0
loop y 6 0
loop x 7 0
loop ic 8 0
loop b 2 0
loop dy 3 0
loop dx 3 0
cursor 0
)");
    const auto g = generated_form(file.computation());
    ASSERT_TRUE(g);
    EXPECT_FALSE(generated_form(*g));  // now in generate's form
    const auto cs = looptune::conv_shape(*g);
    ASSERT_TRUE(cs);
    EXPECT_EQ(cs->co, 16);
    EXPECT_EQ(cs->wo, 7);
    EXPECT_EQ(cs->batch, 2);
    const Program start = tuning_start(file);
    EXPECT_TRUE(same_function(file.computation(), start));
    const auto seeds = looptune::tune_seeds(*g, 200, ActionSpace::preset("full"));
    ASSERT_FALSE(seeds.empty());
    Program p = start;
    for (Action a : seeds.front().actions) p = apply(p, a);
    EXPECT_TRUE(same_function(file.computation(), p)) << seeds.front().name;
}

// A batched matmul (attention's Q.K^T per head) written by hand in one statement, and
// make_bmm's own form: the tile seeds keep the batch loop outermost and compute the same.
TEST(CanonicalForm, BatchedMatmulsTakeTheTileSeedsUnderTheirBatchLoop) {
    const Program file = parse_program(R"(looptool-program 1
name scores
var h 3
var q 20
var t 24
var d 16
tensor Q input 3 20 16
tensor K input 3 16 24
tensor S output 3 20 24
stmt S[h, q, t] += K[h, d, t] * Q[h, q, d]
nest 0
loop h 3 0
loop q 20 0
loop t 24 0
loop d 16 0
cursor 0
)");
    const auto g = generated_form(file.computation());
    ASSERT_TRUE(g);
    const auto r = generated_matmul(*g);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->batch, 0);
    EXPECT_FALSE(generated_form(make_bmm(3, 20, 24, 16)));
    const Program start = tuning_start(file);
    EXPECT_TRUE(same_function(file.computation(), start));
    const auto seeds = looptune::tune_seeds(*g, 200, ActionSpace::preset("full"));
    ASSERT_GE(seeds.size(), 3u);
    for (const auto &seed : seeds) {
        Program p = start;
        for (Action a : seed.actions) p = apply(p, a);
        EXPECT_EQ(p.tree.nests[0].loops[0].var, r->batch) << seed.name;
        EXPECT_TRUE(same_function(file.computation(), p)) << seed.name;
    }
}

TEST(CanonicalForm, GenerateWritesBatchedMatmulsThatReadBack) {
    tests::TempDir dir("bmm");
    const auto paths = write_bmm_dataset({2, 3}, {{8, 16, 4}}, dir.path.string());
    ASSERT_EQ(paths.size(), 2u);
    const Program p = load_program_file(paths[1]);
    EXPECT_TRUE(p.computation() == make_bmm(3, 8, 16, 4));
    ASSERT_TRUE(generated_matmul(p.computation()));
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, p));
    EXPECT_THROW(write_bmm_dataset({1 << 20}, {{4096, 4096, 4096}}, dir.path.string()), Error);
}

// A stride-2 conv: recognised as a conv (its seeds apply), each seed computing what the naive
// nest does; stride 1 is make_conv2d itself.
TEST(CanonicalForm, StridedConvsTakeTheConvSeeds) {
    EXPECT_TRUE(make_strided_conv2d(1, 4, 9, 9, 8, 3, 3, 1) == make_conv2d(1, 4, 9, 9, 8, 3, 3));
    const Computation c = make_strided_conv2d(2, 4, 17, 19, 16, 3, 3, 2);
    EXPECT_EQ(c.vars[2].extent, 8);
    EXPECT_EQ(c.vars[3].extent, 9);
    EXPECT_FALSE(generated_form(c));
    ASSERT_TRUE(conv_roles(c));
    ASSERT_TRUE(looptune::conv_shape(c));
    const auto seeds = looptune::tune_seeds(c, 200, ActionSpace::preset("full"));
    ASSERT_FALSE(seeds.empty());
    auto jit = Jit::create();
    const Program start = Program::naive(std::make_shared<const Computation>(c));
    EXPECT_TRUE(tests::matches_reference(*jit, start));
    for (const auto &seed : seeds) {
        Program p = start;
        for (Action a : seed.actions) p = apply(p, a);
        EXPECT_TRUE(tests::matches_reference(*jit, p)) << seed.name;
    }
    EXPECT_THROW(make_strided_conv2d(1, 4, 9, 9, 8, 3, 3, 0), Error);
}

// tune's shapes (CLI and Python) through one builder.
TEST(CanonicalForm, ComputationsByShape) {
    EXPECT_TRUE(computation_of_shape("t", "matmul", {2, 3, 4}) == make_matmul(2, 3, 4));
    EXPECT_TRUE(computation_of_shape("t", "matmul", {5, 2, 3, 4}) == make_bmm(5, 2, 3, 4));
    EXPECT_TRUE(computation_of_shape("t", "bmm", {5, 2, 3, 4}) == make_bmm(5, 2, 3, 4));
    EXPECT_TRUE(computation_of_shape("t", "conv", {1, 2, 9, 9, 4, 3, 3, 2, 0}) ==
                make_strided_conv2d(1, 2, 9, 9, 4, 3, 3, 2));
    for (const auto &[kind, d] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"matmul", {2, 3}},
             {"bmm", {2, 3, 4}},
             {"conv", {1, 2, 9, 9, 4, 3}},
             {"conv", {1, 2, 9, 9, 4, 3, 3, 1, 3}},
             {"matmul", {2, 0, 4}},
             {"gemm", {2, 3, 4}}})
        EXPECT_THROW(computation_of_shape("t", kind, d), Error) << kind << " " << d.size();
}

// What generate writes and LoopTune's corpus holds is left as it is.
TEST(CanonicalForm, TheCorpusIsAlreadyInGeneratesForm) {
    const std::filesystem::path corpus = LOOPTUNE_CORPUS_DIR;
    int checked = 0;
    for (const char *dir : {"conv", "mm64_256_16_range"})
        for (const auto &e : std::filesystem::directory_iterator(corpus / dir)) {
            if (checked % 7 == 0 || std::string(dir) == "conv") {
                const Program p = load_program_file(e.path().string());
                EXPECT_FALSE(generated_form(p.computation())) << e.path();
                EXPECT_TRUE(
                    looptune::tune_seeds(p.computation(), 200, ActionSpace::preset("full")).size() >
                    0)
                    << e.path();
            }
            ++checked;
        }
    EXPECT_GT(checked, 2000);
}

TEST(CanonicalForm, GeneratesOwnFormAndOtherComputationsAreLeftAlone) {
    EXPECT_FALSE(generated_form(make_matmul(8, 16, 4)));
    EXPECT_TRUE(generated_matmul(make_matmul(8, 16, 4)));
    EXPECT_FALSE(generated_form(make_elementwise_add(8, 16)));
    EXPECT_FALSE(generated_form(make_conv2d(1, 2, 6, 6, 3, 3, 3)));
    // A transposed operand is a matmul with its own layout (as attention's K is): recognised,
    // rewritten with generate's variable order, its tensors as they are, and the seeds compute
    // the same function.
    const Program t = parse_program(R"(looptool-program 1
name tr
var m 8
var n 16
var k 4
tensor A input 4 8
tensor B input 4 16
tensor C output 8 16
stmt C[m, n] += A[k, m] * B[k, n]
nest 0
loop m 8 0
loop n 16 0
loop k 4 0
cursor 0
)");
    const auto r = matmul_roles(t.computation());
    ASSERT_TRUE(r);
    EXPECT_EQ(t.computation().vars[size_t(r->k)].name, "k");
    const auto g = generated_form(t.computation());
    ASSERT_TRUE(g);
    EXPECT_EQ(g->tensors[0].shape, (std::vector<int64_t>{4, 8}));
    const Program start = tuning_start(t);
    EXPECT_TRUE(same_function(t.computation(), start));
    const auto seeds = looptune::tune_seeds(*g, 200, ActionSpace::preset("full"));
    ASSERT_FALSE(seeds.empty());
    for (const auto &seed : seeds) {
        Program p = start;
        for (Action a : seed.actions) p = apply(p, a);
        EXPECT_TRUE(same_function(t.computation(), p)) << seed.name;
    }
    // A variable in one operand only is no contraction of two matrices.
    const Program outer = parse_program(R"(looptool-program 1
name outer
var m 8
var n 16
var k 4
tensor A input 8 4
tensor B input 16
tensor C output 8 16
stmt C[m, n] += A[m, k] * B[n]
nest 0
loop m 8 0
loop n 16 0
loop k 4 0
cursor 0
)");
    EXPECT_FALSE(matmul_roles(outer.computation()));
}

}  // namespace
