// What the Q-network sees of an environment state, as plain floats: the input of the network in
// training (rl/, LibTorch) and in `tune` (policy/plain_qnet.h, no LibTorch).
//
//   flat    = loops_tensor [max_loops x kLoopFeatures] ++ globals
//   globals = stride_tensor [kStrideBuckets] ++ prev_actions_tensor [kPrevActions x |A|]
//             ++ [steps left / max_steps] ++ machine vector [kMachineFeatures]
//   graph   = the Boost.Graph loop-tree observation as dense features + edges (GNN encoder)
//   mask    = legal actions (the action mask), used when acting and in the target's max
#pragma once

#include <cstdint>
#include <vector>

#include "env/environment.h"
#include "env/graph_observation.h"

namespace looptune {

struct RlState {
    std::vector<float> flat;
    DenseGraph graph;           // empty unless the encoder needs it
    std::vector<uint8_t> mask;  // |A| entries, 1 = legal
};

struct RlShape {
    int max_loops = 10;
    int num_actions = 0;
    /// The machine vector's width: kMachineFeatures; 0 only for a network from before it
    /// (policy/policy_extend.h widens one on load).
    int machine_features = kMachineFeatures;
    int loops_size() const { return max_loops * kLoopFeatures; }
    int globals_size() const {
        return kStrideBuckets + kPrevActions * num_actions + 1 + machine_features;
    }
    int flat_size() const { return loops_size() + globals_size(); }
};

RlShape rl_shape(const Environment &env);

/// Encodes env's current state; `with_graph` fills the loop-tree graph too.
RlState encode_state(const Environment &env, bool with_graph);

/// A terminal state has no legal action that matters; an all-zero mask marks it.
bool any_legal(const RlState &s);

}  // namespace looptune
