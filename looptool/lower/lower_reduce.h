// Lowering, the reduction kinds (lower.h): the LLVM code that starts, combines and finishes
// a sum, max or min (ir.h, ReduceKind). Internal: included by lower_emit.cpp only (LLVM
// include paths, looptool/CMakeLists.txt).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <cstdint>

#include "looptool/ir/ir.h"

namespace looptool::detail {

/// The reduction's identity (0, -inf, +inf) as a constant of type t (float or a float vector).
llvm::Value *reduce_identity_value(llvm::Type *t, ReduceKind k);

/// old combined with one more term v: fadd, or maxnum/minnum. Unlike a compare-and-select,
/// maxnum and minnum skip a NaN operand whatever its position, so the result does not depend
/// on the order of the terms: any split, reorder or vectorization of the loops gives the
/// reference's (fmax's) value.
llvm::Value *reduce_combine(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *old, llvm::Value *v);

/// The lanes of `vec` (partial results of one element) combined into the scalar `start`.
llvm::Value *reduce_lanes(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *start, llvm::Value *vec);

/// A loop storing `value` into the n floats at `ptr` (a max/min identity: memset cannot write
/// -inf); b continues after it, in fn.
void emit_fill(llvm::IRBuilder<> &b, llvm::Function *fn, llvm::Value *ptr, int64_t n, float value);

}  // namespace looptool::detail
