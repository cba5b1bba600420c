// The LLVM IR pipeline every kernel goes through before codegen, shared by the JIT (jit.cpp)
// and the exporter (export.cpp) so that an exported kernel is the JIT's kernel. An internal
// header: LLVM-typed, included only by those two .cpp files.
#pragma once

#include <string>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace looptool::detail {

/// LLVM's native target, asm printer and parser, initialised once per process (thread-safe);
/// also turns codegen's loop strength reduction off (optimize.cpp says why).
void initialize_native_target();
/// Whether codegen runs without loop strength reduction (LLVM's `disable-lsr` option is set).
bool strength_reduction_disabled();

/// The pipeline in LLVM's textual new-PM syntax: $LOOPTOOL_PASSES when set (or "O2"/"O3"),
/// else the default (optimize.cpp says why it is this one).
std::string ir_pipeline();

/// Runs `pipeline` on m with tm's cost model; "O2"/"O3" run LLVM's default pipelines. Throws
/// Error if the pipeline text does not parse.
void optimize_module(llvm::Module &m, llvm::TargetMachine *tm, const std::string &pipeline);

}  // namespace looptool::detail
