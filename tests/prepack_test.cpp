// Packs of constant inputs split off into a `prepare` program run once (looptool/actions/
// prepack.h): prepare then run computes what the schedule computes, in the interpreter and in
// the JIT's kernels, for conv tiles (W packed whole and block by block), strided and padded
// convs' seeds, a matmul's packed B, and random action sequences after a pack; the environment
// and compare measure it under their own keys and names.
#include <gtest/gtest.h>

#include <random>

#include "env/environment.h"
#include "experiments/compare.h"
#include "looptool/actions/prepack.h"
#include "looptool/check/prepacked.h"
#include "looptool/check/verify.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

using tests::apply_all;
using tests::naive_of;

// The JIT's prepare then run on random inputs, against the reference of p's computation.
::testing::AssertionResult kernels_match(const Program &p, const Prepacked &s) {
    Buffers got = make_buffers(*p.comp, 5);
    const Reference want = compute_reference(*p.comp, got);
    fill_non_inputs(*p.comp, got, std::numeric_limits<float>::quiet_NaN());
    add_packed_buffers(s, got);
    run_prepacked_kernels(tests::shared_jit(), s, got);
    drop_packed_buffers(s, got);
    const Comparison cmp = compare_outputs(*p.comp, want, got);
    if (cmp.ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << cmp.first_mismatch << "\n" << dump(p, true);
}

// The split of p with W constant, checked: prepare holds only the copies, run none, and both
// the interpreter and the kernels compute the reference. Returns whether p had a pack of W.
bool expect_split_matches(const Program &p) {
    const std::optional<Prepacked> s = split_prepacked(p, {"W"});
    if (!s) return false;
    const Computation &run = *s->run.comp;
    EXPECT_EQ(s->packed, std::vector<std::string>{"W_packed"});
    EXPECT_EQ(run.tensors[p.comp->num_buffers()].kind, TensorKind::Input);
    EXPECT_EQ(run.tensor_index("W_packed"), int(p.comp->num_buffers()));
    EXPECT_EQ(s->prepare.tree.nests.size(), 1u);
    EXPECT_EQ(s->run.tree.nests.size() + 1, p.tree.nests.size());
    EXPECT_EQ(s->prepare.comp->num_buffers(), run.num_buffers());
    const Comparison cmp = verify_prepacked_schedule(p, *s);
    EXPECT_TRUE(cmp.ok) << cmp.first_mismatch << "\n" << dump(p, true);
    EXPECT_TRUE(kernels_match(p, *s));
    return true;
}

}  // namespace

// Conv tiles with W packed: whole before the nest (batch 2) and block by block inside the
// output-channel blocks (batch 1, Nest::shared), where run then reads all of P.
TEST(Prepack, ConvTilesWithWPackedSplitAndMatch) {
    for (int64_t batch : {2, 1}) {
        auto conv = std::make_shared<Computation>(make_conv2d(batch, 32, 6, 12, 64, 3, 3));
        int split = 0, shared = 0;
        for (int tm : {32, 64, 16}) {
            const looptune::ConvTileSchedule s{tm, 8, "mh", false, true, true};
            const Program p =
                apply_all(Program::naive(conv), looptune::conv_tile_actions(*conv, s));
            SCOPED_TRACE(s.name());
            shared += p.tree.nests[0].shared > 0;
            split += expect_split_matches(p);
        }
        EXPECT_EQ(split, 3);
        EXPECT_EQ(shared > 0, batch == 1);
    }
}

// Nothing to prepare: no pack, or a pack of an input not declared constant.
TEST(Prepack, NoSplitWithoutAPackOfAConstantInput) {
    auto conv = std::make_shared<Computation>(make_conv2d(1, 8, 6, 12, 32, 3, 3));
    EXPECT_FALSE(split_prepacked(Program::naive(conv), {"W"}));
    const looptune::ConvTileSchedule s{16, 8, "mh", false, true, true};
    const Program p = apply_all(Program::naive(conv), looptune::conv_tile_actions(*conv, s));
    EXPECT_FALSE(split_prepacked(p, {"X"}));
    EXPECT_FALSE(split_prepacked(p, {}));
    EXPECT_TRUE(split_prepacked(p, {"X", "W"}));
}

// A constant input the computation does not have, or one that is not an input, is an error.
TEST(Prepack, NamesThatAreNotInputsAreErrors) {
    auto conv = std::make_shared<Computation>(make_conv2d(1, 8, 6, 12, 32, 3, 3));
    const Program p = Program::naive(conv);
    EXPECT_THROW(split_prepacked(p, {"Wt"}), Error);
    EXPECT_THROW(split_prepacked(p, {"Y"}), Error);
    try {
        check_constant_inputs(*conv, {"Y"});
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("not an input"), std::string::npos) << e.what();
    }
}

// The seeds of strided and padded convs (the layers of the strided set): each one that packs W
// splits, and prepare then run matches the reference.
TEST(Prepack, StridedAndPaddedConvSeedsSplitAndMatch) {
    int split = 0;
    for (const Computation &c : {make_padded_conv2d(1, 16, 14, 14, 32, 3, 3, 2, 1),
                                 make_strided_conv2d(1, 32, 14, 14, 64, 1, 1, 2),
                                 make_padded_conv2d(1, 8, 9, 9, 32, 3, 3, 1, 1)}) {
        const auto seeds =
            looptune::tune_seeds(c, looptune::kSeedSteps, ActionSpace::preset("full"));
        for (const auto &seed : seeds) {
            SCOPED_TRACE(c.name + " " + seed.name);
            split += expect_split_matches(apply_all(naive_of(c), seed.actions));
        }
    }
    EXPECT_GE(split, 3);
}

// Random action sequences after a pack of the constant input (further packs, splits, swaps,
// merges, flattens of the `layout` space): every state's split computes the original, in the
// interpreter and the kernels; so do random sequences from a conv tile with W packed.
TEST(Prepack, RandomSequencesAfterAPackSplitAndMatch) {
    std::mt19937_64 rng(23);
    const ActionSpace space = ActionSpace::preset("layout");
    int split = 0;
    for (int i = 0; i < 24; ++i) {
        auto mm = std::make_shared<Computation>(make_matmul(9 + i % 13, 64, 16 + i % 7));
        // m blocks outermost: B is invariant under them (n, m, k, m', n': its panels).
        Program p = apply_all(naive_of(*mm), {Action::Split8, Action::Down, Action::SwapDown,
                                              Action::Down, Action::Split32, Action::SwapUp,
                                              Action::SwapUp, Action::SwapUp, Action::Down});
        p = tests::random_walk(apply(p, Action::Pack), rng, 10, space);
        const std::optional<Prepacked> s = split_prepacked(p, {"B"});
        if (!s) continue;
        ++split;
        const Comparison cmp = verify_prepacked_schedule(p, *s);
        EXPECT_TRUE(cmp.ok) << cmp.first_mismatch << "\n" << dump(p, true);
        EXPECT_TRUE(kernels_match(p, *s));
    }
    EXPECT_GE(split, 12);
    auto conv = std::make_shared<Computation>(make_conv2d(1, 16, 6, 10, 32, 3, 3));
    const looptune::ConvTileSchedule s{16, 8, "mh", false, true, true};
    const Program tile = apply_all(Program::naive(conv), looptune::conv_tile_actions(*conv, s));
    for (int i = 0; i < 12; ++i) expect_split_matches(tests::random_walk(tile, rng, 8, space));
}

// The environment measures a split's run alone, under a key of its own, verifying it; its
// verify() runs prepare then run. Per call and prepacked figures are both measured.
TEST(Prepack, EnvironmentMeasuresAndVerifiesTheSplit) {
    auto conv = std::make_shared<Computation>(make_conv2d(1, 32, 10, 16, 64, 3, 3));
    const looptune::ConvTileSchedule s{32, 8, "mh", false, true, true};
    const Program p = apply_all(Program::naive(conv), looptune::conv_tile_actions(*conv, s));
    looptune::EnvConfig cfg;
    cfg.action_space = "full";
    cfg.verify = true;
    cfg.constant_inputs = {"W"};
    looptune::Environment env(cfg);
    env.reset(Program::naive(conv));
    const int64_t before = env.counters().measurements;  // the naive nest's
    looptune::StepInfo info;
    EXPECT_GT(env.evaluate(p, &info), 0);
    EXPECT_TRUE(info.measured && !info.from_cache);
    EXPECT_TRUE(env.verify(p).ok);
    looptune::StepInfo again;  // measured afresh, not the cached figure
    env.measure_again(p, &again);
    EXPECT_FALSE(again.from_cache);
    EXPECT_EQ(env.counters().measurements, before + 2);
    env.set_constant_inputs({});
    looptune::StepInfo per_call;
    EXPECT_GT(env.evaluate(p, &per_call), 0);
    EXPECT_FALSE(per_call.from_cache);  // not the prepacked figure
    EXPECT_TRUE(env.verify(p).ok);
    cfg.constant_inputs = {"V"};
    looptune::Environment bad(cfg);
    EXPECT_THROW(bad.reset(Program::naive(conv)), Error);
}

// compare refuses a prepacked method without --const, and one of a library.
TEST(Prepack, CompareRefusesPrepackedMethodsItCannotRun) {
    looptune::CompareConfig c;
    c.dataset_dir = "/nonexistent";
    c.out_dir = ::testing::TempDir() + "/prepack_compare";
    c.plots = false;
    c.methods = {"tile-prepacked"};
    try {
        looptune::run_compare(c);
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("--const"), std::string::npos) << e.what();
    }
    c.constant_inputs = {"W"};
    c.methods = {"onednn-conv-best-prepacked"};
    try {
        looptune::run_compare(c);
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("unknown method"), std::string::npos) << e.what();
    }
}
