// The program format's reader (text_format.h): parse_program(), statement by statement.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptool {

namespace {

// Recursive-descent parser for one statement line, e.g.
//   T[m, n] += (A[m, k] * B[k, n])        Y[n, m, ho, wo] = max(T[...], 0)
class StmtParser {
public:
    StmtParser(const Computation &c, std::string_view text, std::string where)
        : c_(c), s_(text), where_(std::move(where)) {}

    Statement parse() {
        Statement st;
        st.out = access();
        skip();
        if (eat("+="))
            st.reduce = ReduceKind::Sum;
        else if (eat("="))
            st.reduce = ReduceKind::None;
        else
            fail("expected '=' or '+='");
        st.value = expr().e;
        skip();
        if (i_ != s_.size()) fail("unexpected text after the statement");
        if (st.reduce == ReduceKind::None) as_reduction(st);
        return st;
    }

private:
    // `OUT = max(OUT, v)`, `min(OUT, v)` and `OUT + v` (either operand order, v not reading
    // OUT's tensor) are reductions: a max/min/sum of v over the variables OUT does not use.
    static void as_reduction(Statement &st) {
        const Expr e = st.value;
        if (e.args.size() != 2) return;
        if (e.op != OpKind::Max && e.op != OpKind::Min && e.op != OpKind::Add) return;
        const ReduceKind kind = e.op == OpKind::Max   ? ReduceKind::Max
                                : e.op == OpKind::Min ? ReduceKind::Min
                                                      : ReduceKind::Sum;
        auto is_out = [&](const Expr &x) { return x.op == OpKind::Read && x.access == st.out; };
        for (size_t i = 0; i < 2; ++i) {
            if (!is_out(e.args[i])) continue;
            Statement r{st.out, kind, e.args[1 - i]};
            if (reads_tensor(r, st.out.tensor)) return;
            st = std::move(r);
            return;
        }
    }
    [[noreturn]] void fail(const std::string &what) const {
        throw Error(fmt::format("{}: {} at column {}", where_, what, i_ + 1));
    }
    void skip() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    bool eat(std::string_view tok) {
        skip();
        if (s_.substr(i_, tok.size()) == tok) {
            i_ += tok.size();
            return true;
        }
        return false;
    }
    void expect(std::string_view tok) {
        if (!eat(tok)) fail(fmt::format("expected '{}'", tok));
    }
    std::string ident() {
        skip();
        size_t j = i_;
        while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_'))
            ++j;
        if (j == i_ || std::isdigit(static_cast<unsigned char>(s_[i_]))) fail("expected a name");
        std::string id(s_.substr(i_, j - i_));
        i_ = j;
        return id;
    }
    bool peek_digit() {
        skip();
        return i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]));
    }
    int64_t integer() {
        skip();
        size_t j = i_;
        while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
        if (j == i_ || j - i_ > 15) fail("expected an integer");
        int64_t v = std::stoll(std::string(s_.substr(i_, j - i_)));
        i_ = j;
        return v;
    }
    Affine affine() {
        Affine a;
        bool first = true;
        for (;;) {
            int64_t sign = 1;
            if (eat("-"))
                sign = -1;
            else if (!first && !eat("+"))
                break;
            first = false;
            if (peek_digit()) {
                int64_t n = integer();
                if (eat("*"))
                    a.terms.push_back({var(ident()), sign * n});
                else
                    a.offset += sign * n;
            } else {
                a.terms.push_back({var(ident()), sign});
            }
            skip();
            if (i_ >= s_.size() || (s_[i_] != '+' && s_[i_] != '-')) break;
        }
        return a;
    }
    int var(const std::string &name) {
        int v = c_.var_index(name);
        if (v < 0) fail(fmt::format("unknown variable '{}'", name));
        return v;
    }
    Access access() {
        std::string name = ident();
        int t = c_.tensor_index(name);
        if (t < 0) fail(fmt::format("unknown tensor '{}'", name));
        return access_of(t);
    }
    Access access_of(int t) {
        Access a{t, {}};
        expect("[");
        if (!eat("]")) {
            do a.index.push_back(affine());
            while (eat(","));
            expect("]");
        }
        return a;
    }
    // Every expression comes back with its tree depth. The parser, the interpreter, the
    // lowering and Expr's destructor all recurse over the tree, so a deep one (20,000 nested
    // parentheses, or a 20,000-term sum, which nests left-deep) overflowed the stack.
    struct Parsed {
        Expr e;
        int depth;
    };
    Parsed node(OpKind op, Parsed a, Parsed b) {
        return deeper(Expr::binary(op, std::move(a.e), std::move(b.e)), std::max(a.depth, b.depth));
    }
    Parsed deeper(Expr e, int child_depth) {
        if (child_depth + 1 > kMaxExprDepth)
            fail(fmt::format("expression nested deeper than {} levels", kMaxExprDepth));
        return {std::move(e), child_depth + 1};
    }
    Parsed expr() {
        // Bounds the recursion itself (expr -> factor -> expr through '(' or a call) before
        // any tree exists.
        if (++active_ > kMaxExprDepth)
            fail(fmt::format("expression nested deeper than {} levels", kMaxExprDepth));
        Parsed e = term();
        for (;;) {
            if (eat("+"))
                e = node(OpKind::Add, std::move(e), term());
            else if (eat("-"))
                e = node(OpKind::Sub, std::move(e), term());
            else
                break;
        }
        --active_;
        return e;
    }
    Parsed term() {
        Parsed e = factor();
        for (;;) {
            if (eat("*"))
                e = node(OpKind::Mul, std::move(e), factor());
            else if (eat("/"))
                e = node(OpKind::Div, std::move(e), factor());
            else
                return e;
        }
    }
    Parsed factor() {
        skip();
        if (eat("(")) {
            Parsed e = expr();
            expect(")");
            return e;
        }
        if (i_ < s_.size() &&
            (s_[i_] == '-' || s_[i_] == '.' || std::isdigit(static_cast<unsigned char>(s_[i_])))) {
            const std::string rest(s_.substr(i_));
            char *end = nullptr;
            errno = 0;
            float v = std::strtof(rest.c_str(), &end);
            if (end == rest.c_str() || errno == ERANGE) fail("expected a number");
            i_ += size_t(end - rest.c_str());
            return {Expr::constant(v), 1};
        }
        std::string name = ident();
        for (OpKind op : all_ops()) {
            // Ops written as calls: `min(a, b)`, `exp(a)`.
            if (op_arity(op) == 0 || *op_infix(op) || name != op_name(op)) continue;
            expect("(");
            Parsed a = expr();
            if (op_arity(op) == 2) {
                expect(",");
                Parsed b = expr();
                expect(")");
                return node(op, std::move(a), std::move(b));
            }
            expect(")");
            return deeper(Expr::unary(op, std::move(a.e)), a.depth);
        }
        int t = c_.tensor_index(name);
        if (t < 0) fail(fmt::format("unknown tensor or function '{}'", name));
        return {Expr::read(access_of(t)), 1};
    }

    const Computation &c_;
    std::string_view s_;
    std::string where_;
    size_t i_ = 0;
    int active_ = 0;  // expr() calls in progress
};

std::vector<std::string> split_words(const std::string &line) {
    std::istringstream in(line);
    std::vector<std::string> w;
    for (std::string s; in >> s;) w.push_back(s);
    return w;
}

int64_t parse_int(const std::string &s, const std::string &where) {
    if (s.empty() || s.size() > 15 ||
        s.find_first_not_of("0123456789", s[0] == '-' ? 1 : 0) != std::string::npos || s == "-")
        throw Error(fmt::format("{}: '{}' is not an integer", where, s));
    return std::stoll(s);
}

}  // namespace

namespace {

/// Reads a program file line by line: the header, then keyword lines in any order until the
/// cursor line; statements and loops are resolved once every variable and tensor is known.
class ProgramReader {
public:
    explicit ProgramReader(const std::string &source) : source_(source) {}

    void line(const std::string &text, int lineno) {
        const std::string where = fmt::format("{}:{}", source_, lineno);
        const auto w = split_words(text);
        if (w.empty() || w[0][0] == '#') return;
        if (!header_) return read_header(w, where);
        if (have_cursor_) throw Error(fmt::format("{}: text after the cursor line", where));
        const std::string &kw = w[0];
        if (kw == "name") return read_name(w, where);
        if (kw == "var") return read_var(w, where);
        if (kw == "tensor") return read_tensor(w, where);
        if (kw == "stmt") {
            stmt_lines_.push_back({text.substr(text.find("stmt") + 4), lineno});
            return;
        }
        if (kw == "nest") return read_nest(w, where);
        if (kw == "shared") return read_shared(w, where);
        if (kw == "loop") return read_loop(w, where, lineno);
        if (kw == "cursor") return read_cursor(w, where);
        throw Error(fmt::format("{}: unknown keyword '{}'", where, kw));
    }

    Program finish() {
        if (!header_)
            throw Error(fmt::format("{}: empty file (expected 'looptool-program 1')", source_));
        if (!have_cursor_)
            throw Error(fmt::format("{}: truncated: no 'cursor' line at the end", source_));
        // serialize() writes the name; without one the output would not parse back.
        if (comp_->name.empty()) throw Error(fmt::format("{}: no 'name' line", source_));
        for (const auto &[text, lineno] : stmt_lines_)
            comp_->stmts.push_back(
                StmtParser(*comp_, text, fmt::format("{}:{}", source_, lineno)).parse());
        for (size_t n = 0; n < pending_loops_.size(); ++n)
            for (const auto &pl : pending_loops_[n]) {
                const int v = comp_->var_index(pl.var);
                if (v < 0)
                    throw Error(
                        fmt::format("{}:{}: unknown variable '{}'", source_, pl.line, pl.var));
                p_.tree.nests[n].loops.push_back(
                    {v, pl.size, pl.tail, pl.unroll, pl.vectorize, pl.parallel});
            }
        try {
            comp_->validate();
            validate_loop_tree(*comp_, p_.tree);
        } catch (const Error &e) {
            throw Error(fmt::format("{}: {}", source_, e.what()));
        }
        if (p_.cursor < 0 || p_.cursor >= p_.tree.num_loops())
            throw Error(fmt::format("{}: cursor {} is not a loop index (0..{})", source_, p_.cursor,
                                    p_.tree.num_loops() - 1));
        p_.comp = std::move(comp_);
        return p_;
    }

private:
    using Words = std::vector<std::string>;

    void read_header(const Words &w, const std::string &where) {
        if (w.size() != 2 || w[0] != "looptool-program")
            throw Error(fmt::format("{}: expected the header 'looptool-program 1'", where));
        if (w[1] != "1") throw Error(fmt::format("{}: unsupported format version {}", where, w[1]));
        header_ = true;
    }
    void read_name(const Words &w, const std::string &where) {
        if (w.size() != 2) throw Error(fmt::format("{}: expected 'name NAME'", where));
        if (!comp_->name.empty()) throw Error(fmt::format("{}: a second 'name' line", where));
        comp_->name = w[1];
    }
    void read_var(const Words &w, const std::string &where) {
        if (w.size() != 3) throw Error(fmt::format("{}: expected 'var NAME EXTENT'", where));
        if (comp_->var_index(w[1]) >= 0)
            throw Error(fmt::format("{}: variable {} declared twice", where, w[1]));
        comp_->vars.push_back({w[1], parse_int(w[2], where)});
    }
    void read_tensor(const Words &w, const std::string &where) {
        if (w.size() < 4) throw Error(fmt::format("{}: expected 'tensor NAME KIND DIM...'", where));
        Tensor t;
        t.name = w[1];
        if (w[2] == "input")
            t.kind = TensorKind::Input;
        else if (w[2] == "output")
            t.kind = TensorKind::Output;
        else if (w[2] == "temp")
            t.kind = TensorKind::Temp;
        else if (w[2] == "scratch")
            t.kind = TensorKind::Scratch;
        else
            throw Error(fmt::format("{}: unknown tensor kind '{}'", where, w[2]));
        for (size_t i = 3; i < w.size(); ++i) t.shape.push_back(parse_int(w[i], where));
        if (comp_->tensor_index(t.name) >= 0)
            throw Error(fmt::format("{}: tensor {} declared twice", where, t.name));
        comp_->tensors.push_back(std::move(t));
    }
    void read_nest(const Words &w, const std::string &where) {
        p_.tree.nests.push_back({});
        pending_loops_.emplace_back();
        for (size_t i = 1; i < w.size(); ++i) {
            const int64_t s = parse_int(w[i], where);
            if (s < 0 || s > 1000000)  // keeps the cast to int exact
                throw Error(fmt::format("{}: statement id {} out of range", where, s));
            p_.tree.nests.back().stmts.push_back(int(s));
        }
    }
    void read_shared(const Words &w, const std::string &where) {
        if (p_.tree.nests.empty() || !pending_loops_.back().empty() || w.size() != 2)
            throw Error(
                fmt::format("{}: expected 'shared COUNT' right after a 'nest' line", where));
        const int64_t k = parse_int(w[1], where);
        if (k < 1 || k > 1000000)  // keeps the cast to int exact
            throw Error(fmt::format("{}: shared loop count {} out of range", where, k));
        p_.tree.nests.back().shared = int(k);
    }
    void read_loop(const Words &w, const std::string &where, int lineno) {
        if (p_.tree.nests.empty()) throw Error(fmt::format("{}: 'loop' before any 'nest'", where));
        if (w.size() < 4)
            throw Error(fmt::format(
                "{}: expected 'loop VAR SIZE TAIL [unroll] [vectorize] [parallel]'", where));
        PendingLoop l{w[1],  parse_int(w[2], where), parse_int(w[3], where), false, false, false,
                      lineno};
        for (size_t i = 4; i < w.size(); ++i) {
            if (w[i] == "unroll")
                l.unroll = true;
            else if (w[i] == "vectorize")
                l.vectorize = true;
            else if (w[i] == "parallel")
                l.parallel = true;
            else
                throw Error(fmt::format("{}: unknown loop annotation '{}'", where, w[i]));
        }
        pending_loops_.back().push_back(l);
    }
    void read_cursor(const Words &w, const std::string &where) {
        if (w.size() != 2) throw Error(fmt::format("{}: expected 'cursor INDEX'", where));
        const int64_t cursor = parse_int(w[1], where);
        if (cursor < -1 || cursor > 1000000)  // keeps the cast to int exact
            throw Error(fmt::format("{}: cursor {} out of range", where, cursor));
        p_.cursor = int(cursor);
        have_cursor_ = true;
    }

    struct PendingLoop {
        std::string var;
        int64_t size, tail;
        bool unroll, vectorize, parallel;
        int line;
    };
    const std::string &source_;
    std::shared_ptr<Computation> comp_ = std::make_shared<Computation>();
    Program p_;
    bool header_ = false, have_cursor_ = false;
    std::vector<std::pair<std::string, int>> stmt_lines_;
    std::vector<std::vector<PendingLoop>> pending_loops_;
};

}  // namespace

Program parse_program(std::string_view text, const std::string &source) {
    ProgramReader reader(source);
    std::istringstream in{std::string(text)};
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) reader.line(line, ++lineno);
    return reader.finish();
}

}  // namespace looptool
