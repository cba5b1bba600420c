// NestEmitter (lower_nest_emitter.h): addresses, loads and stores, and statements.
#include "looptool/lower/lower_nest_emitter.h"

#include <fmt/format.h>

#include "looptool/ir/error.h"
#include "looptool/lower/lower_math.h"
#include "looptool/lower/lower_reduce.h"
#include "looptool/lower/lower_runtime.h"

namespace looptool::detail {

int64_t NestEmitter::static_offset(int slot, const State &st) const {
    const Slot &s = plan_.slots[size_t(slot)];
    int64_t o = s.offset + st.bias[size_t(slot)];
    for (size_t v = 0; v < s.coef.size(); ++v) o += s.coef[v] * st.stat[v];
    return o;
}

llvm::Align NestEmitter::align_at(int slot, const State &st, int64_t off) const {
    const int64_t g = gcd64(st.mult[size_t(slot)], off);
    const int64_t pow2 = g & -g;
    return llvm::Align(uint64_t(std::min<int64_t>(64, 4 * pow2)));
}

Value *NestEmitter::addr(int slot, const State &st, int64_t off) {
    Value *base = st.ptr[size_t(slot)];
    if (off == 0) return base;
    return b_.CreateInBoundsGEP(f32_, base, b_.getInt64(uint64_t(off)));
}

Value *NestEmitter::load_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride,
                               int64_t lanes) {
    if (w == 1) return load_at(f32_, slot, st, off);
    if (stride == 1 && lanes < w) {
        const llvm::Align al = align_at(slot, st, off);
        return b_.CreateMaskedLoad(vec_type(w), addr(slot, st, off), al, lane_mask(w, lanes),
                                   llvm::Constant::getNullValue(vec_type(w)));
    }
    if (stride == 1) return load_at(vec_type(w), slot, st, off);
    if (stride == 0) return b_.CreateVectorSplat(unsigned(w), load_at(f32_, slot, st, off));
    if (stride > 1 && stride <= 4 && w * stride <= 64) {
        // A small stride (a stride-2 conv's X[2 wo + kw] along wo, a subsample's copy): one
        // masked load of the floats the lanes span, only the lanes' own enabled (the others are
        // never touched), then a shuffle; two loads and a permute where a gather of 16 lanes
        // costs several times that.
        std::vector<llvm::Constant *> bits;
        std::vector<int> pick;
        for (int64_t e = 0; e < w * stride; ++e)
            bits.push_back(b_.getInt1(e % stride == 0 && e / stride < lanes));
        for (int64_t l = 0; l < w; ++l) pick.push_back(int(l * stride));
        Value *span = b_.CreateMaskedLoad(vec_type(w * stride), addr(slot, st, off),
                                          align_at(slot, st, off), llvm::ConstantVector::get(bits),
                                          llvm::PoisonValue::get(vec_type(w * stride)));
        return b_.CreateShuffleVector(span, pick);
    }
    return b_.CreateMaskedGather(vec_type(w), lane_pointers(slot, st, off, w, stride),
                                 llvm::Align(4), lane_mask(w, lanes),
                                 llvm::PoisonValue::get(vec_type(w)));
}

// One gather or scatter, not `w` scalar accesses: a 64x4 conv tile vectorized over output
// channels (stride 3136 in Y) spent 30-50 ms of the IR passes on its 256 scalar stores and
// extracts.
Value *NestEmitter::lane_pointers(int slot, State &st, int64_t off, int64_t w, int64_t stride) {
    std::vector<llvm::Constant *> idx;
    for (int64_t l = 0; l < w; ++l) idx.push_back(b_.getInt64(uint64_t(l * stride)));
    return b_.CreateInBoundsGEP(f32_, addr(slot, st, off), llvm::ConstantVector::get(idx));
}

void NestEmitter::store_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride,
                              int64_t lanes, Value *v) {
    if (w > 1 && stride == 1 && lanes < w) {
        const llvm::Align al = align_at(slot, st, off);
        b_.CreateMaskedStore(v, addr(slot, st, off), al, lane_mask(w, lanes));
    } else if (w == 1 || stride == 1) {
        store_at(v, slot, st, off);
    } else if (stride == 0) {
        LT_CHECK(lanes == w, "a masked piece of a vectorized reduction var");
        // Sequential writes of every lane to one element leave the last lane's value.
        store_at(b_.CreateExtractElement(v, uint64_t(w - 1)), slot, st, off);
    } else {
        b_.CreateMaskedScatter(v, lane_pointers(slot, st, off, w, stride), llvm::Align(4),
                               lane_mask(w, lanes));
    }
}

// A scatter of 16 lanes is microcoded: a 7x7 stem's 32x8 tile (m vectorized, stride 12544 in
// Y; 147 FMAs per accumulator) spent a sixth of its time in its 16 scatters. Two to eight
// accumulators at consecutive elements are instead 4x4 transposes within 128-bit lanes and runs
// of 4 floats (masked past the group's end).
std::set<AccKey> NestEmitter::store_transposed(const Tile &t, int slot, State &st) {
    std::set<AccKey> done;
    auto member = [&](const AccKey &k, int64_t j) {
        const AccKey m{k.off + j, k.w, k.stride, k.lanes};
        auto it = t.acc.find(m);
        return it != t.acc.end() && !done.count(m) ? it->second : nullptr;
    };
    for (const auto &entry : t.acc) {
        const AccKey &k = entry.first;
        if (done.count(k) || k.w < 4 || k.w % 4 != 0 || k.lanes != k.w || k.stride < 8) continue;
        std::vector<Value *> group;
        for (Value *v = member(k, 0); v && group.size() < 8; v = member(k, int64_t(group.size())))
            group.push_back(v);
        if (group.size() < 2) continue;
        for (size_t j = 0; j < group.size(); ++j)
            done.insert(AccKey{k.off + int64_t(j), k.w, k.stride, k.lanes});
        store_group(slot, st, k.off, k.w, k.stride, group);
    }
    return done;
}

// group[j] lane i is the element off + j + i * stride. Per four of them, a 4x4 transpose in
// every 128-bit lane: t[c] lane group L holds members 0..3 of lane 4L + c, one store of 4.
void NestEmitter::store_group(int slot, State &st, int64_t off, int64_t w, int64_t stride,
                              const std::vector<Value *> &group) {
    auto mask = [&](int64_t first, bool pairs) {  // per lane group: unpack of floats or pairs
        std::vector<int> m;
        for (int64_t L = 0; L < w / 4; ++L)
            for (int64_t e = 0; e < 4; ++e) {
                const int64_t from_y = pairs ? e / 2 : e % 2, at = pairs ? e % 2 : e / 2;
                m.push_back(int(from_y * w + 4 * L + first + at));
            }
        return m;
    };
    auto shuffle = [&](Value *x, Value *y, const std::vector<int> &m) {
        return b_.CreateShuffleVector(x, y, m);
    };
    Value *none = llvm::PoisonValue::get(vec_type(w));
    for (size_t q = 0; q < group.size(); q += 4) {
        // Members past the group's end are poison; their lanes of each run are not stored.
        const int64_t real = std::min<int64_t>(4, int64_t(group.size() - q));
        Value *a[4];
        for (size_t j = 0; j < 4; ++j) a[j] = q + j < group.size() ? group[q + j] : none;
        Value *lo01 = shuffle(a[0], a[1], mask(0, false)),
              *hi01 = shuffle(a[0], a[1], mask(2, false));
        Value *lo23 = shuffle(a[2], a[3], mask(0, false)),
              *hi23 = shuffle(a[2], a[3], mask(2, false));
        Value *t[4] = {shuffle(lo01, lo23, mask(0, true)), shuffle(lo01, lo23, mask(2, true)),
                       shuffle(hi01, hi23, mask(0, true)), shuffle(hi01, hi23, mask(2, true))};
        for (int64_t L = 0; L < w / 4; ++L)
            for (int64_t c = 0; c < 4; ++c) {
                const int first = int(4 * L);
                Value *run = b_.CreateShuffleVector(t[c], {first, first + 1, first + 2, first + 3});
                const int64_t at = off + int64_t(q) + (4 * L + c) * stride;
                if (real == 4)
                    store_at(run, slot, st, at);
                else
                    b_.CreateMaskedStore(run, addr(slot, st, at), align_at(slot, st, at),
                                         lane_mask(4, real));
            }
    }
}

Value *NestEmitter::load(int slot, State &st, int vvar, int64_t w) {
    int64_t stride = w > 1 ? plan_.slots[size_t(slot)].coef[size_t(vvar)] : 0;
    const int64_t off = static_offset(slot, st);
    if (stride == 1 && !plan_.prefetch.empty() && plan_.prefetch[size_t(slot)] != 0)
        prefetch(slot, st, off + plan_.prefetch[size_t(slot)], w);
    return load_lanes(slot, st, off, w, stride, w > 1 ? st.lanes : 1);
}

// The lines of `w` floats at `off` elements past the slot's pointer, into L2 (locality 2:
// prefetcht1; prefetcht0 would evict the block in use from L1; docs/decisions.md). Once per line,
// block and pointer: the unrolled rows of a tile load the same vector of B. The address may lie
// past the tensor (the last block's next), so the GEP is not inbounds; a prefetch never faults.
void NestEmitter::prefetch(int slot, const State &st, int64_t off, int64_t w) {
    std::vector<int64_t> at;
    for (int64_t line = 0; line < w; line += 16) at.push_back(off + line);
    // w floats that may not start a line touch one line more: its last element's.
    if (w > 1 && align_at(slot, st, off).value() < 64) at.push_back(off + w - 1);
    for (int64_t a : at) {
        const auto key = std::make_tuple(b_.GetInsertBlock(), st.ptr[size_t(slot)], a);
        if (!prefetched_.insert(key).second) continue;
        Value *p = b_.CreateGEP(f32_, st.ptr[size_t(slot)], b_.getInt64(uint64_t(a)));
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                           {p, b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
    }
}

Value *NestEmitter::eval(const Expr &e, State &st, int vvar, int64_t w) {
    if (e.op == OpKind::Read) return load(plan_.slot(e.access), st, vvar, w);
    if (e.op == OpKind::Const) return llvm::ConstantFP::get(vec_type(w), double(e.value));
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
        case OpKind::Exp:
        case OpKind::Log:
        case OpKind::Tanh:
        case OpKind::Erf: return emit_math(b_, e.op, a);
        case OpKind::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
        case OpKind::Abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
        case OpKind::Recip: return b_.CreateFDiv(llvm::ConstantFP::get(vec_type(w), 1.0), a);
        case OpKind::Read:
        case OpKind::Const: break;
    }
    LT_CHECK(false, fmt::format("cannot lower op {}", op_name(e.op)));
}

// The reduction of old and value: a fused multiply-add for a sum of products. `acc`: old is a
// register tile's accumulator, never NaN (reduce_step).
Value *NestEmitter::update(const Statement &s, Value *old, State &st, int vvar, int64_t w,
                           bool acc) {
    if (s.reduce == ReduceKind::Sum && s.value.op == OpKind::Mul) {
        Value *a = eval(s.value.args[0], st, vvar, w);
        Value *b = eval(s.value.args[1], st, vvar, w);
        return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_type(w)}, {a, b, old});
    }
    Value *v = eval(s.value, st, vvar, w);
    if (acc) return reduce_step(b_, s.reduce, old, v);
    // A stored NaN is one more term, skipped even when every term is NaN (reduce_start).
    return reduce_combine(b_, s.reduce, reduce_start(b_, s.reduce, old), v);
}

void NestEmitter::emit_stmt(int s, State &st, int vvar, int64_t w) {
    const Statement &stmt = c_.stmts[size_t(s)];
    const int out = plan_.slot(stmt.out);
    const int64_t off = static_offset(out, st);
    const int64_t stride = w > 1 ? plan_.slots[size_t(out)].coef[size_t(vvar)] : 0;
    const int64_t lanes = w > 1 ? st.lanes : 1;
    sum_.static_statements++;
    for (Tile *t : st.tiles) {
        if (t->stmt != s) continue;
        auto it = t->acc.find(AccKey{off, w, stride, lanes});
        LT_CHECK(it != t->acc.end(), "a statement copy outside its register tile's accumulators");
        Value *&acc = it->second;
        acc = update(stmt, acc, st, vvar, w, true);
        return;
    }
    if (stmt.reduce != ReduceKind::None) zero_started_[size_t(s)] = false;
    if (stmt.reduce == ReduceKind::None) {
        Value *v = eval(stmt.value, st, vvar, w);
        // A streamed output's whole aligned vectors (a masked or scattered one cannot be).
        const llvm::Align al = align_at(out, st, off);
        if (plan_.streamed[plan_.position(s)] && w > 1 && stride == 1 && lanes == w &&
            int64_t(al.value()) >= std::min<int64_t>(64, 4 * w)) {
            llvm::StoreInst *store = b_.CreateAlignedStore(v, addr(out, st, off), al);
            store->setMetadata(
                llvm::LLVMContext::MD_nontemporal,
                llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1))));
            sum_.streamed_stores++;
        } else {
            store_lanes(out, st, off, w, stride, lanes, v);
        }
    } else if (w > 1 && stride == 0) {
        // A vectorized reduction var: a horizontal reduction into the scalar.
        const llvm::Align al = align_at(out, st, off);
        Value *p = addr(out, st, off);
        Value *old = reduce_start(b_, stmt.reduce, b_.CreateAlignedLoad(f32_, p, al));
        b_.CreateAlignedStore(reduce_lanes(b_, stmt.reduce, old, eval(stmt.value, st, vvar, w)), p,
                              al);
    } else {
        Value *old = load_lanes(out, st, off, w, stride, lanes);
        store_lanes(out, st, off, w, stride, lanes, update(stmt, old, st, vvar, w));
    }
}

void NestEmitter::emit_stmts(State &st, int vvar, int64_t w) {
    for (int s : plan_.nest.stmts) emit_stmt(s, st, vvar, w);
}

}  // namespace looptool::detail
