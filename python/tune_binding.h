// `looptune.tune` (tune_binding.cpp) and what it shares with the rest of the module.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

/// The computation to tune: a benchmark file (in generate's form when it is a matmul or conv
/// written in another), or a matmul (M, N, K) or conv2d (N, CI, H, W, CO, KH, KW) by its
/// shape; `who` names the caller in errors.
looptool::Program tune_start(const std::optional<std::string> &benchmark,
                             const std::optional<std::vector<int64_t>> &matmul,
                             const std::optional<std::vector<int64_t>> &conv,
                             const char *who = "tune");

/// Adds `tune` to the module.
void bind_tune(pybind11::module_ &m);
