// The MLP Q-network's forward and backward pass written out over oneDNN's sgemm (LibTorch types;
// include only from agents/*.cpp). The same network as QNetImpl with the MLP encoder (two
// hidden layers, dueling heads), reading and writing the module's own parameter and gradient
// tensors, so checkpoints, policy files and the fused Adam step are unchanged.
//
// Why by hand: a learner update through LibTorch's autograd dispatched ~530 ops and ran its
// GEMMs through OpenBLAS, whose kernels follow OPENBLAS_CORETYPE (Haswell, AVX2, in these
// machines' environment): 95 GFLOPS on the update's shapes against oneDNN's 190 on a Zen 5 core
// (docs/performance.md (k)). Here an update is ~14 sgemm calls and a few loops over
// preallocated buffers. tests/dense_mlp_test.cpp checks Q-values and every gradient against
// LibTorch's autograd.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "agents/qnet.h"

namespace looptune {

/// Rows of flat state features: `count` rows of the network's input width, contiguous.
struct RowBlock {
    const float *rows = nullptr;
    int64_t count = 0;
};

class DenseMlp {
public:
    /// Whether `net` can run here: the MLP encoder with contiguous float32 CPU parameters.
    static bool applies(QNet &net);
    /// Binds to `net`'s parameters (kept by handle: later weight updates are seen).
    explicit DenseMlp(QNet &net);

    /// Q-values [R x A] of the rows of `blocks` (R rows in all, in order), row-major; valid
    /// until the next forward, whose activations backward() uses.
    const float *forward(const std::vector<RowBlock> &blocks);
    /// Gradients of a loss whose derivative with respect to the Q-values of the first `rows`
    /// rows of the last forward is `dq` [rows x A]; written (not accumulated) into the
    /// parameters' `.grad()` tensors, allocated on first use.
    void backward(const float *dq, int64_t rows);

    int64_t num_actions() const { return A_; }
    int64_t width() const { return F_; }

private:
    // Parameters in registration order: mlp.0, mlp.2, value.0, value.2, advantage.0,
    // advantage.2 (weight and bias each).
    std::vector<torch::Tensor> params_;
    int64_t F_ = 0, H_ = 0, H2_ = 0, A_ = 0;
    // The last forward: rows, the first layer's input columns and the activations.
    int64_t R_ = 0, K_ = 0;
    std::vector<int64_t> cols_;
    std::vector<float> xc_, w1c_, h1_, h2_, hv_, ha_, v_, q_;
    // Backward scratch.
    std::vector<float> da_, dv_, dha_, dhv_, dh2_, dh1_, dw1c_;
};

}  // namespace looptune
