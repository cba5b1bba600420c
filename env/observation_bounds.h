// Bounds of the tensor observations (env/observations.h), for declaring observation spaces.
#pragma once

#include <vector>

namespace looptune {

/// The largest value of each loops_tensor column over every program (all are at least 0), so a
/// Python observation space can declare finite bounds. Defined beside the features.
std::vector<float> loops_tensor_high();
/// The largest value of each machine_tensor entry (all are at least 0).
std::vector<float> machine_tensor_high();

}  // namespace looptune
