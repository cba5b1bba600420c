// Lowering, internal: the emitter of one nest from its plan (lower_emit.h). Its methods are
// split by concern: lower_emit.cpp (the walk over loops, register tiles, transposes and the
// kernel body), lower_emit_access.cpp (addresses, loads and stores, statements). Included by
// those two files only (LLVM include paths).
#pragma once

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "looptool/lower/lower_emit.h"
#include "looptool/lower/lower_internal.h"
#include "looptool/lower/lower_reduce.h"

namespace looptool::detail {

using llvm::BasicBlock;
using llvm::IRBuilder;
using llvm::PHINode;
using llvm::Type;
using llvm::Value;

/// A register tile being emitted: the SSA accumulators of one statement's output region.
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
    std::vector<int64_t> bias;   // per slot: added to its static offset (a rebased slot's)
    std::vector<Tile *> tiles;   // active register tiles (owned by the emit() that started them)
    int64_t lanes = 1;           // real lanes of the vector piece being emitted (masked: < w)
};

inline int64_t gcd64(int64_t a, int64_t b) { return std::gcd(a < 0 ? -a : a, b < 0 ? -b : b); }

/// Emits one nest from its plan. Everything it knows about the nest is in the plan; its own
/// state is the builder's position and the static context passed down the walk.
class NestEmitter {
public:
    /// `before`: the plans of the chain of nests before this one that share loops, each with
    /// the next (Nest::shared), the nearest first. This nest emits those attached to it
    /// (attached_nests) where their shared loops end; each of them emits its own in turn.
    /// `threads` > 1: a parallel outermost loop runs on the JIT's thread pool (run_parallel).
    NestEmitter(const Computation &c, const NestPlan &plan, std::vector<const NestPlan *> before,
                const KernelBody &body, IRBuilder<> &b, std::vector<bool> &zero_started,
                LoweringSummary &sum, int threads = 1)
        : c_(c),
          plan_(plan),
          chain_(before),
          slots_(plan.slots),
          body_(body),
          b_(b),
          ctx_(b.getContext()),
          zero_started_(zero_started),
          sum_(sum),
          threads_(threads) {
        // attached_nests()'s rule over the chain: chain_[j] is the nest j + 1 before this one.
        int least = INT_MAX;
        for (size_t j = 0; j < chain_.size(); ++j) {
            const int s = chain_[j]->nest.shared;
            if (s < least && s >= plan.nest.shared) attached_.push_back({size_t(s), j});
            least = std::min(least, s);
        }
        for (const NestPlan *p : before)
            slots_.insert(slots_.end(), p->slots.begin(), p->slots.end());
        f32_ = Type::getFloatTy(ctx_);
        i64_ = Type::getInt64Ty(ctx_);
        i32_ = Type::getInt32Ty(ctx_);
    }

    void run() {
        if (threads_ > 1 && plan_.nest.loops[0].parallel && chain_.empty()) {
            run_parallel();
            return;
        }
        if (plan_.mode == NestMode::Generic) {
            std::vector<Value *> idx(c_.vars.size(), b_.getInt64(0)), av;
            for (const auto &v : c_.vars) av.push_back(b_.getInt64(uint64_t(v.extent)));
            emit_generic(0, idx, av);
            return;
        }
        emit(0, initial_state());
    }

private:
    State initial_state() const {
        State st;
        for (const auto &v : c_.vars) st.avail.push_back(v.extent);
        st.stat.assign(c_.vars.size(), 0);
        for (const Slot &s : slots_) {
            st.ptr.push_back(body_.args[size_t(s.tensor)]);
            st.mult.push_back(body_.align_floats[size_t(s.tensor)]);
            st.bias.push_back(0);
        }
        return st;
    }
    /// The nest's outermost loop outlined into a function of a range of its iterations, and
    /// here a call of the runtime that runs the ranges on the thread pool (lower_parallel.cpp).
    void run_parallel();
    /// In the outlined function: the iterations [body_.begin, body_.end) of the outermost loop.
    void emit_chunk_range();
    /// The emitter of chain_[j], with the nests before it.
    NestEmitter chained(size_t j) const {
        return NestEmitter(
            c_, *chain_[j],
            std::vector<const NestPlan *>(chain_.begin() + std::ptrdiff_t(j) + 1, chain_.end()),
            body_, b_, zero_started_, sum_);
    }
    /// Whether chain_[j] is a packed block's copy: it writes a block-relative slot.
    bool writes_block(size_t j) const {
        for (int s : chain_[j]->out_slot)
            if (chain_[j]->slots[size_t(s)].block_relative) return true;
        return false;
    }
    /// At the end of chain_[j]'s shared loops: chain_[j], in the same context (its slots and
    /// those of the nests before it are the last of slots_).
    void emit_before(size_t j, size_t d, const State &st) {
        NestEmitter inner = chained(j);
        State s2;
        s2.avail = st.avail;
        s2.stat = st.stat;
        size_t first = plan_.slots.size();
        for (size_t i = 0; i < j; ++i) first += chain_[i]->slots.size();
        const auto from = std::ptrdiff_t(first);
        s2.ptr.assign(st.ptr.begin() + from, st.ptr.end());
        s2.mult.assign(st.mult.begin() + from, st.mult.end());
        s2.bias.assign(st.bias.begin() + from, st.bias.end());
        inner.emit(d, s2);
    }
    /// Where the shared loops end: the block-relative slots of both nests point at their
    /// tensor's start again, their static offset so far cancelled.
    void rebase(State &st) const {
        for (size_t a = 0; a < slots_.size(); ++a) {
            const Slot &s = slots_[a];
            if (!s.block_relative) continue;
            st.ptr[a] = body_.args[size_t(s.tensor)];
            st.mult[a] = body_.align_floats[size_t(s.tensor)];
            st.bias[a] = 0;
            for (size_t v = 0; v < s.coef.size(); ++v) st.bias[a] -= s.coef[v] * st.stat[v];
        }
    }
    void emit(size_t d, State st);
    void emit_stmts(State &st, int vvar, int64_t w);
    void emit_stmt(int s, State &st, int vvar, int64_t w);
    void emit_runtime_loop(int64_t n, bool poll, State &st,
                           const std::function<void(Value *iv)> &body);
    /// The IR names of a do-while loop's header block, counter, next counter and exit block.
    struct LoopNames {
        const char *head, *iv, *next, *exit;
    };
    void emit_do_while(const LoopNames &names, Value *step, Value *bound, bool nowrap, bool poll,
                       const std::vector<Value **> &carried,
                       const std::function<void(Value *iv)> &body);
    void emit_generic(size_t d, std::vector<Value *> idx, std::vector<Value *> avail);
    void emit_poll();
    bool polls(size_t d) const;
    /// A copy `S[...] = T[...]` whose loops from depth d on are a run over contiguous
    /// elements of T (J of them, J % 16 == 0), then `rows` (a multiple of 8) elements of S
    /// contiguous, each row `src_stride` apart in T and each element of the run `dst_stride`
    /// (rows, or a padded row) apart in S: a rows x J transpose, in blocks of `block` rows
    /// (16, or 8 when rows is not a multiple of 16).
    struct Transpose {
        int src = 0, dst = 0;  // slots
        int64_t rows = 0, run = 0, src_stride = 0, dst_stride = 0;
        int block = 16;
    };
    std::optional<Transpose> transpose_at(size_t d, const State &st) const;
    void emit_transpose(const Transpose &t, const State &st);
    std::unique_ptr<Tile> start_tile(size_t pos, size_t d, State &st);
    void finish_tile(const Tile &t, State &st);
    /// The accumulators of `t` that would be scattered (w lanes `stride` >= 8 apart) and come in
    /// groups of 2 to 8 at consecutive elements (an unrolled loop along the output's rows, the
    /// vector across them), each group transposed in registers and stored as runs of up to 4
    /// floats; returns the keys stored.
    std::set<AccKey> store_transposed(const Tile &t, int slot, State &st);
    void store_group(int slot, State &st, int64_t off, int64_t w, int64_t stride,
                     const std::vector<Value *> &group);

    Type *vec_type(int64_t w) const {
        return w == 1 ? f32_ : static_cast<Type *>(llvm::FixedVectorType::get(f32_, unsigned(w)));
    }
    int64_t static_offset(int slot, const State &st) const;
    Value *addr(int slot, const State &st, int64_t extra);
    llvm::Align align_at(int slot, const State &st, int64_t extra) const;
    // One scalar or vector access at `extra` elements past the slot's pointer. The address and
    // its alignment are computed before the instruction is built: passing a stale alignment
    // (an argument evaluated before addr() set it) gave later lanes their neighbour's
    // alignment, and the SLP vectorizer then emitted an aligned store to an unaligned address
    // (vmovaps, SIGSEGV; found by the random-schedule check, docs/reliability.md).
    Value *load_at(Type *t, int slot, const State &st, int64_t extra) {
        return b_.CreateAlignedLoad(t, addr(slot, st, extra), align_at(slot, st, extra));
    }
    void store_at(Value *v, int slot, const State &st, int64_t extra) {
        b_.CreateAlignedStore(v, addr(slot, st, extra), align_at(slot, st, extra));
    }
    Value *load(int slot, State &st, int vvar, int64_t w);
    void prefetch(int slot, const State &st, int64_t off, int64_t w);
    /// `w` lanes `stride` apart from `off`; only the first `lanes` are read (the rest are
    /// zero for stride 1, poison otherwise) or written.
    Value *load_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride, int64_t lanes);
    Value *lane_pointers(int slot, State &st, int64_t off, int64_t w, int64_t stride);
    void store_lanes(int slot, State &st, int64_t off, int64_t w, int64_t stride, int64_t lanes,
                     Value *v);
    Value *lane_mask(int64_t w, int64_t lanes) {
        std::vector<llvm::Constant *> bits;
        for (int64_t l = 0; l < w; ++l) bits.push_back(b_.getInt1(l < lanes));
        return llvm::ConstantVector::get(bits);
    }
    Value *eval(const Expr &e, State &st, int vvar, int64_t w);
    Value *update(const Statement &s, Value *old, State &st, int vvar, int64_t w, bool acc = false);
    Value *identity(ReduceKind k, int64_t w) const { return reduce_identity_value(vec_type(w), k); }

    const Computation &c_;
    const NestPlan &plan_;
    std::vector<const NestPlan *> chain_;  ///< the nests before this one sharing loops
    /// The nests of chain_ this one emits: (depth, index in chain_), outermost first.
    std::vector<std::pair<size_t, size_t>> attached_;
    /// This nest's slots, then those of the nests emitted inside its shared loops: the shared
    /// loops advance the pointers of all.
    std::vector<Slot> slots_;
    const KernelBody &body_;
    IRBuilder<> &b_;
    llvm::LLVMContext &ctx_;
    std::vector<bool> &zero_started_;  // per statement: every emission was a zero-start tile
    LoweringSummary &sum_;
    int threads_ = 1;
    Type *f32_, *i64_, *i32_;
    /// Generic emission: each var's index where the shared loops end (rebase()'s counterpart).
    std::vector<Value *> block_start_;
    /// The prefetches emitted: (block, pointer, offset), each once.
    std::set<std::tuple<llvm::BasicBlock *, Value *, int64_t>> prefetched_;
};

}  // namespace looptool::detail
