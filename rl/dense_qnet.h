// The Q-network's forward and backward pass written out over oneDNN's sgemm (LibTorch types;
// include only from agents/*.cpp), for both encoders: the MLP and the message-passing GNN, each
// under the dueling heads. The same network as QNetImpl, reading and writing the module's own
// parameter and gradient tensors, so checkpoints, policy files and the fused Adam step are
// unchanged.
//
// Why by hand: a learner update through LibTorch's autograd dispatched ~530 ops (MLP) and ran its
// GEMMs through OpenBLAS, whose kernels follow OPENBLAS_CORETYPE (Haswell, AVX2, in these
// machines' environment), at half oneDNN's speed on the update's shapes, and the GNN spent
// most of its update in LibTorch's dispatch, malloc and copies (docs/decisions.md). Here an update
// is a few dozen sgemm calls and loops over preallocated buffers. tests/dense_qnet_test.cpp checks
// Q-values and every gradient against LibTorch's autograd, for both encoders.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "looptool/check/interpreter.h"  // AlignedAllocator
#include "rl/qnet.h"

namespace looptune {

/// `count` states: their flat features (the network's input width each, contiguous) and, for
/// the GNN encoder, their graphs (`count` pointers).
struct RowBlock {
    const float *rows = nullptr;
    int64_t count = 0;
    const DenseGraph *const *graphs = nullptr;
};

class DenseQNet {
public:
    /// Whether `net` can run here: contiguous float32 CPU parameters in QNetImpl's layout.
    static bool applies(QNet &net);
    /// Binds to `net`'s parameters (kept by handle: later weight updates are seen).
    explicit DenseQNet(QNet &net);

    /// Q-values [R x A] of the states of `blocks` (R in all, in order), row-major; valid until
    /// the next forward, whose activations backward() uses.
    const float *forward(const std::vector<RowBlock> &blocks);
    /// Gradients of a loss whose derivative with respect to the Q-values of the first `rows`
    /// states of the last forward is `dq` [rows x A]; written (not accumulated) into the
    /// parameters' `.grad()` tensors, allocated on first use.
    void backward(const float *dq, int64_t rows);

    int64_t num_actions() const { return A_; }
    int64_t width() const { return F_; }

private:
    // Workspace rows 64-byte aligned, as the parameters are: oneDNN's sgemm on 16-byte aligned
    // rows varied by up to 25% between runs with where malloc put them.
    using Floats = looptool::TensorData;
    void forward_mlp(const std::vector<RowBlock> &blocks);
    void forward_gnn(const std::vector<RowBlock> &blocks);
    void gather_graphs(const std::vector<RowBlock> &blocks);  // forward_gnn's steps
    void count_degrees();
    void message_round(int r);
    void readout();
    void forward_heads();
    void backward_heads(const float *dq, int64_t R);  // leaves dL/d(encoding) in denc_
    void backward_mlp(int64_t R);
    void backward_gnn(int64_t R);
    float *param(size_t i) { return params_[i].data_ptr<float>(); }

    std::vector<torch::Tensor> params_;  // in registration order (QNetImpl's constructor)
    bool gnn_ = false;
    size_t head_ = 0;  // index of value.0.weight: the heads' 8 tensors start there
    int64_t F_ = 0, H_ = 0, H2_ = 0, A_ = 0;
    int64_t R_ = 0;      // states in the last forward
    Floats enc_, denc_;  // the encoding [R x H] and its gradient
    Floats hv_, ha_, v_, q_;
    Floats da_, dv_, dha_, dhv_;
    // MLP encoder: the first layer's input columns, gathered input and weights, activations.
    int64_t K_ = 0;
    std::vector<int64_t> cols_;
    std::vector<uint8_t> used_;
    Floats xc_, w1c_, h1_, dh1_, dw1c_;
    // GNN encoder: the batch's disjoint union of graphs and every round's activations.
    int G_ = 0, rounds_ = 0, Gs_ = 0;  // vertex width, rounds, global features
    int64_t N_ = 0;
    std::vector<int64_t> vertex_start_, edge_start_;  // per state, and one past the last
    std::vector<int64_t> src_, dst_;
    Floats x_, inv_in_, inv_out_, globals_in_;
    std::vector<Floats> h_, act_, mp_, mc_;  // per round: input H, relu(Z), messages
    Floats pooled_, globals_, dpooled_, dh_, dz_, dm_, dg_, bias_;
};

}  // namespace looptune
