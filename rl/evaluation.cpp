// The policy's evaluation on test benchmarks during training (rl/learner.h): greedy rollouts
// measured in the environment, alone or two networks side by side.
#include <algorithm>
#include <cmath>

#include "env/environment.h"
#include "looptool/ir/error.h"
#include "rl/episode_starts.h"
#include "rl/learner.h"

namespace looptune {

/// The best GFLOPS of the greedy rollout of `net` from env's state (its start included).
static double greedy_rollout_best(QNet &net, Environment &env, bool with_graph) {
    double best = env.gflops();
    while (env.steps_taken() < env.config().max_steps) {
        const int a = greedy_action(net, encode_state(env, with_graph));
        if (a < 0) break;
        env.step_index(a);
        best = std::max(best, env.gflops());
    }
    return best;
}

Evaluation evaluate_policy(QNet &net, Environment &env, const std::vector<std::string> &files,
                           bool with_graph, std::vector<FailedBenchmark> &failed,
                           EpisodeStarts *seeds) {
    double log_sum = 0, seed_log_sum = 0;
    int evaluated = 0, seeded = 0;
    for (const std::string &f : files) {
        try {
            env.reset(f);
            const double base = env.gflops();
            const double best = greedy_rollout_best(net, env, with_graph);
            double best_seed = 0, best_with_policy = 0;
            if (seeds)
                for (const auto &[name, state] : seeds->seed_states(f, env.action_space())) {
                    env.reset(state);
                    best_seed = std::max(best_seed, env.gflops());
                    best_with_policy =
                        std::max(best_with_policy, greedy_rollout_best(net, env, with_graph));
                }
            log_sum += std::log(best / std::max(base, 1e-9));
            ++evaluated;
            if (best_seed > 0) {
                seed_log_sum += std::log(best_with_policy / best_seed);
                ++seeded;
            }
        } catch (const looptool::InternalError &) {
            throw;  // a bug of ours, not a bad benchmark
        } catch (const std::exception &e) {
            const std::string what = e.what();
            failed.push_back({f, what.substr(0, what.find('\n'))});
        }
    }
    Evaluation e;
    e.speedup = evaluated == 0 ? 0 : std::exp(log_sum / evaluated);
    if (seeded > 0) e.seed_gain = std::exp(seed_log_sum / seeded);
    return e;
}

double compare_policies(QNet &a, QNet &b, Environment &env, const std::vector<std::string> &files,
                        bool with_graph, EpisodeStarts *seeds) {
    auto best_of = [&](QNet &net, const std::string &f) {
        env.reset(f);
        double best = greedy_rollout_best(net, env, with_graph);
        if (seeds)
            for (const auto &[name, state] : seeds->seed_states(f, env.action_space())) {
                env.reset(state);
                best = std::max(best, greedy_rollout_best(net, env, with_graph));
            }
        return best;
    };
    double log_sum = 0;
    int n = 0;
    for (const std::string &f : files) {
        try {
            const double ga = best_of(a, f), gb = best_of(b, f);
            log_sum += std::log(std::max(gb, 1e-9) / std::max(ga, 1e-9));
            ++n;
        } catch (const looptool::InternalError &) {
            throw;
        } catch (const std::exception &) {
            // evaluate() has reported and dropped the benchmark already, or will
        }
    }
    return n == 0 ? 0 : std::exp(log_sum / n);
}

}  // namespace looptune
