// The lowering pipeline (lower.h), one ordered list of steps in the manner of Halide's
// lower_impl: validate -> elide copies -> fold scratch blocks -> fuse rows -> plan each nest
// -> prefetch -> streaming stores
// -> emit from the plans -> zero outputs -> wrapper -> verify. With LOOPTOOL_LOG_LOWERING=1 each
// step logs what it did to stderr.
#include "looptool/lower/lower.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/lower/lower_elide.h"
#include "looptool/lower/lower_emit.h"
#include "looptool/lower/lower_fold.h"
#include "looptool/lower/lower_fuse.h"
#include "looptool/lower/lower_internal.h"
#include "looptool/lower/lower_math.h"
#include "looptool/lower/lower_plan.h"
#include "looptool/lower/lower_prefetch.h"
#include "looptool/lower/lower_runtime.h"
#include "looptool/lower/lower_stream.h"

namespace looptool {
namespace detail {
namespace {

bool log_enabled() {
    const char *v = std::getenv("LOOPTOOL_LOG_LOWERING");
    return v && *v && std::string(v) != "0";
}

}  // namespace

std::unique_ptr<llvm::Module> lower_to_module(const Program &p, llvm::LLVMContext &ctx,
                                              const std::string &fn_name,
                                              const LowerOptions &options,
                                              LoweringSummary *summary) {
    const bool log = log_enabled();
    auto step = [&](const char *name, const std::string &what) {
        if (log) fmt::print(stderr, "lower {}: {}: {}\n", fn_name, name, what);
    };
    const int al = options.buffer_align;
    if (al < 4 || al > 64 || (al & (al - 1)) != 0)
        throw Error(fmt::format("buffer alignment {} is not a power of two from 4 to 64", al));
    p.computation().validate();
    validate_loop_tree(p.computation(), p.tree);
    step("validate", fmt::format("{}, {} statements, {} nests", p.computation().name,
                                 p.computation().stmts.size(), p.tree.nests.size()));

    ElidedProgram prog = options.elide_copies ? elide_copies(p.computation(), p.tree)
                                              : ElidedProgram{p.computation(), p.tree, false};
    if (options.elide_copies) elide_fused_temps(prog);
    if (log) {
        Program shown{std::make_shared<const Computation>(prog.comp), prog.tree, 0};
        std::string tree = dump(shown, false);
        while (!tree.empty() && tree.back() == '\n') tree.pop_back();
        step("elide copies", prog.elided ? "folded a copy nest, the tree is now\n" + tree : "none");
    }
    auto joined = [](const std::vector<std::string> &v, const char *sep) {
        return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, sep));
    };
    const FoldedScratch folded = fold_scratch(prog.comp, prog.tree);
    step("fold scratch", joined(folded.log, "; "));
    const FusedRows fused = options.fuse_rows ? fuse_rows(prog.comp, prog.tree) : FusedRows{};
    step("fuse rows", joined(fused.log, " | "));
    const Computation &c = prog.comp;

    std::vector<NestPlan> plans = plan_nests(c, prog.tree, options);
    for (NestPlan &plan : plans)
        for (Slot &s : plan.slots)
            s.block_relative =
                std::ranges::find(folded.block_relative, s.tensor) != folded.block_relative.end();
    LoweringSummary sum;
    sum.copy_elided = prog.elided;
    for (size_t n = 0; n < plans.size(); ++n) {
        sum.relaxed_nests += plans[n].mode != NestMode::Static;
        sum.generic_nests += plans[n].mode == NestMode::Generic;
        step("plan", fmt::format("nest {}: {}", n, describe(c, plans[n])));
    }
    const std::vector<std::string> prefetched =
        options.prefetch_blocks ? plan_prefetches(c, plans) : std::vector<std::string>{};
    sum.prefetched_reads = int(prefetched.size());
    step("prefetch", options.prefetch_blocks ? joined(prefetched, "; ") : "off");
    const std::vector<std::string> streamed = plan_streaming_stores(c, plans, options.stream_bytes);
    step("stream", joined(streamed, ", "));
    auto m = std::make_unique<llvm::Module>(fn_name, ctx);
    set_math_widths(*m, options.vector_math);
    const KernelBody body = create_kernel_body(c, *m, fn_name, false, options.buffer_align);
    const std::vector<bool> zero_started = emit_nests(c, plans, body, sum, options.threads);
    step("emit", fmt::format("{} register tiles ({} from zero), {} statement copies, {} "
                             "transposing copies, {} parallel nests, {} streamed stores",
                             sum.register_tiles, sum.zero_start_tiles, sum.static_statements,
                             sum.transposed_copies, sum.parallel_nests, sum.streamed_stores));

    emit_zero_outputs(c, body, zero_started, sum);
    std::vector<std::string> zeroed;
    for (int t : sum.zeroed_tensors) zeroed.push_back(c.tensors[size_t(t)].name);
    step("zero outputs", joined(zeroed, ", "));

    emit_wrapper(c, *m, body, fn_name, fused.kernel_owned);
    step("wrapper", fn_name);

    if (!options.shared_runtime) define_runtime_functions(*m);
    step("runtime", options.shared_runtime ? "declared, the JIT's runtime module defines them"
                                           : "defined in the module");

    std::string err;
    llvm::raw_string_ostream os(err);
    LT_CHECK(!llvm::verifyModule(*m, &os), "lowering produced invalid LLVM IR: " + os.str());
    step("verify", "ok");
    if (summary) *summary = std::move(sum);
    return m;
}

}  // namespace detail

LoweredIR lower_to_llvm_ir(const Program &p, const std::string &fn_name,
                           const LowerOptions &options) {
    llvm::LLVMContext ctx;
    LoweredIR r;
    auto m = detail::lower_to_module(p, ctx, fn_name, options, &r.summary);
    llvm::raw_string_ostream os(r.ir);
    m->print(os, nullptr);
    return r;
}

}  // namespace looptool
