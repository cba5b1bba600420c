// The C text of a kernel library (kernel_library.h): its header, looptune_kernels.h, and the
// dispatch source compiled with the kernels' objects, which chooses a kernel by shape.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace looptune {

struct DispatchKernel {
    std::string function;  ///< C function name
    std::string kind;      ///< "matmul", "conv2d" or "" (its own name only)
    /// matmul: M, N, K; conv2d: N, CI, H, W, CO, KH, KW[, STRIDE, PAD]
    std::vector<int64_t> shape;
    std::string params;   ///< the C parameter list, e.g. "const float *A, ..."
    std::string comment;  ///< one line for the header
    /// The same kernel lowered for 64-byte aligned pointers, called when every pointer is;
    /// empty: none (the kernel's own alignment is all there is).
    std::string aligned_function = {};
};

/// The name of `function`'s variant for 64-byte aligned pointers: `function` + "_a64".
inline std::string aligned_function_name(const std::string &function) { return function + "_a64"; }

/// looptune_kernels.h: the contract, lt_sgemm, lt_sconv2d(_ex), lt_library_info and every kernel
/// under its own name. `align`: the bytes the kernels' pointers must be aligned to.
std::string library_header(const std::vector<DispatchKernel> &kernels, const std::string &machine,
                           const std::string &cpu, const std::string &triple,
                           const std::array<int64_t, 3> &block, int align);

/// The dispatch's C source: the shape tables, the fallbacks and `manifest` (JSON text) as
/// lt_library_info()'s string. `block_function` is the block kernel's C function; `align` the
/// bytes the kernels' pointers must be aligned to (others are copied into aligned buffers).
std::string dispatch_source(const std::vector<DispatchKernel> &kernels,
                            const std::string &block_function, const std::array<int64_t, 3> &block,
                            const std::string &manifest, int align);

/// `text` as a C string literal (quotes, backslashes and control characters escaped).
std::string c_string_literal(const std::string &text);

}  // namespace looptune
