// Attention's matmuls (make_scores, make_context) in both head layouts: recognised as batched
// matmuls over two batch variables (so the tile seeds and the tile family apply), and every
// seed, tile schedule and random action sequence computes what the reference interpreter does.
#include <gtest/gtest.h>

#include <random>

#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

Program naive(const Computation &c) {
    return Program::naive(std::make_shared<const Computation>(c));
}

std::vector<Computation> attention_kinds(int64_t b, int64_t h, int64_t t, int64_t d) {
    std::vector<Computation> out;
    for (HeadLayout l : {HeadLayout::TokenMajor, HeadLayout::HeadsMajor}) {
        out.push_back(make_scores(b, h, t, d, l));
        out.push_back(make_context(b, h, t, d, l));
    }
    return out;
}

}  // namespace

TEST(Attention, TheKindsAreBatchedMatmulsInGeneratesForm) {
    const Computation s = make_scores(2, 3, 10, 8);
    EXPECT_EQ(s.name, "scores2_3_10_8");
    const auto r = generated_matmul(s);
    ASSERT_TRUE(r);
    EXPECT_EQ(s.vars[size_t(r->batch)].name, "b");
    EXPECT_EQ(s.vars[size_t(r->batch2)].name, "h");
    EXPECT_EQ(s.vars[size_t(r->m)].name, "i");
    EXPECT_EQ(s.vars[size_t(r->k)].name, "d");
    EXPECT_EQ(s.vars[size_t(r->n)].name, "j");
    EXPECT_EQ(s.tensors[size_t(r->a)].name, "Q");
    const Computation c = make_context(2, 3, 10, 8, HeadLayout::HeadsMajor);
    EXPECT_EQ(c.name, "context2_3_10_8_hm");
    const auto rc = generated_matmul(c);
    ASSERT_TRUE(rc);
    EXPECT_EQ(c.vars[size_t(rc->k)].name, "j");
    EXPECT_EQ(c.vars[size_t(rc->n)].name, "d");
    for (const Computation &x : attention_kinds(1, 2, 5, 4)) {
        EXPECT_FALSE(generated_form(x)) << x.name;
        ASSERT_TRUE(looptune::matmul_shape(x)) << x.name;
    }
    EXPECT_EQ(looptune::matmul_shape(s)->k, 8);
    EXPECT_THROW(make_scores(1, 0, 4, 4), Error);
    EXPECT_THROW(make_context(1, 12, 1 << 20, 64), Error);
}

// Q.K^T written by hand: other names and order, one statement, K's operand first: rewritten with
// the batches first and the same function.
TEST(Attention, HandWrittenScoresAreRecognised) {
    const Program file = parse_program(R"(looptool-program 1
name qk
var e 8
var t 9
var s 10
var g 3
tensor Q input 10 3 8
tensor K input 9 3 8
tensor A output 3 10 9
stmt A[g, s, t] += K[t, g, e] * Q[s, g, e]
nest 0
loop t 9 0
loop e 8 0
loop g 3 0
loop s 10 0
cursor 0
)");
    const auto g = generated_form(file.computation());
    ASSERT_TRUE(g);
    const auto r = generated_matmul(*g);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->batch, 0);
    EXPECT_EQ(r->batch2, -1);
    EXPECT_EQ(g->vars[size_t(r->k)].name, "e");
    auto jit = Jit::create();
    const Program start = tuning_start(file);
    EXPECT_TRUE(tests::matches_reference(*jit, start));
    for (const auto &seed : looptune::tune_seeds(*g, 200, ActionSpace::preset("full"))) {
        Program p = start;
        for (Action a : seed.actions) p = apply(p, a);
        EXPECT_TRUE(tests::matches_reference(*jit, p)) << seed.name;
    }
}

// Each seed and each member of the tile family keeps both batch loops outermost and computes
// what the naive nest does.
TEST(Attention, SeedsAndTileSchedulesVerify) {
    auto jit = Jit::create();
    for (const Computation &c : attention_kinds(2, 3, 20, 16)) {
        const Program start = naive(c);
        ASSERT_TRUE(tests::matches_reference(*jit, start)) << c.name;
        const auto r = *generated_matmul(c);
        const auto seeds = looptune::tune_seeds(c, 200, ActionSpace::preset("full"));
        ASSERT_FALSE(seeds.empty()) << c.name;
        for (const auto &seed : seeds) {
            Program p = start;
            for (Action a : seed.actions) p = apply(p, a);
            EXPECT_EQ(p.tree.nests[0].loops[0].var, r.batch) << c.name << " " << seed.name;
            EXPECT_EQ(p.tree.nests[0].loops[1].var, r.batch2) << c.name << " " << seed.name;
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << c.name << " " << seed.name;
        }
        int tiled = 0;
        for (const auto &s : looptune::schedule_family(20, 20, c.vars[size_t(r.k)].extent, true)) {
            std::vector<Action> actions;
            try {
                actions = looptune::tile_actions(c, s);
            } catch (const Error &) {
                continue;  // not expressible for this shape
            }
            Program p = start;
            for (Action a : actions) p = apply(p, a);
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << c.name << " " << s.name();
            if (++tiled == 6) break;
        }
        EXPECT_GT(tiled, 0) << c.name;
    }
}

// Q.K^T reads K along n with a stride: its seeds include B packed, whether the tile's columns
// divide the tokens (32) or leave a tail (37: K's tokens kept whole, K^T), and those compute the
// same, as do random action sequences after them; the context's V is contiguous along n, no
// pack added.
TEST(Attention, StridedKeysTakePackedSeeds) {
    auto jit = Jit::create();
    std::mt19937_64 rng(43);
    for (int64_t t : {32, 37}) {
        const Computation s = make_scores(1, 2, t, 16);
        int packed = 0;
        for (const auto &seed : looptune::tune_seeds(s, 200, ActionSpace::preset("full"))) {
            if (seed.name.find("pack") == std::string::npos) continue;
            ++packed;
            Program p = naive(s);
            for (Action a : seed.actions) p = apply(p, a);
            EXPECT_EQ(p.comp->tensors.back().name, "K_packed") << t << " " << seed.name;
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << t << " " << seed.name;
            p = tests::random_walk(p, rng, 12, ActionSpace::preset("layout"));
            EXPECT_TRUE(tests::matches_reference(*jit, p)) << t << " " << dump(p, false);
        }
        EXPECT_GE(packed, 3) << t;
    }
    for (const auto &seed :
         looptune::tune_seeds(make_context(1, 2, 32, 16), 200, ActionSpace::preset("full")))
        EXPECT_EQ(seed.name.find("pack"), std::string::npos) << seed.name;
}

// Random legal action sequences over both kinds in both layouts (the layout space: pack
// included), each verified against the reference, interpreted and compiled.
TEST(Attention, RandomActionSequencesVerify) {
    std::mt19937_64 rng(41);
    auto jit = Jit::create();
    const ActionSpace space = ActionSpace::preset("layout");
    for (int i = 0; i < 48; ++i) {
        const auto kinds = attention_kinds(1 + i % 2, 1 + i % 3, 3 + i % 7, 2 + i % 5);
        Program p = naive(kinds[size_t(i) % kinds.size()]);
        p.cursor = i % p.tree.num_loops();
        p = tests::random_walk(p, rng, 16, space);
        ASSERT_TRUE(verify_schedule(p).ok) << dump(p, false);
        ASSERT_TRUE(tests::matches_reference(*jit, p)) << dump(p, false);
    }
}

TEST(Attention, GenerateWritesThemAndTuneTakesTheirShapes) {
    tests::TempDir dir("attention");
    const auto paths = write_attention_dataset("scores", "1", "2|3,8,4", HeadLayout::HeadsMajor,
                                               dir.path.string());
    ASSERT_EQ(paths.size(), 2u);
    EXPECT_TRUE(load_program_file(paths[1]).computation() ==
                make_scores(1, 3, 8, 4, HeadLayout::HeadsMajor));
    EXPECT_EQ(write_attention_dataset("context", "1|2", "12,16,8", HeadLayout::TokenMajor,
                                      dir.path.string())
                  .size(),
              2u);
    EXPECT_THROW(write_attention_dataset("qkv", "1", "2,8,4", HeadLayout::TokenMajor, "x"), Error);
    EXPECT_THROW(write_attention_dataset("scores", "1", "2,8", HeadLayout::TokenMajor, "x"), Error);
    EXPECT_TRUE(computation_of_shape("t", "scores", {1, 12, 128, 64}) ==
                make_scores(1, 12, 128, 64));
    EXPECT_TRUE(computation_of_shape("t", "context", {2, 4, 9, 8}) == make_context(2, 4, 9, 8));
    EXPECT_THROW(computation_of_shape("t", "scores", {1, 12, 128}), Error);
}

// The CLI: generate writes them, tune takes their shapes, and bad options are an error line.
TEST(Attention, TheCliGeneratesAndTunesThem) {
    tests::TempDir dir("attention_cli");
    auto r = tests::run_cli(dir, "generate --kind context --dimA 2,8,4 --batch 1 --out ds");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(load_program_file(dir / "ds/context1_2_8_4").computation() ==
                make_context(1, 2, 8, 4));
    r = tests::run_cli(dir, "generate --kind scores --dimA 2,8 --out bad");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: --dimA '2,8': expected H_RANGE,T_RANGE,D_RANGE"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path / "bad"));
    r = tests::run_cli(dir, "generate --kind mm --dimA 4,4 --dimB 4,4 --layout bhtd --out bad");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--layout is for --kind scores and context"), std::string::npos) << r.err;
    r = tests::run_cli(dir, "tune --scores 1,2,16,8 --budget-s 0.2 --verify");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = tests::run_cli(dir, "tune --context 1,2,16");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: --context"), std::string::npos) << r.err;
}
