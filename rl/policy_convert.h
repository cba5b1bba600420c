// Between the Q-network in LibTorch (rl/qnet.h) and the flat policy file `tune` reads without
// LibTorch (policy/policy_file.h): what `train` writes, and `looptool policy convert` for a
// policy saved in the LibTorch format `tune` read before.
#pragma once

#include <string>

#include "policy/policy_file.h"
#include "rl/qnet.h"

namespace looptune {

/// `net`'s parameters and buffers under their module names, with `meta_json` (which holds the
/// network's description under "network").
PolicyFile policy_file_from_qnet(QNet &net, const std::string &meta_json);

/// A Q-network built from the description in `file` (as it is: a policy from before the
/// machine vector reads states without it) and loaded with its tensors; throws
/// looptool::Error naming a missing or wrongly shaped tensor. Load a file to act or train with
/// through load_current_policy() (policy/policy_extend.h).
QNet qnet_from_policy_file(const PolicyFile &file);

/// Reads a LibTorch policy file (checksum checked) and writes it as a flat policy file.
void convert_policy_file(const std::string &libtorch_path, const std::string &flat_path);

}  // namespace looptune
