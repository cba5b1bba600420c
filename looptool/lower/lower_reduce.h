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

/// reduce_combine for an accumulator `acc` that is not NaN (a register tile's, reduce_start):
/// fadd, or the compare-and-select `v > acc ? v : acc` (`<` for min), which skips a NaN v as
/// maxnum does and so keeps acc free of NaN; on x86 one maxps/minps, where maxnum on a vector
/// takes three instructions (a NaN check and a blend).
llvm::Value *reduce_step(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *acc, llvm::Value *v);

/// A register tile's accumulator started from a stored value: for max and min a NaN there
/// becomes the identity (the reference's max or min skips it as one more term, as maxnum would),
/// so that reduce_step applies.
llvm::Value *reduce_start(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *stored);

/// The lanes of `vec` (partial results of one element) combined into the scalar `start`, for
/// max and min in halves (log2 of the lanes steps, not one per lane); with `never_nan` (vec and
/// start are accumulators) by reduce_step.
llvm::Value *reduce_lanes(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *start, llvm::Value *vec,
                          bool never_nan = false);

/// A loop storing `value` into the n floats at `ptr` (a max/min identity: memset cannot write
/// -inf); b continues after it, in fn.
void emit_fill(llvm::IRBuilder<> &b, llvm::Function *fn, llvm::Value *ptr, int64_t n, float value);

}  // namespace looptool::detail
