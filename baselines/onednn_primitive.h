// oneDNN primitives bound to our buffers (oneDNN 2.6's C API, loaded at run time like its sgemm:
// onednn.cpp; one thread unless set_library_threads says more): the matmul primitive with any
// batch dimensions and strides (attention's Q.K^T and P.V over token-major heads, read in place)
// and an optional bias, and the element-wise and row primitives a transformer layer runs after
// it: binary add, GELU (erf), softmax, layer normalization.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "looptool/gen/epilogue.h"
#include "looptool/ir/ir.h"

namespace looptune::bench {

/// A matmul as oneDNN's primitive takes it: logical dimensions (batches..., rows, columns) and
/// element strides of the source (m x k), the weights (k x n) and the destination (m x n), and
/// which of the computation's tensors each is.
struct StridedMatmul {
    std::vector<int64_t> src_dims, src_strides, wei_dims, wei_strides, dst_dims, dst_strides;
    int src = 0, wei = 0, dst = 0;
};

/// c's matmul (looptool::matmul_roles: any names, batch variables and dimension orders) with
/// the strides of its row-major tensors; nullopt when c is no matmul.
std::optional<StridedMatmul> strided_matmul(const looptool::Computation &c);

/// One primitive and its arguments. `bind` gives the buffers, in the order its maker names;
/// run() executes it on the calling thread's library_threads() threads.
class OnednnPrimitive {
public:
    struct Impl;
    explicit OnednnPrimitive(std::unique_ptr<Impl> impl);
    ~OnednnPrimitive();
    OnednnPrimitive(const OnednnPrimitive &) = delete;
    OnednnPrimitive &operator=(const OnednnPrimitive &) = delete;
    void bind(const std::vector<float *> &buffers);
    void run();
    /// oneDNN's implementation name, e.g. "brg:avx512_core".
    std::string implementation() const;

private:
    std::unique_ptr<Impl> impl_;
};

/// Buffers: source, weights, (bias: n floats, with `bias`), destination.
std::unique_ptr<OnednnPrimitive> onednn_matmul(const StridedMatmul &m, bool bias);
/// dst[i, j] = a[i, j] + b[i, j] (rows x cols). Buffers: a, b, dst.
std::unique_ptr<OnednnPrimitive> onednn_add(int64_t rows, int64_t cols);
/// dst = GELU(src), the erf form. Buffers: src, dst.
std::unique_ptr<OnednnPrimitive> onednn_gelu(int64_t rows, int64_t cols);
/// Softmax over each row. Buffers: src, dst.
std::unique_ptr<OnednnPrimitive> onednn_softmax(int64_t rows, int64_t cols);
/// Layer normalization of each row (epsilon 1e-5), with scale and shift. Buffers: src, scale,
/// shift, dst.
std::unique_ptr<OnednnPrimitive> onednn_layernorm(int64_t rows, int64_t cols);

/// C = act(A B + bias) + R as one matmul primitive with post-ops (eltwise, binary add).
/// Buffers: A, B, (bias: n floats, with the bias), (R, with the residual), C.
std::unique_ptr<OnednnPrimitive> onednn_matmul_epilogue(const looptool::MatmulEpilogue &e);

/// One checked run of `prim` on fresh buffers of `c`, bound to the computation's buffers of
/// these indices in the order `prim`'s maker names (an Error naming `bench` and `method` if it
/// differs from the reference); then each call of the returned function measures it with the
/// full protocol and returns the median GFLOPS.
std::function<double()> primitive_measurer(const std::string &bench, const std::string &method,
                                           const looptool::Computation &c,
                                           std::unique_ptr<OnednnPrimitive> prim,
                                           const std::vector<int> &buffers);

/// "onednn-matmul": compare's method running oneDNN's matmul primitive on any matmul (batched,
/// strided: attention's kinds too) with the computation's own layouts.
inline constexpr const char *kOnednnMatmul = "onednn-matmul";

/// One checked run of onednn-matmul on fresh buffers of `c` (an Error naming `bench` if it
/// differs from the reference or c is no matmul), then each call of the returned function
/// measures it with the full protocol and returns the median GFLOPS.
std::function<double()> onednn_matmul_measurer(const std::string &bench,
                                               const looptool::Computation &c);

}  // namespace looptune::bench
