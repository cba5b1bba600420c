// Benchmark generation: LoopTune's range syntax and matmul datasets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "looptool/loop_tree.h"

namespace looptool {

/// LoopTune's range syntax: `a:b:c` (a to b inclusive, step c), `a:b` (step 1), `a|b|c` (a
/// list) or one integer. Throws Error naming the text for malformed, empty or non-positive
/// ranges.
std::vector<int64_t> parse_range(std::string_view text);

struct MatmulShape {
    int64_t m, n, k;
    std::string name() const;  // mm{m}_{n}_{k}, as LoopTune names them
};

/// Every (m, n, k) from --dimA M_RANGE,K_RANGE --dimB K_RANGE,N_RANGE. The two K ranges must
/// be equal. Ordered by name.
std::vector<MatmulShape> matmul_shapes(std::string_view dim_a, std::string_view dim_b);

/// Writes one benchmark file per shape into `dir` (created if missing), each written
/// atomically; returns the paths written.
std::vector<std::string> write_matmul_dataset(const std::vector<MatmulShape> &shapes,
                                              const std::string &dir);

}  // namespace looptool
