// Benchmark generation: LoopTune's range syntax, matmul and conv2d datasets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "looptool/gen/attention.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/loop_tree.h"

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
/// atomically; returns the paths written. With an epilogue, make_matmul_epilogue's (epilogue.h).
std::vector<std::string> write_matmul_dataset(const std::vector<MatmulShape> &shapes,
                                              const std::string &dir, const Epilogue &e = {});

/// A conv2d as LoopTune names it, conv{n}_{c}_{h}_{w}__{m}_{c}_{kh}_{kw}: input X[n,c,h,w],
/// weights W[m,c,kh,kw], stride 1, no padding (make_conv2d); with a stride or padding,
/// make_padded_conv2d's (names ending _s{stride}, _p{pad}).
struct ConvShape {
    int64_t n, c, h, w, m, kh, kw;
    int64_t stride = 1, pad = 0;
    std::string name() const;
};

/// C[b,m,n] = sum_k A[b,m,k] * B[b,k,n]: a batch of b matmuls (attention's Q.K^T and P.V per
/// head), in make_matmul's form with the batch variable declared first (the naive nest b, m,
/// k, n then b, m, n). Named bmm{b}_{m}_{n}_{k} unless `name` is given.
Computation make_bmm(int64_t b, int64_t m, int64_t n, int64_t k, std::string name = "");

/// Writes one batched matmul (make_bmm) per batch size and shape into `dir`, like
/// write_matmul_dataset.
std::vector<std::string> write_bmm_dataset(const std::vector<int64_t> &batches,
                                           const std::vector<MatmulShape> &shapes,
                                           const std::string &dir);

/// One attention matmul per (batch, heads, tokens, head dim) of the ranges: `kind` "scores"
/// (make_scores) or "context" (make_context), written into `dir` like write_matmul_dataset
/// (nothing written if any shape is bad). `dim_a` is H_RANGE,T_RANGE,D_RANGE, `batch` B_RANGE.
/// Throws Error naming what is wrong.
std::vector<std::string> write_attention_dataset(const std::string &kind, std::string_view batch,
                                                 std::string_view dim_a, HeadLayout layout,
                                                 const std::string &dir);

/// make_conv2d with stride `stride` (X[n, c, s ho + kh, s wo + kw], ho = (h - kh) / s + 1),
/// valid padding; make_conv2d's own computation for stride 1.
Computation make_strided_conv2d(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh,
                                int64_t kw, int64_t stride, std::string name = "");

/// make_strided_conv2d over the input zero-padded by `pad` rows and columns on each side (ho =
/// (h + 2 pad - kh) / stride + 1), exactly: a first statement P[n, c, h + pad, w + pad] +=
/// X[n, c, h, w] fills a temporary P, zero around the image (a sum reduction starts at 0), and
/// the conv reads P (variables n, c, ho, wo, kh, kw, m, h, w; tensors X, W, P, T, Y). Named
/// conv..._s{stride}_p{pad}; make_strided_conv2d's computation for pad 0. Throws Error for a
/// padding that is negative or not below the kernel (outputs of zeros alone).
Computation make_padded_conv2d(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh,
                               int64_t kw, int64_t stride, int64_t pad, std::string name = "");

/// A computation given by its kind and extents, as `tune --matmul/--bmm/--conv` and Python's
/// tune(matmul=, bmm=, conv=) give it: "matmul" M, N, K (B, M, N, K: batched), "bmm" B, M, N,
/// K, "scores" and "context" B, H, T, D (make_scores, make_context, token-major), "conv" N, CI, H,
/// W, CO, KH, KW[, STRIDE[, PAD]] (make_padded_conv2d). Throws Error starting with `who` for
/// another count, an extent outside [1, kMaxExtent], a padding not below the kernel or a kernel
/// larger than the padded image.
Computation computation_of_shape(const std::string &who, const std::string &kind,
                                 const std::vector<int64_t> &d);

/// One row operation per (rows, cols) of --dimA ROWS_RANGE,COLS_RANGE, `kind` "softmax"
/// (make_softmax), "layernorm" (make_layernorm), "gelu" or "gelu-tanh" (make_gelu), written into
/// `dir` like write_matmul_dataset. Throws Error for another kind, a malformed --dimA or a tensor
/// above kMaxTensorElements.
std::vector<std::string> write_rowop_dataset(const std::string &kind, std::string_view dim_a,
                                             const std::string &dir);

/// Every conv from --dimA N_RANGE,C_RANGE,H_RANGE[,W_RANGE] --dimB
/// M_RANGE,C_RANGE,KH_RANGE,KW_RANGE (the input's and the weights' dimensions, as in the names).
/// Without W_RANGE images are square (w = h), which is how LoopTune's 81 conv benchmarks were made:
/// `--dimA 1|32|64,32|64|128,56|112|256 --dimB 1|32|64,32|64|128,3,3`. The two C ranges must
/// be equal; a kernel larger than its (padded) image, a stride outside [1, 64] or a padding not
/// below the kernel is an error. Ordered by name.
std::vector<ConvShape> conv_shapes(std::string_view dim_a, std::string_view dim_b,
                                   int64_t stride = 1, int64_t pad = 0);

/// Writes one naive conv2d benchmark file per shape (make_padded_conv2d) into `dir`, like
/// write_matmul_dataset.
std::vector<std::string> write_conv_dataset(const std::vector<ConvShape> &shapes,
                                            const std::string &dir);

}  // namespace looptool
