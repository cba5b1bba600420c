#include "looptool/gen/epilogue.h"

#include <fmt/format.h>

#include "looptool/ir/error.h"

namespace looptool {

namespace {
constexpr const char *kActNames[] = {"", "relu", "gelu", "gelu-tanh"};

Expr bin(OpKind op, Expr a, Expr b) { return Expr::binary(op, std::move(a), std::move(b)); }

Expr activation(Activation act, const Expr &x) {
    auto k = [](float v) { return Expr::constant(v); };
    switch (act) {
        case Activation::None: return x;
        case Activation::Relu: return bin(OpKind::Max, x, k(0));
        case Activation::Gelu:
            return bin(OpKind::Mul, bin(OpKind::Mul, x, k(0.5f)),
                       bin(OpKind::Add, k(1),
                           Expr::unary(OpKind::Erf, bin(OpKind::Mul, x, k(0.7071067812f)))));
        case Activation::GeluTanh: {
            const Expr cube = bin(OpKind::Mul, bin(OpKind::Mul, x, x), x);
            const Expr inner = Expr::unary(
                OpKind::Tanh, bin(OpKind::Mul, k(0.7978845608f),
                                  bin(OpKind::Add, x, bin(OpKind::Mul, k(0.044715f), cube))));
            return bin(OpKind::Mul, bin(OpKind::Mul, x, k(0.5f)), bin(OpKind::Add, k(1), inner));
        }
    }
    LT_CHECK(false, "activation: unknown kind");
}
}  // namespace

Epilogue parse_epilogue(std::string_view text) {
    Epilogue e;
    if (text.empty()) return e;
    bool act = false;
    size_t i = 0;
    while (i <= text.size()) {
        size_t j = text.find(',', i);
        if (j == std::string_view::npos) j = text.size();
        const std::string w(text.substr(i, j - i));
        i = j + 1;
        auto once = [&](bool &seen) {
            if (seen) throw Error(fmt::format("epilogue '{}': '{}' given twice", text, w));
            seen = true;
        };
        if (w == "bias") {
            once(e.bias);
        } else if (w == "residual") {
            once(e.residual);
        } else if (w == "relu" || w == "gelu" || w == "gelu-tanh") {
            if (act) throw Error(fmt::format("epilogue '{}': two activations", text));
            act = true;
            e.act = w == "relu"   ? Activation::Relu
                    : w == "gelu" ? Activation::Gelu
                                  : Activation::GeluTanh;
        } else {
            throw Error(fmt::format(
                "epilogue '{}': unknown word '{}' (known: bias, relu, gelu, gelu-tanh, residual)",
                text, w));
        }
    }
    return e;
}

std::string epilogue_text(const Epilogue &e) {
    std::string s;
    auto add = [&](const char *w) {
        if (!s.empty()) s += ',';
        s += w;
    };
    if (e.bias) add("bias");
    if (e.act != Activation::None) add(kActNames[int(e.act)]);
    if (e.residual) add("residual");
    return s;
}

Computation make_matmul_epilogue(int64_t m, int64_t n, int64_t k, const Epilogue &e,
                                 std::string name) {
    Computation c = make_matmul(m, n, k);
    if (!e.any()) return name.empty() ? c : (c.name = name, c);
    std::string words = epilogue_text(e);
    for (char &ch : words)
        if (ch == ',' || ch == '-') ch = '_';
    c.name = name.empty() ? fmt::format("mm{}_{}_{}_{}", m, n, k, words) : std::move(name);
    const int M = 0, N = 2;
    // A, B, [Bias], [R], T, C: T and C move behind the epilogue's inputs.
    const Tensor t = c.tensors[2], out = c.tensors[3];
    c.tensors.resize(2);
    if (e.bias) c.tensors.push_back({"Bias", {n}, TensorKind::Input});
    if (e.residual) c.tensors.push_back({"R", {m, n}, TensorKind::Input});
    const int ti = int(c.tensors.size());
    c.tensors.push_back(t);
    c.tensors.push_back(out);
    const Access mn{0, {Affine::of_var(M), Affine::of_var(N)}};
    auto at = [&](int tensor) {
        Access a = mn;
        a.tensor = tensor;
        return a;
    };
    c.stmts[0].out = at(ti);
    Expr x = Expr::read(at(ti));
    if (e.bias) x = bin(OpKind::Add, x, Expr::read(Access{2, {Affine::of_var(N)}}));
    x = activation(e.act, x);
    if (e.residual) x = bin(OpKind::Add, x, Expr::read(at(e.bias ? 3 : 2)));
    c.stmts[1] = {at(ti + 1), ReduceKind::None, x};
    c.validate();
    return c;
}

std::optional<MatmulEpilogue> matmul_epilogue(const Computation &c) {
    if (c.vars.size() != 3 || c.stmts.size() != 2) return std::nullopt;
    const int64_t m = c.vars[0].extent, k = c.vars[1].extent, n = c.vars[2].extent;
    for (bool bias : {false, true})
        for (Activation act :
             {Activation::None, Activation::Relu, Activation::Gelu, Activation::GeluTanh})
            for (bool residual : {false, true}) {
                const Epilogue e{bias, act, residual};
                if (!e.any()) continue;
                const Computation g = make_matmul_epilogue(m, n, k, e, c.name);
                if (g.stmts != c.stmts || g.tensors.size() != c.tensors.size()) continue;
                bool same = true;
                for (size_t i = 0; i < g.tensors.size(); ++i)
                    same = same && g.tensors[i].shape == c.tensors[i].shape &&
                           g.tensors[i].kind == c.tensors[i].kind;
                for (size_t v = 0; v < 3; ++v) same = same && g.vars[v].name == c.vars[v].name;
                if (same)
                    return MatmulEpilogue{m, n, k, e, bias ? 2 : -1, residual ? 2 + bias : -1};
            }
    return std::nullopt;
}

}  // namespace looptool
