#include "looptool/lower/lower_math.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "looptool/ir/error.h"

namespace looptool::detail {

namespace {

constexpr const char *kWidthsFlag = "looptool.vector_math";

// libm's name of op, or null for an op that is no call.
const char *libm_name(OpKind op) {
    switch (op) {
        case OpKind::Exp: return "expf";
        case OpKind::Log: return "logf";
        case OpKind::Tanh: return "tanhf";
        case OpKind::Erf: return "erff";
        case OpKind::Read:
        case OpKind::Const:
        case OpKind::Add:
        case OpKind::Sub:
        case OpKind::Mul:
        case OpKind::Div:
        case OpKind::Min:
        case OpKind::Max:
        case OpKind::Neg:
        case OpKind::Sqrt:
        case OpKind::Abs:
        case OpKind::Recip: return nullptr;
    }
    return nullptr;
}

// The x86 vector function ABI's name: ISA letter, unmasked, lanes, one vector parameter.
std::string variant_name(const char *fn, unsigned w) {
    const char isa = w == 4 ? 'b' : w == 8 ? 'd' : 'e';
    return fmt::format("_ZGV{}N{}v_{}", isa, w, fn);
}

unsigned widths_of(const llvm::Module &m) {
    auto *w = llvm::mdconst::extract_or_null<llvm::ConstantInt>(m.getModuleFlag(kWidthsFlag));
    return w ? unsigned(w->getZExtValue()) : 0;
}

// `t fn(t)`, pure: errno, which libm may set, is never read by a kernel.
llvm::Function *declare(llvm::Module &m, const std::string &name, llvm::Type *t) {
    auto *f = llvm::cast<llvm::Function>(
        m.getOrInsertFunction(name, llvm::FunctionType::get(t, {t}, false)).getCallee());
    f->setDoesNotThrow();
    f->setDoesNotAccessMemory();
    f->setWillReturn();
    return f;
}

// A libm call on a scalar, naming the vector variants the loop vectorizer may widen it to
// (LLVM reads them from the call's `vector-function-abi-variant`; each must be declared).
llvm::Value *scalar_call(llvm::IRBuilder<> &b, OpKind op, llvm::Value *x, unsigned widths) {
    llvm::Module &m = *b.GetInsertBlock()->getModule();
    if (widths == 0 && op == OpKind::Exp) return b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
    if (widths == 0 && op == OpKind::Log) return b.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
    const char *fn = libm_name(op);
    llvm::CallInst *call = b.CreateCall(declare(m, fn, x->getType()), {x});
    std::string variants;
    for (unsigned w : kMathWidths) {
        if (!(widths & w)) continue;
        llvm::Function *v =
            declare(m, variant_name(fn, w), llvm::FixedVectorType::get(x->getType(), w));
        llvm::appendToCompilerUsed(m, {v});
        variants += (variants.empty() ? "" : ",") + v->getName().str();
    }
    if (!variants.empty())
        call->addFnAttr(
            llvm::Attribute::get(b.getContext(), "vector-function-abi-variant", variants));
    return call;
}

// Without vector variants: lane by lane.
llvm::Value *scalarized(llvm::IRBuilder<> &b, OpKind op, llvm::Value *x, unsigned n) {
    llvm::Value *out = llvm::PoisonValue::get(x->getType());
    for (unsigned i = 0; i < n; ++i)
        out = b.CreateInsertElement(
            out, scalar_call(b, op, b.CreateExtractElement(x, uint64_t(i)), 0), uint64_t(i));
    return out;
}

// f of the vectors `in` (each of x's lanes) in 16-lane pieces, the lanes past the end padded
// with 1.0: an AVX-512 intrinsic at any width.
llvm::Value *by16(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &in,
                  const std::function<llvm::Value *(const std::vector<llvm::Value *> &)> &f) {
    auto *vt = llvm::cast<llvm::FixedVectorType>(in[0]->getType());
    const unsigned lanes = vt->getNumElements();
    if (lanes == 16) return f(in);
    llvm::Value *one = llvm::ConstantFP::get(vt, 1.0), *out = llvm::PoisonValue::get(vt);
    for (unsigned pos = 0; pos < lanes; pos += 16) {
        std::vector<int> piece(16), back(lanes), merge(lanes);
        for (unsigned i = 0; i < 16; ++i) piece[i] = int(pos + i < lanes ? pos + i : lanes);
        for (unsigned i = 0; i < lanes; ++i) {
            const bool mine = i >= pos && i < pos + 16;
            back[i] = mine ? int(i - pos) : -1;
            merge[i] = int(mine ? lanes + i : i);
        }
        std::vector<llvm::Value *> pieces;
        for (llvm::Value *v : in) pieces.push_back(b.CreateShuffleVector(v, one, piece));
        out = b.CreateShuffleVector(out, b.CreateShuffleVector(f(pieces), back), merge);
    }
    return out;
}

// 2^n p for a vector n of whole numbers in [-150, 128] and p in [0.7, 1.5], rounded once: p
// times two powers of two built in the exponent field, so that a result below 2^-126 is
// rounded once into the subnormals.
llvm::Value *scale_by_pow2(llvm::IRBuilder<> &b, llvm::Value *p, llvm::Value *n) {
    auto *vt = llvm::cast<llvm::FixedVectorType>(p->getType());
    auto *it = llvm::FixedVectorType::get(b.getInt32Ty(), vt->getNumElements());
    llvm::Value *ni = b.CreateFPToSI(n, it);
    llvm::Value *n1 = b.CreateAShr(ni, 1), *n2 = b.CreateSub(ni, n1);
    auto pow2 = [&](llvm::Value *e) {
        llvm::Value *bias = llvm::ConstantInt::get(it, 127);
        return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, bias), 23), vt);
    };
    return b.CreateFMul(b.CreateFMul(p, pow2(n1)), pow2(n2));
}

// x clamped to [lo, hi] by compare-and-selects that keep a NaN (x86's maxps/minps with x
// second, one instruction each), so NaN flows through to the result.
llvm::Value *clamp(llvm::IRBuilder<> &b, llvm::Value *x, double lo, double hi) {
    llvm::Value *l = llvm::ConstantFP::get(x->getType(), lo);
    llvm::Value *h = llvm::ConstantFP::get(x->getType(), hi);
    x = b.CreateSelect(b.CreateFCmpOLT(x, l), l, x);
    return b.CreateSelect(b.CreateFCmpOGT(x, h), h, x);
}

// exp on a vector inline, Cephes' expf: k = rint(x log2 e), r = x - k ln 2 in two parts (the
// first with few enough bits that k times it is exact), exp(r) by a degree-6 polynomial on
// [-ln2/2, ln2/2] (within 2 ulp), scaled by 2^k (scale_by_pow2). x is clamped to [-104, 89]
// first: exp(-104) rounds to 0 and 2^128 overflows to inf, as exp of anything beyond does.
llvm::Value *inline_exp(llvm::IRBuilder<> &b, llvm::Value *x) {
    auto *vt = llvm::cast<llvm::FixedVectorType>(x->getType());
    auto k = [&](double v) { return llvm::ConstantFP::get(vt, v); };
    auto fma = [&](llvm::Value *a, llvm::Value *m, llvm::Value *c) {
        return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {a, m, c});
    };
    llvm::Value *xc = clamp(b, x, -104.0, 89.0);
    llvm::Value *n =
        b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b.CreateFMul(xc, k(1.44269504088896341)));
    llvm::Value *r = fma(n, k(-0.693359375), xc);
    r = fma(n, k(2.12194440e-4), r);
    llvm::Value *p = k(1.9875691500e-4);
    for (double c :
         {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
        p = fma(p, r, k(c));
    p = fma(p, b.CreateFMul(r, r), b.CreateFAdd(r, k(1.0)));
    // Converting a NaN n to an integer is poison in LLVM's IR: the NaN is put back after.
    return b.CreateSelect(b.CreateFCmpUNO(x, x), x, scale_by_pow2(b, p, n));
}

// exp on a vector with AVX-512, by a table of 2^(j/16): with t = x log2 e rounded to sixteenths
// m = q + j/16 (q whole, j in 0..15), exp(x) = 2^q 2^(j/16) exp(r), r = x - m ln 2 in two parts
// (the first with 12 bits, so that m times it is exact), |r| <= ln2/32. exp(r) - 1 by its
// Taylor terms to r^3 (within 0.08 ulp there), one fma onto the table's entry (vpermps from a
// register), 2^q by vscalefps, which takes the floor of m and rounds once (overflow to inf, the
// subnormals, 0). Within 1.1 ulp; 9 instructions per vector on the FMA pipes, where the
// degree-6 polynomial takes 12: exp is what a softmax row spends its time on.
// m is rounded by adding 1.5 * 2^19 (whose float spacing is 1/16), which leaves 16 j in the
// sum's low bits: the table's index. x is clamped to [-104, 104] first (exp(-104) rounds to 0,
// 2^(104 log2 e) overflows), which keeps a NaN; vscalefps of a NaN is NaN.
llvm::Value *table_exp(llvm::IRBuilder<> &b, llvm::Value *x) {
    auto *vt = llvm::cast<llvm::FixedVectorType>(x->getType());
    auto k = [&](double v) { return llvm::ConstantFP::get(vt, v); };
    auto fma = [&](llvm::Value *a, llvm::Value *m, llvm::Value *c) {
        return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {a, m, c});
    };
    llvm::Value *xc = clamp(b, x, -104.0, 104.0);
    llvm::Value *s = fma(xc, k(1.44269504088896341), k(0x1.8p19));
    llvm::Value *m = b.CreateFSub(s, k(0x1.8p19));
    llvm::Value *r = fma(m, k(-0x1.62ep-1), xc);
    r = fma(m, k(-0x1.0bfbe8p-15), r);
    llvm::Value *q = b.CreateFMul(fma(fma(r, k(1.0 / 6), k(0.5)), r, k(1.0)), r);
    std::vector<llvm::Constant *> entries;
    for (int j = 0; j < 16; ++j)
        entries.push_back(
            llvm::ConstantFP::get(b.getFloatTy(), double(float(std::exp2(j / 16.0)))));
    llvm::Value *table = llvm::ConstantVector::get(entries);
    auto *i16 = llvm::FixedVectorType::get(b.getInt32Ty(), 16);
    llvm::Value *entry = by16(b, {s}, [&](const std::vector<llvm::Value *> &v) {
        return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_permvar_sf_512, {},
                                 {table, b.CreateBitCast(v[0], i16)});
    });
    llvm::Value *y = fma(entry, q, entry);
    return by16(b, {y, m}, [&](const std::vector<llvm::Value *> &v) {
        auto *v16 = llvm::FixedVectorType::get(b.getFloatTy(), 16);
        return b.CreateIntrinsic(
            llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
            {v[0], v[1], llvm::PoisonValue::get(v16), b.getInt16(0xffff), b.getInt32(4)});
    });
}

}  // namespace

unsigned vector_math_widths(const llvm::TargetMachine &tm) {
    if (tm.getTargetTriple().getArch() != llvm::Triple::x86_64) return 0;
    const llvm::MCSubtargetInfo &sti = *tm.getMCSubtargetInfo();
    return 4u | (sti.checkFeatures("+avx2") ? 8u : 0u) | (sti.checkFeatures("+avx512f") ? 16u : 0u);
}

std::vector<std::string> vector_math_symbols(unsigned widths) {
    std::vector<std::string> names;
    for (OpKind op : {OpKind::Exp, OpKind::Log, OpKind::Tanh, OpKind::Erf})
        for (unsigned w : kMathWidths)
            if (widths & w) names.push_back(variant_name(libm_name(op), w));
    return names;
}

void set_math_widths(llvm::Module &m, unsigned widths) {
    m.addModuleFlag(llvm::Module::Warning, kWidthsFlag, widths);
}

bool is_math_call(OpKind op) { return libm_name(op) != nullptr; }

llvm::Value *emit_math(llvm::IRBuilder<> &b, OpKind op, llvm::Value *x) {
    LT_CHECK(is_math_call(op), fmt::format("{} is not a math call", op_name(op)));
    const unsigned widths = widths_of(*b.GetInsertBlock()->getModule());
    auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
    if (!vt) return scalar_call(b, op, x, widths);
    const unsigned n = vt->getNumElements();
    if (op == OpKind::Exp) return (widths & 16) ? table_exp(b, x) : inline_exp(b, x);
    if (widths == 0) return scalarized(b, op, x, n);
    unsigned widest = 0;
    for (unsigned w : kMathWidths)
        if (widths & w) widest = w;
    llvm::Module &m = *b.GetInsertBlock()->getModule();
    llvm::Value *one = llvm::ConstantFP::get(vt, 1.0), *out = llvm::PoisonValue::get(vt);
    // Pieces of the widest variant; the rest in the narrowest that holds it, padded with 1.0.
    for (unsigned pos = 0; pos < n;) {
        const unsigned left = n - pos;
        unsigned w = widest;
        if (left < widest)
            for (unsigned c : kMathWidths)
                if ((widths & c) && c >= left) {
                    w = c;
                    break;
                }
        const unsigned take = std::min(w, left);
        std::vector<int> in(w), wide(n), merge(n);
        for (unsigned i = 0; i < w; ++i) in[i] = int(i < take ? pos + i : n);
        for (unsigned i = 0; i < n; ++i) {
            const bool mine = i >= pos && i < pos + take;
            wide[i] = mine ? int(i - pos) : -1;
            merge[i] = int(mine ? n + i : i);
        }
        llvm::Value *piece = b.CreateShuffleVector(x, one, in);
        llvm::Value *y =
            b.CreateCall(declare(m, variant_name(libm_name(op), w), piece->getType()), {piece});
        out = b.CreateShuffleVector(out, b.CreateShuffleVector(y, wide), merge);
        pos += take;
    }
    return out;
}

}  // namespace looptool::detail
