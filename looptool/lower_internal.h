// The lowering's LLVM-typed entry point, for the code that hands the module to LLVM (the JIT,
// an object-file export). Include it only from .cpp files built with LLVM's include paths
// (looptool/CMakeLists.txt); lower.h stays free of LLVM types for everyone else.
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>

#include "looptool/loop_tree.h"
#include "looptool/lower.h"

namespace looptool::detail {

/// Lowers p to a verified LLVM module in ctx exporting `void fn_name(float *const *, const
/// volatile int32_t *)` (the KernelFn ABI of jit.h), not yet optimised and without a data
/// layout or target triple (the caller sets those for its target). Fills *summary when given.
/// Throws Error if the computation or the tree are invalid.
std::unique_ptr<llvm::Module> lower_to_module(const Program &p, llvm::LLVMContext &ctx,
                                              const std::string &fn_name,
                                              const LowerOptions &options = {},
                                              LoweringSummary *summary = nullptr);

}  // namespace looptool::detail
