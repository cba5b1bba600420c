// Lowering, the LLVM steps (lower.h): the kernel body, emission of each nest from its plan,
// zeroing the reduction outputs no zero-start tile covered, and the exported wrapper.
// Internal: included by lower.cpp only (LLVM include paths, looptool/CMakeLists.txt).
#pragma once

#include <llvm/IR/Function.h>
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

#include "looptool/lower/lower_plan.h"

namespace looptool::detail {

/// The internal kernel body: one noalias pointer argument per tensor and the cancel flag. Its
/// blocks: `entry` (left open for emit_zero_outputs), `nests` (where emit_nests starts) and
/// `ret`.
struct KernelBody {
    llvm::Function *fn = nullptr;
    std::vector<llvm::Value *> args;  ///< per tensor
    /// Per tensor: the floats its pointer is aligned to (inputs and outputs: the caller's
    /// LowerOptions::buffer_align; temporaries: 16, allocated 64-byte aligned).
    std::vector<int64_t> align_floats;
    int buffer_align = 64;  ///< LowerOptions::buffer_align
    llvm::Value *cancel = nullptr;
    llvm::Value *begin = nullptr, *end = nullptr;  ///< a chunk body's range (i64), else null
    llvm::BasicBlock *entry = nullptr, *nests = nullptr, *ret = nullptr;
};

/// A fence where `body` returns: non-temporal stores are weakly ordered, and a caller (or the
/// thread that waits for a parallel range) must see them once the body is done.
void fence_streamed_stores(const KernelBody &body);

/// With `range`, two i64 parameters follow the cancel flag: the iterations [begin, end) of a
/// parallel loop the body runs (its name then `fn_name` itself). `buffer_align`: as
/// LowerOptions::buffer_align.
KernelBody create_kernel_body(const Computation &c, llvm::Module &m, const std::string &fn_name,
                              bool range, int buffer_align);

/// Emits every nest from its plan, in order, into body.nests, then branches to body.ret.
/// Returns per statement whether every emission of it was a zero-start register tile (so
/// its output needs no zeroing).
/// `threads` > 1: parallel loops run on the JIT's thread pool; 1: as plain loops.
std::vector<bool> emit_nests(const Computation &c, const std::vector<NestPlan> &plans,
                             const KernelBody &body, LoweringSummary &summary, int threads = 1);

/// Sets, in body.entry, every reduction output some emission of its statement accumulates
/// into memory to the reduction's identity (memset to zero for a sum, a fill loop for max and
/// min), then branches to body.nests.
void emit_zero_outputs(const Computation &c, const KernelBody &body,
                       const std::vector<bool> &zero_started, LoweringSummary &summary);

/// The exported KernelFn `void fn_name(float *const *buffers, const volatile int32_t *cancel)`
/// that unpacks the buffers and calls the body (inlined by the JIT's first pass). The scratch
/// tensors and the temporaries in `kernel_owned` (lower_fuse.h) it allocates and frees itself.
void emit_wrapper(const Computation &c, llvm::Module &m, const KernelBody &body,
                  const std::string &fn_name, const std::vector<int> &kernel_owned = {});

}  // namespace looptool::detail
