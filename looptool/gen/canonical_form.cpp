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

/// A padding statement: P[a, b, h + ph, w + pw] += In[a, b, h, w], In an input covered by plain
/// variables, P a temporary of In's shape plus 2 ph rows and 2 pw columns (ph, pw >= 0). P
/// starts at 0 (a sum reduction's identity), so it holds In with zeros around it.
struct PadCopy {
    int input = 0, temp = 0;
    std::vector<int> vars;  // a, b, h, w
    int64_t ph = 0, pw = 0;
};
std::optional<PadCopy> pad_copy(const Computation &c, const Statement &s) {
    if (s.reduce != ReduceKind::Sum || !is_read(s.value)) return std::nullopt;
    const Access &in = s.value.access;
    if (!kind_is(c, in.tensor, TensorKind::Input) || !kind_is(c, s.out.tensor, TensorKind::Temp))
        return std::nullopt;
    PadCopy p{in.tensor, s.out.tensor, plain_vars(c, in)};
    if (p.vars.size() != 4 || s.out.index.size() != 4) return std::nullopt;
    const auto &shape = c.tensors[size_t(in.tensor)].shape;
    const auto &padded = c.tensors[size_t(s.out.tensor)].shape;
    for (size_t d = 0; d < 4; ++d) {
        const Affine &f = s.out.index[d];
        if (f.terms.size() != 1 || f.terms[0].var != p.vars[d] || f.terms[0].coef != 1 ||
            f.offset < 0 || (d < 2 && f.offset != 0) || padded[d] != shape[d] + 2 * f.offset)
            return std::nullopt;
    }
    p.ph = s.out.index[2].offset;
    p.pw = s.out.index[3].offset;
    return p;
}

/// The statement that computes a contraction, and where it ends up: the product statement
/// (a sum of a product of two reads) into `out`, directly or through a temporary copied by
/// a second statement; with `pad`, after a padding statement (stmts[0]) whose temporary is one
/// of the product's operands. nullopt for any other shape of program.
struct Contraction {
    const Statement *product = nullptr;
    int out = 0, temp = -1;
    std::optional<PadCopy> pad;
};
std::optional<Contraction> contraction(const Computation &c, size_t tensors) {
    std::optional<PadCopy> pad;
    if (c.stmts.size() >= 2) pad = pad_copy(c, c.stmts[0]);
    const size_t first = pad ? 1 : 0;
    if (c.stmts.size() <= first || c.stmts.size() > first + 2) return std::nullopt;
    const Statement &s0 = c.stmts[first];
    if (s0.reduce != ReduceKind::Sum || s0.value.op != OpKind::Mul || s0.value.args.size() != 2 ||
        !is_read(s0.value.args[0]) || !is_read(s0.value.args[1]) ||
        s0.value.args[0].access.tensor == s0.value.args[1].access.tensor)
        return std::nullopt;
    int padded_reads = 0;
    for (const Expr &e : s0.value.args) {
        const bool from_pad = pad && e.access.tensor == pad->temp;
        padded_reads += from_pad;
        if (!from_pad && !kind_is(c, e.access.tensor, TensorKind::Input)) return std::nullopt;
    }
    if (pad && (padded_reads != 1 || s0.out.tensor == pad->temp)) return std::nullopt;
    Contraction r{&s0, s0.out.tensor, -1, pad};
    if (c.stmts.size() == first + 2) {
        const Statement &s1 = c.stmts[first + 1];
        if (s1.reduce != ReduceKind::None || !is_read(s1.value) ||
            s1.value.access.tensor != s0.out.tensor || s1.value.access.index != s0.out.index ||
            s1.out.index != s0.out.index || !kind_is(c, s0.out.tensor, TensorKind::Temp))
            return std::nullopt;
        r.out = s1.out.tensor;
        r.temp = s0.out.tensor;
    }
    if (!kind_is(c, r.out, TensorKind::Output) ||
        c.tensors.size() != tensors + (r.temp >= 0) + (pad ? 1 : 0))
        return std::nullopt;
    return r;
}

/// s p + q (a strided output position plus a kernel offset: s >= 1), either term first.
bool is_sum_of(const Affine &f, int p, int q) {
    if (f.terms.size() != 2 || f.offset != 0) return false;
    for (int i = 0; i < 2; ++i) {
        const Affine::Term &out = f.terms[size_t(i)], &kernel = f.terms[size_t(1 - i)];
        if (out.var == p && kernel.var == q && out.coef >= 1 && kernel.coef == 1) return true;
    }
    return false;
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

/// c in generate's form: variables in `order` (old indices, names kept; each alias (v, to) a
/// variable of to's extent that becomes `to`), the padding statement if any, the product as
/// a * b into a temporary before the output, then the copy into the output.
Computation rebuilt(const Computation &c, const Contraction &k, const std::vector<int> &order,
                    int a, int b, const std::vector<std::pair<int, int>> &aliases = {}) {
    Computation g;
    g.name = c.name;
    std::vector<int> var_at(c.vars.size());
    for (size_t i = 0; i < order.size(); ++i) {
        g.vars.push_back(c.vars[size_t(order[i])]);
        var_at[size_t(order[i])] = int(i);
    }
    for (auto [v, to] : aliases) var_at[size_t(v)] = var_at[size_t(to)];
    std::vector<int> at;
    int temp = -1;
    g.tensors = with_temporary(c, k.out, k.temp, at, temp);
    auto moved = [&](Access x, int tensor) {
        x.tensor = tensor;
        for (Affine &f : x.index)
            for (Affine::Term &t : f.terms) t.var = var_at[size_t(t.var)];
        return x;
    };
    if (k.pad) {
        const Statement &pad = c.stmts[0];
        g.stmts.push_back({moved(pad.out, at[size_t(pad.out.tensor)]), ReduceKind::Sum,
                           Expr::read(moved(pad.value.access, at[size_t(k.pad->input)]))});
    }
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

/// Already generate's form: two statements (three with a padding statement first), variables
/// declared in `order`, a then b.
bool in_generated_form(const Computation &c, const std::vector<int> &order, int a,
                       bool padded = false) {
    std::vector<int> identity(order.size());
    for (size_t i = 0; i < identity.size(); ++i) identity[i] = int(i);
    const size_t first = padded ? 1 : 0;
    return c.stmts.size() == 2 + first && order == identity &&
           c.stmts[first].value.args[0].access.tensor == a;
}

}  // namespace

std::optional<MatmulRoles> matmul_roles(const Computation &c) {
    const auto k = contraction(c, 3);
    if (!k || k->pad || c.vars.size() < 3 || c.vars.size() > 5) return std::nullopt;
    const Statement &s = *k->product;
    const std::vector<int> o = plain_vars(c, s.out), x = plain_vars(c, s.value.args[0].access),
                           y = plain_vars(c, s.value.args[1].access);
    const size_t dims = c.vars.size() - 1;  // the output's: the batches, m and n
    if (o.size() != dims || x.size() != dims || y.size() != dims) return std::nullopt;
    auto has = [](const std::vector<int> &v, int var) {
        return std::find(v.begin(), v.end(), var) != v.end();
    };
    // A batch variable indexes all three tensors; m and n are the output's others, in its order.
    std::vector<int> batches, mn;
    for (int v : o) (has(x, v) && has(y, v) ? batches : mn).push_back(v);
    if (mn.size() != 2) return std::nullopt;
    const int m = mn[0], n = mn[1];
    for (int swap = 0; swap < 2; ++swap) {
        const std::vector<int> &av = swap ? y : x, &bv = swap ? x : y;
        if (!has(av, m) || has(av, n) || !has(bv, n) || has(bv, m)) continue;
        int k_var = -1;  // A's variable that is neither a batch nor m
        for (int v : av)
            if (v != m && !has(batches, v)) k_var = v;
        if (k_var < 0 || !has(bv, k_var) || has(o, k_var)) continue;
        MatmulRoles r{m,
                      n,
                      k_var,
                      s.value.args[swap].access.tensor,
                      s.value.args[1 - swap].access.tensor,
                      k->out,
                      k->temp};
        if (!batches.empty()) r.batch = batches[0];
        if (batches.size() > 1) r.batch2 = batches[1];
        return r;
    }
    return std::nullopt;
}

namespace {

/// generate's declaration order of a matmul's variables: (batch, (batch2,)) m, k, n.
std::vector<int> matmul_order(const MatmulRoles &r) {
    std::vector<int> order{r.m, r.k, r.n};
    if (r.batch2 >= 0) order.insert(order.begin(), r.batch2);
    if (r.batch >= 0) order.insert(order.begin(), r.batch);
    return order;
}

}  // namespace

std::optional<MatmulRoles> generated_matmul(const Computation &c) {
    const auto r = matmul_roles(c);
    if (!r || !in_generated_form(c, matmul_order(*r), r->a)) return std::nullopt;
    return r;
}

namespace {

/// r with the padding statement's roles: its temporary is the product's X, its first two
/// variables n and c or others of their extents, its last two its own. False when they are not.
bool with_padding(const Computation &c, const PadCopy &pad, ConvRoles &r) {
    if (r.x != pad.temp) return false;
    const std::vector<int> &v = pad.vars;
    const std::vector<int> conv{r.n, r.c, r.ho, r.wo, r.kh, r.kw, r.m};
    auto in_conv = [&](int x) { return std::find(conv.begin(), conv.end(), x) != conv.end(); };
    size_t vars = 9;
    for (int d : {0, 1}) {
        const int to = d ? r.c : r.n;
        if (c.vars[size_t(v[size_t(d)])].extent != c.vars[size_t(to)].extent) return false;
        if (v[size_t(d)] != to && in_conv(v[size_t(d)])) return false;
        vars += v[size_t(d)] != to;
    }
    if (in_conv(v[2]) || in_conv(v[3]) || c.vars.size() != vars) return false;
    r.pad_stmt = 0;
    r.input = pad.input;
    r.h = v[2];
    r.wv = v[3];
    r.pad_h = pad.ph;
    r.pad_w = pad.pw;
    return true;
}

/// generate's declaration order of a conv's variables (n, c, ho, wo, kh, kw, m, then a padded
/// one's h, w), and the padding statement's other variables that become n and c.
std::vector<int> conv_order(const Computation &c, const ConvRoles &r,
                            std::vector<std::pair<int, int>> &aliases) {
    std::vector<int> order{r.n, r.c, r.ho, r.wo, r.kh, r.kw, r.m};
    if (r.pad_stmt < 0) return order;
    order.push_back(r.h);
    order.push_back(r.wv);
    const Access &in = c.stmts[size_t(r.pad_stmt)].value.access;
    for (int d : {0, 1})
        if (const int v = in.index[size_t(d)].terms[0].var; v != (d ? r.c : r.n))
            aliases.push_back({v, d ? r.c : r.n});
    return order;
}

}  // namespace

std::optional<ConvRoles> conv_roles(const Computation &c) {
    const auto k = contraction(c, 3);
    if (!k || c.vars.size() < 7) return std::nullopt;
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
        r.stride_h = x.index[2].coef_of(r.ho);
        r.stride_w = x.index[3].coef_of(r.wo);
        if (k->pad ? !with_padding(c, *k->pad, r) : c.vars.size() != 7) continue;
        return r;
    }
    return std::nullopt;
}

std::optional<ConvParams> conv_params(const Computation &c) {
    const auto r = conv_roles(c);
    if (!r || r->stride_h != r->stride_w || r->pad_h != r->pad_w) return std::nullopt;
    const auto &x = c.tensors[size_t(r->pad_stmt >= 0 ? r->input : r->x)].shape;
    auto e = [&](int v) { return c.vars[size_t(v)].extent; };
    return ConvParams{x[0],     x[1],     x[2],        x[3],     e(r->m),
                      e(r->kh), e(r->kw), r->stride_h, r->pad_h, *r};
}

std::optional<Computation> generated_form(const Computation &c) {
    if (const auto r = matmul_roles(c)) {
        const std::vector<int> order = matmul_order(*r);
        if (in_generated_form(c, order, r->a)) return std::nullopt;
        return rebuilt(c, *contraction(c, 3), order, r->a, r->b);
    }
    if (const auto r = conv_roles(c)) {
        std::vector<std::pair<int, int>> aliases;
        const std::vector<int> order = conv_order(c, *r, aliases);
        if (aliases.empty() && in_generated_form(c, order, r->x, r->pad_stmt >= 0))
            return std::nullopt;
        return rebuilt(c, *contraction(c, 3), order, r->x, r->w, aliases);
    }
    return std::nullopt;
}

Program tuning_start(const Program &file) {
    if (auto g = generated_form(file.computation()))
        return Program::naive(std::make_shared<const Computation>(std::move(*g)));
    return Program::naive(file.comp);
}

}  // namespace looptool
