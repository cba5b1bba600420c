// The guided search's finalists (tune/guided_finals.h): above one thread the candidates tune
// chooses among hold both sides of `parallel` of the policy's schedule and of the best measured,
// so neither a tiny matmul (one thread wins) nor a GEMV (two win) hangs on the policy's guess;
// the chosen kernel verifies. Which side wins is a measurement: docs/decisions.md, not here.
#include "tune/guided_finals.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "search/thread_variants.h"
#include "test_util.h"
#include "tune/guided_search.h"

using namespace looptool;
using namespace looptune;

namespace {

Environment threads_env(const Policy &policy, int threads) {
    EnvConfig c;
    c.threads = threads;
    c = policy.env_config(c);
    c.verify = true;  // every kernel compiled is checked against the reference
    c.measure.min_time_s = 0.002;
    return Environment(c);
}

/// Whether a finalist of `r` has the schedule `actions` reach from `start`.
bool offered(const GuidedResult &r, const Program &start, const std::vector<Action> &actions) {
    const std::string key = schedule_key(tests::apply_all(start, actions));
    return std::any_of(r.finalists.begin(), r.finalists.end(), [&](const GuidedFinalist &f) {
        return schedule_key(tests::apply_all(start, f.actions)) == key;
    });
}

/// The other side of `parallel` of `actions` from `start`, if there is one.
std::optional<std::vector<Action>> other_side(const Program &start,
                                              const std::vector<Action> &actions) {
    const Program p = tests::apply_all(start, actions);
    if (has_parallel(p)) return serial_path(start, actions);
    const auto more = parallel_actions(p, 2);
    if (!more) return std::nullopt;
    std::vector<Action> out = actions;
    out.insert(out.end(), more->begin(), more->end());
    return out;
}

}  // namespace

// A tiny matmul, a GEMV of a real model and a medium matmul on two threads: the greedy rollout's
// best and the chosen kernel are finalists beside their other side; the choice verifies.
TEST(GuidedFinals, OnTwoThreadsBothSidesOfTheChoiceAreMeasured) {
    const Policy policy = Policy::load(shipped_policy_path(2));
    for (auto [m, n, k] : {std::array<int64_t, 3>{8, 8, 8}, {64, 1, 1216}, {96, 128, 64}}) {
        Environment env = threads_env(policy, 2);
        const Program start = tests::matmul_program(m, n, k);
        SCOPED_TRACE(start.comp->name);
        GuidedConfig g;
        g.budget_s = 0.3;
        const GuidedResult r = guided_search(policy, env, start, g);
        EXPECT_TRUE(env.verify(r.best).ok);
        ASSERT_FALSE(r.finalists.empty());
        ASSERT_TRUE(offered(r, start, r.actions));
        for (const GuidedFinalist &f : r.finalists)  // a counterpart is measured, never cut
            if (f.found_by.ends_with(", parallel") || f.found_by.ends_with(", serial"))
                EXPECT_GT(f.gflops, 0) << f.found_by;
        std::vector<std::vector<Action>> of{r.actions};
        if (!r.greedy.best_actions.empty()) of.push_back(r.greedy.best_actions);
        for (const std::vector<Action> &a : of) {
            EXPECT_TRUE(offered(r, start, a));
            if (const auto other = other_side(start, a)) EXPECT_TRUE(offered(r, start, *other));
        }
        // The chosen kernel's figure is its finalist's.
        const auto chosen = std::find_if(r.finalists.begin(), r.finalists.end(), [&](auto &f) {
            return schedule_key(tests::apply_all(start, f.actions)) == schedule_key(r.best);
        });
        ASSERT_NE(chosen, r.finalists.end());
        EXPECT_EQ(chosen->gflops, r.best_gflops);
    }
}

// On one thread nothing is offered across `parallel`: no finalist is parallel.
TEST(GuidedFinals, OnOneThreadNoParallelCounterpart) {
    const Policy policy = Policy::load(shipped_policy_path(1));
    Environment env = threads_env(policy, 1);
    const Program start = tests::matmul_program(64, 1, 1216);
    GuidedConfig g;
    g.budget_s = 0.2;
    const GuidedResult r = guided_search(policy, env, start, g);
    for (const GuidedFinalist &f : r.finalists)
        EXPECT_FALSE(has_parallel(tests::apply_all(start, f.actions))) << f.found_by;
    EXPECT_TRUE(env.verify(r.best).ok);
}

// thread_counterparts() itself: nothing on one thread; above, the other side of each
// finalist, never the start's nor one already a finalist.
TEST(GuidedFinals, CounterpartsAreTheOtherSideOfTheBestFinalists) {
    const Program start = tests::matmul_program(64, 96, 48);
    const auto seeds = tune_seeds(start.computation(), kSeedSteps, ActionSpace::preset("full"));
    ASSERT_GE(seeds.size(), 2u);
    std::vector<SearchNode> nodes{{start, {}, 1.0, 0, "naive"}};
    for (size_t i = 0; i < 2; ++i)
        nodes.push_back({tests::apply_all(start, seeds[i].actions), seeds[i].actions,
                         10.0 - double(i), 0, seeds[i].name});
    PolicyTuneResult greedy;  // never improved on the start
    const Finals f = pick_finals(nodes, 2, std::nullopt, greedy, 0);
    EXPECT_TRUE(thread_counterparts(nodes, f, start, 1).empty());
    const std::vector<SearchNode> c = thread_counterparts(nodes, f, start, 2);
    ASSERT_EQ(c.size(), 2u);  // the start's is not offered
    for (size_t i = 0; i < c.size(); ++i) {
        EXPECT_EQ(c[i].origin, seeds[i].name + ", parallel");
        EXPECT_TRUE(has_parallel(c[i].program));
        EXPECT_EQ(schedule_key(tests::apply_all(start, c[i].path)), schedule_key(c[i].program));
        // Its own other side is the finalist it came from: nothing new.
        std::vector<SearchNode> both = nodes;
        both.push_back(c[i]);
        Finals g = f;
        g.take(both, both.size() - 1);
        for (const SearchNode &d : thread_counterparts(both, g, start, 2))
            EXPECT_NE(schedule_key(d.program), schedule_key(nodes[i + 1].program));
    }
}
