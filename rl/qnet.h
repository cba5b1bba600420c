// The Q-network (LibTorch; include only from agents/*.cpp): an observation encoder, MLP over
// the flat tensors or message passing over the loop-tree graph, then a dueling head
// Q(s, a) = V(s) + A(s, a) - mean_a A(s, a).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "env/rl_state.h"

namespace looptune {

struct QNetConfig {
    std::string encoder = "mlp";  ///< mlp | gnn
    int hidden = 256;
    int gnn_hidden = 64;
    int gnn_rounds = 3;
    RlShape shape;
};

/// A batch of encoded states as tensors, built once and fed to as many networks as need it
/// (the learner's online and target networks both see the next states).
struct StateBatch {
    torch::Tensor flat;  ///< [B, flat_size]
    // The GNN's batched graph (undefined for the MLP): vertex features [N, kGraphVertexFeatures],
    // edges as index tensors src -> dst [E], each vertex's graph [N], and the degrees and vertex
    // counts message passing divides by ([N, 1], [N, 1], [B, 1]).
    torch::Tensor x, src, dst, graph_of, in_deg, out_deg, vertices;
    /// The columns of `flat` that are not zero in every row (int64 [K]); undefined when most
    /// are non-zero or the batch is small. The MLP's first layer then multiplies only these
    /// columns by the matching columns of its weights: the same product (a zero column adds
    /// nothing to it, and its weights' gradient is zero either way) at a fraction of the FLOPs.
    torch::Tensor nonzero_columns;
    int64_t size() const { return flat.size(0); }
};
/// B rows of `width` floats (one state's flat features each); `graphs`, when not null, holds
/// the B states' graphs. The rows are copied to `device` (wrapped without a copy on the CPU:
/// the caller keeps them alive while the batch is used).
StateBatch make_state_batch(const float *rows, int64_t B, int64_t width,
                            const DenseGraph *const *graphs, torch::Device device);
StateBatch make_state_batch(const std::vector<const RlState *> &states, bool with_graph,
                            torch::Device device);

class QNetImpl : public torch::nn::Module {
public:
    explicit QNetImpl(const QNetConfig &config);
    /// Q-values [B, |A|] (illegal actions not masked; see masked()).
    torch::Tensor forward(const StateBatch &batch);
    torch::Tensor forward(const std::vector<const RlState *> &states);
    const QNetConfig &config() const { return config_; }
    bool uses_graph() const { return config_.encoder == "gnn"; }

private:
    torch::Tensor encode_mlp(const StateBatch &batch);
    torch::Tensor encode_gnn(const StateBatch &batch);
    QNetConfig config_;
    torch::nn::Sequential mlp_{nullptr};
    torch::nn::Linear node_in_{nullptr}, globals_in_{nullptr}, readout_{nullptr};
    std::vector<torch::nn::Linear> self_, down_, up_;
    torch::nn::Sequential value_{nullptr}, advantage_{nullptr};
};
TORCH_MODULE(QNet);

/// [B, |A|] bool tensor of the states' masks.
torch::Tensor mask_tensor(const std::vector<const RlState *> &states, torch::Device device);
/// The same from B x |A| bytes (0 or 1), wrapped without a copy on the CPU.
torch::Tensor mask_tensor(const uint8_t *masks, int64_t B, int64_t A, torch::Device device);
/// q with illegal actions at -1e9 (so argmax and max only see legal ones).
torch::Tensor masked(const torch::Tensor &q, const torch::Tensor &mask);

/// The network's description as JSON (stored next to the weights).
std::string qnet_config_json(const QNetConfig &c);
QNetConfig qnet_config_from_json(const std::string &json);

/// Copies every parameter and buffer of `from` into `to` (same architecture).
void copy_weights(QNet &to, const QNet &from);

/// Loads `net`'s parameters and buffers from `archive` and checks that each kept the shape
/// `net` was built with: LibTorch's load takes a stored tensor's shape as it is, and a wrong
/// one reached the dense forward pass unchecked. Throws looptool::Error naming the tensor.
void load_weights_checked(QNet &net, torch::serialize::InputArchive &archive);

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
