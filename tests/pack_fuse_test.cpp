// `pack` and `fuse` together (docs/actions.md) on a matmul with bias and GELU: a packed block's
// copy, the matmul and its epilogue sharing loops as a chain (attached_nests), the loop tree
// before and after as text, legality, and every program checked against the original
// computation's reference (the JIT and the scheduled interpreter), random action sequences with
// both actions included.
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
#include "looptool/ir/nest_chain.h"
#include "looptool/jit/jit.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

using tests::apply_all;
using tests::at;
using tests::naive_of;

// p computes what `original` computes: the JIT's kernel and the interpreter, on the original's
// buffers (a packed copy is the kernel's own).
void expect_matches(const Program &p, const Computation &original) {
    ASSERT_TRUE(same_storage(*p.comp, original));
    Buffers in = make_buffers(original, 11);
    const Reference want = compute_reference(original, in);
    Buffers got = in;
    fill_non_inputs(original, got, std::numeric_limits<float>::quiet_NaN());
    tests::shared_jit().compile(p).fn(got.pointers().data(), nullptr);
    Comparison c = compare_outputs(original, want, got, 1.0);
    EXPECT_TRUE(c.ok) << "JIT: " << c.first_mismatch << "\n" << dump(p, false);
    Buffers run = in;
    run_schedule(p, run);
    c = compare_outputs(original, want, run, 1.0);
    EXPECT_TRUE(c.ok) << "interpreter: " << c.first_mismatch << "\n" << dump(p, false);
}

const Epilogue kBiasGelu{true, Activation::Gelu, false};

// A matmul tile of `c`'s sizes (its epilogue nest left as generated).
Program tiled(const Computation &c, looptune::TileSchedule s) {
    s.vectorize_write = false;
    const int64_t m = c.vars[0].extent, k = c.vars[1].extent, n = c.vars[2].extent;
    return apply_all(naive_of(c), looptune::tile_actions(make_matmul(m, n, k), s));
}

// Whether p has a packed block's copy, and a nest sharing loops with its epilogue.
bool packed(const Program &p) { return p.comp->tensor_index("B_packed") >= 0; }
bool fused(const Program &p) {
    for (const Nest &n : p.tree.nests)
        if (n.shared > 0 &&
            p.comp->tensors[size_t(p.comp->stmts[size_t(n.stmts[0])].out.tensor)].kind !=
                TensorKind::Scratch)
            return true;
    return false;
}

}  // namespace

// Which nest runs which inside its loops: the nearest later one whose own loops reach there.
TEST(PackFuse, AttachedNestsFollowTheSharedLoops) {
    auto tree = [](std::vector<int> shared) {
        LoopTree t;
        for (int s : shared) t.nests.push_back(Nest{std::vector<Loop>(4), {0}, s});
        return t;
    };
    auto pairs = [](const std::vector<Attached> &v) {
        std::vector<std::pair<int, int>> out;
        for (const Attached &a : v) out.push_back({a.nest, a.depth});
        return out;
    };
    using P = std::vector<std::pair<int, int>>;
    // A copy sharing 1 loop, its user 2 with the epilogue: the epilogue runs both.
    EXPECT_EQ(pairs(attached_nests(tree({1, 2, 0}), 2)), (P{{0, 1}, {1, 2}}));
    EXPECT_EQ(pairs(attached_nests(tree({1, 2, 0}), 1)), P{});
    // A copy sharing 2, its user 1: the user runs the copy below its own first loop.
    EXPECT_EQ(pairs(attached_nests(tree({2, 1, 0}), 2)), (P{{1, 1}}));
    EXPECT_EQ(pairs(attached_nests(tree({2, 1, 0}), 1)), (P{{0, 2}}));
    EXPECT_EQ(pairs(attached_nests(tree({0, 1, 0}), 2)), (P{{1, 1}}));
}

// The 4x64 tile with column panels outermost, B's k x 64 panels packed under the m blocks (the
// copy shares n with the matmul), then the epilogue fused under the m blocks: it runs on each
// 4x64 tile, the copy once per panel.
TEST(PackFuse, FuseAfterPackTreeBeforeAndAfter) {
    const Computation c = make_matmul_epilogue(16, 128, 32, kBiasGelu);
    looptune::TileSchedule s{4, 64, 0, "nm"};
    s.pack = true;
    const Program p = tiled(c, s);
    const std::string kGelu =
        "((T[m, 64*n_o+n_i] + Bias[64*n_o+n_i]) * 0.5) * "
        "(1 + erf(((T[m, 64*n_o+n_i] + Bias[64*n_o+n_i]) * 0.70710677)))";
    EXPECT_EQ(dump(p, false),
              "for n_o in 2 : L0 [shared with the next nest]\n"
              " for k in 32 : L1\n"
              "  for n_i in 64 : L2 [vectorize]\n"
              "   B_packed[n_o, k, n_i] = B[k, 64*n_o+n_i]\n"
              "for n_o in 2 : L3\n"
              " for m in 4 : L4\n"
              "  for k in 32 : L5\n"
              "   for m' in 4 : L6 [unroll]\n"
              "    for n_i in 64 : L7 [vectorize]\n"
              "     T[m, 64*n_o+n_i] += A[m, k] * B_packed[n_o, k, n_i]\n"
              "for m in 16 : L8\n"
              " for n_o in 2 : L9\n"
              "  for n_i in 64 : L10\n"
              "   C[m, 64*n_o+n_i] = " +
                  kGelu + "\n");
    const Program f = apply(at(p, 1, 1), Action::Fuse);
    EXPECT_EQ(f.cursor, p.tree.flat({1, 1}));
    EXPECT_EQ(dump(f, false),
              "for n_o in 2 : L0 [shared with the next nest]\n"
              " for k in 32 : L1\n"
              "  for n_i in 64 : L2 [vectorize]\n"
              "   B_packed[n_o, k, n_i] = B[k, 64*n_o+n_i]\n"
              "for n_o in 2 : L3 [shared with the next nest]\n"
              " for m in 4 : L4 [shared with the next nest]\n"
              "  for k in 32 : L5\n"
              "   for m' in 4 : L6 [unroll]\n"
              "    for n_i in 64 : L7 [vectorize]\n"
              "     T[m, 64*n_o+n_i] += A[m, k] * B_packed[n_o, k, n_i]\n"
              "for n_o in 2 : L8\n"
              " for m in 4 : L9\n"
              "  for m' in 4 : L10 [unroll]\n"
              "   for n_i in 64 : L11 [vectorize]\n"
              "    C[m, 64*n_o+n_i] = " +
                  kGelu + "\n");
    expect_matches(p, c);
    expect_matches(f, c);
    // Packing the fused program is the same program.
    s.pack = false;
    const Program fused_first = apply(at(tiled(c, s), 0, 1), Action::Fuse);
    ASSERT_TRUE(is_legal(fused_first, Action::Pack)) << why_illegal(fused_first, Action::Pack);
    const Program packed_after = apply(fused_first, Action::Pack);
    EXPECT_TRUE(packed_after.same_as(f)) << dump(packed_after, false);
    expect_matches(packed_after, c);
}

// A k block outside the m blocks: the copy shares n and the k block, the epilogue only n (the
// reduction is complete only there), so the matmul runs the copy inside its own loop.
TEST(PackFuse, FuseAboveAPackedKBlock) {
    const Computation c = make_matmul_epilogue(24, 128, 96, kBiasGelu);
    looptune::TileSchedule s{4, 64, 32, "nkm"};
    s.pack = true;
    const Program p = tiled(c, s);
    ASSERT_EQ(p.tree.nests[0].shared, 2) << dump(p, true);
    EXPECT_FALSE(is_legal(at(p, 1, 1), Action::Fuse));  // under the k block
    const Program f = apply(at(p, 1, 0), Action::Fuse);
    EXPECT_EQ(f.tree.nests[1].shared, 1);
    expect_matches(f, c);
    // Tails in every tile dimension and a whole copy of B (m blocks outermost).
    const Computation odd = make_matmul_epilogue(37, 70, 19, kBiasGelu);
    looptune::TileSchedule t{8, 32, 0, "mn"};
    t.pack = true;
    const Program q = tiled(odd, t);
    ASSERT_EQ(q.tree.nests[0].shared, 0);
    expect_matches(apply(at(q, 1, 1), Action::Fuse), odd);
}

// A projection wide enough for B's packed panels (n >= 1024): tune's seed of that tile ends
// with `fuse` under the m blocks, so the epilogue runs on the tile beside the packed copy.
TEST(PackFuse, TheWideProjectionSeedFusesUnderPackedPanels) {
    const Computation c = make_matmul_epilogue(32, 1024, 64, kBiasGelu);
    const auto seeds = looptune::tune_seeds(c, looptune::kSeedSteps, ActionSpace::preset("full"));
    const auto s = std::find_if(seeds.begin(), seeds.end(), [](const looptune::TuneSeed &t) {
        return t.name == "tile 4x64 nm pack fused";
    });
    ASSERT_NE(s, seeds.end());
    const Program p = apply_all(naive_of(c), s->actions);
    EXPECT_TRUE(packed(p) && fused(p)) << dump(p, false);
    expect_matches(p, c);
}

TEST(PackFuse, IllegalWithAReason) {
    const Computation c = make_matmul_epilogue(16, 128, 32, kBiasGelu);
    looptune::TileSchedule s{4, 64, 0, "nm"};
    s.pack = true;
    const Program f = apply(at(tiled(c, s), 1, 1), Action::Fuse);
    auto reason = [](const Program &p, Action a) {
        const char *why = why_illegal(p, a);
        return std::string(why ? why : "legal");
    };
    EXPECT_EQ(reason(at(f, 2, 2), Action::Pack), "the nest shares loops with the nest before it");
    EXPECT_EQ(reason(at(f, 0, 0), Action::Pack),
              "the loop belongs to the copy nest of a packed block");
    EXPECT_EQ(reason(at(f, 1, 2), Action::Fuse), "the nest shares loops with another nest already");
    EXPECT_EQ(reason(at(f, 1, 0), Action::SwapDown),
              "the loop is shared with the copy nest of a packed block");
    EXPECT_EQ(reason(at(f, 1, 1), Action::Split2), "the loop is shared with a fused nest");
    EXPECT_EQ(reason(at(f, 2, 1), Action::Split2), "the loop is shared with a fused nest");
    EXPECT_FALSE(is_legal(at(f, 1, 0), Action::Parallel));
    EXPECT_FALSE(is_legal(at(f, 1, 3), Action::Flatten));
    // The loops below the shared ones still change.
    EXPECT_TRUE(is_legal(at(f, 1, 3), Action::SwapUp));
    EXPECT_TRUE(is_legal(at(f, 2, 3), Action::Split16));
}

// Random legal sequences of the `layout` space (pack and fuse among them) from mm+bias+GELU
// nests, from the naive nest, a tile and a packed tile: every result verified, and some hold
// a packed block and a fused epilogue at once.
TEST(PackFuse, RandomSequencesWithBothActionsVerify) {
    std::mt19937_64 rng(41);
    const ActionSpace space = ActionSpace::preset("layout");
    int both = 0;
    for (int trial = 0; trial < 30; ++trial) {
        const auto &ext = tests::awkward_extents();
        auto draw = [&] { return ext[std::uniform_int_distribution<size_t>(3, 11)(rng)]; };
        const Computation c = make_matmul_epilogue(draw(), draw(), draw(), kBiasGelu);
        Program p = naive_of(c);
        looptune::TileSchedule s{4, 16, 0, trial % 2 ? "nm" : "mn"};
        s.pack = trial % 3 == 1;
        if (trial % 3 != 0) {
            try {
                p = tiled(c, s);
            } catch (const Error &) {
                p = naive_of(c);  // a split the sizes do not allow
            }
        }
        std::vector<Action> taken;
        p = tests::random_walk(p, rng, 16, space, &taken);
        // Then fuse and pack where they are legal, at the first loop that allows them.
        for (Action a : {Action::Fuse, Action::Pack})
            for (int l = 0; l < p.tree.num_loops(); ++l) {
                p.cursor = l;
                if (!is_legal(p, a)) continue;
                p = apply(p, a);
                taken.push_back(a);
                break;
            }
        both += packed(p) && fused(p);
        SCOPED_TRACE(fmt::format("{}: {}", c.name, fmt::join(action_names(taken), ",")));
        expect_matches(p, c);
    }
    EXPECT_GT(both, 3);
}
