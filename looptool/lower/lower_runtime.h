// Functions kernels call instead of carrying the code themselves: the register transpose of a
// `pack` copy. A JIT defines them once in a runtime module of its own (every kernel then only
// declares them: the 16x16 transpose was over half of a packed conv tile's codegen, 74.5 -> 31.7
// million llc instructions without it, docs/decisions.md); an exported kernel, or any module
// lowered without a JIT, defines them in itself with internal linkage so that its object file
// stands alone.
#pragma once

#include <llvm/IR/Function.h>
#include <llvm/IR/Module.h>

namespace looptool::detail {

/// The declaration in m of `void looptool_transpose16(const float *src, float *dst, i64
/// src_stride, i64 rows, i64 run, i64 dst_stride)` (`rows_per_block` 16) or
/// `looptool_transpose8` (8): dst[j * dst_stride + r] = src[r * src_stride + j] for r < rows,
/// j < run, rows a multiple of `rows_per_block` and run of 4, in blocks of that many rows
/// transposed in registers (dst_stride >= rows: a padded copy's rows).
llvm::Function *transpose_function(llvm::Module &m, int rows_per_block);

/// The declaration in m of `void looptool_parallel_for(ptr pool, ptr body, ptr ctx, i64 n)`:
/// runs body(ctx, begin, end) over [0, n) in contiguous chunks on the thread pool `pool`
/// (looptool/jit/thread_pool.h). A JIT defines it and `looptool_thread_pool` per Jit; no module
/// defines them itself (a module lowered with LowerOptions::threads 1 never uses them).
llvm::Function *parallel_for_function(llvm::Module &m);
/// The declaration in m of the external global `looptool_thread_pool`: the pool's address.
llvm::GlobalVariable *thread_pool_global(llvm::Module &m);

/// Gives every runtime function m declares its body, with internal linkage: m then stands
/// alone (LowerOptions::shared_runtime false).
void define_runtime_functions(llvm::Module &m);

/// A module defining every runtime function with external linkage (Jit::create adds it).
std::unique_ptr<llvm::Module> runtime_module(llvm::LLVMContext &ctx);

}  // namespace looptool::detail
