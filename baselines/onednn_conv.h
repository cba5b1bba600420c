// oneDNN's convolution as the reference for conv2d benchmarks: forward inference,
// the direct algorithm, on library_threads() threads, Debian's oneDNN 2.6 loaded at run time like
// its sgemm (onednn.cpp: load_onednn), through the C API so nothing links libdnnl.
//  - Plain: X, W and Y in our layouts (NCHW, OIHW, NCHW), oneDNN reading and writing our
//    buffers directly: what a user with our tensors calls.
//  - Best: every tensor in the layout oneDNN prefers (format_tag any: on AVX-512 its brgconv
//    kernels with nhwc activations and Ohwi32o/Ohwi64o weights), X and W
//    reordered into it once before the timing and Y reordered back after it: the library's
//    best case, layout conversion not counted.
// Both are checked against our reference on the computation's own buffers (onednn_conv_measurer).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "looptool/check/interpreter.h"
#include "looptool/ir/ir.h"

namespace looptune::bench {

enum class ConvLayout { Plain, Best };

/// "onednn-conv-plain" or "onednn-conv-best", the compare method names.
const char *conv_method_name(ConvLayout layout);

/// True when `c` is a conv2d (looptool::conv_params: any form, one stride and one padding for
/// rows and columns), which oneDNN runs on our buffers with the same stride and padding.
bool is_conv2d(const looptool::Computation &c);

/// One oneDNN convolution primitive for one make_conv2d computation and its buffers.
class OnednnConv {
public:
    /// Loads oneDNN (load_onednn) and creates the primitive for `c` in `layout`; throws
    /// looptool::Error if `c` is not a conv2d (is_conv2d) or oneDNN refuses it.
    OnednnConv(const looptool::Computation &c, ConvLayout layout);
    ~OnednnConv();
    OnednnConv(const OnednnConv &) = delete;
    OnednnConv &operator=(const OnednnConv &) = delete;

    /// Binds the computation's buffers (its X, W and Y are read and written); for Best, reorders X
    /// and W into oneDNN's layouts (not timed). The inputs must not change afterwards.
    void bind(looptool::Buffers &b);
    /// The convolution alone, on the bound buffers (Best: into oneDNN's own Y).
    void run();
    /// Best: reorders oneDNN's Y into the bound Y. Plain: nothing (Y is already ours).
    void finish();
    /// oneDNN's implementation name, e.g. "jit:avx512_core" or "gemm:jit".
    std::string implementation() const;
    /// oneDNN's layouts of src, weights and dst, e.g. "nhwc Ohwi64o nhwc".
    std::string layouts() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// A KernelFn (looptool/jit/jit.h) running the bound convolution `active` (set_active_conv);
/// it ignores its buffers, which must be the bound ones.
void set_active_conv(OnednnConv *active);
void onednn_conv_kernel(float *const *buffers, const volatile int32_t *cancel);

/// What compare does for the oneDNN conv methods: fresh buffers, one run checked against the
/// reference interpreter's result (an Error naming `bench` if it differs); then each call of
/// the returned function measures the convolution with the full protocol on the same buffers
/// and returns the median GFLOPS (compare's judge calls it once per alternating round).
std::function<double()> onednn_conv_measurer(const std::string &bench, ConvLayout layout,
                                             const looptool::Computation &c);

}  // namespace looptune::bench
