// Computations beyond contractions: a max/min/sum reduction, a numerically safe softmax and a
// layer normalization, built in the IR (the same programs as datasets/normalization, at any
// size). Each output starts at its reduction's identity (ir.h, ReduceKind).
#pragma once

#include <cstdint>
#include <string>

#include "looptool/ir/ir.h"

namespace looptool {

/// Y[m, n] = reduce over r of X[m, r, n] (times W[r, n] when `product`), `kind` Sum, Max or
/// Min. With `through_temp` the reduction goes into a temporary T and a copy nest writes Y,
/// the form copy elision folds (LowerOptions::elide_copies).
Computation make_reduce(ReduceKind kind, int64_t m, int64_t r, int64_t n, bool product = false,
                        bool through_temp = false, std::string name = "");

/// Y[i, j] = exp(X[i, j] - Mx[i]) / S[i] with Mx[i] = max_j X[i, j] (a max reduction) and
/// S[i] = sum_j exp(X[i, j] - Mx[i]): the numerically safe softmax over the rows of X.
Computation make_softmax(int64_t rows, int64_t cols, std::string name = "");

/// Y[i, j] = (X[i, j] - Mu[i]) * R[i] * G[j] + B[j], Mu[i] = mean_j X[i, j], R[i] =
/// recip(sqrt(mean_j (X[i, j] - Mu[i])^2 + 1e-5)): layer normalization over the rows of X.
Computation make_layernorm(int64_t rows, int64_t cols, std::string name = "");

/// GELU elementwise over a rows x cols X: Y = 0.5 X (1 + erf(X / sqrt 2)) (BERT's), or with
/// `tanh_form` Y = 0.5 X (1 + tanh(sqrt(2 / pi) (X + 0.044715 X^3))) (GPT-2's approximation).
Computation make_gelu(int64_t rows, int64_t cols, bool tanh_form = false, std::string name = "");

}  // namespace looptool
