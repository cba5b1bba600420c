#include "looptool/lower/optimize.h"

#include <fmt/format.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include <cstdlib>

#include "looptool/ir/error.h"

namespace looptool::detail {

namespace {
// The IR pipeline. The lowering already emits the register tiles, unrolled copies and
// vector code, so the passes only have to (a) inline the body into the exported wrapper,
// (b) clean up and hoist (EarlyCSE, InstCombine, LICM) and (c) auto-vectorize the loops the
// schedule left alone, so that the naive nest runs like `g++ -O3 -march=native` on the same
// loop order, in about half the compile time of O2 for the same kernel speed (without
// loop-vectorize the naive nest runs ~30x slower; docs/decisions.md).
constexpr const char *kDefaultPipeline =
    "always-inline,"
    "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(licm),"
    "loop-simplify,lcssa,loop-rotate,loop-vectorize,"
    "slp-vectorizer,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(licm))";
}  // namespace

namespace {
/// LLVM's `disable-lsr` codegen option, or null if this LLVM has none.
llvm::cl::opt<bool> *disable_lsr_option() {
    auto &options = llvm::cl::getRegisteredOptions();
    const auto it = options.find("disable-lsr");
    return it == options.end() ? nullptr : static_cast<llvm::cl::opt<bool> *>(it->second);
}
}  // namespace

void initialize_native_target() {
    static const bool initialised = [] {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        llvm::InitializeNativeTargetAsmParser();
        // Codegen without loop strength reduction (llc's -disable-lsr, an option of LLVM's
        // codegen pipeline that only its command line sets): the lowering already walks every
        // loop with pointer increments, LSR and its IV analysis were 17% of llc's instructions
        // on a 32x8 vm conv tile (callgrind: 123.5 -> 105.5 million), and no kernel ran slower
        // without it (conv tiles, packed and blocked matmul tiles, naive nests; three
        // alternating runs each).
        if (llvm::cl::opt<bool> *o = disable_lsr_option()) o->setValue(true);
        return true;
    }();
    (void)initialised;
}

bool strength_reduction_disabled() {
    initialize_native_target();
    const llvm::cl::opt<bool> *o = disable_lsr_option();
    return o && o->getValue();
}

std::string ir_pipeline() {
    // LOOPTOOL_PASSES overrides it (textual new-PM syntax) for experiments.
    const char *env = std::getenv("LOOPTOOL_PASSES");
    return env && *env ? env : kDefaultPipeline;
}

void optimize_module(llvm::Module &m, llvm::TargetMachine *tm, const std::string &pipeline) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    pto.LoopInterleaving = true;
    pto.LoopUnrolling = false;  // the schedule decides unrolling
    llvm::PassBuilder pb(tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm;
    if (pipeline == "O2" || pipeline == "O3") {
        mpm = pb.buildPerModuleDefaultPipeline(pipeline == "O2" ? llvm::OptimizationLevel::O2
                                                                : llvm::OptimizationLevel::O3);
    } else if (auto e = pb.parsePassPipeline(mpm, pipeline)) {
        throw Error(
            fmt::format("LLVM: parsing the pass pipeline: {}", llvm::toString(std::move(e))));
    }
    mpm.run(m, mam);
}

}  // namespace looptool::detail
