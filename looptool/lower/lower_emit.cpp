#include "looptool/lower/lower_emit.h"

#include "looptool/lower/lower_nest_emitter.h"

#include <fmt/format.h>

#include <algorithm>

#include "looptool/ir/error.h"
#include "looptool/lower/lower_reduce.h"
#include "looptool/lower/lower_runtime.h"

namespace looptool::detail {

// Whether loop d checks the cancel flag each iteration: the outermost loop, and every loop
// whose iteration runs at least kPollWork innermost iterations (a check then costs ~0.1% at
// most). With the outermost loop alone, a conv whose batch loop is outermost could be cancelled
// only between images: a naive batch-2 conv ran 4.7 s a call past a 0.34 s cap.
constexpr int64_t kPollWork = int64_t(1) << 16;
bool NestEmitter::polls(size_t d) const {
    int64_t work = 1;
    for (size_t e = d + 1; e < plan_.nest.loops.size() && work < kPollWork; ++e)
        work *= plan_.nest.loops[e].size + (plan_.nest.loops[e].tail > 0);
    return d == 0 || work >= kPollWork;
}

void NestEmitter::emit_poll() {
    Value *flag = b_.CreateLoad(i32_, body_.cancel, /*isVolatile=*/true, "cancel");
    BasicBlock *cont = BasicBlock::Create(ctx_, "go", body_.fn);
    llvm::MDBuilder md(ctx_);
    b_.CreateCondBr(b_.CreateICmpNE(flag, b_.getInt32(0)), body_.ret, cont,
                    md.createBranchWeights(1, 1u << 20));
    b_.SetInsertPoint(cont);
}

// A do-while loop of n >= 2 iterations; the accumulators of the active tiles are carried
// around it in phis.
void NestEmitter::emit_runtime_loop(int64_t n, bool poll, State &st,
                                    const std::function<void(Value *iv)> &body) {
    std::vector<Value **> carried;
    for (Tile *t : st.tiles)
        for (auto &[key, v] : t->acc) carried.push_back(&v);
    emit_do_while({"loop", "i", "i.next", "done"}, b_.getInt64(1), b_.getInt64(uint64_t(n)),
                  /*nowrap=*/true, poll, carried, body);
}

// A do-while loop: the counter runs from 0 by `step` while counter + step < `bound` (so at
// least once); each `carried` value is replaced by a phi around the loop, and holds the value
// the body left in it at the exit. `nowrap`: the increment cannot overflow (nuw, nsw).
void NestEmitter::emit_do_while(const LoopNames &names, Value *step, Value *bound, bool nowrap,
                                bool poll, const std::vector<Value **> &carried,
                                const std::function<void(Value *iv)> &body) {
    BasicBlock *pre = b_.GetInsertBlock();
    BasicBlock *head = BasicBlock::Create(ctx_, names.head, body_.fn);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    PHINode *iv = b_.CreatePHI(i64_, 2, names.iv);
    iv->addIncoming(b_.getInt64(0), pre);
    std::vector<PHINode *> phis;
    for (Value **slot : carried) {
        PHINode *phi = b_.CreatePHI((*slot)->getType(), 2, "acc");
        phi->addIncoming(*slot, pre);
        *slot = phi;
        phis.push_back(phi);
    }
    if (poll) emit_poll();
    body(iv);
    BasicBlock *latch = b_.GetInsertBlock();
    Value *next = b_.CreateAdd(iv, step, names.next, /*HasNUW=*/nowrap, /*HasNSW=*/nowrap);
    BasicBlock *exit = BasicBlock::Create(ctx_, names.exit, body_.fn);
    b_.CreateCondBr(b_.CreateICmpULT(next, bound), head, exit);
    iv->addIncoming(next, latch);
    for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(*carried[i], latch);
    b_.SetInsertPoint(exit);
}

std::unique_ptr<Tile> NestEmitter::start_tile(size_t pos, size_t d, State &st) {
    std::optional<std::vector<AccKey>> keys = tile_keys(plan_, pos, d, st.avail, st.stat);
    if (!keys) return nullptr;
    const int s = plan_.nest.stmts[pos];
    auto t = std::make_unique<Tile>(Tile{s, plan_.zero_start[pos], {}});
    const int out = plan_.out_slot[pos];
    const ReduceKind kind = c_.stmts[size_t(s)].reduce;
    for (const AccKey &k : *keys) {
        Value *init;
        if (t->zero_start) {
            init = identity(kind, k.w);
        } else if (k.w > 1 && k.stride == 0) {
            // Partial results of one element: the stored value in lane 0, the identity in the rest.
            Value *x = reduce_start(b_, kind, load_at(f32_, out, st, k.off));
            init = b_.CreateInsertElement(identity(kind, k.w), x, uint64_t(0));
        } else {
            init = reduce_start(b_, kind, load_lanes(out, st, k.off, k.w, k.stride, k.lanes));
        }
        t->acc[k] = init;
    }
    sum_.register_tiles++;
    if (t->zero_start) sum_.zero_start_tiles++;
    st.tiles.push_back(t.get());
    return t;
}

void NestEmitter::finish_tile(const Tile &t, State &st) {
    const int out = plan_.out_slot[plan_.position(t.stmt)];
    const ReduceKind kind = c_.stmts[size_t(t.stmt)].reduce;
    const std::set<AccKey> transposed = store_transposed(t, out, st);
    for (auto &[k, v] : t.acc) {
        if (transposed.count(k)) continue;
        if (k.w > 1 && k.stride == 0) {
            // -0 is the identity of a float sum that keeps a -0 result (0 + -0 is +0).
            Value *start = kind == ReduceKind::Sum ? llvm::ConstantFP::getNegativeZero(f32_)
                                                   : identity(kind, 1);
            store_lanes(out, st, k.off, 1, 0, 1, reduce_lanes(b_, kind, start, v, true));
        } else {
            store_lanes(out, st, k.off, k.w, k.stride, k.lanes, v);
        }
    }
    if (!t.zero_start) zero_started_[size_t(t.stmt)] = false;
    st.tiles.erase(std::find(st.tiles.begin(), st.tiles.end(), &t));
}

// A `pack`'s transposing copy (a conv's weights W[m, c, kh, kw] into [.., c, kh, kw, m_i]) as
// written is a scalar load and store per element, each load a row further in T: on a
// 512-channel 7x7 layer the copy cost more than the convolution (docs/decisions.md). Below the
// depth where the remaining loops are a run over contiguous elements of T and then the rows, it is
// a call to the runtime's transpose in blocks of 16 (or 8) rows (lower_runtime.h), which a JIT
// compiles once for all its kernels.
std::optional<NestEmitter::Transpose> NestEmitter::transpose_at(size_t d, const State &st) const {
    const std::vector<Loop> &loops = plan_.nest.loops;
    if (plan_.nest.stmts.size() != 1 || loops.size() < d + 2 || plan_.region[0] >= int(d))
        return std::nullopt;
    const Statement &stmt = c_.stmts[size_t(plan_.nest.stmts[0])];
    if (stmt.reduce != ReduceKind::None || stmt.value.op != OpKind::Read ||
        c_.tensors[size_t(stmt.out.tensor)].kind != TensorKind::Scratch)
        return std::nullopt;
    Transpose t;
    t.dst = plan_.slot(stmt.out);
    t.src = plan_.slot(stmt.value.access);
    const Slot &src = plan_.slots[size_t(t.src)], &dst = plan_.slots[size_t(t.dst)];
    // Every loop covers single elements of its own var, all that is left of it here.
    for (size_t e = d; e < loops.size(); ++e) {
        const Loop &l = loops[e];
        if (l.tail || l.unroll || l.vectorize || plan_.inner[e] != 1 ||
            st.avail[size_t(l.var)] != l.size)
            return std::nullopt;
    }
    const Loop &row = loops.back();
    t.rows = row.size;
    t.src_stride = src.coef[size_t(row.var)];
    if (dst.coef[size_t(row.var)] != 1 || t.rows % 8 != 0 || t.src_stride == 1) return std::nullopt;
    t.block = t.rows % 16 == 0 ? 16 : 8;
    // The run, innermost first: contiguous in T, and in S one row of `rows` (or a padded row of
    // more) apart.
    t.dst_stride = dst.coef[size_t(loops[loops.size() - 2].var)];
    if (t.dst_stride < t.rows) return std::nullopt;
    int64_t want_src = 1, want_dst = t.dst_stride;
    for (size_t e = loops.size() - 1; e-- > d;) {
        const size_t v = size_t(loops[e].var);
        if (src.coef[v] != want_src || dst.coef[v] != want_dst) return std::nullopt;
        want_src *= loops[e].size;
        want_dst *= loops[e].size;
    }
    t.run = want_src;
    if (t.run % 16 != 0) return std::nullopt;
    return t;
}

void NestEmitter::emit_transpose(const Transpose &t, const State &st) {
    ++sum_.transposed_copies;
    Value *src = addr(t.src, st, static_offset(t.src, st));
    Value *dst = addr(t.dst, st, static_offset(t.dst, st));
    // A call, not the code: a JIT compiles the transpose once (lower_runtime.h).
    b_.CreateCall(transpose_function(*b_.GetInsertBlock()->getModule(), t.block),
                  {src, dst, b_.getInt64(uint64_t(t.src_stride)), b_.getInt64(uint64_t(t.rows)),
                   b_.getInt64(uint64_t(t.run)), b_.getInt64(uint64_t(t.dst_stride))});
}

void NestEmitter::emit(size_t d, State st) {
    for (const auto &[depth, j] : attached_)
        if (depth == d) {
            if (writes_block(j)) rebase(st);
            emit_before(j, d, st);
        }
    if (d == plan_.nest.loops.size()) {
        emit_stmts(st, -1, 1);
        return;
    }
    if (const auto t = transpose_at(d, st)) {
        emit_transpose(*t, st);
        return;
    }
    // The tiles started here live until this depth is done; st and its copies below only
    // point at them.
    std::vector<std::unique_ptr<Tile>> started;
    for (size_t i = 0; i < plan_.nest.stmts.size(); ++i)
        if (plan_.region[i] == int(d))
            if (auto t = start_tile(i, d, st)) started.push_back(std::move(t));

    const Loop &l = plan_.nest.loops[d];
    const size_t v = size_t(l.var);
    const int64_t chunk = plan_.inner[d], total = st.avail[v], nfull = total / chunk,
                  rem = total % chunk, base = st.stat[v];
    const bool poll = polls(d);
    auto static_copy = [&](int64_t start, int64_t n) {
        State s2 = st;
        s2.stat[v] = base + start;
        s2.avail[v] = n;
        if (poll) emit_poll();
        emit(d + 1, s2);
        // Accumulators changed in s2's tiles are the same Tile objects as st's.
    };
    switch (plan_.expansion(d, total)) {
        case Expansion::Vector:
            if (poll) emit_poll();
            for (const VectorPiece &piece : plan_.pieces(total)) {
                State s2 = st;
                s2.stat[v] = base + piece.start;
                s2.avail[v] = piece.lanes;
                s2.lanes = piece.lanes;
                emit_stmts(s2, int(v), piece.width);
            }
            break;
        case Expansion::Unrolled:
            for (int64_t i = 0; i < nfull; ++i) static_copy(i * chunk, chunk);
            if (rem > 0) static_copy(nfull * chunk, rem);
            break;
        case Expansion::Loop:
            emit_runtime_loop(nfull, poll, st, [&](Value *iv) {
                State s2 = st;
                s2.avail[v] = chunk;
                for (size_t a = 0; a < slots_.size(); ++a) {
                    const int64_t step = slots_[a].coef[v] * chunk;
                    if (step == 0) continue;
                    Value *off = b_.CreateMul(iv, b_.getInt64(uint64_t(step)), "", true, true);
                    s2.ptr[a] = b_.CreateInBoundsGEP(f32_, st.ptr[a], off);
                    s2.mult[a] = gcd64(st.mult[a], step);
                }
                emit(d + 1, s2);
            });
            if (rem > 0) static_copy(nfull * chunk, rem);
            break;
    }
    for (auto it = started.rbegin(); it != started.rend(); ++it) finish_tile(**it, st);
}

// Fallback for nests whose static expansion would be too large: plain scalar loops with
// run-time trip counts and flat addressing, ignoring unroll/vectorize.
void NestEmitter::emit_generic(size_t d, std::vector<Value *> idx, std::vector<Value *> avail) {
    for (const auto &[depth, j] : attached_) {
        if (depth != d) continue;
        // A block-relative slot counts from where its copy's shared loops end.
        if (writes_block(j)) block_start_ = idx;
        NestEmitter inner = chained(j);
        inner.block_start_ = block_start_;
        inner.emit_generic(d, idx, avail);
    }
    if (d == plan_.nest.loops.size()) {
        State st;
        st.stat.assign(c_.vars.size(), 0);
        for (const Slot &s : plan_.slots) {
            Value *flat = b_.getInt64(0);
            for (size_t v = 0; v < s.coef.size(); ++v) {
                if (s.coef[v] == 0) continue;
                Value *i = s.block_relative ? b_.CreateSub(idx[v], block_start_[v]) : idx[v];
                flat = b_.CreateAdd(flat, b_.CreateMul(i, b_.getInt64(uint64_t(s.coef[v]))));
            }
            st.ptr.push_back(b_.CreateInBoundsGEP(f32_, body_.args[size_t(s.tensor)], flat));
            st.mult.push_back(1);
            st.bias.push_back(0);
        }
        emit_stmts(st, -1, 1);
        return;
    }
    const Loop &l = plan_.nest.loops[d];
    const size_t v = size_t(l.var);
    const int64_t chunk = plan_.inner[d];
    Value *total = avail[v], *base = idx[v];
    emit_do_while({"gloop", "start", "", "gdone"}, b_.getInt64(uint64_t(chunk)), total,
                  /*nowrap=*/false, polls(d), {}, [&](Value *start) {
                      idx[v] = b_.CreateAdd(base, start);
                      avail[v] = chunk == 1 ? b_.getInt64(1)
                                            : b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                                                       b_.getInt64(uint64_t(chunk)),
                                                                       b_.CreateSub(total, start));
                      emit_generic(d + 1, idx, avail);
                  });
}

void fence_streamed_stores(const KernelBody &body) {
    IRBuilder<> b(body.ret->getTerminator());
    b.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
}

KernelBody create_kernel_body(const Computation &c, llvm::Module &m, const std::string &fn_name,
                              bool range, int buffer_align) {
    llvm::LLVMContext &ctx = m.getContext();
    IRBuilder<> b(ctx);
    Type *ptr = llvm::PointerType::getUnqual(ctx);
    const size_t nt = c.tensors.size();
    KernelBody body;
    // The internal body takes every tensor as its own noalias pointer so alias analysis can
    // tell them apart; the exported wrapper unpacks the KernelFn ABI and calls it (inlined).
    std::vector<Type *> params(nt, ptr);
    params.push_back(ptr);
    if (range) params.insert(params.end(), 2, b.getInt64Ty());
    auto *body_ty = llvm::FunctionType::get(b.getVoidTy(), params, false);
    body.fn = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage,
                                     range ? fn_name : fn_name + ".body", m);
    body.fn->addFnAttr(llvm::Attribute::AlwaysInline);
    body.fn->addFnAttr(llvm::Attribute::NoUnwind);
    body.buffer_align = buffer_align;
    for (size_t t = 0; t < nt; ++t) {
        llvm::Argument *a = body.fn->getArg(unsigned(t));
        a->setName(c.tensors[t].name);
        a->addAttr(llvm::Attribute::NoAlias);
        a->addAttr(llvm::Attribute::NoCapture);
        const bool callers =
            c.tensors[t].kind == TensorKind::Input || c.tensors[t].kind == TensorKind::Output;
        const int64_t bytes = callers ? buffer_align : 64;
        body.align_floats.push_back(bytes / 4);
        a->addAttr(llvm::Attribute::getWithAlignment(ctx, llvm::Align(uint64_t(bytes))));
        a->addAttr(llvm::Attribute::getWithDereferenceableBytes(
            ctx, uint64_t(c.tensors[t].num_elements()) * 4));
        body.args.push_back(a);
    }
    body.cancel = body.fn->getArg(unsigned(nt));
    body.cancel->setName("cancel");
    if (range) {
        body.begin = body.fn->getArg(unsigned(nt + 1));
        body.end = body.fn->getArg(unsigned(nt + 2));
        body.begin->setName("begin");
        body.end->setName("end");
    }
    body.entry = BasicBlock::Create(ctx, "entry", body.fn);
    body.nests = BasicBlock::Create(ctx, "nests", body.fn);
    body.ret = BasicBlock::Create(ctx, "ret", body.fn);
    b.SetInsertPoint(body.ret);
    b.CreateRetVoid();
    return body;
}

std::vector<bool> emit_nests(const Computation &c, const std::vector<NestPlan> &plans,
                             const KernelBody &body, LoweringSummary &summary, int threads) {
    IRBuilder<> b(body.fn->getContext());
    b.SetInsertPoint(body.nests);
    std::vector<bool> zero_started(c.stmts.size(), true);
    for (size_t n = 0; n < plans.size(); ++n) {
        if (plans[n].nest.shared) continue;    // emitted inside the next nest's shared loops
        std::vector<const NestPlan *> before;  // the chain sharing this nest's loops, nearest first
        for (size_t k = n; k > 0 && plans[k - 1].nest.shared; --k) before.push_back(&plans[k - 1]);
        NestEmitter(c, plans[n], before, body, b, zero_started, summary, threads).run();
    }
    b.CreateBr(body.ret);
    if (summary.streamed_stores > 0) fence_streamed_stores(body);
    return zero_started;
}

void emit_zero_outputs(const Computation &c, const KernelBody &body,
                       const std::vector<bool> &zero_started, LoweringSummary &summary) {
    IRBuilder<> b(body.fn->getContext());
    b.SetInsertPoint(body.entry);
    const size_t nt = c.tensors.size();
    std::vector<bool> zero(nt, false);
    for (size_t s = 0; s < c.stmts.size(); ++s)
        if (c.stmts[s].reduce != ReduceKind::None && !zero_started[s])
            zero[size_t(c.stmts[s].out.tensor)] = true;
    for (size_t t = 0; t < nt; ++t) {
        if (!zero[t]) continue;
        const int64_t n = c.tensors[t].num_elements();
        const ReduceKind k = c.reduction_into(int(t));
        if (k == ReduceKind::Sum)
            b.CreateMemSet(body.args[t], b.getInt8(0), uint64_t(n) * 4,
                           llvm::MaybeAlign(uint64_t(body.align_floats[t] * 4)));
        else
            emit_fill(b, body.fn, body.args[t], n, reduce_identity(k));
        summary.zeroed_tensors.push_back(int(t));
    }
    b.CreateBr(body.nests);
}

Value *emit_checked_alloc(IRBuilder<> &b, llvm::Function *fn, int64_t elements,
                          const std::string &name) {
    llvm::Module &m = *fn->getParent();
    llvm::LLVMContext &ctx = m.getContext();
    Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty();
    auto aligned_alloc = m.getOrInsertFunction("aligned_alloc", ptr, i64, i64);
    auto abort_fn = m.getOrInsertFunction("abort", b.getVoidTy());
    const uint64_t bytes = (uint64_t(elements) * 4 + 63) / 64 * 64;
    Value *p = b.CreateCall(aligned_alloc, {b.getInt64(64), b.getInt64(bytes)}, name);
    BasicBlock *fail = BasicBlock::Create(ctx, "no_memory", fn);
    BasicBlock *ok = BasicBlock::Create(ctx, "allocated", fn);
    b.CreateCondBr(b.CreateIsNull(p), fail, ok);
    b.SetInsertPoint(fail);
    b.CreateCall(abort_fn);
    b.CreateUnreachable();
    b.SetInsertPoint(ok);
    return p;
}

void emit_wrapper(const Computation &c, llvm::Module &m, const KernelBody &body,
                  const std::string &fn_name, const std::vector<int> &kernel_owned) {
    llvm::LLVMContext &ctx = m.getContext();
    IRBuilder<> b(ctx);
    Type *ptr = llvm::PointerType::getUnqual(ctx);
    auto *kernel_ty = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr}, false);
    auto *kernel = llvm::Function::Create(kernel_ty, llvm::Function::ExternalLinkage, fn_name, m);
    kernel->addFnAttr(llvm::Attribute::NoUnwind);
    b.SetInsertPoint(BasicBlock::Create(ctx, "entry", kernel));
    // A null cancel pointer means "never cancel".
    auto *never =
        new llvm::GlobalVariable(m, b.getInt32Ty(), true, llvm::GlobalValue::InternalLinkage,
                                 b.getInt32(0), fn_name + ".never");
    Value *cancel = kernel->getArg(1);
    cancel = b.CreateSelect(b.CreateIsNull(cancel), never, cancel);
    // Scratch tensors (`pack`ed copies) and folded temporaries (lower_fuse.h) are the kernel's
    // own, allocated per call: reentrant, and nothing stays mapped between calls. A repeated
    // allocation of one size is served from the heap glibc keeps, not by fresh pages (up to its
    // 32 MB mmap threshold).
    std::vector<Value *> call_args, scratch;
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        const bool owned =
            t >= c.num_buffers() || std::ranges::find(kernel_owned, int(t)) != kernel_owned.end();
        if (!owned) {
            call_args.push_back(
                b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, kernel->getArg(0), t),
                                    llvm::Align(8), c.tensors[t].name + ".ptr"));
            continue;
        }
        // `pack` keeps a scratch tensor within kMaxScratchElements; a folded one is smaller.
        Value *p = emit_checked_alloc(b, kernel, c.tensors[t].num_elements(), c.tensors[t].name);
        call_args.push_back(p);
        scratch.push_back(p);
    }
    call_args.push_back(cancel);
    b.CreateCall(body.fn, call_args);
    if (!scratch.empty()) {
        auto free_fn = m.getOrInsertFunction("free", b.getVoidTy(), ptr);
        for (Value *p : scratch) b.CreateCall(free_fn, {p});
    }
    b.CreateRetVoid();
}

}  // namespace looptool::detail
