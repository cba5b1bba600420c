#include "looptool/check/interpreter.h"

#include <sys/mman.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "looptool/ir/error.h"
#include "looptool/ir/nest_chain.h"

namespace looptool {

std::vector<float *> Buffers::pointers() {
    std::vector<float *> p;
    for (auto &d : data) p.push_back(d.data());
    return p;
}

namespace detail {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = size_t(4) << 20;
size_t rounded(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

// Large tensors in huge pages: the first touch of a 180 MB GEMV matrix took 0.52 s in 4 KB
// pages on this VM (most of `tune`'s time on such a shape) and 0.35 s with MADV_HUGEPAGE; the
// libraries compared against get the same buffers (make_buffers), so the TLB is the same on
// both sides. Where transparent huge pages are off, madvise fails and the pages stay small.
void *allocate_buffer(size_t bytes) {
    if (bytes < kHugeFrom) return ::operator new(bytes, std::align_val_t(64));
    void *p = ::operator new(rounded(bytes), std::align_val_t(kHugePage));
    (void)madvise(p, rounded(bytes), MADV_HUGEPAGE);
    return p;
}

void free_buffer(void *p, size_t bytes) {
    if (bytes < kHugeFrom)
        ::operator delete(p, std::align_val_t(64));
    else
        ::operator delete(p, std::align_val_t(kHugePage));
}

}  // namespace detail

Buffers make_buffers(const Computation &c, uint64_t seed) {
    // Two inputs per 64-bit draw, each k / 2^23 - 1 for a 24-bit k: uniform over [-1, 1) in
    // steps of 2^-23, exact in float. (uniform_real_distribution took one draw per element and
    // twice the time: filling the 180 MB of a Llama-7B GEMV's B was most of tuning it.)
    Buffers b;
    std::mt19937_64 rng(seed);
    auto value = [](uint64_t bits) { return float(int32_t(bits & 0xffffff)) * 0x1p-23f - 1.0f; };
    for (size_t ti = 0; ti < c.num_buffers(); ++ti) {
        const Tensor &t = c.tensors[ti];
        TensorData v(size_t(t.num_elements()), 0.0f);
        if (t.kind == TensorKind::Input) {
            size_t i = 0;
            for (; i + 1 < v.size(); i += 2) {
                const uint64_t r = rng();
                v[i] = value(r);
                v[i + 1] = value(r >> 32);
            }
            if (i < v.size()) v[i] = value(rng());
        }
        b.data.push_back(std::move(v));
    }
    return b;
}

void fill_non_inputs(const Computation &c, Buffers &b, float value) {
    for (size_t t = 0; t < c.num_buffers(); ++t)
        if (c.tensors[t].kind != TensorKind::Input)
            std::fill(b.data[t].begin(), b.data[t].end(), value);
}

namespace {

template <typename T>
T apply_op(OpKind op, T a, T b) {
    switch (op) {
        case OpKind::Add: return a + b;
        case OpKind::Sub: return a - b;
        case OpKind::Mul: return a * b;
        case OpKind::Div: return a / b;
        case OpKind::Min: return std::min(a, b);
        case OpKind::Max: return std::max(a, b);
        case OpKind::Neg: return -a;
        case OpKind::Exp: return std::exp(a);
        case OpKind::Log: return std::log(a);
        case OpKind::Sqrt: return std::sqrt(a);
        case OpKind::Abs: return std::abs(a);
        case OpKind::Recip: return T(1) / a;
        case OpKind::Tanh: return std::tanh(a);
        case OpKind::Erf: return std::erf(a);
        case OpKind::Read:
        case OpKind::Const: break;
    }
    LT_CHECK(false, fmt::format("{} is not an arithmetic op", op_name(op)));
}

template <typename T>
T eval(const Computation &c, const Expr &e, const Buffers &b, const std::vector<int64_t> &idx) {
    if (e.op == OpKind::Read)
        return T(b.data[size_t(e.access.tensor)][size_t(flat_index(c, e.access, idx))]);
    if (e.op == OpKind::Const) return T(e.value);
    T a = eval<T>(c, e.args[0], b, idx);
    T bb = e.args.size() > 1 ? eval<T>(c, e.args[1], b, idx) : T(0);
    return apply_op(e.op, a, bb);
}

void exec_stmt_float(const Computation &c, const Statement &s, Buffers &b,
                     const std::vector<int64_t> &idx) {
    float v = eval<float>(c, s.value, b, idx);
    float &out = b.data[size_t(s.out.tensor)][size_t(flat_index(c, s.out, idx))];
    switch (s.reduce) {
        case ReduceKind::None: out = v; return;
        case ReduceKind::Sum: out += v; return;
        case ReduceKind::Max: out = std::fmax(out, v); return;
        case ReduceKind::Min: out = std::fmin(out, v); return;
    }
}

// The scheduled interpreter is the definition of the loop semantics (see loop_tree.h): a loop
// with `avail` elements of its var to cover walks them in chunks of its inner coverage; the
// last chunk may be partial and then limits the inner loops of that var.
struct ScheduleRunner {
    const Computation &c;
    const Nest &nest;
    Buffers &b;
    std::vector<int64_t> inner;  // inner coverage per depth
    std::vector<int64_t> idx, avail;
    /// The nests run inside this one's loops (attached_nests), each at its depth.
    std::vector<std::pair<size_t, ScheduleRunner *>> before;

    void run(size_t depth) {
        for (auto &[d, r] : before)
            if (d == depth) {
                r->idx = idx;
                r->avail = avail;
                r->run(depth);
            }
        if (depth == nest.loops.size()) {
            for (int s : nest.stmts) exec_stmt_float(c, c.stmts[size_t(s)], b, idx);
            return;
        }
        const int v = nest.loops[depth].var;
        const int64_t chunk = inner[depth], total = avail[size_t(v)], base = idx[size_t(v)];
        for (int64_t start = 0; start < total; start += chunk) {
            idx[size_t(v)] = base + start;
            avail[size_t(v)] = std::min(chunk, total - start);
            run(depth + 1);
        }
        idx[size_t(v)] = base;
        avail[size_t(v)] = total;
    }
};

}  // namespace

void run_schedule(const Program &p, Buffers &b) {
    const Computation &c = *p.comp;
    LT_CHECK(b.data.size() == c.num_buffers(), "buffers do not match the computation");
    // The kernel allocates its scratch tensors; so does the interpreter, for the run.
    for (size_t t = c.num_buffers(); t < c.tensors.size(); ++t)
        b.data.emplace_back(size_t(c.tensors[t].num_elements()), 0.0f);
    struct Drop {
        Buffers &b;
        size_t n;
        ~Drop() { b.data.resize(n); }
    } drop{b, c.num_buffers()};
    // As in the kernel, every tensor a reduction writes starts at the reduction's identity.
    for (size_t t = 0; t < c.tensors.size(); ++t)
        if (const ReduceKind k = c.reduction_into(int(t)); k != ReduceKind::None)
            std::fill(b.data[t].begin(), b.data[t].end(), reduce_identity(k));
    std::vector<ScheduleRunner> runners;
    for (const auto &nest : p.tree.nests) {
        ScheduleRunner r{c, nest, b, {}, std::vector<int64_t>(c.vars.size(), 0), {}, {}};
        for (size_t d = 0; d < nest.loops.size(); ++d)
            r.inner.push_back(inner_coverage(nest, int(d)));
        r.avail.resize(c.vars.size());
        for (size_t v = 0; v < c.vars.size(); ++v) r.avail[v] = c.vars[v].extent;
        runners.push_back(std::move(r));
    }
    for (size_t n = 0; n < runners.size(); ++n)
        for (const Attached &a : attached_nests(p.tree, int(n)))
            runners[n].before.push_back({size_t(a.depth), &runners[size_t(a.nest)]});
    for (size_t n = 0; n < runners.size(); ++n)
        if (!p.tree.nests[n].shared) runners[n].run(0);  // the others run inside a later nest
}

}  // namespace looptool
