#include "looptool/gen/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"

namespace looptool {

namespace {
int64_t range_int(std::string_view s, std::string_view whole) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos)
        throw Error(fmt::format("bad range '{}': '{}' is not a positive integer", whole, s));
    int64_t v = std::stoll(std::string(s));
    if (v <= 0) throw Error(fmt::format("bad range '{}': sizes must be positive", whole));
    if (v > kMaxExtent)
        throw Error(
            fmt::format("bad range '{}': size {} is above the limit {}", whole, v, kMaxExtent));
    return v;
}

std::vector<std::string_view> split_on(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    return out;
}
}  // namespace

std::vector<int64_t> parse_range(std::string_view text) {
    std::vector<int64_t> out;
    if (text.find('|') != std::string_view::npos) {
        for (auto part : split_on(text, '|')) out.push_back(range_int(part, text));
    } else if (text.find(':') != std::string_view::npos) {
        auto parts = split_on(text, ':');
        if (parts.size() > 3) throw Error(fmt::format("bad range '{}': too many ':'", text));
        int64_t a = range_int(parts[0], text), b = range_int(parts[1], text);
        int64_t step = parts.size() == 3 ? range_int(parts[2], text) : 1;
        if (b < a) throw Error(fmt::format("bad range '{}': end below start", text));
        if ((b - a) / step >= 100000)
            throw Error(fmt::format("bad range '{}': more than 100000 values", text));
        for (int64_t v = a; v <= b; v += step) out.push_back(v);
    } else {
        out.push_back(range_int(text, text));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string MatmulShape::name() const { return fmt::format("mm{}_{}_{}", m, n, k); }

Computation make_bmm(int64_t b, int64_t m, int64_t n, int64_t k, std::string name) {
    Computation c;
    c.name = name.empty() ? fmt::format("bmm{}_{}_{}_{}", b, m, n, k) : std::move(name);
    c.vars = {{"b", b}, {"m", m}, {"k", k}, {"n", n}};
    const int B = 0, M = 1, K = 2, N = 3;
    c.tensors = {{"A", {b, m, k}, TensorKind::Input},
                 {"B", {b, k, n}, TensorKind::Input},
                 {"T", {b, m, n}, TensorKind::Temp},
                 {"C", {b, m, n}, TensorKind::Output}};
    auto at = [](int t, std::initializer_list<int> vs) {
        Access a{t, {}};
        for (int v : vs) a.index.push_back(Affine::of_var(v));
        return a;
    };
    c.stmts.push_back(
        {at(2, {B, M, N}), ReduceKind::Sum,
         Expr::binary(OpKind::Mul, Expr::read(at(0, {B, M, K})), Expr::read(at(1, {B, K, N})))});
    c.stmts.push_back({at(3, {B, M, N}), ReduceKind::None, Expr::read(at(2, {B, M, N}))});
    c.validate();
    return c;
}

std::vector<MatmulShape> matmul_shapes(std::string_view dim_a, std::string_view dim_b) {
    auto a = split_on(dim_a, ',');
    auto b = split_on(dim_b, ',');
    if (a.size() != 2) throw Error(fmt::format("--dimA '{}': expected M_RANGE,K_RANGE", dim_a));
    if (b.size() != 2) throw Error(fmt::format("--dimB '{}': expected K_RANGE,N_RANGE", dim_b));
    auto ms = parse_range(a[0]), ka = parse_range(a[1]), kb = parse_range(b[0]),
         ns = parse_range(b[1]);
    if (ka != kb)
        throw Error(
            fmt::format("the K ranges of --dimA ('{}') and --dimB ('{}') differ", a[1], b[0]));
    if (ms.size() * ns.size() * ka.size() > 1000000)
        throw Error("the ranges give more than 1,000,000 shapes");
    std::vector<MatmulShape> out;
    for (auto m : ms)
        for (auto n : ns)
            for (auto k : ka) {
                if (double(m) * double(k) > double(kMaxTensorElements) ||
                    double(k) * double(n) > double(kMaxTensorElements) ||
                    double(m) * double(n) > double(kMaxTensorElements))
                    throw Error(
                        fmt::format("shape {}x{}x{}: a tensor above 2^31 elements", m, n, k));
                out.push_back({m, n, k});
            }
    std::sort(out.begin(), out.end(),
              [](const MatmulShape &x, const MatmulShape &y) { return x.name() < y.name(); });
    return out;
}

namespace {
std::vector<std::string> write_dataset(const std::vector<ComputationPtr> &comps,
                                       const std::string &dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
        throw Error(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
    std::vector<std::string> paths;
    for (const auto &comp : comps) {
        std::string path = (std::filesystem::path(dir) / comp->name).string();
        write_file_atomically(path, serialize(Program::naive(comp)));
        paths.push_back(path);
    }
    return paths;
}
}  // namespace

std::vector<std::string> write_matmul_dataset(const std::vector<MatmulShape> &shapes,
                                              const std::string &dir, const Epilogue &e) {
    std::vector<ComputationPtr> comps;  // built first: a bad shape writes nothing
    for (const auto &s : shapes)
        comps.push_back(std::make_shared<Computation>(make_matmul_epilogue(s.m, s.n, s.k, e)));
    return write_dataset(comps, dir);
}

std::vector<std::string> write_rowop_dataset(const std::string &kind, std::string_view dim_a,
                                             const std::string &dir) {
    if (kind != "softmax" && kind != "layernorm" && kind != "gelu" && kind != "gelu-tanh")
        throw Error(fmt::format(
            "generate: '{}' is no row operation (softmax, layernorm, gelu, gelu-tanh)", kind));
    const auto d = split_on(dim_a, ',');
    if (d.size() != 2)
        throw Error(fmt::format("--dimA '{}': expected ROWS_RANGE,COLS_RANGE", dim_a));
    std::vector<ComputationPtr> comps;  // built first: a bad shape writes nothing
    for (int64_t r : parse_range(d[0]))
        for (int64_t c : parse_range(d[1])) {
            if (double(r) * double(c) > double(kMaxTensorElements) || r > kMaxExtent ||
                c > kMaxExtent)
                throw Error(
                    fmt::format("{} {}x{}: a tensor above 2^31 elements or an extent "
                                "above 2^20",
                                kind, r, c));
            comps.push_back(std::make_shared<Computation>(
                kind == "softmax"     ? make_softmax(r, c)
                : kind == "layernorm" ? make_layernorm(r, c)
                                      : make_gelu(r, c, kind == "gelu-tanh")));
        }
    return write_dataset(comps, dir);
}

std::vector<std::string> write_attention_dataset(const std::string &kind, std::string_view batch,
                                                 std::string_view dim_a, HeadLayout layout,
                                                 const std::string &dir) {
    if (kind != "scores" && kind != "context")
        throw Error(fmt::format("generate: '{}' is no attention matmul (scores, context)", kind));
    const auto d = split_on(dim_a, ',');
    if (d.size() != 3)
        throw Error(
            fmt::format("--dimA '{}': expected H_RANGE,T_RANGE,D_RANGE for {}", dim_a, kind));
    const auto bs = parse_range(batch), hs = parse_range(d[0]), ts = parse_range(d[1]),
               ds = parse_range(d[2]);
    if (double(bs.size()) * double(hs.size()) * double(ts.size()) * double(ds.size()) > 1e6)
        throw Error("the ranges give more than 1,000,000 shapes");
    std::vector<ComputationPtr> comps;  // built first: a bad shape writes nothing
    for (int64_t b : bs)
        for (int64_t h : hs)
            for (int64_t t : ts)
                for (int64_t e : ds)
                    comps.push_back(std::make_shared<const Computation>(
                        kind == "scores" ? make_scores(b, h, t, e, layout)
                                         : make_context(b, h, t, e, layout)));
    return write_dataset(comps, dir);
}

std::string ConvShape::name() const {
    return fmt::format("conv{}_{}_{}_{}__{}_{}_{}_{}{}{}", n, c, h, w, m, c, kh, kw,
                       stride == 1 ? "" : fmt::format("_s{}", stride),
                       pad == 0 ? "" : fmt::format("_p{}", pad));
}

Computation make_strided_conv2d(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh,
                                int64_t kw, int64_t stride, std::string name) {
    if (stride < 1) throw Error(fmt::format("conv2d: stride {} is not positive", stride));
    Computation c = make_conv2d(n, ci, h, w, co, kh, kw, name);
    if (stride == 1) return c;
    const int64_t ho = (h - kh) / stride + 1, wo = (w - kw) / stride + 1;
    if (name.empty())
        c.name =
            fmt::format("conv{}_{}_{}_{}__{}_{}_{}_{}_s{}", n, ci, h, w, co, ci, kh, kw, stride);
    // Variables n, c, ho, wo, kh, kw, m (make_conv2d's order); X's rows and columns strided.
    c.vars[2].extent = ho;
    c.vars[3].extent = wo;
    for (int t : {2, 3}) c.tensors[size_t(t)].shape = {n, co, ho, wo};
    Statement &s = c.stmts[0];
    for (Affine &f : s.value.args[0].access.index)
        for (Affine::Term &term : f.terms)
            if (term.var == 2 || term.var == 3) term.coef = stride;
    c.validate();
    return c;
}

Computation make_padded_conv2d(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh,
                               int64_t kw, int64_t stride, int64_t pad, std::string name) {
    if (pad < 0 || pad > kMaxExtent)
        throw Error(fmt::format("conv2d: padding {} is not in [0, {}]", pad, kMaxExtent));
    if (pad == 0) return make_strided_conv2d(n, ci, h, w, co, kh, kw, stride, std::move(name));
    if (pad >= kh || pad >= kw)
        throw Error(
            fmt::format("conv2d: padding {} is not below the kernel {}x{} (an output "
                        "would see only zeros)",
                        pad, kh, kw));
    const int64_t hp = h + 2 * pad, wp = w + 2 * pad;
    const bool named = !name.empty();
    Computation c = make_strided_conv2d(n, ci, hp, wp, co, kh, kw, stride, std::move(name));
    if (!named)
        c.name = fmt::format("conv{}_{}_{}_{}__{}_{}_{}_{}{}_p{}", n, ci, h, w, co, ci, kh, kw,
                             stride == 1 ? "" : fmt::format("_s{}", stride), pad);
    // The padded image P (a temporary before T) filled from the input X by a first statement:
    // a sum reduction into P, so P starts at zero and the border stays zero.
    c.vars.push_back({"h", h});
    c.vars.push_back({"w", w});
    const int N = 0, CI = 1, H = 7, W = 8;
    c.tensors[0].shape = {n, ci, h, w};
    c.tensors.insert(c.tensors.begin() + 2, {"P", {n, ci, hp, wp}, TensorKind::Temp});
    const int moved[] = {2, 1, 3, 4};  // the product reads P; T and Y move one place
    for (Statement &s : c.stmts) {
        s.out.tensor = moved[s.out.tensor];
        if (s.value.op == OpKind::Read) s.value.access.tensor = moved[s.value.access.tensor];
        for (Expr &e : s.value.args) e.access.tensor = moved[e.access.tensor];
    }
    auto v = [](int x) { return Affine::of_var(x); };
    const Access in{0, {v(N), v(CI), v(H), v(W)}};
    const Access padded{2, {v(N), v(CI), Affine{{{H, 1}}, pad}, Affine{{{W, 1}}, pad}}};
    c.stmts.insert(c.stmts.begin(), Statement{padded, ReduceKind::Sum, Expr::read(in)});
    c.validate();
    return c;
}

Computation computation_of_shape(const std::string &who, const std::string &kind,
                                 const std::vector<int64_t> &d) {
    const bool conv = kind == "conv", attention = kind == "scores" || kind == "context";
    const bool bmm = kind == "bmm" || attention;
    if (!conv && !bmm && kind != "matmul")
        throw Error(fmt::format("{}: no computation kind '{}'", who, kind));
    const bool count_ok =
        conv ? d.size() >= 7 && d.size() <= 9 : d.size() == 4 || (!bmm && d.size() == 3);
    if (!count_ok)
        throw Error(fmt::format("{}: {} takes {} extents, not {}", who, kind,
                                conv  ? "7 (8 with a stride, 9 with padding)"
                                : bmm ? "4"
                                      : "3 (or 4 batched)",
                                d.size()));
    for (size_t i = 0; i < d.size() && i < 8; ++i)  // (a padding of 0 is allowed)
        if (d[i] < 1 || d[i] > kMaxExtent)
            throw Error(fmt::format("{}: extent {} is not in [1, {}]", who, d[i], kMaxExtent));
    if (conv && d.size() == 9 && (d[8] < 0 || d[8] >= std::min(d[5], d[6])))
        throw Error(fmt::format("{}: padding {} is not in [0, {}] (below the kernel {}x{})", who,
                                d[8], std::min(d[5], d[6]) - 1, d[5], d[6]));
    if (conv && (d[5] > d[2] + 2 * (d.size() > 8 ? d[8] : 0) ||
                 d[6] > d[3] + 2 * (d.size() > 8 ? d[8] : 0)))
        throw Error(
            fmt::format("{}: kernel {}x{} larger than the (padded) image", who, d[5], d[6]));
    if (attention)
        return kind == "scores" ? make_scores(d[0], d[1], d[2], d[3])
                                : make_context(d[0], d[1], d[2], d[3]);
    if (conv)
        return make_padded_conv2d(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d.size() > 7 ? d[7] : 1,
                                  d.size() > 8 ? d[8] : 0);
    return d.size() == 4 ? make_bmm(d[0], d[1], d[2], d[3]) : make_matmul(d[0], d[1], d[2]);
}

std::vector<std::string> write_bmm_dataset(const std::vector<int64_t> &batches,
                                           const std::vector<MatmulShape> &shapes,
                                           const std::string &dir) {
    std::vector<ComputationPtr> comps;
    for (int64_t b : batches)
        for (const MatmulShape &s : shapes) {
            if (double(b) * double(std::max({s.m * s.k, s.k * s.n, s.m * s.n})) >
                double(kMaxTensorElements))
                throw Error(fmt::format("shape {}x{}x{}x{}: a tensor above 2^31 elements", b, s.m,
                                        s.n, s.k));
            comps.push_back(std::make_shared<const Computation>(make_bmm(b, s.m, s.n, s.k)));
        }
    return write_dataset(comps, dir);
}

namespace {
void check_conv_shape(const ConvShape &s) {
    if (s.kh > s.h + 2 * s.pad || s.kw > s.w + 2 * s.pad)
        throw Error(fmt::format("{}: kernel {}x{} larger than the {}image {}x{}", s.name(), s.kh,
                                s.kw, s.pad ? "padded " : "", s.h + 2 * s.pad, s.w + 2 * s.pad));
    if (s.pad >= s.kh || s.pad >= s.kw)
        throw Error(fmt::format("{}: padding {} is not below the kernel {}x{}", s.name(), s.pad,
                                s.kh, s.kw));
}
}  // namespace

std::vector<ConvShape> conv_shapes(std::string_view dim_a, std::string_view dim_b, int64_t stride,
                                   int64_t pad) {
    if (stride < 1 || stride > 64)
        throw Error(fmt::format("conv: stride {} is not in [1, 64]", stride));
    if (pad < 0 || pad > 64) throw Error(fmt::format("conv: padding {} is not in [0, 64]", pad));
    auto a = split_on(dim_a, ',');
    auto b = split_on(dim_b, ',');
    if (a.size() != 3 && a.size() != 4)
        throw Error(fmt::format(
            "--dimA '{}': expected N_RANGE,C_RANGE,H_RANGE[,W_RANGE] for a conv", dim_a));
    if (b.size() != 4)
        throw Error(fmt::format(
            "--dimB '{}': expected M_RANGE,C_RANGE,KH_RANGE,KW_RANGE for a conv", dim_b));
    auto ns = parse_range(a[0]), cs = parse_range(a[1]), hs = parse_range(a[2]);
    auto ms = parse_range(b[0]), cb = parse_range(b[1]), khs = parse_range(b[2]),
         kws = parse_range(b[3]);
    const bool square = a.size() == 3;
    auto ws = square ? std::vector<int64_t>{0} : parse_range(a[3]);
    if (cs != cb)
        throw Error(
            fmt::format("the C ranges of --dimA ('{}') and --dimB ('{}') differ", a[1], b[1]));
    if (double(ns.size()) * double(cs.size()) * double(hs.size()) * double(ws.size()) *
            double(ms.size()) * double(khs.size()) * double(kws.size()) >
        1e6)
        throw Error("the ranges give more than 1,000,000 shapes");
    std::vector<ConvShape> out;
    for (auto n : ns)
        for (auto c : cs)
            for (auto h : hs)
                for (auto w0 : ws)
                    for (auto m : ms)
                        for (auto kh : khs)
                            for (auto kw : kws) {
                                const int64_t w = square ? h : w0;
                                const ConvShape s{n, c, h, w, m, kh, kw, stride, pad};
                                check_conv_shape(s);
                                const double x = double(n) * double(c) * double(h + 2 * pad) *
                                                 double(w + 2 * pad),
                                             y = double(n) * double(m) *
                                                 double((h + 2 * pad - kh) / stride + 1) *
                                                 double((w + 2 * pad - kw) / stride + 1),
                                             wt = double(m) * double(c) * double(kh) * double(kw);
                                if (std::max({x, y, wt}) > double(kMaxTensorElements))
                                    throw Error(
                                        fmt::format("{}: a tensor above 2^31 elements", s.name()));
                                out.push_back(s);
                            }
    std::sort(out.begin(), out.end(),
              [](const ConvShape &x, const ConvShape &y) { return x.name() < y.name(); });
    return out;
}

std::vector<std::string> write_conv_dataset(const std::vector<ConvShape> &shapes,
                                            const std::string &dir) {
    std::vector<ComputationPtr> comps;
    for (const auto &s : shapes)
        comps.push_back(std::make_shared<Computation>(
            make_padded_conv2d(s.n, s.c, s.h, s.w, s.m, s.kh, s.kw, s.stride, s.pad)));
    return write_dataset(comps, dir);
}

}  // namespace looptool
