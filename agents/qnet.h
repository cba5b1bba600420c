// The Q-network (LibTorch; include only from agents/*.cpp): an observation encoder, MLP over
// the flat tensors or message passing over the loop-tree graph, then a dueling head
// Q(s, a) = V(s) + A(s, a) - mean_a A(s, a).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "agents/rl_state.h"

namespace looptune {

struct QNetConfig {
    std::string encoder = "mlp";  ///< mlp | gnn
    int hidden = 256;
    int gnn_hidden = 64;
    int gnn_rounds = 3;
    RlShape shape;
};

class QNetImpl : public torch::nn::Module {
public:
    explicit QNetImpl(const QNetConfig &config);
    /// Q-values [B, |A|] (illegal actions not masked; see masked()).
    torch::Tensor forward(const std::vector<const RlState *> &states);
    const QNetConfig &config() const { return config_; }

private:
    torch::Tensor encode_mlp(const std::vector<const RlState *> &states);
    torch::Tensor encode_gnn(const std::vector<const RlState *> &states);
    QNetConfig config_;
    torch::nn::Sequential mlp_{nullptr};
    torch::nn::Linear node_in_{nullptr}, globals_in_{nullptr}, readout_{nullptr};
    std::vector<torch::nn::Linear> self_, down_, up_;
    torch::nn::Sequential value_{nullptr}, advantage_{nullptr};
};
TORCH_MODULE(QNet);

/// [B, |A|] bool tensor of the states' masks.
torch::Tensor mask_tensor(const std::vector<const RlState *> &states, torch::Device device);
/// q with illegal actions at -1e9 (so argmax and max only see legal ones).
torch::Tensor masked(const torch::Tensor &q, const torch::Tensor &mask);

/// The network's description as JSON (stored next to the weights).
std::string qnet_config_json(const QNetConfig &c);
QNetConfig qnet_config_from_json(const std::string &json);

/// Copies every parameter and buffer of `from` into `to` (same architecture).
void copy_weights(QNet &to, const QNet &from);

}  // namespace looptune

namespace looptune {
/// argmax over the legal actions of Q(s, .); -1 when none is legal.
int greedy_action(QNet &net, const RlState &s);

/// A policy file: the network's weights plus a JSON description (network, action space, step
/// limit, provenance). Written to a temporary file and renamed into place.
void save_policy_file(const std::string &path, QNet &net, const std::string &meta_json);
/// Throws looptool::Error naming the file when it is missing or not a policy file.
QNet load_policy_file(const std::string &path, std::string *meta_json);
}  // namespace looptune
