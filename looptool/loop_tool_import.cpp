#include "looptool/loop_tool_import.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "looptool/error.h"

namespace looptool {

namespace {

// loop_tool's op codes (README of the corpus).
enum LtOp { kConstant = 0, kWrite = 1, kRead = 2, kView = 3, kMul = 7, kAdd = 5 };

struct LtLoop {
    int var;
    int64_t size, tail;
};

struct LtNode {
    int op = -1;
    std::vector<int> inputs, vars;
    std::vector<LtLoop> order;
    std::vector<std::string> loop_annotations;
    int line = 0;
};

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : s) {
        if (ch == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += ch;
        }
    }
    out.push_back(cur);
    return out;
}

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
        for (const auto &p : split(s, ',')) {
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
        if (!have_inputs_ || !have_outputs_)
            fail(0, "truncated: missing the 'i:' or 'o:' line");
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
             fmt::format("the node graph has a cycle through node {} (its inputs lead back to it)", at));
    }

    LtNode parse_node(const std::string &line, int lineno) const {
        // n:op:inputs,:vars,:constraints:sym=var,:priority:var;size;tail,...:noreuse,:annots:annot:
        auto f = split(line, ':');
        if (f.size() < 8) fail(lineno, "node line has too few ':' fields");
        LtNode n;
        n.line = lineno;
        n.op = int(to_int(f[1], lineno, "op code"));
        if (n.op < 0 || n.op > 17) fail(lineno, fmt::format("unknown op code {}", n.op));
        n.inputs = int_list(f[2], lineno, "input id");
        n.vars = int_list(f[3], lineno, "variable id");
        for (const auto &item : split(f[7], ',')) {
            if (item.empty()) continue;
            auto parts = split(item, ';');
            if (parts.size() != 3) fail(lineno, fmt::format("bad loop '{}' (want var;size;tail)", item));
            LtLoop l{int(to_int(parts[0], lineno, "loop variable")),
                     to_int(parts[1], lineno, "loop size"), to_int(parts[2], lineno, "loop tail")};
            if (l.size < 1 || l.tail < 0 || l.size > kMaxExtent || l.tail > kMaxExtent)
                fail(lineno, fmt::format("bad loop size {} / tail {}", l.size, l.tail));
            n.order.push_back(l);
        }
        // One entry per loop, by position (",unroll,," annotates the second loop).
        if (f.size() > 9) n.loop_annotations = split(f[9], ',');
        return n;
    }

    Program build() {
        std::string name = std::filesystem::path(source_).filename().string();
        for (const auto &n : nodes_)
            if (n.op == kView)
                fail(0, "unsupported: view nodes (conv2d) cannot be imported yet");
        // Supported graph: the matmul as LoopTune writes it:
        //   a = read; b = read; p = multiply(a, b) over m,k,n; s = add(p) over m,n; write(s).
        if (nodes_.size() != 5 || nodes_[0].op != kRead || nodes_[1].op != kRead ||
            nodes_[2].op != kMul || nodes_[3].op != kAdd || nodes_[4].op != kWrite)
            fail(0, "unsupported: only LoopTune's matmul graph (read, read, multiply, add, write) "
                    "is supported");
        const LtNode &a = nodes_[0], &b = nodes_[1], &mul = nodes_[2], &add = nodes_[3],
                     &wr = nodes_[4];
        if (a.vars.size() != 2 || b.vars.size() != 2 || a.vars[1] != b.vars[0] ||
            !a.inputs.empty() || !b.inputs.empty() ||
            mul.inputs != std::vector<int>{0, 1} || add.inputs != std::vector<int>{2} ||
            wr.inputs != std::vector<int>{3} || add.vars != std::vector<int>{a.vars[0], b.vars[1]} ||
            wr.vars != add.vars || outputs_ != std::vector<int>{4} ||
            inputs_ != std::vector<int>{0, 1})
            fail(0, "unsupported: the graph is not a matmul C[m,n] = sum_k A[m,k] * B[k,n]");
        const int fm = a.vars[0], fk = a.vars[1], fn = b.vars[1];
        if (mul.order.empty() || wr.order.empty())
            fail(mul.order.empty() ? mul.line : wr.line, "node has no loop order");
        // Our matmul declares vars m, k, n (ids 0, 1, 2).
        auto our_var = [&](int fv, int line) {
            if (fv == fm) return 0;
            if (fv == fk) return 1;
            if (fv == fn) return 2;
            fail(line, fmt::format("loop over unexpected variable {}", var_names_[size_t(fv)]));
        };
        auto to_nest = [&](const LtNode &node, int stmt) {
            Nest nest;
            nest.stmts = {stmt};
            for (size_t i = 0; i < node.order.size(); ++i) {
                Loop l{our_var(node.order[i].var, node.line), node.order[i].size, node.order[i].tail};
                if (i < node.loop_annotations.size()) {
                    const auto &an = node.loop_annotations[i];
                    if (an == "unroll") l.unroll = true;
                    else if (an == "vectorize") l.vectorize = true;
                    else if (!an.empty())
                        fail(node.line, fmt::format("unsupported loop annotation '{}'", an));
                }
                nest.loops.push_back(l);
            }
            return nest;
        };
        Nest compute = to_nest(mul, 0), write = to_nest(wr, 1);
        if (!add.order.empty() && to_nest(add, 0).loops != compute.loops)
            fail(add.line, "unsupported: the add node is scheduled apart from the multiply");
        // Bound the coverages innermost first so that none overflows int64.
        for (size_t d = compute.loops.size(); d-- > 0;)
            if (coverage(compute, int(d)) > kMaxExtent)
                fail(mul.line, fmt::format("loop {} covers more than {} elements", d, kMaxExtent));
        // Extents: coverage of the outermost loop of each var.
        int64_t ext[3] = {0, 0, 0};
        for (size_t d = 0; d < compute.loops.size(); ++d) {
            int v = compute.loops[d].var;
            if (ext[v] == 0) ext[v] = coverage(compute, int(d));
        }
        for (int v = 0; v < 3; ++v)
            if (ext[v] == 0)
                fail(mul.line, fmt::format("the multiply does not loop over {}",
                                           v == 0 ? "m" : v == 1 ? "k" : "n"));
        Program p;
        try {
            p.comp = std::make_shared<Computation>(make_matmul(ext[0], ext[2], ext[1], name));
            p.tree.nests = {compute, write};
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
