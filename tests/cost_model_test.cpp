// The cost model (tune/cost_model.h): its features read any schedule key, it learns a relation
// its features can express and says when it has learnt nothing, its file round-trips and a
// damaged one is refused; the guided search ranked by it still returns verified schedules no
// slower than the start, with fewer measurements.
#include "tune/cost_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"
#include "test_util.h"
#include "tune/guided_search.h"
#include "tune/ranked_rollout.h"

using namespace looptool;
using namespace looptune;
using looptool::tests::TempDir;

namespace {

/// Distinct schedules of an m x n x k matmul: the naive nest and random walks from it.
std::vector<std::string> schedule_keys(int64_t m, int64_t n, int64_t k, std::mt19937_64 &rng,
                                       size_t count) {
    std::set<std::string> keys;
    const Program start = tests::matmul_program(m, n, k);
    keys.insert(schedule_key(start));
    for (int tries = 0; keys.size() < count && tries < 50 * int(count); ++tries)
        keys.insert(schedule_key(tests::random_walk(start, rng, 12)));
    return {keys.begin(), keys.end()};
}

/// A made-up machine whose log GFLOPS is linear in a few features (a relation the model can
/// learn), with 2% noise; or, with `learnable` false, random GFLOPS.
double made_up_gflops(const std::string &key, std::mt19937_64 &rng, bool learnable) {
    std::uniform_real_distribution<double> u(0, 1);
    if (!learnable) return 1 + 100 * u(rng);
    const std::vector<std::string> &names = schedule_feature_names();
    const std::vector<double> f = schedule_features(key);
    auto at = [&](const std::string &n) {
        return f[size_t(std::find(names.begin(), names.end(), n) - names.begin())];
    };
    return 10 * std::exp(1.0 * at("inner_vec") + 0.3 * at("unroll_tile") - 0.15 * at("loops") +
                         0.1 * at("inner_span") + 0.02 * (u(rng) - 0.5));
}

std::vector<CostSample> made_up_samples(bool learnable, uint64_t seed, int shapes = 24) {
    std::mt19937_64 rng(seed);
    const std::vector<int64_t> sides = {16, 24, 32, 48, 64, 96};
    std::vector<CostSample> out;
    for (int s = 0; s < shapes; ++s) {
        const int64_t m = sides[rng() % sides.size()], n = sides[rng() % sides.size()],
                      k = sides[rng() % sides.size()];
        const std::string bench = fmt::format("mm{}_{}_{}_{}", m, n, k, s);
        for (const std::string &key : schedule_keys(m, n, k, rng, 15))
            out.push_back({bench, key, made_up_gflops(key, rng, learnable)});
    }
    return out;
}

const CostModel &learnt_model() {
    static const CostModel m = CostModel::fit(made_up_samples(true, 1), "test-machine");
    return m;
}

}  // namespace

TEST(CostModel, FeaturesReadEveryKeyAndRefuseMalformedOnes) {
    std::mt19937_64 rng(3);
    const size_t n = schedule_feature_names().size();
    for (const std::string &key : schedule_keys(37, 17, 100, rng, 30))
        EXPECT_EQ(schedule_features(key).size(), n) << key;
    const Program conv =
        Program::naive(std::make_shared<Computation>(make_conv2d(1, 8, 10, 10, 16, 3, 3)));
    EXPECT_EQ(schedule_features(schedule_key(conv)).size(), n);
    for (const char *bad : {"", "mm", "mm|m=4", "mm|m=4|N:0,4", "mm|m=4|Ns0:0,x,0",
                            "mm|m=4|Ns0:3,4,0", "mm|m=4|Q", "mm|m=-4|Ns0:0,4,0"})
        EXPECT_THROW(schedule_features(bad), Error) << bad;
}

TEST(CostModel, LearnsARelationItsFeaturesExpressAndRanksUnseenShapes) {
    const CostModel &m = learnt_model();
    EXPECT_GE(m.fit_quality().rows, kMinCostRows);
    EXPECT_GT(m.fit_quality().heldout_spearman, 0.9);
    // Shapes it was not fitted to: its scores order each one's schedules as the made-up machine
    // does.
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_bench;
    for (const CostSample &s : made_up_samples(true, 99, 4)) {
        by_bench[s.benchmark].first.push_back(m.score(s.schedule));
        by_bench[s.benchmark].second.push_back(s.gflops);
    }
    ASSERT_EQ(by_bench.size(), 4u);
    for (const auto &[name, v] : by_bench) EXPECT_GT(spearman(v.first, v.second), 0.85) << name;
}

TEST(CostModel, SaysWhenItLearntNothing) {
    const CostModel m = CostModel::fit(made_up_samples(false, 2), "test-machine");
    EXPECT_LT(std::abs(m.fit_quality().heldout_spearman), 0.3);
    EXPECT_THROW(CostModel::fit(made_up_samples(true, 2, 2), "test-machine"), Error);
}

TEST(CostModel, Spearman) {
    EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1);
    EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
    EXPECT_DOUBLE_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0);
    EXPECT_DOUBLE_EQ(spearman({1}, {1}), 0);
}

TEST(CostModel, FileRoundTripsAndADamagedOneIsRefused) {
    TempDir dir("cost_model");
    const CostModel &m = learnt_model();
    m.save(dir / "m.json");
    const CostModel back = CostModel::load(dir / "m.json");
    std::mt19937_64 rng(5);
    for (const std::string &key : schedule_keys(64, 32, 48, rng, 10))
        EXPECT_DOUBLE_EQ(back.score(key), m.score(key));
    EXPECT_EQ(back.machine(), "test-machine");
    const std::string good = tests::slurp(dir / "m.json");
    auto refused = [&](const std::string &text, const std::string &why) {
        tests::write(dir, "bad.json", text);
        try {
            CostModel::load(dir / "bad.json");
            ADD_FAILURE() << "loaded: " << why;
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
        }
    };
    refused("", "empty");
    refused(good.substr(0, good.size() / 2), "truncated");
    refused("{\"format\": \"something else\"}", "another format");
    std::string other = good;
    other.replace(other.find("log_volume"), 10, "log_volumX");
    refused(other, "other features");
    std::string nan = good;
    nan.replace(nan.find("\"weights\": ["), 12, "\"weights\": [\"x\", ");
    refused(nan, "a weight that is not a number");
    EXPECT_THROW(CostModel::load(dir / "missing.json"), Error);
}

TEST(CostModel, StoreRowsAreOneMachinesAndFitFromTheStore) {
    TempDir dir("cost_model_store");
    {
        auto store = MeasurementStore::open(dir / "s.sqlite");
        for (const CostSample &s : made_up_samples(true, 7)) {
            store->put(s.benchmark, s.schedule, "here", {s.gflops, 5, 0.01, 0});
            store->put(s.benchmark, s.schedule, "elsewhere", {1.0, 5, 0.01, 0});
        }
        EXPECT_EQ(store->rows("here").size(), store->rows("elsewhere").size());
        EXPECT_TRUE(store->rows("nowhere").empty());
    }
    const CostModel m = fit_cost_model_from_store(dir / "s.sqlite", "here");
    EXPECT_GT(m.fit_quality().heldout_spearman, 0.9);
    EXPECT_EQ(m.source(), dir / "s.sqlite");
    // The other machine's rows are all alike: nothing to rank by.
    const CostModel flat = fit_cost_model_from_store(dir / "s.sqlite", "elsewhere");
    EXPECT_EQ(flat.fit_quality().heldout_spearman, 0);
    EXPECT_THROW(fit_cost_model_from_store(dir / "s.sqlite", "nowhere"), Error);
    EXPECT_THROW(fit_cost_model_from_store(dir / "missing.sqlite", "here"), Error);
}

TEST(CostModel, RankedSeedsKeepTheFirstRule) {
    const Program start = tests::matmul_program(512, 1024, 2048);
    const std::vector<TuneSeed> all =
        tune_seeds(start.computation(), kSeedSteps, ActionSpace::preset("layout"));
    ASSERT_GT(all.size(), size_t(kRankedSeeds));
    const std::vector<TuneSeed> kept = ranked_seeds(all, start, learnt_model());
    ASSERT_EQ(kept.size(), size_t(kRankedSeeds));
    EXPECT_EQ(kept.front().name, all.front().name);
    for (size_t i = 2; i < kept.size(); ++i) {
        Program a = start, b = start;
        for (Action x : kept[i - 1].actions) a = apply(a, x);
        for (Action x : kept[i].actions) b = apply(b, x);
        EXPECT_GE(learnt_model().score(a), learnt_model().score(b));
    }
}

TEST(CostModel, RankedGuidedSearchIsVerifiedNeverSlowerThanTheStartWithFewerMeasurements) {
    const Policy policy = Policy::load(shipped_policy_path());
    for (auto [m, n, k] : {std::tuple{96, 17, 40}, std::tuple{64, 64, 48}}) {
        SCOPED_TRACE(fmt::format("{}x{}x{}", m, n, k));
        const Program start = tests::matmul_program(m, n, k);
        int64_t measurements[2] = {0, 0};
        for (bool ranked : {false, true}) {
            EnvConfig c = policy.env_config();
            c.verify = true;
            c.measure.min_time_s = 0.002;
            Environment env(c);
            GuidedConfig g;
            // A budget both searches spend on the seeds, which they measure whatever the
            // budget: the counts then compare what the ranking keeps, not how loaded the
            // machine is.
            g.budget_s = 0.01;
            g.rank = ranked ? &learnt_model() : nullptr;
            const GuidedResult r = guided_search(policy, env, start, g);
            Program replayed = start;
            for (Action a : r.actions) replayed = apply(replayed, a);
            EXPECT_EQ(schedule_key(replayed), schedule_key(r.best));
            EXPECT_TRUE(env.verify(r.best).ok);
            EXPECT_GE(r.best_gflops, r.base_gflops);
            EXPECT_GT(r.measurements, 0);
            measurements[ranked] = r.measurements;
        }
        EXPECT_LT(measurements[1], measurements[0]);
    }
}

TEST(CostModel, TuneRanksWithAModelAndSaysWhatIsWrongWithAFile) {
    TempDir dir("cost_model_cli");
    learnt_model().save(dir / "m.json");
    tests::write(dir, "bad.json", "{\"format\": \"looptune-cost-model\"");
    const std::string tune = "tune --matmul 24,40,16 --budget-s 0.3 --json ";
    tests::RunResult r = tests::run_cli(dir, tune + "--rank model --cost-model m.json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["rank"], "model");
    EXPECT_GT(j["measurements"].get<int64_t>(), 0);
    EXPECT_GE(j["gflops"].get<double>(), j["base_gflops"].get<double>());
    // (Fitted to a made-up machine: tune says so.)
    EXPECT_NE(r.err.find("another machine"), std::string::npos) << r.err;
    // --rank model: a missing or damaged file is an error naming it.
    for (const char *file : {"missing.json", "bad.json"}) {
        r = tests::run_cli(dir, tune + "--rank model --cost-model " + file);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(std::string("error: ") + file), std::string::npos) << r.err;
    }
    // --rank auto: a damaged file is passed over with a warning, a missing one silently.
    r = tests::run_cli(dir, tune + "--rank auto --cost-model bad.json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("warning: bad.json"), std::string::npos) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["rank"], "none");
    r = tests::run_cli(dir, tune + "--rank auto --cost-model missing.json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["rank"], "none");
    // cost-model fits to a store and refuses one with too few rows.
    r = tests::run_cli(dir, "cost-model --store none.sqlite --out x.json");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("none.sqlite"), std::string::npos) << r.err;
}
