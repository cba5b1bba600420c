// Gradient-norm clipping and an Adam step in one pass per parameter tensor (LibTorch; include
// only from agents/*.cpp). The same arithmetic as torch::nn::utils::clip_grad_norm_ followed by
// torch::optim::Adam::step (no weight decay, no AMSGrad), but on raw float pointers: LibTorch's
// version runs ~10 dispatched tensor ops per parameter tensor (~150 per update of our
// 12-tensor network), which cost more than the network's own GEMMs' overhead
// (docs/decisions.md). The moments live in the optimizer's own AdamParamState, so checkpoints keep
// torch::optim::Adam's format.
#pragma once

#include <torch/torch.h>

namespace looptune {

/// Zeroes the gradients of `optimizer`'s parameters (defined ones stay defined, like
/// Optimizer::zero_grad).
void zero_grads(torch::optim::Adam &optimizer);

/// Scales the gradients so their global L2 norm is at most `max_norm` (as clip_grad_norm_ does:
/// by max_norm / (norm + 1e-6) when that is below 1) and takes one Adam step. Falls back to
/// clip_grad_norm_ and Adam::step when a parameter is not a contiguous float32 CPU tensor.
/// Returns the gradients' norm before clipping.
double clip_and_adam_step(torch::optim::Adam &optimizer, double max_norm);

}  // namespace looptune
