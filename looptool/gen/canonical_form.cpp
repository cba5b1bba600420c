#include "looptool/gen/canonical_form.h"

#include <fmt/format.h>

#include <memory>

namespace looptool {

namespace {

/// The variables of a two-dimensional access indexed by one variable per dimension over the
/// whole tensor, or nullopt.
std::optional<std::pair<int, int>> two_vars(const Computation &c, const Access &a) {
    if (a.index.size() != 2 || !is_identity_cover(c, a)) return std::nullopt;
    return std::pair{a.index[0].terms[0].var, a.index[1].terms[0].var};
}

bool is_read(const Expr &e) { return e.op == OpKind::Read; }

/// The product's operands as (A, B) with A[m, k], B[k, n] against out[m, n], or nullopt.
std::optional<MatmulRoles> product_roles(const Computation &c, const Statement &s, int out) {
    if (s.reduce != ReduceKind::Sum || s.value.op != OpKind::Mul || s.value.args.size() != 2 ||
        !is_read(s.value.args[0]) || !is_read(s.value.args[1]))
        return std::nullopt;
    const auto o = two_vars(c, s.out);
    const Access &x = s.value.args[0].access, &y = s.value.args[1].access;
    const auto xv = two_vars(c, x), yv = two_vars(c, y);
    if (!o || !xv || !yv || x.tensor == y.tensor) return std::nullopt;
    const auto [m, n] = *o;
    for (int swap = 0; swap < 2; ++swap) {
        const Access &a = swap ? y : x, &b = swap ? x : y;
        const auto av = swap ? *yv : *xv, bv = swap ? *xv : *yv;
        const int k = av.second;
        if (av.first == m && bv.second == n && bv.first == k && k != m && k != n && m != n)
            return MatmulRoles{m, n, k, a.tensor, b.tensor, out, -1};
    }
    return std::nullopt;
}

bool kind_is(const Computation &c, int t, TensorKind k) { return c.tensors[size_t(t)].kind == k; }

}  // namespace

std::optional<MatmulRoles> matmul_roles(const Computation &c) {
    if (c.vars.size() != 3 || c.stmts.empty() || c.stmts.size() > 2) return std::nullopt;
    const Statement &s0 = c.stmts[0];
    std::optional<MatmulRoles> r;
    if (c.stmts.size() == 1) {
        r = product_roles(c, s0, s0.out.tensor);
        if (!r || !kind_is(c, r->out, TensorKind::Output) || c.tensors.size() != 3)
            return std::nullopt;
    } else {
        const Statement &s1 = c.stmts[1];
        if (s1.reduce != ReduceKind::None || !is_read(s1.value) ||
            s1.value.access.tensor != s0.out.tensor || s1.value.access.index != s0.out.index ||
            s1.out.index != s0.out.index)
            return std::nullopt;
        r = product_roles(c, s0, s1.out.tensor);
        if (!r || !kind_is(c, s0.out.tensor, TensorKind::Temp) ||
            !kind_is(c, r->out, TensorKind::Output) || c.tensors.size() != 4)
            return std::nullopt;
        r->temp = s0.out.tensor;
    }
    if (!kind_is(c, r->a, TensorKind::Input) || !kind_is(c, r->b, TensorKind::Input))
        return std::nullopt;
    return r;
}

std::optional<MatmulRoles> generated_matmul(const Computation &c) {
    const auto r = matmul_roles(c);
    if (!r || r->temp < 0 || r->m != 0 || r->k != 1 || r->n != 2) return std::nullopt;
    if (c.stmts[0].value.args[0].access.tensor != r->a) return std::nullopt;
    return r;
}

std::optional<Computation> generated_form(const Computation &c) {
    const auto r = matmul_roles(c);
    if (!r || generated_matmul(c)) return std::nullopt;
    Computation g;
    g.name = c.name;
    g.vars = {c.vars[size_t(r->m)], c.vars[size_t(r->k)], c.vars[size_t(r->n)]};
    // Tensor indices of c in g: the temporary (new or kept) goes before the output.
    std::vector<int> at(c.tensors.size());
    int temp = -1;
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (int(t) == r->temp) continue;
        if (int(t) == r->out && r->temp < 0) {
            std::string name = "T";
            for (int i = 1; c.tensor_index(name) >= 0; ++i) name = fmt::format("T{}", i);
            temp = int(g.tensors.size());
            g.tensors.push_back({name, c.tensors[t].shape, TensorKind::Temp});
        } else if (int(t) == r->out) {
            temp = int(g.tensors.size());
            g.tensors.push_back(c.tensors[size_t(r->temp)]);
        }
        at[t] = int(g.tensors.size());
        g.tensors.push_back(c.tensors[t]);
    }
    auto access = [](int t, int v0, int v1) {
        return Access{t, {Affine::of_var(v0), Affine::of_var(v1)}};
    };
    const int M = 0, K = 1, N = 2;
    g.stmts.push_back({access(temp, M, N), ReduceKind::Sum,
                       Expr::binary(OpKind::Mul, Expr::read(access(at[size_t(r->a)], M, K)),
                                    Expr::read(access(at[size_t(r->b)], K, N)))});
    g.stmts.push_back(
        {access(at[size_t(r->out)], M, N), ReduceKind::None, Expr::read(access(temp, M, N))});
    g.validate();
    return g;
}

Program tuning_start(const Program &file) {
    if (auto g = generated_form(file.computation()))
        return Program::naive(std::make_shared<const Computation>(std::move(*g)));
    return Program::naive(file.comp);
}

}  // namespace looptool
