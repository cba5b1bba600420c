#include "rl/episode_starts.h"

#include "looptool/formats/text_format.h"
#include "search/seeds.h"

namespace looptune {

EpisodeStarts::EpisodeStarts(const TrainConfig &config, const Dataset &dataset)
    : config_(config), dataset_(dataset) {}

const std::vector<std::pair<std::string, looptool::Program>> &EpisodeStarts::seed_states(
    const std::string &file, const looptool::ActionSpace &space) {
    auto it = seeds_.find(file);
    if (it != seeds_.end()) return it->second;
    std::vector<std::pair<std::string, looptool::Program>> states;
    const looptool::Program naive =
        looptool::Program::naive(looptool::load_program_file(file).comp);
    // Every seed tune measures: its step limit (guided_step_limit()) makes room for them all.
    for (const TuneSeed &s : tune_seeds(*naive.comp, kSeedSteps, space)) {
        looptool::Program p = naive;
        for (looptool::Action a : s.actions) p = looptool::apply(p, a);
        states.emplace_back(s.name, std::move(p));
    }
    return seeds_.emplace(file, std::move(states)).first->second;
}

void EpisodeStarts::reset(Environment &env, std::mt19937_64 &rng) {
    const std::string &file =
        dataset_.train[std::uniform_int_distribution<size_t>(0, dataset_.train.size() - 1)(rng)];
    if (config_.seed_starts > 0 &&
        std::uniform_real_distribution<double>(0, 1)(rng) < config_.seed_starts) {
        const auto &states = seed_states(file, env.action_space());
        if (!states.empty()) {
            env.reset(
                states[std::uniform_int_distribution<size_t>(0, states.size() - 1)(rng)].second);
            return;
        }
    }
    env.reset(file);
}

}  // namespace looptune
