#include "looptool/lower/lower_reduce.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

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

llvm::Value *reduce_lanes(llvm::IRBuilder<> &b, ReduceKind k, llvm::Value *start,
                          llvm::Value *vec) {
    switch (k) {
        case ReduceKind::Sum: {
            auto *sum = llvm::cast<llvm::Instruction>(b.CreateFAddReduce(start, vec));
            sum->setHasAllowReassoc(true);
            return sum;
        }
        // llvm.vector.reduce.fmax/fmin have maxnum/minnum's semantics.
        case ReduceKind::Max: return reduce_combine(b, k, start, b.CreateFPMaxReduce(vec));
        case ReduceKind::Min: return reduce_combine(b, k, start, b.CreateFPMinReduce(vec));
        case ReduceKind::None: break;
    }
    LT_CHECK(false, "not a reduction");
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
