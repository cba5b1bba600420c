#include "looptool/ir/ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "looptool/ir/error.h"

namespace looptool {

int64_t Affine::coef_of(int v) const {
    int64_t c = 0;
    for (const auto &t : terms)
        if (t.var == v) c += t.coef;
    return c;
}

int64_t Tensor::num_elements() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
}

int64_t Tensor::stride(size_t d) const {
    int64_t s = 1;
    for (size_t i = d + 1; i < shape.size(); ++i) s *= shape[i];
    return s;
}

const std::vector<OpKind> &all_ops() {
    static const std::vector<OpKind> ops = {
#define LOOPTOOL_OP_VALUE(op, name, arity, infix) OpKind::op,
        LOOPTOOL_OPS(LOOPTOOL_OP_VALUE)
#undef LOOPTOOL_OP_VALUE
    };
    return ops;
}

int op_arity(OpKind op) {
    switch (op) {
#define LOOPTOOL_OP_ARITY(op, name, arity, infix) \
    case OpKind::op: return arity;
        LOOPTOOL_OPS(LOOPTOOL_OP_ARITY)
#undef LOOPTOOL_OP_ARITY
    }
    LT_CHECK(false, "not an OpKind");
}

const char *op_name(OpKind op) {
    switch (op) {
#define LOOPTOOL_OP_NAME(op, name, arity, infix) \
    case OpKind::op: return name;
        LOOPTOOL_OPS(LOOPTOOL_OP_NAME)
#undef LOOPTOOL_OP_NAME
    }
    LT_CHECK(false, "not an OpKind");
}

const char *op_infix(OpKind op) {
    switch (op) {
#define LOOPTOOL_OP_INFIX(op, name, arity, infix) \
    case OpKind::op: return infix;
        LOOPTOOL_OPS(LOOPTOOL_OP_INFIX)
#undef LOOPTOOL_OP_INFIX
    }
    LT_CHECK(false, "not an OpKind");
}

Expr Expr::read(Access a) {
    Expr e;
    e.op = OpKind::Read;
    e.access = std::move(a);
    return e;
}
Expr Expr::constant(float v) {
    Expr e;
    e.op = OpKind::Const;
    e.value = v;
    return e;
}
Expr Expr::binary(OpKind op, Expr a, Expr b) {
    Expr e;
    e.op = op;
    e.args = {std::move(a), std::move(b)};
    return e;
}
Expr Expr::unary(OpKind op, Expr a) {
    Expr e;
    e.op = op;
    e.args = {std::move(a)};
    return e;
}

float reduce_identity(ReduceKind k) {
    switch (k) {
        case ReduceKind::None:
        case ReduceKind::Sum: return 0.0f;
        case ReduceKind::Max: return -std::numeric_limits<float>::infinity();
        case ReduceKind::Min: return std::numeric_limits<float>::infinity();
    }
    LT_CHECK(false, "not a ReduceKind");
}

const char *reduce_name(ReduceKind k) {
    switch (k) {
        case ReduceKind::None: return "none";
        case ReduceKind::Sum: return "sum";
        case ReduceKind::Max: return "max";
        case ReduceKind::Min: return "min";
    }
    LT_CHECK(false, "not a ReduceKind");
}

ReduceKind Computation::reduction_into(int t) const {
    for (const auto &s : stmts)
        if (s.out.tensor == t && s.reduce != ReduceKind::None) return s.reduce;
    return ReduceKind::None;
}

int Computation::var_index(const std::string &n) const {
    for (size_t i = 0; i < vars.size(); ++i)
        if (vars[i].name == n) return int(i);
    return -1;
}

int Computation::tensor_index(const std::string &n) const {
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].name == n) return int(i);
    return -1;
}

namespace {
void collect_vars(const Access &a, std::vector<int> &out) {
    for (const auto &ix : a.index)
        for (const auto &t : ix.terms)
            if (std::find(out.begin(), out.end(), t.var) == out.end()) out.push_back(t.var);
}
void collect_vars(const Expr &e, std::vector<int> &out) {
    if (e.op == OpKind::Read) collect_vars(e.access, out);
    for (const auto &a : e.args) collect_vars(a, out);
}
int64_t count_ops(const Expr &e) {
    int64_t n = e.op == OpKind::Read || e.op == OpKind::Const ? 0 : 1;
    for (const auto &a : e.args) n += count_ops(a);
    return n;
}
}  // namespace

std::vector<int> vars_of(const Access &a) {
    std::vector<int> out;
    collect_vars(a, out);
    return out;
}

std::vector<int> vars_of(const Statement &s) {
    std::vector<int> out;
    collect_vars(s.out, out);
    collect_vars(s.value, out);
    return out;
}

std::vector<int> Computation::stmt_vars(int stmt) const {
    LT_CHECK(stmt >= 0 && size_t(stmt) < stmts.size(), fmt::format("no statement {}", stmt));
    return vars_of(stmts[size_t(stmt)]);
}

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

void collect_reads(const Expr &e, std::vector<const Access *> &out) {
    if (e.op == OpKind::Read) out.push_back(&e.access);
    for (const auto &a : e.args) collect_reads(a, out);
}

bool reads_tensor(const Statement &s, int t) {
    std::vector<const Access *> reads;
    collect_reads(s.value, reads);
    for (auto *a : reads)
        if (a->tensor == t) return true;
    return false;
}

bool is_identity_cover(const Computation &c, const Access &a) {
    // An exact cover whose every dimension is one var.
    for (const Affine &f : a.index)
        if (f.terms.size() != 1) return false;
    return is_exact_cover(c, a);
}

bool is_exact_cover(const Computation &c, const Access &a) {
    const Tensor &t = c.tensors[size_t(a.tensor)];
    std::vector<int> seen;
    for (size_t d = 0; d < a.index.size(); ++d) {
        const Affine &f = a.index[d];
        if (f.offset != 0 || f.terms.empty()) return false;
        std::vector<Affine::Term> terms = f.terms;
        std::sort(terms.begin(), terms.end(),
                  [](const Affine::Term &x, const Affine::Term &y) { return x.coef < y.coef; });
        int64_t radix = 1;  // the coefficient the next term must have
        for (const Affine::Term &term : terms) {
            if (term.coef != radix) return false;
            if (std::find(seen.begin(), seen.end(), term.var) != seen.end()) return false;
            seen.push_back(term.var);
            radix *= c.vars[size_t(term.var)].extent;
        }
        if (radix != t.shape[d]) return false;
    }
    return true;
}

double Computation::flops() const {
    double total = 0;
    for (size_t s = 0; s < stmts.size(); ++s) {
        double iters = 1;
        for (int v : stmt_vars(int(s))) iters *= double(vars[size_t(v)].extent);
        int64_t ops = count_ops(stmts[s].value) + (stmts[s].reduce != ReduceKind::None ? 1 : 0);
        total += iters * double(ops);
    }
    return total;
}

namespace {
void validate_access(const Computation &c, const Access &a, const std::string &where) {
    if (a.tensor < 0 || size_t(a.tensor) >= c.tensors.size())
        throw Error(fmt::format("{}: unknown tensor id {}", where, a.tensor));
    const Tensor &t = c.tensors[size_t(a.tensor)];
    if (a.index.size() != t.shape.size())
        throw Error(fmt::format("{}: tensor {} has {} dimensions but is indexed with {}", where,
                                t.name, t.shape.size(), a.index.size()));
    for (size_t d = 0; d < a.index.size(); ++d) {
        int64_t lo = a.index[d].offset, hi = a.index[d].offset;
        for (const auto &term : a.index[d].terms) {
            if (term.var < 0 || size_t(term.var) >= c.vars.size())
                throw Error(fmt::format("{}: unknown variable id {}", where, term.var));
            int64_t span = term.coef * (c.vars[size_t(term.var)].extent - 1);
            (span >= 0 ? hi : lo) += span;
        }
        if (lo < 0 || hi >= t.shape[d])
            throw Error(
                fmt::format("{}: index {} of tensor {} ranges over [{}, {}] but the "
                            "dimension has size {}",
                            where, d, t.name, lo, hi, t.shape[d]));
    }
}
void validate_expr(const Computation &c, const Expr &e, const std::string &where) {
    if (int(e.args.size()) != op_arity(e.op))
        throw Error(fmt::format("{}: {} takes {} operands, got {}", where, op_name(e.op),
                                op_arity(e.op), e.args.size()));
    if (e.op == OpKind::Read) {
        validate_access(c, e.access, where);
        if (c.tensors[size_t(e.access.tensor)].kind == TensorKind::Output)
            throw Error(fmt::format("{}: reads output tensor {}", where,
                                    c.tensors[size_t(e.access.tensor)].name));
    }
    for (const auto &a : e.args) validate_expr(c, a, where);
}
// The statement forms whose result does not depend on the order the loops visit the
// statement's domain in: an assignment writes each element once, and a reduction's terms
// are combined in any order.
void validate_reduction(const Computation &c, int si, const std::string &where) {
    const Statement &s = c.stmts[size_t(si)];
    const std::string &out = c.tensors[size_t(s.out.tensor)].name;
    if (s.reduce == ReduceKind::None) {
        const std::vector<int> outv = vars_of(s.out);
        for (int v : vars_of(s))
            if (std::find(outv.begin(), outv.end(), v) == outv.end())
                throw Error(fmt::format(
                    "{}: '=' into {} iterates over {}, which the output does not use (each "
                    "element would be overwritten); write a reduction: +=, max({}[...], ...) "
                    "or min({}[...], ...)",
                    where, out, c.vars[size_t(v)].name, out, out));
        return;
    }
    if (reads_tensor(s, s.out.tensor))
        throw Error(fmt::format("{}: a {} reduction into {} reads {} itself", where,
                                reduce_name(s.reduce), out, out));
    const ReduceKind first = c.reduction_into(s.out.tensor);
    if (first != s.reduce)
        throw Error(
            fmt::format("{}: a {} reduction into {}, which a {} reduction writes too "
                        "(one kind per tensor: it starts at that kind's identity)",
                        where, reduce_name(s.reduce), out, reduce_name(first)));
}
}  // namespace

size_t Computation::num_buffers() const {
    size_t n = 0;
    while (n < tensors.size() && tensors[n].kind != TensorKind::Scratch) ++n;
    return n;
}

bool same_storage(const Computation &a, const Computation &b) {
    if (a.name != b.name || a.num_buffers() != b.num_buffers()) return false;
    for (size_t t = 0; t < a.num_buffers(); ++t) {
        const Tensor &x = a.tensors[t], &y = b.tensors[t];
        if (x.name != y.name || x.kind != y.kind || x.num_elements() != y.num_elements())
            return false;
    }
    return true;
}

void Computation::validate() const {
    if (vars.empty()) throw Error(fmt::format("computation {}: no index variables", name));
    for (const auto &v : vars) {
        if (v.name.empty()) throw Error(fmt::format("computation {}: unnamed variable", name));
        if (v.extent <= 0 || v.extent > kMaxExtent)
            throw Error(fmt::format("computation {}: variable {} has extent {} (must be in 1..{})",
                                    name, v.name, v.extent, kMaxExtent));
    }
    for (const auto &t : tensors) {
        if (t.shape.empty()) throw Error(fmt::format("tensor {} has no dimensions", t.name));
        double n = 1;
        for (auto s : t.shape) {
            if (s <= 0)
                throw Error(fmt::format("tensor {} has a non-positive dimension {}", t.name, s));
            n *= double(s);
        }
        if (n > double(kMaxTensorElements))
            throw Error(
                fmt::format("tensor {} has {:.0f} elements, above the limit of 2^31", t.name, n));
    }
    for (size_t t = num_buffers(); t < tensors.size(); ++t)
        if (tensors[t].kind != TensorKind::Scratch)
            throw Error(fmt::format(
                "tensor {} follows a scratch tensor (scratch tensors come last)", tensors[t].name));
    if (stmts.empty()) throw Error(fmt::format("computation {}: no statements", name));
    for (size_t s = 0; s < stmts.size(); ++s) {
        std::string where = fmt::format("computation {}, statement {}", name, s);
        validate_access(*this, stmts[s].out, where);
        if (tensors[size_t(stmts[s].out.tensor)].kind == TensorKind::Input)
            throw Error(fmt::format("{}: writes input tensor {}", where,
                                    tensors[size_t(stmts[s].out.tensor)].name));
        validate_expr(*this, stmts[s].value, where);
        validate_reduction(*this, int(s), where);
    }
}

Computation make_matmul(int64_t m, int64_t n, int64_t k, std::string name) {
    Computation c;
    c.name = name.empty() ? fmt::format("mm{}_{}_{}", m, n, k) : std::move(name);
    // Declaration order is the naive loop order: LoopTune's nest is m, k, n.
    c.vars = {{"m", m}, {"k", k}, {"n", n}};
    const int M = 0, K = 1, N = 2;
    c.tensors = {{"A", {m, k}, TensorKind::Input},
                 {"B", {k, n}, TensorKind::Input},
                 {"T", {m, n}, TensorKind::Temp},
                 {"C", {m, n}, TensorKind::Output}};
    auto at = [](int t, std::initializer_list<int> vs) {
        Access a{t, {}};
        for (int v : vs) a.index.push_back(Affine::of_var(v));
        return a;
    };
    c.stmts.push_back(
        {at(2, {M, N}), ReduceKind::Sum,
         Expr::binary(OpKind::Mul, Expr::read(at(0, {M, K})), Expr::read(at(1, {K, N})))});
    c.stmts.push_back({at(3, {M, N}), ReduceKind::None, Expr::read(at(2, {M, N}))});
    c.validate();
    return c;
}

Computation make_conv2d(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh,
                        int64_t kw, std::string name) {
    if (kh > h || kw > w)
        throw Error(fmt::format("conv2d: kernel {}x{} larger than image {}x{}", kh, kw, h, w));
    Computation c;
    c.name = name.empty() ? fmt::format("conv{}_{}_{}_{}__{}_{}_{}_{}", n, ci, h, w, co, ci, kh, kw)
                          : std::move(name);
    int64_t ho = h - kh + 1, wo = w - kw + 1;
    // Declaration order is the naive loop order, as in LoopTune's conv files.
    c.vars = {{"n", n}, {"c", ci}, {"ho", ho}, {"wo", wo}, {"kh", kh}, {"kw", kw}, {"m", co}};
    const int N = 0, CI = 1, HO = 2, WO = 3, KH = 4, KW = 5, M = 6;
    c.tensors = {{"X", {n, ci, h, w}, TensorKind::Input},
                 {"W", {co, ci, kh, kw}, TensorKind::Input},
                 {"T", {n, co, ho, wo}, TensorKind::Temp},
                 {"Y", {n, co, ho, wo}, TensorKind::Output}};
    auto v = [](int x) { return Affine::of_var(x); };
    auto sum = [](int a, int b) { return Affine{{{a, 1}, {b, 1}}, 0}; };
    Access x{0, {v(N), v(CI), sum(HO, KH), sum(WO, KW)}};
    Access wt{1, {v(M), v(CI), v(KH), v(KW)}};
    Access t{2, {v(N), v(M), v(HO), v(WO)}};
    Access y{3, {v(N), v(M), v(HO), v(WO)}};
    c.stmts.push_back(
        {t, ReduceKind::Sum, Expr::binary(OpKind::Mul, Expr::read(x), Expr::read(wt))});
    c.stmts.push_back({y, ReduceKind::None, Expr::read(t)});
    c.validate();
    return c;
}

Computation make_elementwise_add(int64_t m, int64_t n, std::string name) {
    Computation c;
    c.name = name.empty() ? fmt::format("add{}_{}", m, n) : std::move(name);
    c.vars = {{"m", m}, {"n", n}};
    Access a{0, {Affine::of_var(0), Affine::of_var(1)}};
    Access b{1, a.index};
    Access o{2, a.index};
    c.tensors = {{"A", {m, n}, TensorKind::Input},
                 {"B", {m, n}, TensorKind::Input},
                 {"C", {m, n}, TensorKind::Output}};
    c.stmts.push_back(
        {o, ReduceKind::None, Expr::binary(OpKind::Add, Expr::read(a), Expr::read(b))});
    c.validate();
    return c;
}

std::string format_affine(const Computation &c, const Affine &a) {
    std::string s;
    for (const auto &t : a.terms) {
        LT_CHECK(t.var >= 0 && size_t(t.var) < c.vars.size(), fmt::format("no var {}", t.var));
        const std::string &vn = c.vars[size_t(t.var)].name;
        if (!s.empty())
            s += t.coef < 0 ? "-" : "+";
        else if (t.coef < 0)
            s += "-";
        int64_t mag = t.coef < 0 ? -t.coef : t.coef;
        s += mag == 1 ? vn : fmt::format("{}*{}", mag, vn);
    }
    if (a.offset != 0 || s.empty()) {
        if (s.empty())
            s = fmt::format("{}", a.offset);
        else
            s += fmt::format("{}{}", a.offset < 0 ? "-" : "+", a.offset < 0 ? -a.offset : a.offset);
    }
    return s;
}

std::string format_access(const Computation &c, const Access &a) {
    LT_CHECK(a.tensor >= 0 && size_t(a.tensor) < c.tensors.size(),
             fmt::format("no tensor {}", a.tensor));
    std::string s = c.tensors[size_t(a.tensor)].name + "[";
    for (size_t i = 0; i < a.index.size(); ++i) {
        if (i) s += ", ";
        s += format_affine(c, a.index[i]);
    }
    return s + "]";
}

std::string format_expr(const Computation &c, const Expr &e) {
    if (e.op == OpKind::Read) return format_access(c, e.access);
    if (e.op == OpKind::Const) return fmt::format("{}", e.value);
    std::vector<std::string> args;
    for (const auto &a : e.args) args.push_back(format_expr(c, a));
    if (*op_infix(e.op)) return fmt::format("({} {} {})", args[0], op_infix(e.op), args[1]);
    return fmt::format("{}({})", op_name(e.op), fmt::join(args, ", "));
}

namespace {
// The outermost parentheses of a binary operator carry no information.
std::string strip_outer_parens(std::string value) {
    if (value.size() > 1 && value.front() == '(' && value.back() == ')') {
        int depth = 0;
        bool outer = true;
        for (size_t i = 0; i + 1 < value.size(); ++i) {
            depth += value[i] == '(' ? 1 : value[i] == ')' ? -1 : 0;
            if (depth == 0) {
                outer = false;
                break;
            }
        }
        if (outer) value = value.substr(1, value.size() - 2);
    }
    return value;
}
}  // namespace

std::string format_stmt(const Computation &c, const Statement &s) {
    const std::string out = format_access(c, s.out);
    const std::string value = strip_outer_parens(format_expr(c, s.value));
    switch (s.reduce) {
        case ReduceKind::None: return fmt::format("{} = {}", out, value);
        case ReduceKind::Sum: return fmt::format("{} += {}", out, value);
        case ReduceKind::Max:
        case ReduceKind::Min:
            return fmt::format("{} = {}({}, {})", out, reduce_name(s.reduce), out, value);
    }
    LT_CHECK(false, "not a ReduceKind");
}

}  // namespace looptool
