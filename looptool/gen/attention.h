// Attention's two batched matmuls as the projections leave their operands: Q, K and V
// token-major [B, T, H, D] (the heads interleaved in each token's row of H D features), so a
// head's rows are D floats apart by H D (a batch stride of D), or heads-major [B, H, T, D].
#pragma once

#include <cstdint>
#include <string>

#include "looptool/ir/ir.h"

namespace looptool {

/// Where the heads sit in Q, K, V and the context: token-major [B, T, H, D] (what a projection
/// writes) or heads-major [B, H, T, D].
enum class HeadLayout { TokenMajor, HeadsMajor };

/// S[b, h, i, j] = sum_d Q[b, i, h, d] * K[b, j, h, d] (Q.K^T per head; heads-major: Q[b, h, i,
/// d], K[b, h, j, d]), in generate's form: the product into a temporary T of S's shape, then a
/// copy into S; variables declared b, h, i, d, j (batch, batch, m, k, n). Named
/// scores{B}_{H}_{T}_{D}, plus _hm heads-major, unless `name` is given. Throws Error for an
/// extent outside [1, kMaxExtent] or a tensor above kMaxTensorElements.
Computation make_scores(int64_t b, int64_t h, int64_t t, int64_t d,
                        HeadLayout layout = HeadLayout::TokenMajor, std::string name = "");

/// C[b, i, h, d] = sum_j P[b, h, i, j] * V[b, j, h, d] (P.V per head; heads-major: V[b, h, j, d],
/// C[b, h, i, d]), in generate's form like make_scores; variables declared b, h, i, j, d.
/// Named context{B}_{H}_{T}_{D}[_hm].
Computation make_context(int64_t b, int64_t h, int64_t t, int64_t d,
                         HeadLayout layout = HeadLayout::TokenMajor, std::string name = "");

}  // namespace looptool
