#include "tune/ranked_rollout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace looptune {

using looptool::Action;
using looptool::Program;

std::vector<TuneSeed> ranked_seeds(const std::vector<TuneSeed> &seeds, const Program &start,
                                   const CostModel &model) {
    if (seeds.size() <= size_t(kRankedSeeds)) return seeds;
    std::vector<double> score(seeds.size());
    for (size_t i = 0; i < seeds.size(); ++i) {
        Program p = start;
        for (Action a : seeds[i].actions) p = looptool::apply(p, a);
        score[i] = model.score(p);
    }
    std::vector<size_t> order(seeds.size() - 1);
    std::iota(order.begin(), order.end(), 1);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<TuneSeed> out = {seeds.front()};
    for (size_t i = 0; out.size() < size_t(kRankedSeeds); ++i) out.push_back(seeds[order[i]]);
    return out;
}

std::unique_ptr<Environment> unmeasured_environment(const Environment &env) {
    EnvConfig c = env.config();
    c.measure_enabled = false;
    c.store_path.clear();
    c.verify = false;
    return std::make_unique<Environment>(c);
}

std::vector<ScoredState> scored_rollout(const Policy &policy, Environment &shadow,
                                        const Program &from, int branch, int max_actions,
                                        const CostModel &model) {
    shadow.reset(from);
    const std::vector<float> q = policy.q_values(shadow);
    std::vector<int> order(q.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q[a] > q[b]; });
    std::vector<ScoredState> out;
    if (branch >= int(order.size()) || std::isinf(q[size_t(order[size_t(branch)])])) return out;
    const std::string from_key = looptool::schedule_key(from);
    std::vector<Action> path;
    for (int a = order[size_t(branch)]; a >= 0 && int(path.size()) < max_actions;
         a = policy.act(shadow)) {
        shadow.step_index(a);
        path.push_back(shadow.action_space().actions[size_t(a)]);
        const std::string key = looptool::schedule_key(shadow.program());
        if (key != from_key) out.push_back({shadow.program(), path, model.score(key)});
    }
    return out;
}

std::vector<ScoredState> chained_rollout(const Policy &policy, Environment &shadow,
                                         const Program &from, int max_actions) {
    std::vector<ScoredState> out;
    std::string last_key = looptool::schedule_key(from);
    Program p = from;
    std::vector<Action> path;
    while (int(path.size()) < max_actions) {
        shadow.reset(p);  // a fresh episode from where the last one ended
        const size_t before = path.size();
        while (shadow.steps_taken() < shadow.config().max_steps && int(path.size()) < max_actions) {
            const int a = policy.act(shadow);
            if (a < 0) break;
            shadow.step_index(a);
            path.push_back(shadow.action_space().actions[size_t(a)]);
        }
        if (path.size() == before) break;  // no legal action
        p = shadow.program();
        const std::string key = looptool::schedule_key(p);
        if (key != last_key) out.push_back({p, path, 0});
        last_key = key;
    }
    return out;
}

PolicyTuneResult ranked_greedy_rollout(const Policy &policy, Environment &env, Environment &shadow,
                                       const Program &start, const CostModel &model,
                                       const RolloutHooks &hooks) {
    PolicyTuneResult r;
    if (hooks.before_measurement) hooks.before_measurement();
    env.reset(start);
    r.base_gflops = r.best_gflops = r.final_gflops = env.gflops();
    r.best = r.final = start;
    if (hooks.after_measurement) hooks.after_measurement(0, env.gflops());
    const std::vector<ScoredState> states =
        scored_rollout(policy, shadow, start, 0, env.config().max_steps, model);
    if (states.empty()) return r;
    r.actions = states.back().actions;
    r.step_gflops.assign(r.actions.size(), std::numeric_limits<double>::quiet_NaN());
    const size_t top = size_t(std::max_element(states.begin(), states.end(),
                                               [](const ScoredState &a, const ScoredState &b) {
                                                   return a.score < b.score;
                                               }) -
                              states.begin());
    for (size_t i : {top, states.size() - 1}) {
        const ScoredState &s = states[i];
        if (!std::isnan(r.step_gflops[s.actions.size() - 1])) continue;
        if (hooks.before_measurement) hooks.before_measurement();
        const double g = env.evaluate(s.program);
        r.step_gflops[s.actions.size() - 1] = g;
        if (hooks.after_measurement) hooks.after_measurement(int(s.actions.size()), g);
        if (g > r.best_gflops) {
            r.best_gflops = g;
            r.best = s.program;
            r.best_actions = s.actions;
        }
    }
    r.final = states.back().program;
    r.final_gflops = r.step_gflops.back();
    return r;
}

}  // namespace looptune
