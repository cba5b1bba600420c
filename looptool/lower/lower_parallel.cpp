// Lowering a parallel loop (docs/actions.md, `parallel`): the nest's outermost loop becomes a
// function of a range of its iterations, `name(ctx, begin, end)`, which the kernel hands to the
// JIT's thread pool through `looptool_parallel_for` (lower_runtime.h). The range's full
// iterations are a run-time loop, the partial last one (a tail) a static copy, as in one thread.
#include <fmt/format.h>

#include "looptool/ir/error.h"
#include "looptool/lower/lower_nest_emitter.h"
#include "looptool/lower/lower_runtime.h"

namespace looptool::detail {
namespace {

// `void name(ptr ctx, i64 begin, i64 end)`, what the pool calls: ctx holds the tensors'
// pointers then the cancel flag's; it calls the range body (inlined) with them.
llvm::Function *chunk_entry(const Computation &c, llvm::Module &m, const KernelBody &range,
                            const std::string &name) {
    llvm::LLVMContext &ctx = m.getContext();
    IRBuilder<> b(ctx);
    Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty();
    auto *type = llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false);
    auto *fn = llvm::Function::Create(type, llvm::Function::InternalLinkage, name, m);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    b.SetInsertPoint(BasicBlock::Create(ctx, "entry", fn));
    std::vector<Value *> args;
    for (size_t t = 0; t <= c.tensors.size(); ++t)
        args.push_back(b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, fn->getArg(0), t),
                                           llvm::Align(8)));
    args.push_back(fn->getArg(1));
    args.push_back(fn->getArg(2));
    b.CreateCall(range.fn, args);
    b.CreateRetVoid();
    return fn;
}

}  // namespace

void NestEmitter::run_parallel() {
    ++sum_.parallel_nests;
    llvm::Module &m = *body_.fn->getParent();
    const std::string name = body_.fn->getName().str() + ".par";
    const KernelBody range =
        create_kernel_body(c_, m, name + ".range", /*range=*/true, body_.buffer_align);
    {
        IRBuilder<> rb(range.entry);
        rb.CreateBr(range.nests);
        rb.SetInsertPoint(range.nests);
        NestEmitter chunk(c_, plan_, {}, range, rb, zero_started_, sum_);
        const int streamed = sum_.streamed_stores;
        chunk.emit_chunk_range();
        rb.CreateBr(range.ret);
        if (sum_.streamed_stores > streamed) fence_streamed_stores(range);
    }
    llvm::Function *entry = chunk_entry(c_, m, range, name);
    // The tensors' pointers escape to the other threads through ctx: this body no longer holds
    // them alone (noalias) nor keeps them (nocapture), so that no access moves across the call.
    for (llvm::Argument &a : body_.fn->args()) {
        a.removeAttr(llvm::Attribute::NoAlias);
        a.removeAttr(llvm::Attribute::NoCapture);
    }
    Type *ptr = b_.getPtrTy();
    const size_t n = c_.tensors.size() + 1;
    IRBuilder<> eb(body_.entry);
    Value *ctx = eb.CreateAlloca(llvm::ArrayType::get(ptr, n), nullptr, "par.ctx");
    for (size_t t = 0; t < n; ++t)
        b_.CreateAlignedStore(t < c_.tensors.size() ? body_.args[t] : body_.cancel,
                              b_.CreateConstInBoundsGEP1_64(ptr, ctx, t), llvm::Align(8));
    const Loop &l = plan_.nest.loops[0];
    const int64_t iterations = l.size + (l.tail > 0);
    b_.CreateCall(parallel_for_function(m),
                  {thread_pool_global(m), entry, ctx, b_.getInt64(uint64_t(iterations))});
}

void NestEmitter::emit_chunk_range() {
    const Loop &l = plan_.nest.loops[0];
    const size_t v = size_t(l.var);
    const int64_t chunk = plan_.inner[0], total = c_.vars[v].extent, nfull = total / chunk,
                  rem = total % chunk;
    if (plan_.mode == NestMode::Generic) {
        // Elements [begin * chunk, min(end * chunk, extent)) of the variable, in chunks.
        std::vector<Value *> idx(c_.vars.size(), b_.getInt64(0)), av;
        for (const auto &var : c_.vars) av.push_back(b_.getInt64(uint64_t(var.extent)));
        Value *lo = b_.CreateMul(body_.begin, b_.getInt64(uint64_t(chunk)));
        Value *hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                             b_.CreateMul(body_.end, b_.getInt64(uint64_t(chunk))),
                                             b_.getInt64(uint64_t(total)));
        idx[v] = lo;
        av[v] = b_.CreateSub(hi, lo);
        emit_generic(0, idx, av);
        return;
    }
    for (int r : plan_.region)
        LT_CHECK(r != 0, "a register tile starts at a parallel loop (a reduction over it)");
    const State st = initial_state();
    if (nfull > 0) {
        // The full iterations of the range: [begin, min(end, nfull)), maybe none.
        Value *hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, body_.end,
                                             b_.getInt64(uint64_t(nfull)));
        Value *count = b_.CreateSub(hi, body_.begin);
        BasicBlock *full = BasicBlock::Create(ctx_, "par.full", body_.fn);
        BasicBlock *after = BasicBlock::Create(ctx_, "par.full.done", body_.fn);
        b_.CreateCondBr(b_.CreateICmpSGT(count, b_.getInt64(0)), full, after);
        b_.SetInsertPoint(full);
        State s0 = st;
        for (size_t a = 0; a < slots_.size(); ++a) {
            const int64_t step = slots_[a].coef[v] * chunk;
            if (step == 0) continue;
            Value *off = b_.CreateMul(body_.begin, b_.getInt64(uint64_t(step)), "", true, true);
            s0.ptr[a] = b_.CreateInBoundsGEP(f32_, st.ptr[a], off);
            s0.mult[a] = gcd64(st.mult[a], step);
        }
        emit_do_while({"ploop", "pi", "pi.next", "pdone"}, b_.getInt64(1), count, true,
                      /*poll=*/true, {}, [&](Value *iv) {
                          State s2 = s0;
                          s2.avail[v] = chunk;
                          for (size_t a = 0; a < slots_.size(); ++a) {
                              const int64_t step = slots_[a].coef[v] * chunk;
                              if (step == 0) continue;
                              Value *off =
                                  b_.CreateMul(iv, b_.getInt64(uint64_t(step)), "", true, true);
                              s2.ptr[a] = b_.CreateInBoundsGEP(f32_, s0.ptr[a], off);
                          }
                          emit(1, s2);
                      });
        b_.CreateBr(after);
        b_.SetInsertPoint(after);
    }
    if (rem > 0) {
        // The partial iteration, nfull, when the range ends past it.
        BasicBlock *tail = BasicBlock::Create(ctx_, "par.tail", body_.fn);
        BasicBlock *done = BasicBlock::Create(ctx_, "par.tail.done", body_.fn);
        b_.CreateCondBr(b_.CreateICmpUGT(body_.end, b_.getInt64(uint64_t(nfull))), tail, done);
        b_.SetInsertPoint(tail);
        State s2 = st;
        s2.stat[v] = nfull * chunk;
        s2.avail[v] = rem;
        emit_poll();
        emit(1, s2);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
    }
}

}  // namespace looptool::detail
