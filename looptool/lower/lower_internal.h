// The lowering's LLVM-typed entry point, for the code that hands the module to LLVM (the JIT,
// an object-file export). Include it only from .cpp files built with LLVM's include paths
// (looptool/CMakeLists.txt); lower.h stays free of LLVM types for everyone else.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>

#include "looptool/ir/loop_tree.h"
#include "looptool/lower/lower.h"

namespace looptool::detail {

/// Lowers p to a verified LLVM module in ctx exporting `void fn_name(float *const *, const
/// volatile int32_t *)` (the KernelFn ABI of jit.h), not yet optimised and without a data
/// layout or target triple (the caller sets those for its target). Fills *summary when given.
/// Throws Error if the computation or the tree are invalid.
std::unique_ptr<llvm::Module> lower_to_module(const Program &p, llvm::LLVMContext &ctx,
                                              const std::string &fn_name,
                                              const LowerOptions &options = {},
                                              LoweringSummary *summary = nullptr);

/// At b's insertion point in fn: `aligned_alloc(64, elements * 4 rounded up to 64)`, aborting
/// when it returns null (no error channel in a void kernel, like a failed operator new); b then
/// continues in the block where the allocation succeeded. The kernel wrapper's scratch tensors
/// and the exported C entry's temporaries.
llvm::Value *emit_checked_alloc(llvm::IRBuilder<> &b, llvm::Function *fn, int64_t elements,
                                const std::string &name);

}  // namespace looptool::detail
