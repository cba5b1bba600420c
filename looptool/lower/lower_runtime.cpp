#include "looptool/lower/lower_runtime.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <string>
#include <vector>

#include "looptool/ir/error.h"

namespace looptool::detail {
namespace {

using llvm::BasicBlock;
using llvm::IRBuilder;
using llvm::PHINode;
using llvm::Value;

/// The runtime's transposes, by the rows of their blocks.
constexpr int kTransposeRows[] = {16, 8};
const char *transpose_name(int rows) {
    return rows == 16 ? "looptool_transpose16" : "looptool_transpose8";
}

/// `for (i = 0; i < bound; i += step) body(i)` with bound >= step > 0 (a do-while).
template <typename Body>
void emit_loop(IRBuilder<> &b, const char *name, Value *step, Value *bound, Body body) {
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    BasicBlock *pre = b.GetInsertBlock();
    BasicBlock *loop = BasicBlock::Create(b.getContext(), name, fn);
    BasicBlock *done = BasicBlock::Create(b.getContext(), std::string(name) + ".done", fn);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, std::string(name) + ".i");
    i->addIncoming(b.getInt64(0), pre);
    body(static_cast<Value *>(i));
    Value *next = b.CreateAdd(i, step, "", true, true);
    i->addIncoming(next, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpULT(next, bound), loop, done);
    b.SetInsertPoint(done);
}

// The transpose of `R` rows (16 or 8) as 4x4 transposes within 128-bit lanes: each vector is
// loaded as R / 4 4-float pieces of rows 4 apart (lane g: row 4g + i), so no shuffle moves data
// between lanes. Shuffles that did (four rounds of full-width interleaves, or in-lane unpacks
// then two rounds of vshuff32x4) spent most of codegen in instruction selection's shuffle
// combining (llc on a 32x8 vm conv tile: 145 million instructions, 124 with this). 4x4 blocks of
// 4-float vectors compile in a fraction but ran the 512-channel 3x3 layer, whose weight copy
// weighs most, 8-15% slower (docs/decisions.md). R = 8 is the 8-row register tile's A
// (docs/decisions.md).
void emit_transpose_body(llvm::Function *fn, int R) {
    llvm::LLVMContext &ctx = fn->getContext();
    IRBuilder<> b(BasicBlock::Create(ctx, "entry", fn));
    auto arg = fn->arg_begin();
    Value *src = &*arg++, *dst = &*arg++, *src_stride = &*arg++, *rows = &*arg++, *run = &*arg++,
          *dst_stride = &*arg++;
    llvm::Type *f32 = b.getFloatTy();
    llvm::Type *v4 = llvm::FixedVectorType::get(f32, 4);
    const int lanes = R / 4;            // 128-bit lanes of a vector of R floats
    auto lanes_mask = [&](auto pick) {  // pick(lane, k): the source of the lane's k-th element
        std::vector<int> m;
        for (int lane = 0; lane < lanes; ++lane)
            for (int k = 0; k < 4; ++k) m.push_back(pick(lane, k));
        return m;
    };
    const std::vector<int> unpack_lo32 =
        lanes_mask([&](int l, int k) { return (k % 2) * R + 4 * l + k / 2; });
    const std::vector<int> unpack_hi32 =
        lanes_mask([&](int l, int k) { return (k % 2) * R + 4 * l + 2 + k / 2; });
    const std::vector<int> unpack_lo64 =
        lanes_mask([&](int l, int k) { return (k / 2) * R + 4 * l + k % 2; });
    const std::vector<int> unpack_hi64 =
        lanes_mask([&](int l, int k) { return (k / 2) * R + 4 * l + 2 + k % 2; });
    std::vector<int> concat4, concat8;  // two vectors side by side
    for (int i = 0; i < 8; ++i) concat4.push_back(i);
    for (int i = 0; i < 16; ++i) concat8.push_back(i);
    auto shuffle = [&](Value *x, Value *y, const std::vector<int> &m) {
        return b.CreateShuffleVector(x, y, m);
    };
    // Blocks of R rows, then 4 elements of the run at a time: 16 columns of a 16x16 block
    // unrolled took 47 million instructions in llc, most in register allocation (16 row
    // pointers and 16 results live at once); 4 of them, 19 million, and the copy runs as fast.
    emit_loop(b, "trows", b.getInt64(uint64_t(R)), rows, [&](Value *rb) {
        Value *block_src =
            b.CreateInBoundsGEP(f32, src, b.CreateMul(rb, src_stride, "", true, true));
        emit_loop(b, "tloop", b.getInt64(4), run, [&](Value *j) {
            // Columns j .. j + 3 of row r, the rows a stride apart.
            std::vector<Value *> piece(static_cast<size_t>(R));
            Value *row = b.CreateInBoundsGEP(f32, block_src, j);
            for (size_t r = 0; r < size_t(R); ++r) {
                if (r > 0) row = b.CreateInBoundsGEP(f32, row, src_stride);
                piece[r] = b.CreateAlignedLoad(v4, row, llvm::Align(4));
            }
            // q[i], lane g: columns j .. j + 3 of row 4g + i.
            Value *q[4];
            for (size_t i = 0; i < 4; ++i) {
                q[i] = shuffle(piece[i], piece[4 + i], concat4);
                if (R == 16)
                    q[i] = shuffle(q[i], shuffle(piece[8 + i], piece[12 + i], concat4), concat8);
            }
            // A 4x4 transpose in every lane: lane g of column j + k is rows 4g .. 4g + 3.
            Value *lo01 = shuffle(q[0], q[1], unpack_lo32),
                  *hi01 = shuffle(q[0], q[1], unpack_hi32);
            Value *lo23 = shuffle(q[2], q[3], unpack_lo32),
                  *hi23 = shuffle(q[2], q[3], unpack_hi32);
            Value *out[4] = {shuffle(lo01, lo23, unpack_lo64), shuffle(lo01, lo23, unpack_hi64),
                             shuffle(hi01, hi23, unpack_lo64), shuffle(hi01, hi23, unpack_hi64)};
            // Column j + k goes to dst[(j + k) * dst_stride + rb .. + R - 1].
            Value *p = b.CreateInBoundsGEP(
                f32, dst,
                b.CreateAdd(b.CreateMul(j, dst_stride, "", true, true), rb, "", true, true));
            for (size_t k = 0; k < 4; ++k) {
                if (k > 0) p = b.CreateInBoundsGEP(f32, p, dst_stride);
                b.CreateAlignedStore(out[k], p, llvm::Align(4));
            }
        });
    });
    b.CreateRetVoid();
}

}  // namespace

llvm::Function *transpose_function(llvm::Module &m, int rows) {
    LT_CHECK(rows == 16 || rows == 8, "transpose_function: blocks of 16 or 8 rows");
    const char *name = transpose_name(rows);
    if (llvm::Function *f = m.getFunction(name)) return f;
    llvm::LLVMContext &ctx = m.getContext();
    llvm::Type *ptr = llvm::PointerType::getUnqual(ctx), *i64 = llvm::Type::getInt64Ty(ctx);
    auto *type =
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, i64, i64, i64, i64}, false);
    llvm::Function *f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, m);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addFnAttr(llvm::Attribute::NoInline);  // one body per module, whatever calls it
    f->addParamAttr(0, llvm::Attribute::NoAlias);
    f->addParamAttr(1, llvm::Attribute::NoAlias);
    return f;
}

llvm::Function *parallel_for_function(llvm::Module &m) {
    const char *name = "looptool_parallel_for";
    if (llvm::Function *f = m.getFunction(name)) return f;
    llvm::LLVMContext &ctx = m.getContext();
    llvm::Type *ptr = llvm::PointerType::getUnqual(ctx), *i64 = llvm::Type::getInt64Ty(ctx);
    auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, ptr, i64}, false);
    llvm::Function *f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, m);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    return f;
}

llvm::GlobalVariable *thread_pool_global(llvm::Module &m) {
    const char *name = "looptool_thread_pool";
    if (llvm::GlobalVariable *g = m.getGlobalVariable(name)) return g;
    return new llvm::GlobalVariable(m, llvm::Type::getInt8Ty(m.getContext()), false,
                                    llvm::GlobalValue::ExternalLinkage, nullptr, name);
}

void define_runtime_functions(llvm::Module &m) {
    for (int rows : kTransposeRows)
        if (llvm::Function *f = m.getFunction(transpose_name(rows)); f && f->isDeclaration()) {
            f->setLinkage(llvm::Function::InternalLinkage);
            emit_transpose_body(f, rows);
        }
}

std::unique_ptr<llvm::Module> runtime_module(llvm::LLVMContext &ctx) {
    auto m = std::make_unique<llvm::Module>("looptool_runtime", ctx);
    for (int rows : kTransposeRows) emit_transpose_body(transpose_function(*m, rows), rows);
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*m, &os))
        throw Error("internal: the JIT's runtime module does not verify: " + os.str());
    return m;
}

}  // namespace looptool::detail
