// Warm starts from demonstrations (DQfD): the best traces of a search replayed into the
// replay, a supervised pretraining on them, and the demonstrations the learner's large-margin
// loss draws from (Learner::pick_demonstrations, defined in rl/demonstrations.cpp).
#pragma once

#include <vector>

#include "rl/learner.h"

namespace looptune {

/// Loads warm-start traces and replays them in `env`: demonstrations for the margin loss and
/// n-step transitions (rewards measured or looked up in the store) for the replay.
std::vector<Demo> load_demonstrations(const TrainConfig &config, Environment &env,
                                      PrioritizedReplay &replay, bool with_graph);

/// The traces replayed as each other machine `env`'s store has rows and figures of, with env's
/// threads (TrainConfig::warmstart_machines): each Environment configured with that machine
/// (EnvConfig::machine), so rewards come from its rows and states carry its machine vector; a
/// trace stops at its first schedule the store lacks for it. A machine without figures is left
/// out with a warning.
std::vector<Demo> load_other_machines_demonstrations(const TrainConfig &config, Environment &env,
                                                     PrioritizedReplay &replay);

/// Supervised warm start: the margin loss on demonstrations plus TD on their transitions.
void pretrain_on_demonstrations(const TrainConfig &config, Learner &learner,
                                PrioritizedReplay &replay, const std::vector<Demo> &demos);

/// A trainer's warm start: with config.warmstart, the demonstrations loaded in `env` (their
/// transitions into `replay`) and, unless the run was resumed, pretraining on them. None
/// without config.warmstart.
std::vector<Demo> warm_start(const TrainConfig &config, Environment &env, Learner &learner,
                             PrioritizedReplay &replay, bool resumed);

}  // namespace looptune
