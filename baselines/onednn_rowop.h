// References for the row operations (make_softmax, make_layernorm; looptool/ir/row_ops.h):
//  - oneDNN's softmax and layer_normalization primitives (forward inference, one thread,
//    oneDNN 2.6 through the C API, loaded at run time like its sgemm: onednn.cpp), reading
//    and writing our X and Y (and G, B as the layernorm's scale and shift) directly;
//  - a streaming copy of X into Y (a loop compiled -O3 -march=native, non-temporal stores from
//    half the last-level cache up: streaming_copy.cpp): the memory roof a row operation (or
//    GELU), which reads X once and writes Y once, can at best reach.
// Each is checked against our reference on the computation's own buffers before it is timed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "looptool/ir/ir.h"

namespace looptune::bench {

/// "onednn-softmax", "onednn-layernorm" and "copy": the compare methods.
inline constexpr const char *kOnednnSoftmax = "onednn-softmax";
inline constexpr const char *kOnednnLayernorm = "onednn-layernorm";
inline constexpr const char *kStreamingCopy = "copy";

/// True when `c` is exactly make_softmax / make_layernorm of its own sizes.
bool is_softmax(const looptool::Computation &c);
bool is_layernorm(const looptool::Computation &c);

/// True when `method` is one of the three above, and whether it runs on `c` (the oneDNN
/// primitives on their own op, the copy on either and on make_gelu's).
bool is_rowop_method(const std::string &method);
bool rowop_method_runs_on(const std::string &method, const looptool::Computation &c);

/// One checked run of `method` on fresh buffers of `c` (an Error naming `bench` if it differs
/// from the reference; the copy is checked to copy), then each call of the returned function
/// measures it with the full protocol and returns the median GFLOPS counted with c's FLOPs (for
/// the copy: what c would reach at the copy's speed).
std::function<double()> rowop_measurer(const std::string &bench, const std::string &method,
                                       const looptool::Computation &c);

/// Bytes a row operation must move at least: X read once, Y written once (plus G and B).
double rowop_min_bytes(const looptool::Computation &c);

/// y[0, n) = x[0, n): a plain loop, or from half the last-level cache up non-temporal stores (y
/// at any alignment: plain stores up to its first vector boundary and in the tail).
void streaming_copy(const float *x, float *y, int64_t n);

/// Seconds per call of the streaming copy of `floats` floats (the full protocol's median).
double streaming_copy_seconds(int64_t floats);

/// oneDNN's implementation name for `method` on `c`, e.g. "jit:avx512_common".
std::string rowop_implementation(const std::string &method, const looptool::Computation &c);

}  // namespace looptune::bench
