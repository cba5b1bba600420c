#include "looptool/gen/transformer.h"

#include <fmt/format.h>

#include <filesystem>

#include "looptool/formats/text_format.h"
#include "looptool/gen/attention.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "looptool/ir/loop_tree.h"
#include "looptool/ir/row_ops.h"

namespace looptool {

namespace {

Expr rd(int t, std::initializer_list<int> vars) {
    Access a{t, {}};
    for (int v : vars) a.index.push_back(Affine::of_var(v));
    return Expr::read(a);
}

Expr bin(OpKind op, Expr a, Expr b) { return Expr::binary(op, std::move(a), std::move(b)); }

// rows x cols X, the bias Bv, the output last.
Computation epilogue_base(int64_t rows, int64_t cols, std::string name) {
    Computation c;
    c.name = std::move(name);
    c.vars = {{"i", rows}, {"j", cols}};
    c.tensors = {{"X", {rows, cols}, TensorKind::Input}, {"Bv", {cols}, TensorKind::Input}};
    return c;
}

}  // namespace

Computation make_bias_add(int64_t rows, int64_t cols, bool residual, std::string name) {
    Computation c = epilogue_base(
        rows, cols,
        name.empty() ? fmt::format("bias{}{}_{}", residual ? "_residual" : "", rows, cols) : name);
    Expr e = bin(OpKind::Add, rd(0, {0, 1}), rd(1, {1}));
    if (residual) {
        c.tensors.push_back({"R", {rows, cols}, TensorKind::Input});
        e = bin(OpKind::Add, e, rd(2, {0, 1}));
    }
    c.tensors.push_back({"Y", {rows, cols}, TensorKind::Output});
    Access y{int(c.tensors.size()) - 1, {Affine::of_var(0), Affine::of_var(1)}};
    c.stmts.push_back({y, ReduceKind::None, e});
    c.validate();
    return c;
}

std::vector<TransformerShape> transformer_shapes() {
    return {{"bert-base-128", 128, 768, 12, 3072},
            {"bert-base-384", 384, 768, 12, 3072},
            {"vit-b16-197", 197, 768, 12, 3072}};
}

TransformerShape transformer_shape(const std::string &name) {
    if (name == "tiny") return {"tiny", 8, 16, 2, 32};
    // bert-base-N: BERT-base's layer at any token count (a held-out length such as a prime).
    const std::string bert = "bert-base-";
    if (name.rfind(bert, 0) == 0 && name.size() > bert.size() && name.size() <= bert.size() + 4 &&
        name.find_first_not_of("0123456789", bert.size()) == std::string::npos &&
        name[bert.size()] != '0')
        return {name, std::stoll(name.substr(bert.size())), 768, 12, 3072};
    std::string names = "tiny, bert-base-N (1 <= N <= 9999)";
    for (const TransformerShape &s : transformer_shapes()) {
        if (s.name == name) return s;
        names += ", " + s.name;
    }
    throw Error(fmt::format("no transformer layer '{}' (known: {})", name, names));
}

std::vector<LayerOp> transformer_layer(const TransformerShape &s) {
    const int64_t t = s.tokens, e = s.hidden, h = s.heads, d = s.head_dim(), f = s.ffn;
    if (t < 1 || e < 1 || h < 1 || f < 1 || e % h != 0)
        throw Error(
            fmt::format("transformer {}: hidden {} is not a multiple of {} heads", s.name, e, h));
    std::vector<LayerOp> ops;
    // A projection and its epilogue, one program: T = in . w, then out = epilogue(T).
    auto proj = [&](const char *group, const std::string &name, int64_t n, int64_t k,
                    const Epilogue &ep, std::vector<std::string> reads, const std::string &out) {
        ops.push_back(
            {group, make_matmul_epilogue(t, n, k, ep, name), std::move(reads), out, true});
    };
    const Epilogue bias{true, Activation::None, false}, gelu{true, Activation::Gelu, false},
        residual{true, Activation::None, true};
    for (const char *x : {"q", "k", "v"}) {
        const std::string p = x;
        proj("qkv", p + "_proj", e, e, bias, {"x", "w" + p, "b" + p}, p);
    }
    ops.push_back(
        {"scores", make_scores(1, h, t, d, HeadLayout::TokenMajor, "scores"), {"q", "k"}, "s"});
    ops.push_back({"softmax", make_softmax(h * t, t, "softmax"), {"s"}, "p"});
    ops.push_back({"context",
                   make_context(1, h, t, d, HeadLayout::TokenMajor, "context"),
                   {"p", "v"},
                   "ctx"});
    proj("out", "out_proj", e, e, residual, {"ctx", "wo", "bo", "x"}, "h1");
    ops.push_back({"ln1", make_layernorm(t, e, "ln1"), {"h1", "g1", "b1"}, "n1"});
    proj("ffn_up", "ffn_up", f, e, gelu, {"n1", "w1", "c1"}, "f1");
    proj("ffn_down", "ffn_down", e, f, residual, {"f1", "w2", "c2", "n1"}, "h2");
    ops.push_back({"ln2", make_layernorm(t, e, "ln2"), {"h2", "g2", "b2"}, "y"});
    return ops;
}

std::vector<std::string> write_transformer_dataset(const TransformerShape &s,
                                                   const std::string &dir) {
    const std::vector<LayerOp> ops = transformer_layer(s);  // built first: an error writes nothing
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
        throw Error(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
    std::vector<std::string> paths;
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto path =
            std::filesystem::path(dir) / fmt::format("{:02d}_{}", i + 1, ops[i].comp.name);
        write_file_atomically(
            path.string(),
            serialize(Program::naive(std::make_shared<const Computation>(ops[i].comp))));
        paths.push_back(path.string());
    }
    return paths;
}

}  // namespace looptool
