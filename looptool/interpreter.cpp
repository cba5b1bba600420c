#include "looptool/interpreter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "looptool/error.h"

namespace looptool {

std::vector<float *> Buffers::pointers() {
    std::vector<float *> p;
    for (auto &d : data) p.push_back(d.data());
    return p;
}

Buffers make_buffers(const Computation &c, uint64_t seed) {
    Buffers b;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (const auto &t : c.tensors) {
        TensorData v(size_t(t.num_elements()), 0.0f);
        if (t.kind == TensorKind::Input)
            for (auto &x : v) x = dist(rng);
        b.data.push_back(std::move(v));
    }
    return b;
}

namespace {

int64_t flat_index(const Computation &c, const Access &a, const std::vector<int64_t> &idx) {
    const Tensor &t = c.tensors[size_t(a.tensor)];
    int64_t off = 0;
    for (size_t d = 0; d < a.index.size(); ++d) {
        int64_t i = a.index[d].offset;
        for (const auto &term : a.index[d].terms) i += term.coef * idx[size_t(term.var)];
        off = off * t.shape[d] + i;
    }
    return off;
}

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
        case OpKind::Read:
        case OpKind::Const: break;
    }
    LT_CHECK(false, fmt::format("{} is not an arithmetic op", op_name(op)));
}

template <typename T>
T eval(const Computation &c, const Expr &e, const Buffers &b, const std::vector<int64_t> &idx) {
    if (e.op == OpKind::Read) return T(b.data[size_t(e.access.tensor)][size_t(flat_index(c, e.access, idx))]);
    if (e.op == OpKind::Const) return T(e.value);
    T a = eval<T>(c, e.args[0], b, idx);
    T bb = e.args.size() > 1 ? eval<T>(c, e.args[1], b, idx) : T(0);
    return apply_op(e.op, a, bb);
}

void exec_stmt_float(const Computation &c, const Statement &s, Buffers &b,
                     const std::vector<int64_t> &idx) {
    float v = eval<float>(c, s.value, b, idx);
    float &out = b.data[size_t(s.out.tensor)][size_t(flat_index(c, s.out, idx))];
    out = s.reduce == ReduceKind::Sum ? out + v : v;
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

    void run(size_t depth) {
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

void run_reference(const Computation &c, Buffers &b) {
    for (const auto &s : c.stmts) {
        // Iterate over the statement's domain with the reduction (if any) innermost, so each
        // output element is accumulated in double before one rounding to float.
        const std::vector<int> out_vars = vars_of(s.out);
        std::vector<int> red_vars;
        for (int v : vars_of(s))
            if (std::find(out_vars.begin(), out_vars.end(), v) == out_vars.end())
                red_vars.push_back(v);
        std::vector<int64_t> idx(c.vars.size(), 0);
        auto &out_buf = b.data[size_t(s.out.tensor)];
        // Odometer over out_vars, then over red_vars.
        auto next = [&](const std::vector<int> &vs) {
            for (size_t i = vs.size(); i-- > 0;) {
                int v = vs[i];
                if (++idx[size_t(v)] < c.vars[size_t(v)].extent) return true;
                idx[size_t(v)] = 0;
            }
            return false;
        };
        do {
            double acc = 0;
            do acc += eval<double>(c, s.value, b, idx);
            while (next(red_vars));
            float &out = out_buf[size_t(flat_index(c, s.out, idx))];
            out = s.reduce == ReduceKind::Sum ? float(double(out) + acc) : float(acc);
        } while (next(out_vars));
    }
}

void run_schedule(const Program &p, Buffers &b) {
    const Computation &c = *p.comp;
    for (const auto &nest : p.tree.nests) {
        ScheduleRunner r{c, nest, b, {}, std::vector<int64_t>(c.vars.size(), 0), {}};
        for (size_t d = 0; d < nest.loops.size(); ++d) r.inner.push_back(inner_coverage(nest, int(d)));
        r.avail.resize(c.vars.size());
        for (size_t v = 0; v < c.vars.size(); ++v) r.avail[v] = c.vars[v].extent;
        r.run(0);
    }
}

Comparison compare_outputs(const Computation &c, const Buffers &want, const Buffers &got,
                           double tolerance) {
    Comparison r;
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (c.tensors[t].kind != TensorKind::Output) continue;
        const auto &w = want.data[t];
        const auto &g = got.data[t];
        LT_CHECK(w.size() == g.size(), "buffer sizes differ");
        double scale = 0;
        for (float x : w) scale = std::max(scale, double(std::abs(x)));
        for (size_t i = 0; i < w.size(); ++i) {
            double denom = std::max(double(std::abs(w[i])), 1e-2 * scale);
            double err = denom > 0 ? std::abs(double(g[i]) - double(w[i])) / denom
                                   : std::abs(double(g[i]));
            if (!(err <= tolerance) && r.ok) {  // NaN counts as a mismatch
                r.ok = false;
                r.first_mismatch = fmt::format("{}[{}]: got {}, want {} (relative error {:.3g})",
                                               c.tensors[t].name, i, g[i], w[i], err);
            }
            if (std::isnan(err)) err = INFINITY;
            r.max_rel_error = std::max(r.max_rel_error, err);
        }
    }
    return r;
}

Comparison verify_schedule(const Program &p, uint64_t seed, double tolerance) {
    Buffers want = make_buffers(*p.comp, seed);
    Buffers got = want;
    run_reference(*p.comp, want);
    run_schedule(p, got);
    return compare_outputs(*p.comp, want, got, tolerance);
}

}  // namespace looptool
