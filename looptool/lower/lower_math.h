// Lowering, internal: exp, log, tanh and erf as calls of glibc's math libraries, except exp on
// a vector, which is inline code (with AVX-512 a table of 2^(j/16), within 1.1 ulp; otherwise
// Cephes' expf, within 2 ulp): a libmvec call per 16 lanes clobbers every vector register and
// costs several times these instructions, which is what a softmax row spends its time on.
// A vector otherwise goes to libmvec's variants (`_ZGVeN16v_expf`: 16 lanes, AVX-512; `d`, 8:
// AVX2; `b`, 4: SSE) in pieces of the widths the target allows; a scalar calls libm (`expf`)
// with those variants named on the call, so LLVM's loop vectorizer can widen it to them. Without
// any width (another target, or no libmvec) a vector is computed lane by lane by libm. Included by
// the lowering's .cpp files and the JIT (LLVM include paths).
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

#include "looptool/ir/ir.h"

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace looptool::detail {

/// Bit w (4, 8, 16) of a width set: libmvec's w-lane variants may be called.
constexpr unsigned kMathWidths[] = {4, 8, 16};

/// The widths code for `tm` (its CPU and features) can call: 4 on x86-64, 8 with AVX2, 16 with
/// AVX-512F; none on other targets.
unsigned vector_math_widths(const llvm::TargetMachine &tm);

/// libmvec's names of every function emit_math may call with `widths`.
std::vector<std::string> vector_math_symbols(unsigned widths);

/// Records the widths the module's math calls may use (LowerOptions::vector_math).
void set_math_widths(llvm::Module &m, unsigned widths);

/// True for the ops emit_math lowers.
bool is_math_call(OpKind op);

/// op (Exp, Log, Tanh or Erf) of x, a float or a vector of floats, at b's insertion point.
llvm::Value *emit_math(llvm::IRBuilder<> &b, OpKind op, llvm::Value *x);

}  // namespace looptool::detail
