#include "looptool/lower/lower_reduce.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include <vector>

#include "looptool/ir/error.h"

namespace looptool::detail {

llvm::Value *reduce_identity_value(llvm::Type *t, ReduceKind k) {
    return llvm::ConstantFP::get(t, double(reduce_identity(k)));
}

llvm::Value *reduce_combine(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *old, llvm::Value *v) {
    switch (k) {
        case ReduceKind::Sum: return b.CreateFAdd(old, v);
        case ReduceKind::Max: return b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, old, v);
        case ReduceKind::Min: return b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, old, v);
        case ReduceKind::None: break;
    }
    LT_CHECK(false, "not a reduction");
}

llvm::Value *reduce_step(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *acc, llvm::Value *v) {
    switch (k) {
        case ReduceKind::Sum: return b.CreateFAdd(acc, v);
        case ReduceKind::Max: return b.CreateSelect(b.CreateFCmpOGT(v, acc), v, acc);
        case ReduceKind::Min: return b.CreateSelect(b.CreateFCmpOLT(v, acc), v, acc);
        case ReduceKind::None: break;
    }
    LT_CHECK(false, "not a reduction");
}

llvm::Value *reduce_start(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *stored) {
    if (k == ReduceKind::Sum) return stored;
    return b.CreateSelect(b.CreateFCmpUNO(stored, stored),
                          reduce_identity_value(stored->getType(), k), stored);
}

llvm::Value *reduce_lanes(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *start, llvm::Value *vec,
                          bool never_nan) {
    if (k == ReduceKind::Sum) {
        auto *sum = llvm::cast<llvm::Instruction>(b.CreateFAddReduce(start, vec));
        sum->setHasAllowReassoc(true);
        return sum;
    }
    LT_CHECK(k != ReduceKind::None, "not a reduction");
    // llvm.vector.reduce.fmax without nnan becomes one maxnum per lane on x86, a chain.
    auto step = [&](llvm::Value *x, llvm::Value *y) {
        return never_nan ? reduce_step(b, k, x, y) : reduce_combine(b, k, x, y);
    };
    unsigned n = llvm::cast<llvm::FixedVectorType>(vec->getType())->getNumElements();
    for (; n > 1 && n % 2 == 0; n /= 2) {
        std::vector<int> lo(n / 2), hi(n / 2);
        for (unsigned i = 0; i < n / 2; ++i) lo[i] = int(i), hi[i] = int(n / 2 + i);
        vec = step(b.CreateShuffleVector(vec, lo), b.CreateShuffleVector(vec, hi));
    }
    for (unsigned i = 0; i < n; ++i) start = step(start, b.CreateExtractElement(vec, uint64_t(i)));
    return start;
}

void emit_fill(llvm::IRBuilder<> &b, llvm::Function *fn, llvm::Value *ptr, int64_t n, float value) {
    llvm::LLVMContext &ctx = b.getContext();
    llvm::BasicBlock *pre = b.GetInsertBlock();
    llvm::BasicBlock *head = llvm::BasicBlock::Create(ctx, "fill", fn);
    llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "filled", fn);
    b.CreateBr(head);
    b.SetInsertPoint(head);
    llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, "fill.i");
    i->addIncoming(b.getInt64(0), pre);
    b.CreateAlignedStore(llvm::ConstantFP::get(b.getFloatTy(), double(value)),
                         b.CreateInBoundsGEP(b.getFloatTy(), ptr, i), llvm::Align(4));
    llvm::Value *next = b.CreateAdd(i, b.getInt64(1), "fill.next", true, true);
    i->addIncoming(next, head);
    b.CreateCondBr(b.CreateICmpULT(next, b.getInt64(uint64_t(n))), head, done);
    b.SetInsertPoint(done);
}

}  // namespace looptool::detail
