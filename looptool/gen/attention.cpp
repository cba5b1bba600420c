#include "looptool/gen/attention.h"

#include <fmt/format.h>

#include <algorithm>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

void check_extents(const char *who, int64_t b, int64_t h, int64_t t, int64_t d) {
    for (int64_t e : {b, h, t, d})
        if (e < 1 || e > kMaxExtent)
            throw Error(fmt::format("{}: extent {} is not in [1, {}]", who, e, kMaxExtent));
    const double qkv = double(b) * double(t) * double(h) * double(d),
                 s = double(b) * double(h) * double(t) * double(t);
    if (std::max(qkv, s) > double(kMaxTensorElements))
        throw Error(fmt::format("{} {}x{}x{}x{}: a tensor above 2^31 elements", who, b, h, t, d));
}

Access at(int tensor, std::initializer_list<int> vars) {
    Access a{tensor, {}};
    for (int v : vars) a.index.push_back(Affine::of_var(v));
    return a;
}

// Tensors X, Y (inputs), T (temporary) and the output Z; Z[out] = T[out] after T[out] += X[x] *
// Y[y].
void two_statements(Computation &c, const Access &x, const Access &y, const Access &out) {
    Access t = out, z = out;
    t.tensor = 2;
    z.tensor = 3;
    c.stmts.push_back(
        {t, ReduceKind::Sum, Expr::binary(OpKind::Mul, Expr::read(x), Expr::read(y))});
    c.stmts.push_back({z, ReduceKind::None, Expr::read(t)});
    c.validate();
}

std::string default_name(const char *kind, int64_t b, int64_t h, int64_t t, int64_t d,
                         HeadLayout layout) {
    return fmt::format("{}{}_{}_{}_{}{}", kind, b, h, t, d,
                       layout == HeadLayout::HeadsMajor ? "_hm" : "");
}

}  // namespace

Computation make_scores(int64_t b, int64_t h, int64_t t, int64_t d, HeadLayout layout,
                        std::string name) {
    check_extents("scores", b, h, t, d);
    Computation c;
    c.name = name.empty() ? default_name("scores", b, h, t, d, layout) : std::move(name);
    c.vars = {{"b", b}, {"h", h}, {"i", t}, {"d", d}, {"j", t}};
    const int B = 0, H = 1, I = 2, D = 3, J = 4;
    const bool tm = layout == HeadLayout::TokenMajor;
    const std::vector<int64_t> qk = tm ? std::vector<int64_t>{b, t, h, d} : std::vector{b, h, t, d};
    c.tensors = {{"Q", qk, TensorKind::Input},
                 {"K", qk, TensorKind::Input},
                 {"T", {b, h, t, t}, TensorKind::Temp},
                 {"S", {b, h, t, t}, TensorKind::Output}};
    two_statements(c, tm ? at(0, {B, I, H, D}) : at(0, {B, H, I, D}),
                   tm ? at(1, {B, J, H, D}) : at(1, {B, H, J, D}), at(3, {B, H, I, J}));
    return c;
}

Computation make_context(int64_t b, int64_t h, int64_t t, int64_t d, HeadLayout layout,
                         std::string name) {
    check_extents("context", b, h, t, d);
    Computation c;
    c.name = name.empty() ? default_name("context", b, h, t, d, layout) : std::move(name);
    c.vars = {{"b", b}, {"h", h}, {"i", t}, {"j", t}, {"d", d}};
    const int B = 0, H = 1, I = 2, J = 3, D = 4;
    const bool tm = layout == HeadLayout::TokenMajor;
    const std::vector<int64_t> vc = tm ? std::vector<int64_t>{b, t, h, d} : std::vector{b, h, t, d};
    c.tensors = {{"P", {b, h, t, t}, TensorKind::Input},
                 {"V", vc, TensorKind::Input},
                 {"T", vc, TensorKind::Temp},
                 {"C", vc, TensorKind::Output}};
    two_statements(c, at(0, {B, H, I, J}), tm ? at(1, {B, J, H, D}) : at(1, {B, H, J, D}),
                   tm ? at(3, {B, I, H, D}) : at(3, {B, H, I, D}));
    return c;
}

}  // namespace looptool
