#include "looptool/formats/text_format.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "looptool/formats/loop_tool_import.h"
#include "looptool/formats/temp_file.h"
#include "looptool/ir/error.h"

namespace looptool {

std::string dump(const Program &p, bool show_cursor) {
    const Computation &c = *p.comp;
    std::string out;
    int flat = 0;
    for (const auto &nest : p.tree.nests) {
        auto names = loop_names(c, nest);
        for (size_t d = 0; d < nest.loops.size(); ++d, ++flat) {
            const Loop &l = nest.loops[d];
            out += std::string(d, ' ') + fmt::format("for {} in {}", names[d], l.size);
            if (l.tail) out += fmt::format(" r {}", l.tail);
            out += fmt::format(" : L{}", flat);
            if (l.unroll) out += " [unroll]";
            if (l.vectorize) out += " [vectorize]";
            if (int(d) < nest.shared) out += " [shared with the next nest]";
            if (show_cursor && flat == p.cursor) out += " <<<<<< cursor";
            out += "\n";
        }
        for (int s : nest.stmts)
            out += std::string(nest.loops.size(), ' ') + format_stmt(c, c.stmts[size_t(s)]) + "\n";
    }
    return out;
}

namespace {
const char *kind_name(TensorKind k) {
    switch (k) {
        case TensorKind::Input: return "input";
        case TensorKind::Output: return "output";
        case TensorKind::Temp: return "temp";
        case TensorKind::Scratch: return "scratch";
    }
    return "?";
}
}  // namespace

std::string serialize(const Program &p) {
    const Computation &c = *p.comp;
    std::string out = "looptool-program 1\n";
    out += fmt::format("name {}\n", c.name);
    for (const auto &v : c.vars) out += fmt::format("var {} {}\n", v.name, v.extent);
    for (const auto &t : c.tensors) {
        out += fmt::format("tensor {} {}", t.name, kind_name(t.kind));
        for (auto s : t.shape) out += fmt::format(" {}", s);
        out += "\n";
    }
    for (const auto &s : c.stmts) out += fmt::format("stmt {}\n", format_stmt(c, s));
    for (const auto &nest : p.tree.nests) {
        out += "nest";
        for (int s : nest.stmts) out += fmt::format(" {}", s);
        out += "\n";
        if (nest.shared) out += fmt::format("shared {}\n", nest.shared);
        for (const auto &l : nest.loops) {
            out += fmt::format("loop {} {} {}", c.vars[size_t(l.var)].name, l.size, l.tail);
            if (l.unroll) out += " unroll";
            if (l.vectorize) out += " vectorize";
            out += "\n";
        }
    }
    out += fmt::format("cursor {}\n", p.cursor);
    return out;
}

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

Program parse_program(std::string_view text, const std::string &source) {
    auto comp = std::make_shared<Computation>();
    Program p;
    std::istringstream in{std::string(text)};
    std::string line;
    int lineno = 0;
    bool header = false, have_cursor = false;
    std::vector<std::string> stmt_lines;
    std::vector<int> stmt_line_numbers;
    struct PendingLoop {
        std::string var;
        int64_t size, tail;
        bool unroll, vectorize;
        int line;
    };
    std::vector<std::vector<PendingLoop>> pending_loops;
    while (std::getline(in, line)) {
        ++lineno;
        const std::string where = fmt::format("{}:{}", source, lineno);
        auto w = split_words(line);
        if (w.empty() || w[0][0] == '#') continue;
        if (!header) {
            if (w.size() != 2 || w[0] != "looptool-program")
                throw Error(fmt::format("{}: expected the header 'looptool-program 1'", where));
            if (w[1] != "1")
                throw Error(fmt::format("{}: unsupported format version {}", where, w[1]));
            header = true;
            continue;
        }
        if (have_cursor) throw Error(fmt::format("{}: text after the cursor line", where));
        const std::string &kw = w[0];
        if (kw == "name") {
            if (w.size() != 2) throw Error(fmt::format("{}: expected 'name NAME'", where));
            if (!comp->name.empty()) throw Error(fmt::format("{}: a second 'name' line", where));
            comp->name = w[1];
        } else if (kw == "var") {
            if (w.size() != 3) throw Error(fmt::format("{}: expected 'var NAME EXTENT'", where));
            if (comp->var_index(w[1]) >= 0)
                throw Error(fmt::format("{}: variable {} declared twice", where, w[1]));
            comp->vars.push_back({w[1], parse_int(w[2], where)});
        } else if (kw == "tensor") {
            if (w.size() < 4)
                throw Error(fmt::format("{}: expected 'tensor NAME KIND DIM...'", where));
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
            if (comp->tensor_index(t.name) >= 0)
                throw Error(fmt::format("{}: tensor {} declared twice", where, t.name));
            comp->tensors.push_back(std::move(t));
        } else if (kw == "stmt") {
            stmt_lines.push_back(line.substr(line.find("stmt") + 4));
            stmt_line_numbers.push_back(lineno);
        } else if (kw == "nest") {
            p.tree.nests.push_back({});
            pending_loops.emplace_back();
            for (size_t i = 1; i < w.size(); ++i) {
                int64_t s = parse_int(w[i], where);
                if (s < 0 || s > 1000000)  // keeps the cast to int exact
                    throw Error(fmt::format("{}: statement id {} out of range", where, s));
                p.tree.nests.back().stmts.push_back(int(s));
            }
        } else if (kw == "shared") {
            if (p.tree.nests.empty() || !pending_loops.back().empty() || w.size() != 2)
                throw Error(
                    fmt::format("{}: expected 'shared COUNT' right after a 'nest' line", where));
            const int64_t k = parse_int(w[1], where);
            if (k < 1 || k > 1000000)  // keeps the cast to int exact
                throw Error(fmt::format("{}: shared loop count {} out of range", where, k));
            p.tree.nests.back().shared = int(k);
        } else if (kw == "loop") {
            if (p.tree.nests.empty())
                throw Error(fmt::format("{}: 'loop' before any 'nest'", where));
            if (w.size() < 4)
                throw Error(
                    fmt::format("{}: expected 'loop VAR SIZE TAIL [unroll] [vectorize]'", where));
            PendingLoop l{w[1],  parse_int(w[2], where), parse_int(w[3], where), false, false,
                          lineno};
            for (size_t i = 4; i < w.size(); ++i) {
                if (w[i] == "unroll")
                    l.unroll = true;
                else if (w[i] == "vectorize")
                    l.vectorize = true;
                else
                    throw Error(fmt::format("{}: unknown loop annotation '{}'", where, w[i]));
            }
            pending_loops.back().push_back(l);
        } else if (kw == "cursor") {
            if (w.size() != 2) throw Error(fmt::format("{}: expected 'cursor INDEX'", where));
            int64_t cursor = parse_int(w[1], where);
            if (cursor < -1 || cursor > 1000000)  // keeps the cast to int exact
                throw Error(fmt::format("{}: cursor {} out of range", where, cursor));
            p.cursor = int(cursor);
            have_cursor = true;
        } else {
            throw Error(fmt::format("{}: unknown keyword '{}'", where, kw));
        }
    }
    if (!header) throw Error(fmt::format("{}: empty file (expected 'looptool-program 1')", source));
    if (!have_cursor)
        throw Error(fmt::format("{}: truncated: no 'cursor' line at the end", source));
    // serialize() writes the name; without one the output would not parse back.
    if (comp->name.empty()) throw Error(fmt::format("{}: no 'name' line", source));
    for (size_t i = 0; i < stmt_lines.size(); ++i)
        comp->stmts.push_back(
            StmtParser(*comp, stmt_lines[i], fmt::format("{}:{}", source, stmt_line_numbers[i]))
                .parse());
    for (size_t n = 0; n < pending_loops.size(); ++n)
        for (const auto &pl : pending_loops[n]) {
            int v = comp->var_index(pl.var);
            if (v < 0)
                throw Error(fmt::format("{}:{}: unknown variable '{}'", source, pl.line, pl.var));
            p.tree.nests[n].loops.push_back({v, pl.size, pl.tail, pl.unroll, pl.vectorize});
        }
    try {
        comp->validate();
        validate_loop_tree(*comp, p.tree);
    } catch (const Error &e) {
        throw Error(fmt::format("{}: {}", source, e.what()));
    }
    if (p.cursor < 0 || p.cursor >= p.tree.num_loops())
        throw Error(fmt::format("{}: cursor {} is not a loop index (0..{})", source, p.cursor,
                                p.tree.num_loops() - 1));
    p.comp = std::move(comp);
    return p;
}

std::string read_file(const std::string &path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(fmt::format("{}: is a directory, not a file", path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open file", path));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(fmt::format("{}: read error", path));
    return ss.str();
}

Program load_program_file(const std::string &path) {
    std::string text = read_file(path);
    if (text.rfind("looptool-program", 0) == 0) return parse_program(text, path);
    if (text.rfind("v:", 0) == 0 || text.rfind("n:", 0) == 0) return import_loop_tool(text, path);
    throw Error(
        fmt::format("{}: not a benchmark file (expected 'looptool-program' or loop_tool's "
                    "'v:' lines)",
                    path));
}

void write_file_atomically(const std::string &path, std::string_view content) {
    const std::string tmp = write_temp_file(path, content);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(fmt::format("{}: cannot rename into place: {}", path, ec.message()));
    }
}

}  // namespace looptool
