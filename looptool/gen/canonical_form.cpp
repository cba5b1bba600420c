#include "looptool/gen/canonical_form.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

namespace looptool {

namespace {

bool is_read(const Expr &e) { return e.op == OpKind::Read; }
bool kind_is(const Computation &c, int t, TensorKind k) { return c.tensors[size_t(t)].kind == k; }

/// One variable per dimension, covering the tensor: the variables, else empty.
std::vector<int> plain_vars(const Computation &c, const Access &a) {
    if (!is_identity_cover(c, a)) return {};
    std::vector<int> v;
    for (const Affine &f : a.index) v.push_back(f.terms[0].var);
    return v;
}

/// The statement that computes a contraction, and where it ends up: the product statement
/// s0 (a sum of a product of two reads) into `out`, directly or through a temporary copied by
/// a second statement. nullopt for any other shape of program.
struct Contraction {
    const Statement *product = nullptr;
    int out = 0, temp = -1;
};
std::optional<Contraction> contraction(const Computation &c, size_t tensors) {
    if (c.stmts.empty() || c.stmts.size() > 2) return std::nullopt;
    const Statement &s0 = c.stmts[0];
    if (s0.reduce != ReduceKind::Sum || s0.value.op != OpKind::Mul || s0.value.args.size() != 2 ||
        !is_read(s0.value.args[0]) || !is_read(s0.value.args[1]) ||
        s0.value.args[0].access.tensor == s0.value.args[1].access.tensor)
        return std::nullopt;
    for (const Expr &e : s0.value.args)
        if (!kind_is(c, e.access.tensor, TensorKind::Input)) return std::nullopt;
    Contraction r{&s0, s0.out.tensor, -1};
    if (c.stmts.size() == 2) {
        const Statement &s1 = c.stmts[1];
        if (s1.reduce != ReduceKind::None || !is_read(s1.value) ||
            s1.value.access.tensor != s0.out.tensor || s1.value.access.index != s0.out.index ||
            s1.out.index != s0.out.index || !kind_is(c, s0.out.tensor, TensorKind::Temp))
            return std::nullopt;
        r = {&s0, s1.out.tensor, s0.out.tensor};
    }
    if (!kind_is(c, r.out, TensorKind::Output) || c.tensors.size() != tensors + (r.temp >= 0))
        return std::nullopt;
    return r;
}

/// a + b over two distinct variables, coefficients 1, no offset: the variables, else nullopt.
std::optional<std::pair<int, int>> sum_of_two(const Affine &f) {
    if (f.terms.size() != 2 || f.offset != 0 || f.terms[0].coef != 1 || f.terms[1].coef != 1)
        return std::nullopt;
    return std::pair{f.terms[0].var, f.terms[1].var};
}

bool is_sum_of(const Affine &f, int p, int q) {
    const auto s = sum_of_two(f);
    return s && ((s->first == p && s->second == q) || (s->first == q && s->second == p));
}

/// c's tensors with the temporary (kept, or a new one) right before the output, and where each
/// of c's tensors went.
std::vector<Tensor> with_temporary(const Computation &c, int out, int temp, std::vector<int> &at,
                                   int &new_temp) {
    std::vector<Tensor> ts;
    at.assign(c.tensors.size(), -1);
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (int(t) == temp) continue;
        if (int(t) == out) {
            new_temp = int(ts.size());
            if (temp >= 0) {
                ts.push_back(c.tensors[size_t(temp)]);
            } else {
                std::string name = "T";
                for (int i = 1; c.tensor_index(name) >= 0; ++i) name = fmt::format("T{}", i);
                ts.push_back({name, c.tensors[t].shape, TensorKind::Temp});
            }
        }
        at[t] = int(ts.size());
        ts.push_back(c.tensors[t]);
    }
    return ts;
}

/// c in generate's two-statement form: variables in `order` (old indices, names kept), the
/// product as a * b into a temporary before the output, then the copy into the output.
Computation rebuilt(const Computation &c, const Contraction &k, const std::vector<int> &order,
                    int a, int b) {
    Computation g;
    g.name = c.name;
    std::vector<int> var_at(c.vars.size());
    for (size_t i = 0; i < order.size(); ++i) {
        g.vars.push_back(c.vars[size_t(order[i])]);
        var_at[size_t(order[i])] = int(i);
    }
    std::vector<int> at;
    int temp = -1;
    g.tensors = with_temporary(c, k.out, k.temp, at, temp);
    auto moved = [&](Access x, int tensor) {
        x.tensor = tensor;
        for (Affine &f : x.index)
            for (Affine::Term &t : f.terms) t.var = var_at[size_t(t.var)];
        return x;
    };
    const Statement &p = *k.product;
    const Access &ax =
        p.value.args[0].access.tensor == a ? p.value.args[0].access : p.value.args[1].access;
    const Access &bx =
        p.value.args[0].access.tensor == b ? p.value.args[0].access : p.value.args[1].access;
    const Access t = moved(p.out, temp);
    g.stmts.push_back({t, ReduceKind::Sum,
                       Expr::binary(OpKind::Mul, Expr::read(moved(ax, at[size_t(a)])),
                                    Expr::read(moved(bx, at[size_t(b)])))});
    g.stmts.push_back({moved(p.out, at[size_t(k.out)]), ReduceKind::None, Expr::read(t)});
    g.validate();
    return g;
}

/// Already generate's form: two statements, variables declared in `order`, a then b.
bool in_generated_form(const Computation &c, const std::vector<int> &order, int a) {
    std::vector<int> identity(order.size());
    for (size_t i = 0; i < identity.size(); ++i) identity[i] = int(i);
    return c.stmts.size() == 2 && order == identity && c.stmts[0].value.args[0].access.tensor == a;
}

}  // namespace

std::optional<MatmulRoles> matmul_roles(const Computation &c) {
    const auto k = contraction(c, 3);
    if (!k || c.vars.size() < 3 || c.vars.size() > 4) return std::nullopt;
    const Statement &s = *k->product;
    std::vector<int> o = plain_vars(c, s.out), x = plain_vars(c, s.value.args[0].access),
                     y = plain_vars(c, s.value.args[1].access);
    const size_t dims = c.vars.size() - 1;  // 2, or 3 with a batch variable first
    if (o.size() != dims || x.size() != dims || y.size() != dims) return std::nullopt;
    int batch = -1;
    if (dims == 3) {
        batch = o[0];
        if (x[0] != batch || y[0] != batch) return std::nullopt;
        for (auto *v : {&o, &x, &y}) v->erase(v->begin());
    }
    const int m = o[0], n = o[1];
    if (m == n || m == batch || n == batch) return std::nullopt;
    for (int swap = 0; swap < 2; ++swap) {
        const std::vector<int> &av = swap ? y : x, &bv = swap ? x : y;
        const int k_var = av[1];
        if (av[0] == m && bv[1] == n && bv[0] == k_var && k_var != m && k_var != n &&
            k_var != batch)
            return MatmulRoles{m,
                               n,
                               k_var,
                               s.value.args[swap].access.tensor,
                               s.value.args[1 - swap].access.tensor,
                               k->out,
                               k->temp,
                               batch};
    }
    return std::nullopt;
}

namespace {

/// generate's declaration order of a matmul's variables: (batch,) m, k, n.
std::vector<int> matmul_order(const MatmulRoles &r) {
    std::vector<int> order{r.m, r.k, r.n};
    if (r.batch >= 0) order.insert(order.begin(), r.batch);
    return order;
}

}  // namespace

std::optional<MatmulRoles> generated_matmul(const Computation &c) {
    const auto r = matmul_roles(c);
    if (!r || !in_generated_form(c, matmul_order(*r), r->a)) return std::nullopt;
    return r;
}

std::optional<ConvRoles> conv_roles(const Computation &c) {
    const auto k = contraction(c, 3);
    if (!k || c.vars.size() != 7) return std::nullopt;
    const Statement &s = *k->product;
    const std::vector<int> o = plain_vars(c, s.out);
    if (o.size() != 4) return std::nullopt;
    for (int swap = 0; swap < 2; ++swap) {
        const Access &x = s.value.args[swap].access, &w = s.value.args[1 - swap].access;
        const std::vector<int> wv = plain_vars(c, w);
        if (wv.size() != 4 || x.index.size() != 4 || wv[0] != o[1]) continue;
        ConvRoles r{o[0], wv[1],    o[2],     o[3],   wv[2],  wv[3],
                    o[1], x.tensor, w.tensor, k->out, k->temp};
        std::vector<int> all{r.n, r.c, r.ho, r.wo, r.kh, r.kw, r.m};
        std::sort(all.begin(), all.end());
        if (std::adjacent_find(all.begin(), all.end()) != all.end()) continue;
        const Affine &x0 = x.index[0], &x1 = x.index[1];
        if (x0.terms.size() != 1 || x0.offset || x0.terms[0].coef != 1 || x0.terms[0].var != r.n ||
            x1.terms.size() != 1 || x1.offset || x1.terms[0].coef != 1 || x1.terms[0].var != r.c ||
            !is_sum_of(x.index[2], r.ho, r.kh) || !is_sum_of(x.index[3], r.wo, r.kw))
            continue;
        return r;
    }
    return std::nullopt;
}

std::optional<Computation> generated_form(const Computation &c) {
    if (const auto r = matmul_roles(c)) {
        const std::vector<int> order = matmul_order(*r);
        if (in_generated_form(c, order, r->a)) return std::nullopt;
        return rebuilt(c, *contraction(c, 3), order, r->a, r->b);
    }
    if (const auto r = conv_roles(c)) {
        const std::vector<int> order{r->n, r->c, r->ho, r->wo, r->kh, r->kw, r->m};
        if (in_generated_form(c, order, r->x)) return std::nullopt;
        return rebuilt(c, *contraction(c, 3), order, r->x, r->w);
    }
    return std::nullopt;
}

Program tuning_start(const Program &file) {
    if (auto g = generated_form(file.computation()))
        return Program::naive(std::make_shared<const Computation>(std::move(*g)));
    return Program::naive(file.comp);
}

}  // namespace looptool
