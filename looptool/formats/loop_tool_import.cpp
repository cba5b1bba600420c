#include "looptool/formats/loop_tool_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "looptool/formats/loop_tool_view.h"
#include "looptool/ir/error.h"

namespace looptool {

namespace {

// loop_tool's op codes (README of the corpus).
enum LtOp { kConstant = 0, kWrite = 1, kRead = 2, kView = 3, kMul = 7, kAdd = 5 };

bool contains(const std::vector<int> &v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

/// The index in `ours` of loop_tool variable `lt_var`.
int index_in(const std::vector<int> &ours, int lt_var) {
    return int(std::find(ours.begin(), ours.end(), lt_var) - ours.begin());
}

struct LtLoop {
    int var;
    int64_t size, tail;
};

struct LtNode {
    int op = -1;
    std::vector<int> inputs, vars;
    std::vector<LtLoop> order;
    std::vector<std::string> loop_annotations;
    std::string constraints, symbols;  // view nodes only
    int line = 0;
};

class Importer {
public:
    Importer(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

    Program run() {
        parse();
        return build();
    }

private:
    [[noreturn]] void fail(int line, const std::string &what) const {
        if (line > 0) throw Error(fmt::format("{}:{}: {}", source_, line, what));
        throw Error(fmt::format("{}: {}", source_, what));
    }

    int64_t to_int(const std::string &s, int line, const char *what) const {
        if (s.empty() || s.size() > 15 || s.find_first_not_of("-0123456789") != std::string::npos ||
            s.find('-', 1) != std::string::npos || s == "-")
            fail(line, fmt::format("bad {} '{}'", what, s));
        return std::stoll(s);
    }

    std::vector<int> int_list(const std::string &s, int line, const char *what) const {
        std::vector<int> out;
        for (const auto &p : split_fields(s, ',')) {
            if (p.empty()) continue;
            int64_t v = to_int(p, line, what);
            if (v < 0 || v > 1000000) fail(line, fmt::format("{} {} out of range", what, v));
            out.push_back(int(v));
        }
        return out;
    }

    void parse() {
        std::istringstream in{std::string(text_)};
        std::string line;
        int lineno = 0;
        while (std::getline(in, line)) {
            ++lineno;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (line.empty()) continue;
            if (line.rfind("v:", 0) == 0) {
                std::string name = line.substr(2);
                if (name.empty()) fail(lineno, "empty variable name");
                // loop_tool appends a unique id: m_98 -> m.
                auto us = name.rfind('_');
                if (us != std::string::npos && us + 1 < name.size() &&
                    name.find_first_not_of("0123456789", us + 1) == std::string::npos)
                    name = name.substr(0, us);
                var_names_.push_back(name);
            } else if (line.rfind("n:", 0) == 0) {
                nodes_.push_back(parse_node(line, lineno));
            } else if (line.rfind("i:", 0) == 0) {
                inputs_ = int_list(line.substr(2), lineno, "input node id");
                have_inputs_ = true;
            } else if (line.rfind("o:", 0) == 0) {
                outputs_ = int_list(line.substr(2), lineno, "output node id");
                have_outputs_ = true;
            } else {
                fail(lineno, fmt::format("unrecognized line '{}'", line.substr(0, 40)));
            }
        }
        if (var_names_.empty()) fail(0, "no variables ('v:' lines)");
        if (nodes_.empty()) fail(0, "no nodes ('n:' lines)");
        if (!have_inputs_ || !have_outputs_) fail(0, "truncated: missing the 'i:' or 'o:' line");
        for (size_t i = 0; i < nodes_.size(); ++i) {
            for (int in : nodes_[i].inputs)
                if (in < 0 || size_t(in) >= nodes_.size())
                    fail(nodes_[i].line, fmt::format("input node id {} out of range", in));
            for (int v : nodes_[i].vars)
                if (v < 0 || size_t(v) >= var_names_.size())
                    fail(nodes_[i].line, fmt::format("variable id {} out of range", v));
            for (const auto &l : nodes_[i].order)
                if (l.var < 0 || size_t(l.var) >= var_names_.size())
                    fail(nodes_[i].line, fmt::format("loop variable id {} out of range", l.var));
        }
        for (int id : inputs_)
            if (id < 0 || size_t(id) >= nodes_.size())
                fail(0, fmt::format("input node id {} out of range", id));
        for (int id : outputs_)
            if (id < 0 || size_t(id) >= nodes_.size())
                fail(0, fmt::format("output node id {} out of range", id));
        reject_cycles();
    }

    // loop_tool's IR is a DAG; a file whose node inputs form a cycle was accepted before.
    // Kahn's algorithm removes every node not on or behind a cycle; from any node left, following
    // inputs among the nodes left must come back round, and that node is on the cycle.
    void reject_cycles() const {
        const size_t n = nodes_.size();
        std::vector<int> pending(n, 0);
        std::vector<std::vector<int>> users(n);
        for (size_t i = 0; i < n; ++i)
            for (int in : nodes_[i].inputs) {
                ++pending[i];
                users[size_t(in)].push_back(int(i));
            }
        std::vector<int> ready;
        for (size_t i = 0; i < n; ++i)
            if (pending[i] == 0) ready.push_back(int(i));
        size_t done = 0;
        while (!ready.empty()) {
            int v = ready.back();
            ready.pop_back();
            ++done;
            for (int u : users[size_t(v)])
                if (--pending[size_t(u)] == 0) ready.push_back(u);
        }
        if (done == n) return;
        size_t at = 0;
        while (pending[at] == 0) ++at;
        std::vector<bool> seen(n, false);
        while (!seen[at]) {
            seen[at] = true;
            for (int in : nodes_[at].inputs)
                if (pending[size_t(in)] > 0) {
                    at = size_t(in);
                    break;
                }
        }
        fail(nodes_[at].line,
             fmt::format("the node graph has a cycle through node {} (its inputs lead back to it)",
                         at));
    }

    LtNode parse_node(const std::string &line, int lineno) const {
        // n:op:inputs,:vars,:constraints:sym=var,:priority:var;size;tail,...:noreuse,:annots:annot:
        auto f = split_fields(line, ':');
        if (f.size() < 8) fail(lineno, "node line has too few ':' fields");
        LtNode n;
        n.line = lineno;
        n.op = int(to_int(f[1], lineno, "op code"));
        if (n.op < 0 || n.op > 17) fail(lineno, fmt::format("unknown op code {}", n.op));
        n.inputs = int_list(f[2], lineno, "input id");
        n.vars = int_list(f[3], lineno, "variable id");
        n.constraints = f[4];
        n.symbols = f[5];
        for (const auto &item : split_fields(f[7], ',')) {
            if (item.empty()) continue;
            auto parts = split_fields(item, ';');
            if (parts.size() != 3)
                fail(lineno, fmt::format("bad loop '{}' (want var;size;tail)", item));
            LtLoop l{int(to_int(parts[0], lineno, "loop variable")),
                     to_int(parts[1], lineno, "loop size"), to_int(parts[2], lineno, "loop tail")};
            if (l.size < 1 || l.tail < 0 || l.size > kMaxExtent || l.tail > kMaxExtent)
                fail(lineno, fmt::format("bad loop size {} / tail {}", l.size, l.tail));
            n.order.push_back(l);
        }
        // One entry per loop, by position (",unroll,," annotates the second loop).
        if (f.size() > 9) n.loop_annotations = split_fields(f[9], ',');
        return n;
    }

    Program build() {
        std::string name = std::filesystem::path(source_).filename().string();
        for (const auto &n : nodes_)
            if (n.op == kView) return build_conv(name);
        // Supported graph: the matmul as LoopTune writes it:
        //   a = read; b = read; p = multiply(a, b) over m,k,n; s = add(p) over m,n; write(s).
        if (nodes_.size() != 5 || nodes_[0].op != kRead || nodes_[1].op != kRead ||
            nodes_[2].op != kMul || nodes_[3].op != kAdd || nodes_[4].op != kWrite)
            fail(0,
                 "unsupported: only LoopTune's matmul graph (read, read, multiply, add, write) "
                 "is supported");
        const LtNode &a = nodes_[0], &b = nodes_[1], &mul = nodes_[2], &add = nodes_[3],
                     &wr = nodes_[4];
        if (a.vars.size() != 2 || b.vars.size() != 2 || a.vars[1] != b.vars[0] ||
            !a.inputs.empty() || !b.inputs.empty() || mul.inputs != std::vector<int>{0, 1} ||
            add.inputs != std::vector<int>{2} || wr.inputs != std::vector<int>{3} ||
            add.vars != std::vector<int>{a.vars[0], b.vars[1]} || wr.vars != add.vars ||
            outputs_ != std::vector<int>{4} || inputs_ != std::vector<int>{0, 1})
            fail(0, "unsupported: the graph is not a matmul C[m,n] = sum_k A[m,k] * B[k,n]");
        const int fm = a.vars[0], fk = a.vars[1], fn = b.vars[1];
        // Our matmul declares vars m, k, n (ids 0, 1, 2).
        const std::vector<int> ours = {fm, fk, fn};
        std::vector<Nest> nests = schedule(mul, add, wr, ours);
        auto ext = extents(mul, nests[0], ours);
        return assemble(
            [&] {
                return std::make_shared<Computation>(make_matmul(ext[0], ext[2], ext[1], name));
            },
            std::move(nests));
    }

    /// The compute nest (the multiply's loops, which the add's must equal when it has its
    /// own) and the write nest, `ours[i]` being the loop_tool variable of our var i.
    std::vector<Nest> schedule(const LtNode &mul, const LtNode &add, const LtNode &wr,
                               const std::vector<int> &ours) const {
        if (mul.order.empty() || wr.order.empty())
            fail(mul.order.empty() ? mul.line : wr.line, "node has no loop order");
        Nest compute = to_nest(mul, 0, ours), write = to_nest(wr, 1, ours);
        if (!add.order.empty() && to_nest(add, 0, ours).loops != compute.loops)
            fail(add.line, "unsupported: the add node is scheduled apart from the multiply");
        return {compute, write};
    }

    /// A node's loop order as our nest, `ours[i]` being the loop_tool variable of our var i.
    Nest to_nest(const LtNode &node, int stmt, const std::vector<int> &ours) const {
        Nest nest;
        nest.stmts = {stmt};
        for (size_t i = 0; i < node.order.size(); ++i) {
            auto it = std::find(ours.begin(), ours.end(), node.order[i].var);
            if (it == ours.end())
                fail(node.line, fmt::format("loop over unexpected variable {}",
                                            var_names_[size_t(node.order[i].var)]));
            Loop l{int(it - ours.begin()), node.order[i].size, node.order[i].tail};
            if (i < node.loop_annotations.size()) {
                const auto &an = node.loop_annotations[i];
                if (an == "unroll")
                    l.unroll = true;
                else if (an == "vectorize")
                    l.vectorize = true;
                else if (!an.empty())
                    fail(node.line, fmt::format("unsupported loop annotation '{}'", an));
            }
            nest.loops.push_back(l);
        }
        return nest;
    }

    /// Each of our vars' extent: the coverage of its outermost loop in `compute`.
    std::vector<int64_t> extents(const LtNode &node, const Nest &compute,
                                 const std::vector<int> &ours) const {
        if (compute.loops.empty()) fail(node.line, "node has no loop order");
        // Bound the coverages innermost first so that none overflows int64.
        for (size_t d = compute.loops.size(); d-- > 0;)
            if (coverage(compute, int(d)) > kMaxExtent)
                fail(node.line, fmt::format("loop {} covers more than {} elements", d, kMaxExtent));
        std::vector<int64_t> ext(ours.size(), 0);
        for (size_t d = 0; d < compute.loops.size(); ++d) {
            int v = compute.loops[d].var;
            if (ext[size_t(v)] == 0) ext[size_t(v)] = coverage(compute, int(d));
        }
        for (size_t v = 0; v < ours.size(); ++v)
            if (ext[v] == 0)
                fail(node.line, fmt::format("the computation does not loop over {}",
                                            var_names_[size_t(ours[v])]));
        return ext;
    }

    /// LoopTune's conv2d's nodes, and what build_conv derives from them.
    struct Conv {
        const LtNode &x, &view, &w, &mul, &add, &wr;
        const std::vector<int> &ours;  ///< the multiply's variables: ours[i] is our var i
        ViewConstraints vc;            ///< the view's constraints
        std::vector<int64_t> ext;      ///< our vars' extents
    };

    /// LoopTune's conv2d: x = read; v = view(x); w = read; p = multiply(v, w); s = add(p);
    /// write(s). The view's constraints give X's indices as affine forms of the multiply's
    /// variables (`h = ho + kh`); our vars are the multiply's, in its order.
    Program build_conv(const std::string &name) {
        check_conv_graph();
        const LtNode &mul = nodes_[3];
        Conv conv{nodes_[0], nodes_[1], nodes_[2], mul, nodes_[4], nodes_[5], mul.vars, {}, {}};
        check_conv_vars(conv);
        try {
            conv.vc = parse_view_constraints(conv.view.constraints, conv.view.symbols,
                                             fmt::format("{}:{}", source_, conv.view.line));
        } catch (const Error &e) {
            fail(0, e.what());
        }
        std::vector<Nest> nests = schedule(conv.mul, conv.add, conv.wr, conv.ours);
        conv.ext = extents(conv.mul, nests[0], conv.ours);
        // X's index in each dimension: the variable itself, or its definition over the view's.
        Access xa{0, {}};
        std::vector<int64_t> x_shape;
        for (int v : conv.x.vars) {
            int64_t size = 0;
            xa.index.push_back(x_index(conv, v, size));
            x_shape.push_back(size);
        }
        return assemble([&] { return conv_computation(conv, name, xa, x_shape); },
                        std::move(nests));
    }

    /// The graph's nodes are the conv2d's, in order, connected as it connects them.
    void check_conv_graph() const {
        if (nodes_.size() != 6 || nodes_[0].op != kRead || nodes_[1].op != kView ||
            nodes_[2].op != kRead || nodes_[3].op != kMul || nodes_[4].op != kAdd ||
            nodes_[5].op != kWrite)
            fail(0,
                 "unsupported: a graph with a view node must be LoopTune's conv2d (read, view, "
                 "read, "
                 "multiply, add, write)");
        const LtNode &view = nodes_[1], &mul = nodes_[3], &add = nodes_[4], &wr = nodes_[5];
        if (view.inputs != std::vector<int>{0} || mul.inputs != std::vector<int>{1, 2} ||
            add.inputs != std::vector<int>{3} || wr.inputs != std::vector<int>{4} ||
            wr.vars != add.vars || inputs_ != std::vector<int>{0, 2} ||
            outputs_ != std::vector<int>{5})
            fail(0, "unsupported: the graph is not a conv2d Y = sum view(X) * W");
    }

    /// The multiply's variables are distinct identifiers, and every other node's are among them.
    void check_conv_vars(const Conv &conv) const {
        const std::vector<int> &ours = conv.ours;
        // Our text format names variables with identifiers; so must an import, to round-trip.
        for (int v : ours) {
            const std::string &vn = var_names_[size_t(v)];
            if (vn.empty() || std::isdigit((unsigned char)vn[0]) ||
                !std::all_of(vn.begin(), vn.end(),
                             [](char ch) { return std::isalnum((unsigned char)ch) || ch == '_'; }))
                fail(0, fmt::format("variable name '{}' is not an identifier", vn));
        }
        for (size_t i = 0; i < ours.size(); ++i)
            for (size_t j = 0; j < i; ++j)
                if (var_names_[size_t(ours[i])] == var_names_[size_t(ours[j])])
                    fail(0, fmt::format("two variables of the multiply are both named '{}'",
                                        var_names_[size_t(ours[i])]));
        for (int v : conv.view.vars)
            if (!contains(ours, v))
                fail(conv.view.line, "unsupported: the view has a variable the multiply lacks");
        for (const auto *n : {&conv.w, &conv.add})
            for (int v : n->vars)
                if (!contains(ours, v)) fail(n->line, "unsupported: a variable the multiply lacks");
    }

    /// X's index in its dimension over loop_tool variable `v`, over our vars, and in `size` the
    /// dimension's size: the view's declared size, else the largest index reached plus one.
    Affine x_index(const Conv &conv, int v, int64_t &size) const {
        const LtNode &view = conv.view;
        Affine a;
        if (contains(view.vars, v)) {
            a = Affine::of_var(v);
        } else if (auto d = conv.vc.definition_over(v, view.vars)) {
            a = *d;
        } else {
            fail(view.line, fmt::format("the view does not define {} in terms of its variables",
                                        var_names_[size_t(v)]));
        }
        // Largest index reached (coefficients may be negative), so the size it needs.
        int64_t hi = a.offset, lo = a.offset;
        if (std::abs(a.offset) > kMaxExtent)
            fail(view.line, fmt::format("the view's offset {} is out of range", a.offset));
        for (auto &t : a.terms) {
            if (t.coef == 0 || std::abs(t.coef) > kMaxExtent)
                fail(view.line, fmt::format("the view's coefficient {} is out of range", t.coef));
            const int64_t span = t.coef * (conv.ext[size_t(index_in(conv.ours, t.var))] - 1);
            (span > 0 ? hi : lo) += span;
            t.var = index_in(conv.ours, t.var);
        }
        if (lo < 0)
            fail(view.line, fmt::format("the view reads {} below 0", var_names_[size_t(v)]));
        size = hi + 1;
        if (auto it = conv.vc.sizes.find(v); it != conv.vc.sizes.end()) {
            if (it->second < size)
                fail(view.line, fmt::format("the view reads {} up to {}, beyond its size {}",
                                            var_names_[size_t(v)], hi, it->second));
            size = it->second;
        }
        // Terms in variable order, as our own constructors write them (make_conv2d).
        std::sort(a.terms.begin(), a.terms.end(),
                  [](const Affine::Term &x, const Affine::Term &y) { return x.var < y.var; });
        return a;
    }

    /// The conv's computation: T = sum X[xa] * W, then Y = T.
    ComputationPtr conv_computation(const Conv &conv, const std::string &name, const Access &xa,
                                    const std::vector<int64_t> &x_shape) const {
        auto direct = [&](const std::vector<int> &vars) {
            std::vector<Affine> index;
            for (int v : vars) index.push_back(Affine::of_var(index_in(conv.ours, v)));
            return index;
        };
        auto shape_of = [&](const std::vector<int> &vars) {
            std::vector<int64_t> shape;
            for (int v : vars) shape.push_back(conv.ext[size_t(index_in(conv.ours, v))]);
            return shape;
        };
        auto c = std::make_shared<Computation>();
        c->name = name;
        for (size_t i = 0; i < conv.ours.size(); ++i)
            c->vars.push_back({var_names_[size_t(conv.ours[i])], conv.ext[i]});
        c->tensors = {{"X", x_shape, TensorKind::Input},
                      {"W", shape_of(conv.w.vars), TensorKind::Input},
                      {"T", shape_of(conv.add.vars), TensorKind::Temp},
                      {"Y", shape_of(conv.wr.vars), TensorKind::Output}};
        Access wa{1, direct(conv.w.vars)}, ta{2, direct(conv.add.vars)},
            ya{3, direct(conv.wr.vars)};
        c->stmts.push_back(
            {ta, ReduceKind::Sum, Expr::binary(OpKind::Mul, Expr::read(xa), Expr::read(wa))});
        c->stmts.push_back({ya, ReduceKind::None, Expr::read(ta)});
        c->validate();
        return c;
    }

    /// The program of the computation `make()` builds, scheduled as `nests` with the cursor on
    /// the first loop; an Error either raises is reported as this file's.
    template <class Make>
    Program assemble(Make make, std::vector<Nest> nests) const {
        Program p;
        try {
            p.comp = make();
            p.tree.nests = std::move(nests);
            validate_loop_tree(*p.comp, p.tree);
        } catch (const Error &e) {
            fail(0, e.what());
        }
        p.cursor = 0;
        return p;
    }

    std::string_view text_;
    std::string source_;
    std::vector<std::string> var_names_;
    std::vector<LtNode> nodes_;
    std::vector<int> inputs_, outputs_;
    bool have_inputs_ = false, have_outputs_ = false;
};

}  // namespace

Program import_loop_tool(std::string_view text, const std::string &source) {
    return Importer(text, source).run();
}

}  // namespace looptool
