#include "looptool/ir/row_ops.h"

#include <fmt/format.h>

#include <initializer_list>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

Access at(int t, std::initializer_list<int> vars) {
    Access a{t, {}};
    for (int v : vars) a.index.push_back(Affine::of_var(v));
    return a;
}

Expr rd(int t, std::initializer_list<int> vars) { return Expr::read(at(t, vars)); }

Expr bin(OpKind op, Expr a, Expr b) { return Expr::binary(op, std::move(a), std::move(b)); }

}  // namespace

Computation make_reduce(ReduceKind kind, int64_t m, int64_t r, int64_t n, bool product,
                        bool through_temp, std::string name) {
    LT_CHECK(kind != ReduceKind::None, "make_reduce needs a reduction kind");
    Computation c;
    c.name = name.empty() ? fmt::format("{}{}_{}_{}", reduce_name(kind), m, r, n) : std::move(name);
    c.vars = {{"m", m}, {"r", r}, {"n", n}};
    const int M = 0, R = 1, N = 2;
    c.tensors = {{"X", {m, r, n}, TensorKind::Input}, {"W", {r, n}, TensorKind::Input}};
    if (through_temp) c.tensors.push_back({"T", {m, n}, TensorKind::Temp});
    c.tensors.push_back({"Y", {m, n}, TensorKind::Output});
    const int out = 2;  // T, or Y without the temporary
    Expr value = product ? bin(OpKind::Mul, rd(0, {M, R, N}), rd(1, {R, N})) : rd(0, {M, R, N});
    c.stmts.push_back({at(out, {M, N}), kind, std::move(value)});
    if (through_temp) c.stmts.push_back({at(3, {M, N}), ReduceKind::None, rd(2, {M, N})});
    c.validate();
    return c;
}

Computation make_softmax(int64_t rows, int64_t cols, std::string name) {
    Computation c;
    c.name = name.empty() ? fmt::format("softmax{}_{}", rows, cols) : std::move(name);
    c.vars = {{"i", rows}, {"j", cols}};
    const int I = 0, J = 1;
    enum { X, Mx, E, S, Y };
    c.tensors = {{"X", {rows, cols}, TensorKind::Input},
                 {"Mx", {rows}, TensorKind::Temp},
                 {"E", {rows, cols}, TensorKind::Temp},
                 {"S", {rows}, TensorKind::Temp},
                 {"Y", {rows, cols}, TensorKind::Output}};
    c.stmts.push_back({at(Mx, {I}), ReduceKind::Max, rd(X, {I, J})});
    c.stmts.push_back({at(E, {I, J}), ReduceKind::None,
                       Expr::unary(OpKind::Exp, bin(OpKind::Sub, rd(X, {I, J}), rd(Mx, {I})))});
    c.stmts.push_back({at(S, {I}), ReduceKind::Sum, rd(E, {I, J})});
    c.stmts.push_back(
        {at(Y, {I, J}), ReduceKind::None, bin(OpKind::Div, rd(E, {I, J}), rd(S, {I}))});
    c.validate();
    return c;
}

Computation make_layernorm(int64_t rows, int64_t cols, std::string name) {
    Computation c;
    c.name = name.empty() ? fmt::format("layernorm{}_{}", rows, cols) : std::move(name);
    c.vars = {{"i", rows}, {"j", cols}};
    const int I = 0, J = 1;
    enum { X, G, B, S1, Mu, D, S2, R, Y };
    c.tensors = {{"X", {rows, cols}, TensorKind::Input}, {"G", {cols}, TensorKind::Input},
                 {"B", {cols}, TensorKind::Input},       {"S1", {rows}, TensorKind::Temp},
                 {"Mu", {rows}, TensorKind::Temp},       {"D", {rows, cols}, TensorKind::Temp},
                 {"S2", {rows}, TensorKind::Temp},       {"R", {rows}, TensorKind::Temp},
                 {"Y", {rows, cols}, TensorKind::Output}};
    const Expr inv_n = Expr::constant(1.0f / float(cols));
    c.stmts.push_back({at(S1, {I}), ReduceKind::Sum, rd(X, {I, J})});
    c.stmts.push_back({at(Mu, {I}), ReduceKind::None, bin(OpKind::Mul, rd(S1, {I}), inv_n)});
    c.stmts.push_back(
        {at(D, {I, J}), ReduceKind::None, bin(OpKind::Sub, rd(X, {I, J}), rd(Mu, {I}))});
    c.stmts.push_back(
        {at(S2, {I}), ReduceKind::Sum, bin(OpKind::Mul, rd(D, {I, J}), rd(D, {I, J}))});
    const Expr var = bin(OpKind::Add, bin(OpKind::Mul, rd(S2, {I}), inv_n), Expr::constant(1e-5f));
    c.stmts.push_back(
        {at(R, {I}), ReduceKind::None, Expr::unary(OpKind::Recip, Expr::unary(OpKind::Sqrt, var))});
    const Expr scaled = bin(OpKind::Mul, bin(OpKind::Mul, rd(D, {I, J}), rd(R, {I})), rd(G, {J}));
    c.stmts.push_back({at(Y, {I, J}), ReduceKind::None, bin(OpKind::Add, scaled, rd(B, {J}))});
    c.validate();
    return c;
}

Computation make_gelu(int64_t rows, int64_t cols, bool tanh_form, std::string name) {
    Computation c;
    c.name = name.empty() ? fmt::format("gelu{}{}_{}", tanh_form ? "_tanh" : "", rows, cols)
                          : std::move(name);
    c.vars = {{"i", rows}, {"j", cols}};
    c.tensors = {{"X", {rows, cols}, TensorKind::Input}, {"Y", {rows, cols}, TensorKind::Output}};
    const Expr x = rd(0, {0, 1});
    auto k = [](float v) { return Expr::constant(v); };
    Expr inner;
    if (tanh_form) {
        const Expr cube = bin(OpKind::Mul, bin(OpKind::Mul, x, x), x);
        inner = Expr::unary(OpKind::Tanh,
                            bin(OpKind::Mul, k(0.7978845608f),
                                bin(OpKind::Add, x, bin(OpKind::Mul, k(0.044715f), cube))));
    } else {
        inner = Expr::unary(OpKind::Erf, bin(OpKind::Mul, x, k(0.7071067812f)));
    }
    const Expr half_x = bin(OpKind::Mul, x, k(0.5f));
    c.stmts.push_back(
        {at(1, {0, 1}), ReduceKind::None, bin(OpKind::Mul, half_x, bin(OpKind::Add, k(1), inner))});
    c.validate();
    return c;
}

}  // namespace looptool
