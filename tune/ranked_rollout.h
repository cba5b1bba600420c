// What the guided search does with a cost model (GuidedConfig::rank, cost_model.h): it ranks
// candidate schedules before measuring them, so fewer measurements reach the same kernel.
//   - Of the seeds, the first rule's and the kRankedSeeds - 1 others the model scores highest
//     are measured.
//   - The greedy rollout runs on an environment that measures nothing; the start, the state the
//     model scores highest and the last state are measured.
//   - A branch's rollout runs on an environment that measures nothing; of the states it visits,
//     only the one the model scores highest is measured (and becomes a node).
//   - The search ends once kRankPatience such rollouts in a row found nothing faster.
// The start and the finalists are measured as without a model, so the result is never slower
// than the start.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "env/environment.h"
#include "search/seeds.h"
#include "tune/cost_model.h"
#include "tune/policy.h"

namespace looptune {

inline constexpr int kRankedSeeds = 4;
inline constexpr int kRankPatience = 4;

/// `seeds` (applying to `start`) cut to the first and the best-scored others, kRankedSeeds in
/// all, in the order the model scores them (the first seed first: the search's bound comes from
/// it).
std::vector<TuneSeed> ranked_seeds(const std::vector<TuneSeed> &seeds,
                                   const looptool::Program &start, const CostModel &model);

/// A state of a rollout that was not measured: its program, the actions from where the rollout
/// started, and the model's score.
struct ScoredState {
    looptool::Program program;
    std::vector<looptool::Action> actions;
    double score = 0;
};

/// An environment for rollouts that measure nothing, configured like `env` (action space, episode
/// length, observation size).
std::unique_ptr<Environment> unmeasured_environment(const Environment &env);

/// The policy's rollout on `shadow` (unmeasured_environment()) from `from`: its branch-th action
/// by Q-value (0: the greedy one), then greedily, at most `max_actions` actions and the policy's
/// episode. Returns the states whose schedule differs from `from`'s, scored by the model.
std::vector<ScoredState> scored_rollout(const Policy &policy, Environment &shadow,
                                        const looptool::Program &from, int branch, int max_actions,
                                        const CostModel &model);

/// The policy's greedy rollout on `shadow` (unmeasured_environment()) from `from`, continued in
/// fresh episodes of the policy's length (as it is taught demonstrations longer than one) up to
/// `max_actions` actions: each episode's last state whose schedule differs from `from`'s and from
/// the previous episode's, in order, with the actions from `from` (score 0). A schedule needing
/// more actions than one episode (a packed tile, a conv's: 20-50) is reached so with one
/// measurement per episode, where measuring every state on the way cost the whole budget.
std::vector<ScoredState> chained_rollout(const Policy &policy, Environment &shadow,
                                         const looptool::Program &from, int max_actions);

/// tune_with_policy() ranked: the start measured in `env` (with the hooks around it), the greedy
/// rollout run on `shadow`, then its best-scored state and its last one measured in `env`.
/// step_gflops is NaN for the states not measured.
PolicyTuneResult ranked_greedy_rollout(const Policy &policy, Environment &env, Environment &shadow,
                                       const looptool::Program &start, const CostModel &model,
                                       const RolloutHooks &hooks);

}  // namespace looptune
