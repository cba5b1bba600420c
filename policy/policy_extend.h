// A trained policy widened to a larger action space without losing what it learned (`looptool
// policy extend`, `train --adapt --space`): the same network with one more output per new
// action and, for the encoded state's previous-actions one-hot, one more (zero) input column
// per new action and step. Likewise a policy from before the machine vector gets zero input
// columns for it (with_machine_inputs()).
//
// The dueling head is Q(s, a) = V(s) + A(s, a) - mean_a A(s, a). A new action's advantage row
// is the mean of the old rows (weights and bias), so its A is the old mean in every state: the
// mean over all actions is unchanged, every old action keeps its Q-value exactly (up to float
// rounding), and a new action starts at V(s), the mean of the old actions' Q-values. Zero input
// columns leave every state whose history holds only old actions encoded as before.
#pragma once

#include <string>

#include "policy/policy_file.h"

namespace looptune {

/// `policy` (trained on the preset its meta names) for the preset `to_space`, which must hold
/// every action of the old one (in any order). Throws looptool::Error naming what is wrong: an
/// unknown preset, an action `to_space` lacks, a network whose shape does not match its meta.
PolicyFile extend_policy(const PolicyFile &policy, const std::string &to_space);

/// `policy` able to read the machine vector (env/rl_state.h): a policy trained before the
/// observation had it gets kMachineFeatures more inputs, at the end of the first layer that
/// reads the globals (mlp.0 or globals_in), all with zero weights, so it acts exactly as before
/// until training (`train --adapt`) learns them. A policy that has them is returned as it is.
/// Throws looptool::Error for a network whose shape does not match its meta.
PolicyFile with_machine_inputs(const PolicyFile &policy);

/// read_policy_file() and with_machine_inputs(): every reader of a policy file that acts or
/// trains with it loads it so. Errors name `path`.
PolicyFile load_current_policy(const std::string &path);

/// The policy file `in` widened to `to_space`, written to `out` (atomically); errors name `in`.
void extend_policy_file(const std::string &in, const std::string &to_space, const std::string &out);

}  // namespace looptune
