// The integrity check of a policy file: a CRC-32 over the network's description and every
// parameter and buffer (name, shape, bytes), stored in the file next to the weights. The
// archive format itself does not check its data: a policy with flipped bytes in its weights
// loaded silently before this.
#pragma once

#include <string>

#include "rl/qnet.h"

namespace looptune {

/// "crc32:" and 8 hex digits, over meta_json and net's parameters and buffers in their
/// registration order (the order save and load walk them in).
std::string policy_checksum(QNet &net, const std::string &meta_json);

/// The same over a training checkpoint: its description, both networks and the optimizer's
/// state (step and moments of each parameter, in the parameters' order), so that a flipped
/// byte anywhere in the data is found on --resume rather than trained on.
std::string checkpoint_checksum(QNet &online, QNet &target, torch::optim::Adam &optimizer,
                                const std::string &meta_json);

/// Throws looptool::Error unless each parameter's Adam moments have the parameter's shape
/// (the fused step walks them as raw arrays of the parameter's size).
void check_adam_state(torch::optim::Adam &optimizer);

}  // namespace looptune
