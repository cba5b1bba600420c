// The Q-network's forward pass in plain C++ over a policy file's tensors, for `tune` without
// LibTorch: the same maths as rl/qnet.h's QNetImpl (and rl/dense_qnet.h), for both encoders.
//
//   mlp: z = relu(W2 relu(W1 x + b1) + b2) over the flat features x
//   gnn: h0 = relu(W_in v + b) per vertex; each round h += relu(W_self h + W_down mean(parents)
//        + W_up mean(children) + b); z = relu(W_r [mean of h, h at the cursor vertex,
//        relu(W_g globals + b_g)] + b_r)
//   Q(s, a) = V(z) + A(z, a) - mean_a A(z, a), V and A two layers each with a relu between.
//
// Layers run as y = b + sum_i x_i W[:, i] over the non-zero inputs only (an encoded state is
// mostly zeros), with each weight matrix stored transposed so every step is one contiguous row.
// tests/plain_qnet_test.cpp checks the Q-values and greedy rollouts against LibTorch's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "env/graph_observation.h"
#include "policy/policy_file.h"

namespace looptune {

/// The network's description as stored under "network" in a policy's meta_json.
struct NetworkConfig {
    std::string encoder = "mlp";  ///< mlp | gnn
    int hidden = 256;
    int gnn_hidden = 64;
    int gnn_rounds = 3;
    int max_loops = 10;
    int num_actions = 0;
    /// Inputs of the machine vector: kMachineFeatures, or 0 for a policy trained before the
    /// observation had it (such a file is widened on load: policy/policy_extend.h).
    int machine_features = 0;
    int flat_size() const;     ///< the encoded state's width (env/rl_state.h)
    int globals_size() const;  ///< its trailing global features
};

/// Throws looptool::Error when a field is missing, of the wrong type or out of range;
/// machine_features may be absent (0: a policy from before the machine vector).
NetworkConfig network_config_from_json(const std::string &json);

/// The network a policy file describes (its meta_json's "network"); throws as above.
NetworkConfig network_config_of(const PolicyFile &file);

/// Every tensor the network has, with its shape, in LibTorch's registration order.
std::vector<std::pair<std::string, std::vector<int64_t>>> network_tensors(const NetworkConfig &c);

class PlainQNet {
public:
    /// Binds to `file`'s tensors (copied); throws looptool::Error naming a missing, extra or
    /// wrongly shaped tensor.
    PlainQNet(const NetworkConfig &config, const PolicyFile &file);

    /// Q(s, .) for one state: its flat features (flat_size() floats) and, for the gnn
    /// encoder, its graph. Illegal actions are not masked.
    std::vector<float> forward(const std::vector<float> &flat, const DenseGraph *graph) const;
    const NetworkConfig &config() const { return config_; }

private:
    // A linear layer: weights transposed to [in x out], so an input's weights are contiguous.
    struct Linear {
        int64_t in = 0, out = 0;
        std::vector<float> wt, b;
        void apply(const float *x, float *y, bool relu) const;  // y[out] from x[in]
    };
    Linear layer(const PolicyFile &file, const std::string &name) const;
    std::vector<float> encode_gnn(const std::vector<float> &flat, const DenseGraph &g) const;

    NetworkConfig config_;
    std::vector<Linear> mlp_;                // mlp: 2 layers
    Linear node_in_, globals_in_, readout_;  // gnn
    std::vector<Linear> self_, down_, up_;   // gnn: one of each per round
    Linear value1_, value2_, adv1_, adv2_;   // dueling heads
};

}  // namespace looptune
