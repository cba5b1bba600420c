// Where a training episode starts: the naive nest of a random training benchmark, or, with
// probability TrainConfig::seed_starts, the state one of `tune`'s seeds (tune_seeds(): the
// `tile` members, the conv family, dot products) reaches on it.
//
// Why: `tune` runs the policy from those seeds (a rollout from each measured state), so a
// policy trained only from naive nests acts there on states it never saw. Episodes that start
// at a seed learn, by RL, what improves on the demonstrations' schedules; the reward is then the
// gain over the seed. DQN and Ape-X's actors start their episodes here, and the evaluation
// measures that gain (EpisodeStarts::seed_states()).
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/environment.h"
#include "rl/trainer.h"

namespace looptune {

class EpisodeStarts {
public:
    EpisodeStarts(const TrainConfig &config, const Dataset &dataset);
    /// Resets `env` for a new episode: a training benchmark drawn uniformly, from its naive
    /// nest or (with probability seed_starts, when it has seeds) from one of its seed states
    /// drawn uniformly.
    void reset(Environment &env, std::mt19937_64 &rng);
    /// The states tune's seeds reach on `file`'s computation (cached per file; none for a
    /// computation without seeds), each with the seed's name.
    const std::vector<std::pair<std::string, looptool::Program>> &seed_states(
        const std::string &file, const looptool::ActionSpace &space);

private:
    const TrainConfig &config_;
    const Dataset &dataset_;
    std::map<std::string, std::vector<std::pair<std::string, looptool::Program>>> seeds_;
};

}  // namespace looptune
