// The integrity check of a policy file: a CRC-32 over the network's description and every
// parameter and buffer (name, shape, bytes), stored in the file next to the weights. The
// archive format itself does not check its data: a policy with flipped bytes in its weights
// loaded silently before this (issue 12).
#pragma once

#include <string>

#include "rl/qnet.h"

namespace looptune {

/// "crc32:" and 8 hex digits, over meta_json and net's parameters and buffers in their
/// registration order (the order save and load walk them in).
std::string policy_checksum(QNet &net, const std::string &meta_json);

}  // namespace looptune
