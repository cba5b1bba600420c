// The `fuse` action (looptool/actions/action_fuse.h, docs/actions.md) on matmuls with an
// epilogue (looptool/gen/epilogue.h): the loop tree before and after as text, legality with its
// reasons, the temporary the lowering no longer writes, and every fused kernel checked against
// the reference (the JIT and the scheduled interpreter), random action sequences included.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "looptool/actions/actions.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

using tests::apply_all;
using tests::at;
using tests::naive_of;

// The kernel and the interpreter both compute what the reference says.
void expect_verified(const Program &p) {
    EXPECT_TRUE(tests::matches_reference(tests::shared_jit(), p));
    const Computation &c = p.computation();
    Buffers in = make_buffers(c, 5);
    const Reference want = compute_reference(c, in);
    run_schedule(p, in);
    const Comparison cmp = compare_outputs(c, want, in);
    EXPECT_TRUE(cmp.ok) << "interpreter: " << cmp.first_mismatch << "\n" << dump(p, false);
}

// The 8x32 tile (m_o n_o k m_i n_i), fused under n_o: the epilogue's nest shares m_o and n_o.
Program tiled_fused(const Computation &c) {
    looptune::TileSchedule s;
    s.vectorize_write = false;
    Program p = apply_all(
        naive_of(c), looptune::tile_actions(
                         make_matmul(c.vars[0].extent, c.vars[2].extent, c.vars[1].extent), s));
    return apply(at(p, 0, 1), Action::Fuse);
}

const Epilogue kBiasRelu{true, Activation::Relu, false};

}  // namespace

TEST(Fuse, TreeBeforeAndAfter) {
    const Computation c = make_matmul_epilogue(64, 64, 16, kBiasRelu);
    looptune::TileSchedule s;
    s.vectorize_write = false;
    const Program tiled =
        apply_all(naive_of(c), looptune::tile_actions(make_matmul(64, 64, 16), s));
    EXPECT_EQ(dump(tiled, false),
              "for m in 8 : L0\n"
              " for n in 2 : L1\n"
              "  for k in 16 : L2\n"
              "   for m' in 8 : L3 [unroll]\n"
              "    for n' in 32 : L4 [vectorize]\n"
              "     T[m, n] += A[m, k] * B[k, n]\n"
              "for m in 64 : L5\n"
              " for n in 64 : L6\n"
              "  C[m, n] = max((T[m, n] + Bias[n]), 0)\n");
    const Program fused = apply(at(tiled, 0, 1), Action::Fuse);
    EXPECT_EQ(fused.cursor, tiled.tree.flat({0, 1}));
    EXPECT_EQ(dump(fused, false),
              "for m in 8 : L0 [shared with the next nest]\n"
              " for n in 2 : L1 [shared with the next nest]\n"
              "  for k in 16 : L2\n"
              "   for m' in 8 : L3 [unroll]\n"
              "    for n' in 32 : L4 [vectorize]\n"
              "     T[m, n] += A[m, k] * B[k, n]\n"
              "for m in 8 : L5\n"
              " for n in 2 : L6\n"
              "  for m' in 8 : L7 [unroll]\n"
              "   for n' in 32 : L8 [vectorize]\n"
              "    C[m, n] = max((T[m, n] + Bias[n]), 0)\n");
    expect_verified(fused);
}

// Each epilogue, on sizes that leave tails in every tile dimension, fused at every legal level of
// a tiled nest and of the naive one: all verified.
TEST(Fuse, EveryEpilogueVerifies) {
    const std::vector<Epilogue> epilogues = {
        {true, Activation::None, false},    {true, Activation::Relu, false},
        {true, Activation::Gelu, false},    {true, Activation::GeluTanh, false},
        {true, Activation::None, true},     {false, Activation::Gelu, true},
        {true, Activation::GeluTanh, true}, {false, Activation::Relu, false}};
    for (const Epilogue &e : epilogues) {
        SCOPED_TRACE(epilogue_text(e));
        const Computation c = make_matmul_epilogue(37, 70, 19, e);
        expect_verified(tiled_fused(c));
        // The naive nest m, k, n: only m is above the reduction.
        const Program naive = naive_of(c);
        EXPECT_FALSE(is_legal(at(naive, 0, 1), Action::Fuse));
        expect_verified(apply(at(naive, 0, 0), Action::Fuse));
    }
}

// After fusing, the lowering computes the product straight into C and the epilogue updates it
// in place: the temporary T is never written. Unfused, the epilogue reads T from memory.
TEST(Fuse, TemporaryNotWrittenOnceFused) {
    const Computation c = make_matmul_epilogue(32, 64, 16, kBiasRelu);
    const int t = c.tensor_index("T");
    ASSERT_GE(t, 0);
    auto t_written = [&](const Program &p) {
        Buffers b = make_buffers(c, 3);
        fill_non_inputs(c, b, std::numeric_limits<float>::quiet_NaN());
        auto ptrs = b.pointers();
        tests::shared_jit().compile(p).fn(ptrs.data(), nullptr);
        for (float x : b.data[size_t(t)])
            if (!std::isnan(x)) return true;
        return false;
    };
    const Program fused = tiled_fused(c);
    Program unfused = fused;
    unfused.tree.nests[0].shared = 0;
    unfused.tree.nests[1] = naive_of(c).tree.nests[1];
    EXPECT_FALSE(t_written(fused));
    EXPECT_TRUE(t_written(unfused));
}

TEST(Fuse, IllegalWithAReason) {
    const Computation c = make_matmul_epilogue(64, 64, 16, kBiasRelu);
    looptune::TileSchedule s;
    const Program tiled =
        apply_all(naive_of(c), looptune::tile_actions(make_matmul(64, 64, 16), s));
    auto reason = [](const Program &p) {
        const char *why = why_illegal(p, Action::Fuse);
        return std::string(why ? why : "legal");
    };
    // At k and below, the reduction is not complete.
    EXPECT_NE(reason(at(tiled, 0, 2)).find("reduction"), std::string::npos);
    EXPECT_NE(reason(at(tiled, 0, 4)).find("reduction"), std::string::npos);
    // The epilogue nest is the last one: nothing follows it.
    EXPECT_EQ(reason(at(tiled, 1, 0)), "no nest follows this one");
    // Fused once, the nests share loops.
    const Program fused = apply(at(tiled, 0, 1), Action::Fuse);
    EXPECT_EQ(reason(at(fused, 0, 0)), "the nest shares loops with another nest already");
    EXPECT_EQ(reason(at(fused, 0, 3)), "the nest shares loops with another nest already");
    // Loops below the shared ones still move; the shared ones do not.
    EXPECT_TRUE(is_legal(at(fused, 0, 3), Action::SwapUp));
    EXPECT_FALSE(is_legal(at(fused, 0, 2), Action::SwapUp));
    EXPECT_FALSE(is_legal(at(fused, 1, 1), Action::Split2));
    EXPECT_TRUE(is_legal(at(fused, 1, 2), Action::Split2));
    // B packed under the producer's m blocks (tests/pack_fuse_test.cpp), not in the epilogue.
    EXPECT_TRUE(is_legal(at(fused, 0, 0), Action::Pack));
    EXPECT_FALSE(is_legal(at(fused, 1, 2), Action::Pack));
    EXPECT_FALSE(is_legal(at(fused, 0, 0), Action::Parallel));

    // A consumer that reads the output at another element (a transpose) stays where it is.
    Computation tr = make_matmul(32, 32, 8);
    tr.stmts[1].value.access.index = {Affine::of_var(2), Affine::of_var(0)};
    tr.validate();
    EXPECT_EQ(reason(at(naive_of(tr), 0, 0)),
              "the next nest writes another element than the one it reads");
    // A consumer that reduces: not an epilogue.
    Computation red = make_matmul(32, 32, 8);
    red.tensors[3].shape = {32};
    red.stmts[1] = {Access{3, {Affine::of_var(0)}}, ReduceKind::Sum, red.stmts[1].value};
    red.validate();
    EXPECT_NE(reason(at(naive_of(red), 0, 0)).find("reduces"), std::string::npos);
}

// A hand-written epilogue over its own variables (i, j): fuse renames them to the producer's.
TEST(Fuse, RenamesTheConsumersVariables) {
    Computation c = make_matmul_epilogue(24, 40, 8, Epilogue{true, Activation::Relu, true});
    c.vars.push_back({"i", 24});
    c.vars.push_back({"j", 40});
    const int i = 3, j = 4;
    std::function<void(Expr &)> rename = [&](Expr &e) {
        if (e.op == OpKind::Read)
            for (Affine &f : e.access.index)
                for (auto &term : f.terms)
                    term.var = term.var == 0 ? i : term.var == 2 ? j : term.var;
        for (Expr &a : e.args) rename(a);
    };
    rename(c.stmts[1].value);
    c.stmts[1].out.index = {Affine::of_var(i), Affine::of_var(j)};
    c.validate();
    const Program p = apply(at(apply(at(naive_of(c), 0, 0), Action::Split8), 0, 0), Action::Fuse);
    EXPECT_EQ(p.computation().stmt_vars(1), (std::vector<int>{0, 2}));
    expect_verified(p);
}

// Random legal sequences of the `layout` space (which has `fuse`) from mm+epilogue nests, some
// from a tiled start: every result verified, and `fuse` taken in some of them.
TEST(Fuse, RandomSequencesVerify) {
    std::mt19937_64 rng(40);
    const ActionSpace space = ActionSpace::preset("layout");
    const std::vector<Epilogue> epilogues = {kBiasRelu,
                                             {true, Activation::Gelu, true},
                                             {true, Activation::GeluTanh, false},
                                             {false, Activation::None, true}};
    int fused = 0;
    for (int trial = 0; trial < 24; ++trial) {
        const auto &ext = tests::awkward_extents();
        auto draw = [&] { return ext[std::uniform_int_distribution<size_t>(3, 11)(rng)]; };
        const Computation c = make_matmul_epilogue(draw(), draw(), draw(), epilogues[trial % 4]);
        Program p = naive_of(c);
        if (trial % 2)  // a tile of 4 rows, k above it; every other one fused under m
            for (Action a : {Action::Split4, Action::Down, Action::SwapDown, Action::Down})
                if (is_legal(p, a)) p = apply(p, a);
        if (trial % 4 == 1 && is_legal(at(p, 0, 0), Action::Fuse))
            p = apply(at(p, 0, 0), Action::Fuse);
        std::vector<Action> taken;
        p = tests::random_walk(p, rng, 24, space, &taken);
        for (const auto &n : p.tree.nests) fused += n.shared > 0;
        SCOPED_TRACE(fmt::format("{}: {}", c.name, fmt::join(action_names(taken), ",")));
        expect_verified(p);
    }
    EXPECT_GT(fused, 0);
}

TEST(Fuse, InTheLayoutSpaceOnly) {
    EXPECT_EQ(ActionSpace::preset("full").index_of(Action::Fuse), -1);
    EXPECT_EQ(ActionSpace::preset("full").size(), size_t(17));
    EXPECT_EQ(ActionSpace::preset("layout").index_of(Action::Fuse), 19);
    // threads.policy's space keeps its 20 outputs: fuse is not among them.
    EXPECT_EQ(ActionSpace::preset("threads").index_of(Action::Fuse), -1);
    EXPECT_EQ(ActionSpace::preset("threads").size(), size_t(20));
    EXPECT_EQ(parse_action("fuse"), Action::Fuse);
}

// The seeds of a matmul with an epilogue are the matmul's tiles, each fused at the innermost
// legal level (under the loops outside the reduction).
TEST(Fuse, SeedsFuseTheEpilogue) {
    const Computation c =
        make_matmul_epilogue(128, 128, 64, Epilogue{true, Activation::Gelu, false});
    const auto seeds = looptune::tune_seeds(c, looptune::kSeedSteps, ActionSpace::preset("full"));
    ASSERT_FALSE(seeds.empty());
    int with_fuse = 0;
    for (const auto &s : seeds) {
        const Program p = apply_all(naive_of(c), s.actions);
        if (s.actions.back() != Action::Fuse) continue;
        ++with_fuse;
        EXPECT_GT(p.tree.nests[0].shared, 0) << s.name;
        // Innermost: right above the first loop over the reduction variable k.
        EXPECT_EQ(p.tree.nests[0].loops[size_t(p.tree.nests[0].shared)].var, 1) << s.name;
    }
    EXPECT_GT(with_fuse, 0);
    expect_verified(apply_all(naive_of(c), seeds.front().actions));
}
