// tune's seed rules (search/seeds.h), table by table: each rule seeds its schedule wherever it
// applies, the seed's kernel matches the reference, and no seed comes from a rule that does not
// apply.
#include "search/seeds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "looptool/check/interpreter.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
using namespace looptune;

namespace {

const ActionSpace &full() {
    static const ActionSpace s = ActionSpace::preset("full");
    return s;
}

std::vector<std::string> seed_names(const Computation &c, bool row_band = false) {
    std::vector<std::string> names;
    for (const TuneSeed &s : tune_seeds(c, kSeedSteps, full(), row_band)) names.push_back(s.name);
    return names;
}

bool contains(const std::vector<std::string> &v, const std::string &x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

/// Matmul shapes the tests look through for one where a rule applies; small enough for the
/// reference interpreter.
std::vector<MatmulShape> matmul_candidates() {
    std::vector<MatmulShape> out;
    for (int64_t m : {1, 4, 8, 32, 40, 512})
        for (int64_t n : {17, 64, 80, 1024, 1030})
            for (int64_t k : {64, 256, 600, 1024, 1040, 2048}) out.push_back({m, n, k});
    out.push_back({512, 512, 512});
    return out;
}

/// The first candidate shape where `rule` applies and its schedule is expressible.
std::optional<MatmulShape> shape_for(const MatmulSeedRule &rule) {
    for (const MatmulShape &s : matmul_candidates()) {
        if (!rule.applies(s)) continue;
        try {
            tile_actions(make_matmul(s.m, s.n, s.k), rule.schedule(s));
            return s;
        } catch (const Error &) {}
    }
    return std::nullopt;
}

}  // namespace

TEST(Seeds, EveryMatmulRuleSeedsAVerifiedKernelWhereItApplies) {
    const auto jit = Jit::create();
    for (const MatmulSeedRule &rule : matmul_seed_rules()) {
        SCOPED_TRACE(rule.why);
        const auto s = shape_for(rule);
        ASSERT_TRUE(s) << "no test shape where the rule applies; add one to matmul_candidates()";
        const TileSchedule t = rule.schedule(*s);
        const Computation c = make_matmul(s->m, s->n, s->k);
        EXPECT_TRUE(contains(seed_names(c), "tile " + t.name())) << t.name();
        EXPECT_TRUE(tests::matches_reference(*jit, tests::tiled_matmul(s->m, s->n, s->k, t)));
    }
}

TEST(Seeds, EveryMatmulSeedComesFromARuleThatApplies) {
    for (const MatmulShape &s : matmul_candidates()) {
        if (s.n == 1) continue;
        std::vector<std::string> from_rules;
        for (const MatmulSeedRule &rule : matmul_seed_rules())
            if (rule.applies(s)) from_rules.push_back("tile " + rule.schedule(s).name());
        for (const std::string &name : seed_names(make_matmul(s.m, s.n, s.k)))
            EXPECT_TRUE(contains(from_rules, name))
                << name << " on " << s.m << "x" << s.n << "x" << s.k;
    }
}

TEST(Seeds, AGemvIsSeededWithDotProductsOnly) {
    const std::vector<std::string> names = seed_names(make_matmul(64, 1, 1216));
    EXPECT_EQ(names, (std::vector<std::string>{"dot k64", "dot k16"}));
}

TEST(Seeds, EveryConvRuleSeedsItsTileWhereItAppliesAndNowhereElse) {
    const auto jit = Jit::create();
    const std::vector<Computation> convs = {
        make_conv2d(1, 16, 16, 16, 32, 3, 3), make_conv2d(1, 64, 34, 34, 32, 3, 3),
        make_conv2d(1, 32, 9, 9, 64, 3, 3), make_conv2d(1, 16, 20, 20, 16, 1, 1)};
    for (const ConvSeedRule &rule : conv_seed_rules()) {
        SCOPED_TRACE(rule.why);
        bool seen = false;
        for (const Computation &c : convs) {
            const ConvShape s = *conv_shape(c);
            const std::vector<std::string> names = seed_names(c);
            const ConvTileSchedule t = rule.schedule(s);
            if (!rule.applies(s)) continue;
            std::vector<Action> actions;
            try {
                actions = conv_tile_actions(c, t);
            } catch (const Error &) {
                continue;  // not expressible for this layer
            }
            seen = true;
            EXPECT_TRUE(contains(names, "tile " + t.name())) << t.name();
            Program p = Program::naive(std::make_shared<const Computation>(c));
            for (Action a : actions) p = apply(p, a);
            EXPECT_TRUE(tests::matches_reference(*jit, p));
        }
        EXPECT_TRUE(seen) << "no test layer where the rule applies";
    }
}
