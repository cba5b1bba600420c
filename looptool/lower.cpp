#include "looptool/lower.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <unordered_map>

#include "looptool/error.h"

namespace looptool {
namespace detail {
// Declared again in jit.cpp, the only other user; kept out of lower.h so that no LLVM type
// appears in a header.
std::unique_ptr<llvm::Module> lower_to_module(const Program &p, llvm::LLVMContext &ctx,
                                              const std::string &fn_name,
                                              const LowerOptions &options,
                                              LoweringSummary *summary);
}  // namespace detail

namespace {

using llvm::BasicBlock;
using llvm::IRBuilder;
using llvm::PHINode;
using llvm::Type;
using llvm::Value;

// ---------------------------------------------------------------------------------------
// Step 1: copy elision (optional, see LowerOptions::elide_copies).
//
// LoopTune writes a matmul as `T += A*B` then `C = T`. When the second statement is an
// identity copy over the whole of C, T is a temporary read by that copy only, and C is
// written and read nowhere else, computing straight into C gives the same outputs and saves
// a pass over two m*n buffers: the 8x32 tile on 256^3 ran at 233-239 GFLOPS with it and
// 227-230 without (three interleaved runs, pinned, on a shared Zen 5), a small but
// consistent gain; the naive nest is unchanged.

// True when `a` indexes each dimension of tensor t by a distinct var with coefficient 1 and
// no offset, and that var spans the dimension: an injective map onto every element.
bool is_identity_cover(const Computation &c, const Access &a) {
    const Tensor &t = c.tensors[size_t(a.tensor)];
    std::vector<int> seen;
    for (size_t d = 0; d < a.index.size(); ++d) {
        const Affine &f = a.index[d];
        if (f.terms.size() != 1 || f.terms[0].coef != 1 || f.offset != 0) return false;
        int v = f.terms[0].var;
        if (std::find(seen.begin(), seen.end(), v) != seen.end()) return false;
        if (c.vars[size_t(v)].extent != t.shape[d]) return false;
        seen.push_back(v);
    }
    return true;
}

void collect_reads(const Expr &e, std::vector<const Access *> &out) {
    if (e.op == OpKind::Read) out.push_back(&e.access);
    for (const auto &a : e.args) collect_reads(a, out);
}

bool reads_tensor(const Statement &s, int t) {
    std::vector<const Access *> reads;
    collect_reads(s.value, reads);
    for (auto *a : reads)
        if (a->tensor == t) return true;
    return false;
}

struct Prepared {
    Computation c;
    LoopTree tree;
    bool elided = false;
};

Prepared prepare(const Program &p, bool elide) {
    Prepared r{*p.comp, p.tree, false};
    if (!elide) return r;
    Computation &c = r.c;
    const int ns = int(c.stmts.size());
    auto writers = [&](int t) {
        int n = 0;
        for (const auto &s : c.stmts) n += s.out.tensor == t;
        return n;
    };
    auto readers = [&](int t) {
        int n = 0;
        for (const auto &s : c.stmts) n += reads_tensor(s, t);
        return n;
    };
    // Position of a statement in execution order: (nest, slot at the leaf).
    auto where = [&](int s) {
        for (size_t n = 0; n < r.tree.nests.size(); ++n) {
            const auto &st = r.tree.nests[n].stmts;
            for (size_t i = 0; i < st.size(); ++i)
                if (st[i] == s) return std::pair<int, int>(int(n), int(i));
        }
        return std::pair<int, int>(-1, -1);
    };
    for (int s1 = 0; s1 < ns; ++s1) {
        const Statement &copy = c.stmts[size_t(s1)];
        if (copy.reduce != ReduceKind::None || copy.value.op != OpKind::Read) continue;
        const int t = copy.value.access.tensor, out = copy.out.tensor;
        if (t == out || c.tensors[size_t(t)].kind != TensorKind::Temp) continue;
        if (c.tensors[size_t(t)].shape != c.tensors[size_t(out)].shape) continue;
        if (!(copy.value.access.index == copy.out.index) || !is_identity_cover(c, copy.out)) continue;
        if (writers(t) != 1 || readers(t) != 1 || writers(out) != 1 || readers(out) != 0) continue;
        int s0 = -1;
        for (int s = 0; s < ns; ++s)
            if (c.stmts[size_t(s)].out.tensor == t) s0 = s;
        if (reads_tensor(c.stmts[size_t(s0)], t)) continue;
        if (where(s0) >= where(s1)) continue;  // the copy must run after the producer
        c.stmts[size_t(s0)].out.tensor = out;
        // The copy statement stays in the computation (ids are stable) but leaves the tree.
        auto [n, i] = where(s1);
        auto &stmts = r.tree.nests[size_t(n)].stmts;
        stmts.erase(stmts.begin() + i);
        if (stmts.empty()) r.tree.nests.erase(r.tree.nests.begin() + n);
        r.elided = true;
    }
    return r;
}

// ---------------------------------------------------------------------------------------
// Step 2: emission.

/// One tensor access of the current nest, in flat (row-major element) form:
/// element = offset + sum_v coef[v] * index_v.
struct Slot {
    int tensor = 0;
    std::vector<int64_t> coef;  // per var
    int64_t offset = 0;
};

/// A register-tile accumulator: `w` lanes starting at element `off` relative to the
/// output slot's current base pointer, `stride` elements apart. stride 0 with w > 1 holds
/// w partial sums of one element (a vectorized reduction var), added up when stored.
struct AccKey {
    int64_t off = 0, w = 1, stride = 0;
    auto operator<=>(const AccKey &) const = default;
};

struct Tile {
    int stmt = 0;
    bool zero_start = false;
    std::map<AccKey, Value *> acc;
};

/// The static context of the code being emitted.
struct State {
    std::vector<int64_t> avail;  // per var: elements left to cover at this depth
    std::vector<int64_t> stat;   // per var: static index offset (unrolled copies, tails)
    std::vector<Value *> ptr;    // per slot: run-time base pointer (one GEP per loop level)
    std::vector<int64_t> mult;   // per slot: the pointer is base + mult*k elements
    std::vector<Tile *> tiles;   // active register tiles
};

int64_t gcd64(int64_t a, int64_t b) { return std::gcd(a < 0 ? -a : a, b < 0 ? -b : b); }

class Lowerer {
public:
    Lowerer(const Computation &c, llvm::LLVMContext &ctx, llvm::Module &m,
            const LowerOptions &opt, LoweringSummary &sum)
        : c_(c), ctx_(ctx), m_(m), b_(ctx), opt_(opt), sum_(sum) {
        f32_ = Type::getFloatTy(ctx);
        i64_ = Type::getInt64Ty(ctx);
        i32_ = Type::getInt32Ty(ctx);
        ptr_ = llvm::PointerType::getUnqual(ctx);
        zero_started_.assign(c.stmts.size(), true);
    }

    void build(const LoopTree &tree, const std::string &fn_name);

private:
    // -- nest analysis
    void setup_nest(const Nest &nest);
    int region_start(int s) const;
    bool zero_start_ok(int s, int r) const;
    int64_t emission_cost(size_t d, std::vector<int64_t> &avail,
                          std::map<std::pair<size_t, std::vector<int64_t>>, int64_t> &memo);
    int64_t emission_cost();

    // -- emission
    void emit(size_t d, State st);
    void emit_stmts(State &st, int vvar, int64_t w);
    void emit_stmt(int s, State &st, int vvar, int64_t w);
    void emit_runtime_loop(int64_t n, bool poll, State &st,
                           const std::function<void(Value *iv)> &body);
    void emit_generic(size_t d, std::vector<Value *> idx, std::vector<Value *> avail);
    void emit_poll();
    Tile *start_tile(int s, size_t d, State &st);
    void finish_tile(Tile *t, State &st);
    void collect_keys(int s, size_t d, std::vector<int64_t> avail, std::vector<int64_t> stat,
                      std::vector<AccKey> &keys);

    // -- values
    Type *vec_type(int64_t w) const {
        return w == 1 ? f32_ : static_cast<Type *>(llvm::FixedVectorType::get(f32_, unsigned(w)));
    }
    int64_t static_offset(int slot, const State &st) const;
    Value *addr(int slot, const State &st, int64_t extra, llvm::Align *align);
    Value *load(int slot, State &st, int vvar, int64_t w);
    Value *load_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride);
    void store_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride, Value *v);
    Value *eval(const Expr &e, State &st, int vvar, int64_t w);
    Value *update(const Statement &s, Value *old, State &st, int vvar, int64_t w);

    const Computation &c_;
    llvm::LLVMContext &ctx_;
    llvm::Module &m_;
    IRBuilder<> b_;
    const LowerOptions &opt_;
    LoweringSummary &sum_;
    Type *f32_, *i64_, *i32_, *ptr_;
    llvm::Function *fn_ = nullptr;
    std::vector<Value *> args_;  // per tensor
    Value *cancel_ = nullptr;
    BasicBlock *ret_bb_ = nullptr;
    std::vector<bool> zero_started_;  // per statement: every emission was a zero-start tile

    // current nest
    const Nest *nest_ = nullptr;
    std::vector<int64_t> inner_;
    std::vector<Slot> slots_;
    std::unordered_map<const Access *, int> slot_of_;
    std::vector<int> region_;      // per leaf statement position: tile region depth or -1
    std::vector<bool> zero_plan_;  // per leaf statement position
    bool vector_safe_ = true;
    std::set<int> later_nest_;  // statements scheduled in nests after the current one
    std::set<int> scheduled_;   // statements in the tree
    Nest relaxed_;              // the current nest with copy-only unrolling dropped
};

int64_t Lowerer::static_offset(int slot, const State &st) const {
    const Slot &s = slots_[size_t(slot)];
    int64_t o = s.offset;
    for (size_t v = 0; v < s.coef.size(); ++v) o += s.coef[v] * st.stat[v];
    return o;
}

Value *Lowerer::addr(int slot, const State &st, int64_t off, llvm::Align *align) {
    Value *base = st.ptr[size_t(slot)];
    if (align) {
        int64_t g = gcd64(st.mult[size_t(slot)], off);
        int64_t pow2 = g & -g;
        *align = llvm::Align(uint64_t(std::min<int64_t>(64, 4 * pow2)));
    }
    if (off == 0) return base;
    return b_.CreateInBoundsGEP(f32_, base, b_.getInt64(uint64_t(off)));
}

Value *Lowerer::load_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride) {
    llvm::Align al;
    if (w == 1) return b_.CreateAlignedLoad(f32_, addr(slot, st, off, &al), al);
    if (stride == 1) return b_.CreateAlignedLoad(vec_type(w), addr(slot, st, off, &al), al);
    if (stride == 0)
        return b_.CreateVectorSplat(unsigned(w),
                                    b_.CreateAlignedLoad(f32_, addr(slot, st, off, &al), al));
    Value *v = llvm::PoisonValue::get(vec_type(w));
    for (int64_t l = 0; l < w; ++l) {
        Value *x = b_.CreateAlignedLoad(f32_, addr(slot, st, off + l * stride, &al), al);
        v = b_.CreateInsertElement(v, x, uint64_t(l));
    }
    return v;
}

void Lowerer::store_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride,
                          Value *v) {
    llvm::Align al;
    if (w == 1) {
        b_.CreateAlignedStore(v, addr(slot, st, off, &al), al);
    } else if (stride == 1) {
        b_.CreateAlignedStore(v, addr(slot, st, off, &al), al);
    } else if (stride == 0) {
        // Sequential writes of every lane to one element leave the last lane's value.
        b_.CreateAlignedStore(b_.CreateExtractElement(v, uint64_t(w - 1)),
                              addr(slot, st, off, &al), al);
    } else {
        for (int64_t l = 0; l < w; ++l)
            b_.CreateAlignedStore(b_.CreateExtractElement(v, uint64_t(l)),
                                  addr(slot, st, off + l * stride, &al), al);
    }
}

Value *Lowerer::load(int slot, State &st, int vvar, int64_t w) {
    int64_t stride = w > 1 ? slots_[size_t(slot)].coef[size_t(vvar)] : 0;
    return load_lanes(slot, st, static_offset(slot, st), w, stride);
}

Value *Lowerer::eval(const Expr &e, State &st, int vvar, int64_t w) {
    switch (e.op) {
        case OpKind::Read: return load(slot_of_.at(&e.access), st, vvar, w);
        case OpKind::Const: return llvm::ConstantFP::get(vec_type(w), double(e.value));
        default: break;
    }
    Value *a = eval(e.args[0], st, vvar, w);
    Value *b = e.args.size() > 1 ? eval(e.args[1], st, vvar, w) : nullptr;
    switch (e.op) {
        case OpKind::Add: return b_.CreateFAdd(a, b);
        case OpKind::Sub: return b_.CreateFSub(a, b);
        case OpKind::Mul: return b_.CreateFMul(a, b);
        case OpKind::Div: return b_.CreateFDiv(a, b);
        // std::min(a, b) is (b < a) ? b : a and std::max(a, b) is (a < b) ? b : a; the
        // same selects keep the interpreter's NaN behaviour.
        case OpKind::Min: return b_.CreateSelect(b_.CreateFCmpOLT(b, a), b, a);
        case OpKind::Max: return b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a);
        case OpKind::Neg: return b_.CreateFNeg(a);
        case OpKind::Exp: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, a);
        case OpKind::Log: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, a);
        case OpKind::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
        case OpKind::Abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
        case OpKind::Recip: return b_.CreateFDiv(llvm::ConstantFP::get(vec_type(w), 1.0), a);
        default: LT_CHECK(false, fmt::format("cannot lower op {}", op_name(e.op)));
    }
}

// old + value, as a fused multiply-add when the value is a product.
Value *Lowerer::update(const Statement &s, Value *old, State &st, int vvar, int64_t w) {
    if (s.value.op == OpKind::Mul) {
        Value *a = eval(s.value.args[0], st, vvar, w);
        Value *b = eval(s.value.args[1], st, vvar, w);
        return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_type(w)}, {a, b, old});
    }
    return b_.CreateFAdd(old, eval(s.value, st, vvar, w));
}

void Lowerer::emit_stmt(int s, State &st, int vvar, int64_t w) {
    const Statement &stmt = c_.stmts[size_t(s)];
    const int out = slot_of_.at(&stmt.out);
    const int64_t off = static_offset(out, st);
    const int64_t stride = w > 1 ? slots_[size_t(out)].coef[size_t(vvar)] : 0;
    sum_.static_statements++;
    for (Tile *t : st.tiles) {
        if (t->stmt != s) continue;
        Value *&acc = t->acc.at(AccKey{off, w, stride});
        acc = update(stmt, acc, st, vvar, w);
        return;
    }
    if (stmt.reduce == ReduceKind::Sum) zero_started_[size_t(s)] = false;
    if (stmt.reduce == ReduceKind::None) {
        store_lanes(out, st, off, w, stride, eval(stmt.value, st, vvar, w));
    } else if (w > 1 && stride == 0) {
        // A vectorized reduction var: horizontal reduce-add into the scalar.
        llvm::Align al;
        Value *p = addr(out, st, off, &al);
        Value *old = b_.CreateAlignedLoad(f32_, p, al);
        auto *sum = llvm::cast<llvm::Instruction>(
            b_.CreateFAddReduce(old, eval(stmt.value, st, vvar, w)));
        sum->setHasAllowReassoc(true);
        b_.CreateAlignedStore(sum, p, al);
    } else {
        Value *old = load_lanes(out, st, off, w, stride);
        store_lanes(out, st, off, w, stride, update(stmt, old, st, vvar, w));
    }
}

void Lowerer::emit_stmts(State &st, int vvar, int64_t w) {
    for (int s : nest_->stmts) emit_stmt(s, st, vvar, w);
}

void Lowerer::emit_poll() {
    Value *flag = b_.CreateLoad(i32_, cancel_, /*isVolatile=*/true, "cancel");
    BasicBlock *cont = BasicBlock::Create(ctx_, "go", fn_);
    llvm::MDBuilder md(ctx_);
    b_.CreateCondBr(b_.CreateICmpNE(flag, b_.getInt32(0)), ret_bb_, cont,
                    md.createBranchWeights(1, 1u << 20));
    b_.SetInsertPoint(cont);
}

// A do-while loop of n >= 2 iterations; the accumulators of the active tiles are carried
// around it in phis.
void Lowerer::emit_runtime_loop(int64_t n, bool poll, State &st,
                                const std::function<void(Value *iv)> &body) {
    BasicBlock *pre = b_.GetInsertBlock();
    BasicBlock *head = BasicBlock::Create(ctx_, "loop", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    PHINode *iv = b_.CreatePHI(i64_, 2, "i");
    iv->addIncoming(b_.getInt64(0), pre);
    std::vector<std::pair<Value **, PHINode *>> carried;
    for (Tile *t : st.tiles)
        for (auto &[key, v] : t->acc) {
            PHINode *phi = b_.CreatePHI(v->getType(), 2, "acc");
            phi->addIncoming(v, pre);
            v = phi;
            carried.push_back({&v, phi});
        }
    if (poll) emit_poll();
    body(iv);
    BasicBlock *latch = b_.GetInsertBlock();
    Value *next = b_.CreateAdd(iv, b_.getInt64(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
    BasicBlock *exit = BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt64(uint64_t(n))), head, exit);
    iv->addIncoming(next, latch);
    for (auto &[slot, phi] : carried) phi->addIncoming(*slot, latch);
    b_.SetInsertPoint(exit);
}

// The accumulator keys a tile region touches: walks the static contexts below depth d
// exactly as emit() will (every unrolled copy, one full and one tail context per loop).
void Lowerer::collect_keys(int s, size_t d, std::vector<int64_t> avail,
                           std::vector<int64_t> stat, std::vector<AccKey> &keys) {
    const int out = slot_of_.at(&c_.stmts[size_t(s)].out);
    const Slot &o = slots_[size_t(out)];
    auto off = [&] {
        int64_t x = o.offset;
        for (size_t v = 0; v < stat.size(); ++v) x += o.coef[v] * stat[v];
        return x;
    };
    if (d == nest_->loops.size()) {
        keys.push_back({off(), 1, 0});
        return;
    }
    const Loop &l = nest_->loops[d];
    const size_t v = size_t(l.var);
    const int64_t chunk = inner_[d], total = avail[v], nfull = total / chunk,
                  rem = total % chunk, base = stat[v];
    if (l.vectorize && vector_safe_ && total > 1) {
        keys.push_back({off(), total, o.coef[v]});
        return;
    }
    const bool unrolled = l.unroll || l.vectorize || nfull <= 1;
    for (int64_t i = 0; i < (unrolled ? nfull : std::min<int64_t>(nfull, 1)); ++i) {
        stat[v] = base + (unrolled ? i * chunk : 0);
        avail[v] = chunk;
        collect_keys(s, d + 1, avail, stat, keys);
    }
    if (rem > 0) {
        stat[v] = base + nfull * chunk;
        avail[v] = rem;
        collect_keys(s, d + 1, avail, stat, keys);
    }
}

Tile *Lowerer::start_tile(int s, size_t d, State &st) {
    std::vector<AccKey> keys;
    collect_keys(s, d, st.avail, st.stat, keys);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    // Every element must belong to one accumulator only; a vectorized reduction var with a
    // tail (two partial-sum widths for one element) is left to plain loads and stores.
    std::map<int64_t, size_t> owner;
    int64_t regs = 0;
    for (size_t k = 0; k < keys.size(); ++k) {
        regs += (keys[k].w + 15) / 16;
        int64_t lanes = keys[k].stride == 0 ? 1 : keys[k].w;
        for (int64_t l = 0; l < lanes; ++l)
            if (!owner.emplace(keys[k].off + l * keys[k].stride, k).second) return nullptr;
    }
    // Past a few hundred vector registers the accumulators only spill and bloat the code.
    if (regs > 256) return nullptr;
    auto *t = new Tile{s, false, {}};
    const int pos = int(std::find(nest_->stmts.begin(), nest_->stmts.end(), s) - nest_->stmts.begin());
    t->zero_start = zero_plan_[size_t(pos)];
    const int out = slot_of_.at(&c_.stmts[size_t(s)].out);
    for (const AccKey &k : keys) {
        Value *init;
        if (t->zero_start) {
            init = llvm::Constant::getNullValue(vec_type(k.w));
        } else if (k.w > 1 && k.stride == 0) {
            llvm::Align al;
            Value *x = b_.CreateAlignedLoad(f32_, addr(out, st, k.off, &al), al);
            init = b_.CreateInsertElement(llvm::Constant::getNullValue(vec_type(k.w)), x,
                                          uint64_t(0));
        } else {
            init = load_lanes(out, st, k.off, k.w, k.stride);
        }
        t->acc[k] = init;
    }
    sum_.register_tiles++;
    if (t->zero_start) sum_.zero_start_tiles++;
    st.tiles.push_back(t);
    return t;
}

void Lowerer::finish_tile(Tile *t, State &st) {
    const int out = slot_of_.at(&c_.stmts[size_t(t->stmt)].out);
    for (auto &[k, v] : t->acc) {
        if (k.w > 1 && k.stride == 0) {
            auto *sum = llvm::cast<llvm::Instruction>(
                b_.CreateFAddReduce(llvm::ConstantFP::getNegativeZero(f32_), v));
            sum->setHasAllowReassoc(true);
            store_lanes(out, st, k.off, 1, 0, sum);
        } else {
            store_lanes(out, st, k.off, k.w, k.stride, v);
        }
    }
    if (!t->zero_start) zero_started_[size_t(t->stmt)] = false;
    st.tiles.erase(std::find(st.tiles.begin(), st.tiles.end(), t));
    delete t;
}

void Lowerer::emit(size_t d, State st) {
    if (d == nest_->loops.size()) {
        emit_stmts(st, -1, 1);
        return;
    }
    std::vector<Tile *> started;
    for (size_t i = 0; i < nest_->stmts.size(); ++i)
        if (region_[i] == int(d))
            if (Tile *t = start_tile(nest_->stmts[i], d, st)) started.push_back(t);

    const Loop &l = nest_->loops[d];
    const size_t v = size_t(l.var);
    const int64_t chunk = inner_[d], total = st.avail[v], nfull = total / chunk,
                  rem = total % chunk, base = st.stat[v];
    const bool poll = d == 0;
    auto static_copy = [&](int64_t start, int64_t n) {
        State s2 = st;
        s2.stat[v] = base + start;
        s2.avail[v] = n;
        if (poll) emit_poll();
        emit(d + 1, s2);
        // Accumulators changed in s2's tiles are the same Tile objects as st's.
    };
    if (l.vectorize && vector_safe_ && total > 1) {
        if (poll) emit_poll();
        emit_stmts(st, int(v), total);
    } else if (l.unroll || l.vectorize || nfull <= 1) {
        for (int64_t i = 0; i < nfull; ++i) static_copy(i * chunk, chunk);
        if (rem > 0) static_copy(nfull * chunk, rem);
    } else {
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
    }
    for (auto it = started.rbegin(); it != started.rend(); ++it) finish_tile(*it, st);
}

// Fallback for nests whose static expansion would be too large: plain scalar loops with
// run-time trip counts and flat addressing, ignoring unroll/vectorize.
void Lowerer::emit_generic(size_t d, std::vector<Value *> idx, std::vector<Value *> avail) {
    if (d == nest_->loops.size()) {
        State st;
        st.stat.assign(c_.vars.size(), 0);
        for (const Slot &s : slots_) {
            Value *flat = b_.getInt64(0);
            for (size_t v = 0; v < s.coef.size(); ++v)
                if (s.coef[v] != 0)
                    flat = b_.CreateAdd(flat, b_.CreateMul(idx[v], b_.getInt64(uint64_t(s.coef[v]))));
            st.ptr.push_back(b_.CreateInBoundsGEP(f32_, args_[size_t(s.tensor)], flat));
            st.mult.push_back(1);
        }
        emit_stmts(st, -1, 1);
        return;
    }
    const Loop &l = nest_->loops[d];
    const size_t v = size_t(l.var);
    const int64_t chunk = inner_[d];
    Value *total = avail[v], *base = idx[v];
    BasicBlock *pre = b_.GetInsertBlock();
    BasicBlock *head = BasicBlock::Create(ctx_, "gloop", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    PHINode *start = b_.CreatePHI(i64_, 2, "start");
    start->addIncoming(b_.getInt64(0), pre);
    if (d == 0) emit_poll();
    idx[v] = b_.CreateAdd(base, start);
    avail[v] = chunk == 1 ? b_.getInt64(1)
                          : b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.getInt64(uint64_t(chunk)),
                                                     b_.CreateSub(total, start));
    emit_generic(d + 1, idx, avail);
    BasicBlock *latch = b_.GetInsertBlock();
    Value *next = b_.CreateAdd(start, b_.getInt64(uint64_t(chunk)));
    start->addIncoming(next, latch);
    BasicBlock *exit = BasicBlock::Create(ctx_, "gdone", fn_);
    b_.CreateCondBr(b_.CreateICmpULT(next, total), head, exit);
    b_.SetInsertPoint(exit);
}

// Tile region of statement s: the outermost loop over a reduction var (a var not in the
// output access) such that every loop from it inwards is unrolled, vectorized or over a
// reduction var, so the output elements touched below it are fixed at that point.
int Lowerer::region_start(int s) const {
    const Statement &stmt = c_.stmts[size_t(s)];
    if (stmt.reduce != ReduceKind::Sum || reads_tensor(stmt, stmt.out.tensor)) return -1;
    for (int o : nest_->stmts)
        if (o != s && (c_.stmts[size_t(o)].out.tensor == stmt.out.tensor ||
                       reads_tensor(c_.stmts[size_t(o)], stmt.out.tensor)))
            return -1;
    const std::vector<int> outv = vars_of(stmt.out);
    int r = -1;
    for (size_t d = nest_->loops.size(); d-- > 0;) {
        const Loop &l = nest_->loops[d];
        bool red = std::find(outv.begin(), outv.end(), l.var) == outv.end();
        if (!(l.unroll || l.vectorize || red)) break;
        if (red) r = int(d);
    }
    return r;
}

// Accumulators may start at zero when this region is the only pass over the reduction for
// each of its output elements and nothing else touches the output before.
bool Lowerer::zero_start_ok(int s, int r) const {
    const Statement &stmt = c_.stmts[size_t(s)];
    const std::vector<int> outv = vars_of(stmt.out);
    for (int d = 0; d < r; ++d)
        if (std::find(outv.begin(), outv.end(), nest_->loops[size_t(d)].var) == outv.end())
            return false;
    if (!is_identity_cover(c_, stmt.out)) return false;
    // The only writer, and every reader runs in a later nest (region_start already
    // excluded readers in this nest). Statements dropped by copy elision do not count.
    for (int o : scheduled_)
        if (o != s && c_.stmts[size_t(o)].out.tensor == stmt.out.tensor) return false;
    for (int o : scheduled_)
        if (reads_tensor(c_.stmts[size_t(o)], stmt.out.tensor) && !later_nest_.count(o)) return false;
    return true;
}

void Lowerer::setup_nest(const Nest &nest) {
    nest_ = &nest;
    inner_.clear();
    for (size_t d = 0; d < nest.loops.size(); ++d) inner_.push_back(inner_coverage(nest, int(d)));
    slots_.clear();
    slot_of_.clear();
    auto add = [&](const Access &a) {
        Slot s{a.tensor, std::vector<int64_t>(c_.vars.size(), 0), 0};
        const Tensor &t = c_.tensors[size_t(a.tensor)];
        for (size_t d = 0; d < a.index.size(); ++d) {
            s.offset += t.stride(d) * a.index[d].offset;
            for (const auto &term : a.index[d].terms) s.coef[size_t(term.var)] += t.stride(d) * term.coef;
        }
        slot_of_[&a] = int(slots_.size());
        slots_.push_back(std::move(s));
    };
    for (int s : nest.stmts) {
        const Statement &stmt = c_.stmts[size_t(s)];
        add(stmt.out);
        std::vector<const Access *> reads;
        collect_reads(stmt.value, reads);
        for (auto *a : reads) add(*a);
    }
    // Vector code runs each statement for all lanes before the next statement; that equals
    // the interpreter's lane-by-lane interleaving when every tensor written in the nest is
    // accessed through one and the same index expression by all its users in the nest.
    vector_safe_ = true;
    for (int s : nest.stmts) {
        const Access &w = c_.stmts[size_t(s)].out;
        for (int o : nest.stmts) {
            const Statement &other = c_.stmts[size_t(o)];
            std::vector<const Access *> uses;
            collect_reads(other.value, uses);
            if (o != s) uses.push_back(&other.out);
            for (auto *a : uses)
                if (a->tensor == w.tensor && !(a->index == w.index)) vector_safe_ = false;
        }
    }
    region_.clear();
    zero_plan_.clear();
    for (int s : nest.stmts) {
        int r = region_start(s);
        region_.push_back(r);
        zero_plan_.push_back(r >= 0 && zero_start_ok(s, r));
    }
}

// Estimated cost of emitting the nest from depth d in context `avail`: one unit per
// statement copy, plus a loop weight per run-time loop copy. Innermost run-time loops weigh
// most: the loop vectorizer turns each into a vector body, a remainder and checks, and
// costs ~2-4 ms of IR passes and codegen per copy (256 unrolled copies of the naive n loop
// took ~0.9 s to compile).
int64_t Lowerer::emission_cost(size_t d, std::vector<int64_t> &avail,
                               std::map<std::pair<size_t, std::vector<int64_t>>, int64_t> &memo) {
    if (d == nest_->loops.size()) return int64_t(nest_->stmts.size());
    auto key = std::make_pair(d, avail);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const Loop &l = nest_->loops[d];
    const size_t v = size_t(l.var);
    const int64_t chunk = inner_[d], total = avail[v], nfull = total / chunk, rem = total % chunk;
    int64_t n = 0;
    if (l.vectorize && vector_safe_ && total > 1) {
        n = int64_t(nest_->stmts.size());
    } else {
        const bool unrolled = l.unroll || l.vectorize || nfull <= 1;
        avail[v] = chunk;
        if (nfull > 0)
            n += unrolled ? nfull * emission_cost(d + 1, avail, memo)
                          : (d + 1 == nest_->loops.size() ? 64 : 8) + emission_cost(d + 1, avail, memo);
        if (rem > 0) {
            avail[v] = rem;
            n += emission_cost(d + 1, avail, memo);
        }
        avail[v] = total;
    }
    n = std::min<int64_t>(n, int64_t(1) << 40);
    memo[key] = n;
    return n;
}

// `nest` with unroll dropped from every loop that has a plain (run-time) loop beneath it:
// such copies are not straight-line code anyway, and they multiply the loops to compile.
int64_t Lowerer::emission_cost() {
    std::vector<int64_t> avail;
    for (const auto &v : c_.vars) avail.push_back(v.extent);
    std::map<std::pair<size_t, std::vector<int64_t>>, int64_t> memo;
    return emission_cost(0, avail, memo);
}

Nest unroll_only_straight_line(Nest nest) {
    bool plain_below = false;
    for (size_t d = nest.loops.size(); d-- > 0;) {
        Loop &l = nest.loops[d];
        if (plain_below) l.unroll = false;
        if (!l.unroll && !l.vectorize) plain_below = true;
    }
    return nest;
}

void Lowerer::build(const LoopTree &tree, const std::string &fn_name) {
    const size_t nt = c_.tensors.size();
    // The internal body takes every tensor as its own noalias pointer so alias analysis can
    // tell them apart; the exported wrapper unpacks the KernelFn ABI and calls it (inlined).
    std::vector<Type *> params(nt, ptr_);
    params.push_back(ptr_);
    auto *body_ty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    fn_ = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, fn_name + ".body", m_);
    fn_->addFnAttr(llvm::Attribute::AlwaysInline);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    for (size_t t = 0; t < nt; ++t) {
        llvm::Argument *a = fn_->getArg(unsigned(t));
        a->setName(c_.tensors[t].name);
        a->addAttr(llvm::Attribute::NoAlias);
        a->addAttr(llvm::Attribute::NoCapture);
        a->addAttr(llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
        a->addAttr(llvm::Attribute::getWithDereferenceableBytes(
            ctx_, uint64_t(c_.tensors[t].num_elements()) * 4));
        args_.push_back(a);
    }
    cancel_ = fn_->getArg(unsigned(nt));
    cancel_->setName("cancel");

    BasicBlock *entry = BasicBlock::Create(ctx_, "entry", fn_);
    BasicBlock *first = BasicBlock::Create(ctx_, "nests", fn_);
    ret_bb_ = BasicBlock::Create(ctx_, "ret", fn_);
    b_.SetInsertPoint(ret_bb_);
    b_.CreateRetVoid();
    b_.SetInsertPoint(first);

    for (const auto &nest : tree.nests) scheduled_.insert(nest.stmts.begin(), nest.stmts.end());
    for (size_t ni = 0; ni < tree.nests.size(); ++ni) {
        later_nest_.clear();
        for (size_t nj = ni + 1; nj < tree.nests.size(); ++nj)
            later_nest_.insert(tree.nests[nj].stmts.begin(), tree.nests[nj].stmts.end());
        // Over the budget, first drop the unrolling that only copies loops; then fall back to
        // plain loops.
        setup_nest(tree.nests[ni]);
        if (emission_cost() > opt_.max_emission_cost) {
            relaxed_ = unroll_only_straight_line(tree.nests[ni]);
            setup_nest(relaxed_);
            sum_.relaxed_nests++;
        }
        std::vector<int64_t> avail;
        for (const auto &v : c_.vars) avail.push_back(v.extent);
        if (emission_cost() > opt_.max_emission_cost) {
            sum_.generic_nests++;
            std::vector<Value *> idx(c_.vars.size(), b_.getInt64(0)), av;
            for (const auto &v : c_.vars) av.push_back(b_.getInt64(uint64_t(v.extent)));
            emit_generic(0, idx, av);
            continue;
        }
        State st;
        st.avail = avail;
        st.stat.assign(c_.vars.size(), 0);
        for (const Slot &s : slots_) {
            st.ptr.push_back(args_[size_t(s.tensor)]);
            st.mult.push_back(16);  // 64-byte aligned buffers
        }
        emit(0, st);
    }
    b_.CreateBr(ret_bb_);

    // Zero the reduction outputs now that we know which were fully covered by zero-start
    // register tiles.
    b_.SetInsertPoint(entry);
    std::vector<bool> zero(nt, false);
    for (size_t s = 0; s < c_.stmts.size(); ++s)
        if (c_.stmts[s].reduce == ReduceKind::Sum && !zero_started_[s])
            zero[size_t(c_.stmts[s].out.tensor)] = true;
    for (size_t t = 0; t < nt; ++t)
        if (zero[t]) {
            b_.CreateMemSet(args_[t], b_.getInt8(0), uint64_t(c_.tensors[t].num_elements()) * 4,
                            llvm::MaybeAlign(64));
            sum_.zeroed_tensors.push_back(int(t));
        }
    b_.CreateBr(first);

    // The exported KernelFn: void fn(float *const *buffers, const volatile int32_t *cancel).
    auto *kernel_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_}, false);
    auto *kernel = llvm::Function::Create(kernel_ty, llvm::Function::ExternalLinkage, fn_name, m_);
    kernel->addFnAttr(llvm::Attribute::NoUnwind);
    b_.SetInsertPoint(BasicBlock::Create(ctx_, "entry", kernel));
    // A null cancel pointer means "never cancel".
    auto *never = new llvm::GlobalVariable(m_, i32_, true, llvm::GlobalValue::InternalLinkage,
                                           b_.getInt32(0), fn_name + ".never");
    Value *cancel = kernel->getArg(1);
    cancel = b_.CreateSelect(b_.CreateIsNull(cancel), never, cancel);
    std::vector<Value *> call_args;
    for (size_t t = 0; t < nt; ++t)
        call_args.push_back(b_.CreateAlignedLoad(
            ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, kernel->getArg(0), t), llvm::Align(8),
            c_.tensors[t].name + ".ptr"));
    call_args.push_back(cancel);
    b_.CreateCall(fn_, call_args);
    b_.CreateRetVoid();
}

}  // namespace

namespace detail {

std::unique_ptr<llvm::Module> lower_to_module(const Program &p, llvm::LLVMContext &ctx,
                                              const std::string &fn_name,
                                              const LowerOptions &options,
                                              LoweringSummary *summary) {
    p.computation().validate();
    validate_loop_tree(p.computation(), p.tree);
    Prepared prep = prepare(p, options.elide_copies);
    LoweringSummary sum;
    sum.copy_elided = prep.elided;
    auto m = std::make_unique<llvm::Module>(fn_name, ctx);
    Lowerer(prep.c, ctx, *m, options, sum).build(prep.tree, fn_name);
    std::string err;
    llvm::raw_string_ostream os(err);
    LT_CHECK(!llvm::verifyModule(*m, &os), "lowering produced invalid LLVM IR: " + os.str());
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
