#include "looptool/check/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <unordered_set>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

// Float's unit roundoff plus the double reference's own (2^-29 times smaller, kept so that
// the bound also covers the reference's rounding).
constexpr double kU = 0x1p-24 + 0x1p-53;
// Absolute error of a product, quotient or libm result that underflows (gradual underflow
// rounds to a multiple of 2^-149).
constexpr double kEta = 0x1p-149;
// exp, log, tanh and erf are glibc calls: libm's expf/logf/tanhf/erff on scalars, libmvec's
// vector variants on vectors (lower_math.h), which are less exact (up to 4 ulp, docs/decisions.md).
// 8 ulp, i.e. 16 u of the result, for all four: twice that.
constexpr double kLibmU = 16 * kU;
// 2 / sqrt(pi): the largest slope of erf.
constexpr double kErfSlope = 1.1283791670955126;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kFloatMax = double(std::numeric_limits<float>::max());

double gamma(int64_t m) {
    const double mu = double(std::max<int64_t>(m, 0)) * kU;
    return mu < 1 ? mu / (1 - mu) : kInf;
}

// A value in double and a bound on |float evaluation - value|; e = +inf: cannot be bounded
// (the float evaluation may overflow, or divides by an interval that holds zero).
struct V {
    double v = 0, e = 0;
};

// One rounding op's result: propagated error `prop` plus `rel` * |result| of rounding, plus
// `eta` where the op can underflow (a sum or difference that underflows is exact).
V rounded(double v, double prop, double rel, bool exact_inputs, double eta = kEta) {
    if (!std::isfinite(v)) return {v, exact_inputs ? 0 : kInf};  // a NaN/inf class, if exact
    if (!std::isfinite(prop)) return {v, kInf};
    double e = prop + rel * (std::abs(v) + prop) + eta;
    if (std::abs(v) + e > kFloatMax) e = kInf;  // the float result may overflow
    return {v, e};
}

V apply_op(OpKind op, V a, V b) {
    const bool exact = a.e == 0 && b.e == 0;
    if (std::isinf(a.e) || std::isinf(b.e)) return {0, kInf};
    switch (op) {
        case OpKind::Add: return rounded(a.v + b.v, a.e + b.e, kU, exact, 0);
        case OpKind::Sub: return rounded(a.v - b.v, a.e + b.e, kU, exact, 0);
        case OpKind::Mul:
            return rounded(a.v * b.v, std::abs(a.v) * b.e + std::abs(b.v) * a.e + a.e * b.e, kU,
                           exact);
        case OpKind::Div:
        case OpKind::Recip: {
            if (op == OpKind::Recip) b = a, a = {1, 0};
            if (b.e >= std::abs(b.v) && !exact) return {a.v / b.v, kInf};
            const double r = a.v / b.v;
            const double prop = exact ? 0 : (a.e + std::abs(r) * b.e) / (std::abs(b.v) - b.e);
            return rounded(r, prop, kU, exact);
        }
        case OpKind::Min: return {std::min(a.v, b.v), std::max(a.e, b.e)};
        case OpKind::Max: return {std::max(a.v, b.v), std::max(a.e, b.e)};
        case OpKind::Neg: return {-a.v, a.e};
        case OpKind::Abs: return {std::abs(a.v), a.e};
        case OpKind::Exp: {
            const double r = std::exp(a.v);
            return rounded(r, r * std::expm1(a.e), kLibmU, exact);
        }
        case OpKind::Log: {
            if (a.e >= a.v && !exact) return {std::log(a.v), kInf};
            const double prop = exact ? 0 : -std::log1p(-a.e / a.v);
            return rounded(std::log(a.v), prop, kLibmU, exact);
        }
        case OpKind::Sqrt: {
            double prop = std::sqrt(a.e);  // |sqrt(x) - sqrt(y)| <= sqrt(|x - y|)
            if (a.v > 0) prop = std::min(prop, a.e / std::sqrt(a.v));
            return rounded(std::sqrt(a.v), prop, kU, exact);
        }
        case OpKind::Tanh:
        case OpKind::Erf: {
            // Each is monotone with its steepest slope at 0: bound the slope on [|v|-e, |v|+e].
            const double m = std::max(0.0, std::abs(a.v) - a.e);
            const double t = std::tanh(m);
            const double slope = op == OpKind::Tanh ? 1 - t * t : kErfSlope * std::exp(-m * m);
            const double r = op == OpKind::Tanh ? std::tanh(a.v) : std::erf(a.v);
            return rounded(r, a.e * slope, kLibmU, exact);
        }
        case OpKind::Read:
        case OpKind::Const: break;
    }
    LT_CHECK(false, "not an arithmetic op");
}

// The state of one element of a written tensor. Sum (and an assignment, one term): the sum
// of the terms written or accumulated into it, the sum of their magnitudes, of their own error
// bounds, and their count. Max/Min: the extreme term (NaN terms skipped, as fmax does) and the
// largest of the terms' bounds.
struct Acc {
    double v = 0, mag = 0, err = 0;
    int64_t n = 0;
    ReduceKind kind = ReduceKind::Sum;

    static Acc start(ReduceKind k) {
        Acc a;
        a.kind = k == ReduceKind::None ? ReduceKind::Sum : k;
        a.v = double(reduce_identity(k));
        return a;
    }
    bool extreme() const { return kind == ReduceKind::Max || kind == ReduceKind::Min; }
    void add(V t) {
        ++n;
        if (extreme()) {
            v = kind == ReduceKind::Max ? std::fmax(v, t.v) : std::fmin(v, t.v);
            err = std::max(err, t.e);
            return;
        }
        v += t.v;
        if (std::isfinite(t.v)) mag += std::abs(t.v);
        err += t.e;
    }
    // A statement's terms `o` combined into this element.
    void merge(const Acc &o) {
        if (!o.extreme()) {
            v += o.v, mag += o.mag, err += o.err, n += o.n;
            return;
        }
        // What the element held (the identity, or an earlier assignment's value) is one more
        // term of the max or min.
        Acc r = o;
        if (n > 0) r.add(V{v, bound()});
        *this = r;
    }
    // Sum: any summation order of n float terms: |error| <= gamma_{n-1} * sum |terms|
    // (Higham, Accuracy and Stability of Numerical Algorithms, eq. 4.4), the terms' own errors
    // added. Max/Min round nothing, and |max_i f_i - max_i v_i| <= max_i |f_i - v_i|: the
    // largest term bound (0 when every term is exact, so the result must equal the reference
    // rounded to float exactly).
    double bound() const {
        if (!std::isfinite(err)) return kInf;
        if (extreme()) return err;
        if (mag + err > kFloatMax) return kInf;
        if (!std::isfinite(v)) return 0;  // an exact inf/NaN term: the class must match
        return gamma(n - 1) * (mag + err) + err;
    }
};

// `read(tensor, flat)` gives a written tensor's element as a V.
template <typename Read>
V eval(const Computation &c, const Expr &e, const Buffers &in, const std::vector<int64_t> &idx,
       Read &read) {
    switch (e.op) {
        case OpKind::Read: {
            const int t = e.access.tensor;
            const int64_t f = flat_index(c, e.access, idx);
            if (c.tensors[size_t(t)].kind == TensorKind::Input)
                return {double(in.data[size_t(t)][size_t(f)]), 0};
            return read(t, f);
        }
        case OpKind::Const: return {double(e.value), 0};
        default: {
            V a = eval(c, e.args[0], in, idx, read);
            V b = e.args.size() > 1 ? eval(c, e.args[1], in, idx, read) : V{};
            return apply_op(e.op, a, b);
        }
    }
}

// Odometer over `vs` (last fastest); false after the last combination.
bool next(const Computation &c, const std::vector<int> &vs, std::vector<int64_t> &idx) {
    for (size_t i = vs.size(); i-- > 0;) {
        const int v = vs[i];
        if (++idx[size_t(v)] < c.vars[size_t(v)].extent) return true;
        idx[size_t(v)] = 0;
    }
    return false;
}

std::vector<int> reduction_vars(const Statement &s) {
    const std::vector<int> out = vars_of(s.out);
    std::vector<int> red;
    for (int v : vars_of(s))
        if (std::find(out.begin(), out.end(), v) == out.end()) red.push_back(v);
    return red;
}

double domain_size(const Computation &c, const Statement &s) {
    double n = 1;
    for (int v : vars_of(s)) n *= double(c.vars[size_t(v)].extent);
    return n;
}

int64_t total_outputs(const Computation &c) {
    int64_t n = 0;
    for (const auto &t : c.tensors)
        if (t.kind == TensorKind::Output) n += t.num_elements();
    return n;
}

// Sampling computes one element from its own reduction; that needs every statement's output
// indices to be plain variables (or constants) and no statement reading what it writes.
bool samplable(const Computation &c) {
    for (const auto &s : c.stmts) {
        std::vector<int> seen;
        for (const auto &a : s.out.index) {
            if (a.terms.empty()) continue;
            if (a.terms.size() != 1 || a.terms[0].coef != 1) return false;
            if (std::find(seen.begin(), seen.end(), a.terms[0].var) != seen.end()) return false;
            seen.push_back(a.terms[0].var);
        }
        bool self_read = false;
        auto visit = [&](auto &&self, const Expr &e) -> void {
            if (e.op == OpKind::Read && e.access.tensor == s.out.tensor) self_read = true;
            for (const auto &a : e.args) self(self, a);
        };
        visit(visit, s.value);
        if (self_read) return false;
    }
    return true;
}

// Output elements per statement evaluation when one output element is computed on its own.
double cost_per_element(const Computation &c) {
    double cost = 0;
    for (const auto &s : c.stmts)
        cost += domain_size(c, s) / double(c.tensors[size_t(s.out.tensor)].num_elements());
    return std::max(cost, 1.0);
}

int64_t sample_size(const Computation &c, const ReferenceOptions &o) {
    const int64_t total = total_outputs(c);
    if (reference_cost(c) <= o.max_terms || !samplable(c)) return total;
    const double n = std::max(o.max_terms / cost_per_element(c), double(o.min_sample));
    return std::min<int64_t>(total, int64_t(n));
}

class Progress {
public:
    explicit Progress(bool on) : on_(on), start_(std::chrono::steady_clock::now()), last_(start_) {}
    void update(double done, double total, const char *what) {
        if (!on_) return;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_ < std::chrono::seconds(1)) return;
        last_ = now;
        fmt::print(stderr, "reference: {:.0f}% of {}, {:.1f} s\n", 100 * done / total, what,
                   std::chrono::duration<double>(now - start_).count());
    }

private:
    bool on_;
    std::chrono::steady_clock::time_point start_, last_;
};

// Every written tensor's elements after all statements.
std::vector<std::vector<Acc>> full_state(const Computation &c, const Buffers &in,
                                         const ReferenceOptions &o) {
    std::vector<std::vector<Acc>> state(c.tensors.size());
    for (size_t t = 0; t < c.tensors.size(); ++t)
        if (c.tensors[t].kind != TensorKind::Input)
            state[t].assign(size_t(c.tensors[t].num_elements()),
                            Acc::start(c.reduction_into(int(t))));
    auto read = [&](int t, int64_t f) {
        const Acc &a = state[size_t(t)][size_t(f)];
        return V{a.v, a.bound()};
    };
    Progress progress(o.progress);
    const double cost = reference_cost(c);
    double done = 0;
    for (const auto &s : c.stmts) {
        // The reduction innermost, so each element is accumulated on its own before it is
        // written (as a float kernel would, in some order).
        const std::vector<int> out_vars = vars_of(s.out), red_vars = reduction_vars(s);
        double red_size = 1;
        for (int v : red_vars) red_size *= double(c.vars[size_t(v)].extent);
        std::vector<int64_t> idx(c.vars.size(), 0);
        auto &out = state[size_t(s.out.tensor)];
        int64_t count = 0;
        do {
            Acc local = Acc::start(s.reduce);
            do local.add(eval(c, s.value, in, idx, read));
            while (next(c, red_vars, idx));
            Acc &o_acc = out[size_t(flat_index(c, s.out, idx))];
            if (s.reduce == ReduceKind::None)
                o_acc = local;
            else
                o_acc.merge(local);
            done += red_size;
            if (++count % 1024 == 0)
                progress.update(done, cost, fmt::format("{:.3g} terms", cost).c_str());
        } while (next(c, out_vars, idx));
    }
    return state;
}

Reference full_reference(const Computation &c, const Buffers &in, const ReferenceOptions &o) {
    std::vector<std::vector<Acc>> state = full_state(c, in, o);
    Reference r;
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (c.tensors[t].kind != TensorKind::Output) continue;
        Reference::Output out;
        out.tensor = int(t);
        for (const Acc &a : state[t]) out.value.push_back(a.v), out.bound.push_back(a.bound());
        state[t] = {};
        r.checked += int64_t(out.value.size());
        r.outputs.push_back(std::move(out));
    }
    r.total = r.checked;
    return r;
}

// One element at a time: elem(t, f, upto) is element f of tensor t after statements [0, upto).
class Sampler {
public:
    Sampler(const Computation &c, const Buffers &in) : c_(c), in_(in) {}

    Acc elem(int t, int64_t f, size_t upto) {
        const auto key = std::make_tuple(t, f, upto);
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        Acc acc = Acc::start(c_.reduction_into(t));
        const Tensor &tensor = c_.tensors[size_t(t)];
        for (size_t si = 0; si < upto; ++si) {
            const Statement &s = c_.stmts[si];
            if (s.out.tensor != t) continue;
            std::vector<int64_t> idx(c_.vars.size(), 0);
            if (!place(s.out, tensor, f, idx)) continue;
            auto read = [&](int rt, int64_t rf) {
                Acc a = elem(rt, rf, si);
                return V{a.v, a.bound()};
            };
            Acc local = Acc::start(s.reduce);
            const std::vector<int> red_vars = reduction_vars(s);
            do local.add(eval(c_, s.value, in_, idx, read));
            while (next(c_, red_vars, idx));
            if (s.reduce == ReduceKind::None)
                acc = local;
            else
                acc.merge(local);
        }
        memo_.emplace(key, acc);
        return acc;
    }

    void forget() { memo_.clear(); }

private:
    // Sets the output variables so that `out` addresses element f; false if it never does.
    bool place(const Access &out, const Tensor &t, int64_t f, std::vector<int64_t> &idx) const {
        for (size_t d = out.index.size(); d-- > 0;) {
            const int64_t coord = f % t.shape[d];
            f /= t.shape[d];
            const Affine &a = out.index[d];
            const int64_t i = coord - a.offset;
            if (a.terms.empty()) {
                if (i != 0) return false;
                continue;
            }
            const int v = a.terms[0].var;
            if (i < 0 || i >= c_.vars[size_t(v)].extent) return false;
            idx[size_t(v)] = i;
        }
        return true;
    }

    const Computation &c_;
    const Buffers &in_;
    std::map<std::tuple<int, int64_t, size_t>, Acc> memo_;
};

Reference sampled_reference(const Computation &c, const Buffers &in, const ReferenceOptions &o,
                            int64_t count) {
    Reference r;
    r.total = total_outputs(c);
    std::mt19937_64 rng(o.sample_seed);
    Sampler sampler(c, in);
    Progress progress(o.progress);
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (c.tensors[t].kind != TensorKind::Output) continue;
        const int64_t n = c.tensors[t].num_elements();
        const int64_t want = std::min<int64_t>(n, (count * n + r.total - 1) / r.total);
        std::unordered_set<int64_t> picked;
        while (int64_t(picked.size()) < want) picked.insert(int64_t(rng() % uint64_t(n)));
        Reference::Output out;
        out.tensor = int(t);
        out.index.assign(picked.begin(), picked.end());
        std::sort(out.index.begin(), out.index.end());
        for (int64_t f : out.index) {
            const Acc a = sampler.elem(int(t), f, c.stmts.size());
            out.value.push_back(a.v);
            out.bound.push_back(a.bound());
            sampler.forget();  // each element from its own reduction; keeps memory flat
            progress.update(
                double(out.value.size()), double(want),
                fmt::format("{} sampled elements of {}", want, c.tensors[t].name).c_str());
        }
        r.checked += int64_t(out.index.size());
        r.outputs.push_back(std::move(out));
    }
    return r;
}

}  // namespace

double reference_cost(const Computation &c) {
    double n = 0;
    for (const auto &s : c.stmts) n += domain_size(c, s);
    return n;
}

int64_t reference_bytes(const Computation &c, const ReferenceOptions &options) {
    const int64_t total = total_outputs(c), n = sample_size(c, options);
    if (n < total) return n * int64_t(3 * sizeof(double) + 64 * c.stmts.size());
    int64_t written = 0;
    for (const auto &t : c.tensors)
        if (t.kind != TensorKind::Input) written += t.num_elements();
    return written * int64_t(sizeof(Acc)) + total * int64_t(2 * sizeof(double));
}

Reference compute_reference(const Computation &c, const Buffers &inputs,
                            const ReferenceOptions &options) {
    LT_CHECK(inputs.data.size() == c.num_buffers(), "buffers do not match the computation");
    const int64_t n = sample_size(c, options);
    return n < total_outputs(c) ? sampled_reference(c, inputs, options, n)
                                : full_reference(c, inputs, options);
}

void run_reference(const Computation &c, Buffers &b) {
    const std::vector<std::vector<Acc>> state = full_state(c, b, ReferenceOptions{});
    for (size_t t = 0; t < c.num_buffers(); ++t)
        for (size_t i = 0; i < state[t].size(); ++i) b.data[t][i] = float(state[t][i].v);
}

Comparison verify_schedule(const Program &p, uint64_t seed, double tolerance,
                           const ReferenceOptions &options) {
    check_tolerance(tolerance);
    Buffers got = make_buffers(*p.comp, seed);
    const Reference want = compute_reference(*p.comp, got, options);
    run_schedule(p, got);
    return compare_outputs(*p.comp, want, got, tolerance);
}

}  // namespace looptool
