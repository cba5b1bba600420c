#include "looptool/lower/lower_fuse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

namespace looptool::detail {
namespace {

bool plain(const Loop &l) { return !l.unroll && !l.vectorize && !l.parallel; }

// Every access to tensor t by the statements of nests [a, b), writes and reads.
std::vector<Access *> accesses_in(Computation &c, const LoopTree &t, size_t a, size_t b, int ten) {
    std::vector<Access *> out;
    std::function<void(Expr &)> walk = [&](Expr &e) {
        if (e.op == OpKind::Read && e.access.tensor == ten) out.push_back(&e.access);
        for (Expr &x : e.args) walk(x);
    };
    for (size_t n = a; n < b; ++n)
        for (int s : t.nests[n].stmts) {
            Statement &st = c.stmts[size_t(s)];
            if (st.out.tensor == ten) out.push_back(&st.out);
            walk(st.value);
        }
    return out;
}

bool touches(const Statement &s, int t) { return s.out.tensor == t || reads_tensor(s, t); }

// The nests of [a, b) whose statements touch tensor t.
int nests_touching(const Computation &c, const LoopTree &t, size_t a, size_t b, int ten) {
    int n = 0;
    for (size_t i = a; i < b; ++i) {
        bool any = false;
        for (int s : t.nests[i].stmts) any |= touches(c.stmts[size_t(s)], ten);
        n += any;
    }
    return n;
}

// The dimension of `a` indexed by var alone (one term), or -1.
int own_dim(const Access &a, int var) {
    for (size_t d = 0; d < a.index.size(); ++d)
        if (a.index[d].terms.size() == 1 && a.index[d].terms[0].var == var &&
            a.index[d].terms[0].coef != 0)
            return int(d);
    return -1;
}

// Whether nests [a, b) may run their first k loops once: every statement's output is indexed
// by each of those loops' variables, and every tensor written in the run and touched by two of
// its nests is, in each access of the run, indexed by each such variable alone in one
// dimension, the same in all of them.
bool legal_run(Computation &c, const LoopTree &t, size_t a, size_t b, size_t k) {
    std::set<int> vars, written;
    for (size_t d = 0; d < k; ++d) vars.insert(t.nests[a].loops[d].var);
    for (size_t n = a; n < b; ++n)
        for (int s : t.nests[n].stmts) {
            const std::vector<int> outv = vars_of(c.stmts[size_t(s)].out);
            for (int v : vars)
                if (std::find(outv.begin(), outv.end(), v) == outv.end()) return false;
            written.insert(c.stmts[size_t(s)].out.tensor);
        }
    for (int ten : written) {
        if (nests_touching(c, t, a, b, ten) < 2) continue;
        const std::vector<Access *> acc = accesses_in(c, t, a, b, ten);
        for (int v : vars) {
            const int d = own_dim(*acc[0], v);
            if (d < 0) return false;
            for (const Access *x : acc)
                if (own_dim(*x, v) != d || !(x->index[size_t(d)] == acc[0]->index[size_t(d)]))
                    return false;
        }
    }
    return true;
}

// The loops nests a and b both start with, plain and equal, at most `limit` of them.
size_t common_prefix(const LoopTree &t, size_t a, size_t b, size_t limit) {
    const Nest &x = t.nests[a], &y = t.nests[b];
    size_t k = 0;
    while (k < limit && k < x.loops.size() && k < y.loops.size() && plain(x.loops[k]) &&
           x.loops[k] == y.loops[k] && inner_coverage(x, int(k)) == inner_coverage(y, int(k)))
        ++k;
    return k;
}

bool walks_only_prefix(const Nest &n, int var, size_t k) {
    for (size_t d = k; d < n.loops.size(); ++d)
        if (n.loops[d].var == var) return false;
    return true;
}

// Folds the temporaries only nests [a, b) touch (lower_fuse.h); their names, for the log.
std::vector<std::string> fold_temps(Computation &c, const LoopTree &t, size_t a, size_t b, size_t k,
                                    std::vector<int> &owned) {
    std::vector<std::string> names;
    for (size_t ten = 0; ten < c.tensors.size(); ++ten) {
        Tensor &tt = c.tensors[ten];
        if (tt.kind != TensorKind::Temp || c.reduction_into(int(ten)) != ReduceKind::None) continue;
        if (nests_touching(c, t, 0, t.nests.size(), int(ten)) !=
            nests_touching(c, t, a, b, int(ten)))
            continue;
        std::vector<Access *> acc = accesses_in(c, t, a, b, int(ten));
        if (acc.empty()) continue;
        std::vector<std::string> dims;
        for (size_t d = 0; d < tt.shape.size(); ++d) {
            const Affine &f = acc[0]->index[d];
            if (f.terms.size() != 1 || f.terms[0].coef != 1 || f.offset != 0) continue;
            const int v = f.terms[0].var;
            bool ok = false;
            for (size_t e = 0; e < k; ++e) ok |= t.nests[a].loops[e].var == v;
            for (const Access *x : acc) ok &= x->index[d] == f;
            for (size_t n = a; n < b; ++n) ok &= walks_only_prefix(t.nests[n], v, k);
            if (!ok) continue;
            // One slice: the dimension keeps extent 1, indexed by 0.
            tt.shape[d] = 1;
            for (Access *x : acc) x->index[d] = Affine{};
            dims.push_back(c.vars[size_t(v)].name);
        }
        if (dims.empty()) continue;
        owned.push_back(int(ten));
        names.push_back(fmt::format("{}: {}", tt.name, fmt::join(dims, ", ")));
    }
    return names;
}

}  // namespace

FusedRows fuse_rows(Computation &c, LoopTree &tree) {
    FusedRows out;
    const size_t n = tree.nests.size();
    auto free_nest = [&](size_t i) {
        return tree.nests[i].shared == 0 && (i == 0 || tree.nests[i - 1].shared == 0);
    };
    for (size_t a = 0; a + 1 < n;) {
        if (!free_nest(a) || !free_nest(a + 1)) {
            ++a;
            continue;
        }
        size_t k = common_prefix(tree, a, a + 1, tree.nests[a].loops.size());
        while (k > 0 && !legal_run(c, tree, a, a + 2, k)) --k;
        if (k == 0) {
            ++a;
            continue;
        }
        size_t b = a + 2;
        while (b < n && free_nest(b) && common_prefix(tree, a, b, k) == k &&
               legal_run(c, tree, a, b + 1, k))
            ++b;
        for (size_t i = a; i + 1 < b; ++i) tree.nests[i].shared = int(k);
        std::vector<std::string> vars;
        for (size_t d = 0; d < k; ++d)
            vars.push_back(c.vars[size_t(tree.nests[a].loops[d].var)].name);
        std::string line = fmt::format("nests {}-{} share {}", a, b - 1, fmt::join(vars, ", "));
        for (const std::string &f : fold_temps(c, tree, a, b, k, out.kernel_owned))
            line += "; " + f;
        out.log.push_back(line);
        a = b;
    }
    return out;
}

}  // namespace looptool::detail
