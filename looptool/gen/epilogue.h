// Matmuls with an epilogue: C[m, n] = act(sum_k A[m, k] * B[k, n] + bias[n]) + R[m, n], the
// projections of a transformer layer (bias and GELU, or bias and a residual add), written as
// generate writes a matmul: the product reduced into a temporary T, then one elementwise
// statement from T to C (the canonical two-nest form, which `fuse` turns into one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "looptool/ir/ir.h"

namespace looptool {

enum class Activation { None, Relu, Gelu, GeluTanh };

struct Epilogue {
    bool bias = false;  ///< + bias[n]
    Activation act = Activation::None;
    bool residual = false;  ///< + R[m, n], after the activation
    bool any() const { return bias || act != Activation::None || residual; }
    bool operator==(const Epilogue &) const = default;
};

/// Parses "bias,relu", "bias,gelu,residual", ...: any of bias, relu, gelu (erf form), gelu-tanh,
/// residual, comma-separated, at most one activation ("": none). Throws Error naming the unknown
/// or repeated word.
Epilogue parse_epilogue(std::string_view text);
/// The words parse_epilogue reads back ("bias,gelu-tanh,residual"), "" for none.
std::string epilogue_text(const Epilogue &e);

/// T[m, n] += A[m, k] * B[k, n]; C[m, n] = epilogue(T[m, n]) with the variables declared m, k,
/// n as make_matmul's and the tensors A, B, then Bias[n] and R[m, n] when used, T, C. GELU is
/// 0.5 x (1 + erf(x / sqrt 2)) or 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Named
/// mm{m}_{n}_{k}_{words joined by _} unless `name` is given; make_matmul for no epilogue.
Computation make_matmul_epilogue(int64_t m, int64_t n, int64_t k, const Epilogue &e,
                                 std::string name = "");

/// c's sizes and epilogue when it is exactly make_matmul_epilogue of them (names aside), with
/// an epilogue; nullopt otherwise.
struct MatmulEpilogue {
    int64_t m = 0, n = 0, k = 0;
    Epilogue epilogue;
    int bias = -1, residual = -1;  ///< tensor ids, -1 when unused
};
std::optional<MatmulEpilogue> matmul_epilogue(const Computation &c);

}  // namespace looptool
