// oneDNN's matmul primitive with post-ops as the reference for a matmul with an epilogue
// (looptool/gen/epilogue.h): the bias through the matmul's bias descriptor, the activation as an
// eltwise post-op (relu, gelu_erf, gelu_tanh), the residual as a binary add post-op, one thread,
// oneDNN 2.6 through the C API loaded at run time (onednn.cpp). It reads and writes the
// computation's own A, B, Bias, R and C, and is checked against our reference before it is timed.
#pragma once

#include <functional>
#include <string>

#include "baselines/onednn_primitive.h"
#include "looptool/ir/ir.h"

namespace looptune::bench {

// compare's `onednn-matmul` (kOnednnMatmul, onednn_primitive.h) runs this on matmuls with an
// epilogue and the plain strided primitive on the other matmuls.

/// True when `c` is a matmul with an epilogue as generate writes it (looptool::matmul_epilogue).
bool onednn_postops_runs_on(const looptool::Computation &c);

/// One checked run on fresh buffers of `c` (an Error naming `bench` if it differs from the
/// reference), then each call of the returned function measures the primitive with the full
/// protocol and returns the median GFLOPS counted with c's FLOPs.
std::function<double()> onednn_postops_measurer(const std::string &bench,
                                                const looptool::Computation &c);

/// oneDNN's implementation name for `c`'s primitive, e.g. "brg:avx512_core".
std::string onednn_postops_implementation(const looptool::Computation &c);

}  // namespace looptune::bench
