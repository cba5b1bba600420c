#include "looptool/lower_fold.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

namespace looptool::detail {
namespace {

bool walks_only_above(const Nest &n, int var, int shared) {
    for (size_t d = size_t(shared); d < n.loops.size(); ++d)
        if (n.loops[d].var == var) return false;
    return true;
}

// Every access to tensor t in c, writes and reads.
std::vector<Access *> accesses_of(Computation &c, int t) {
    std::vector<Access *> out;
    std::function<void(Expr &)> walk = [&](Expr &e) {
        if (e.op == OpKind::Read && e.access.tensor == t) out.push_back(&e.access);
        for (Expr &a : e.args) walk(a);
    };
    for (Statement &s : c.stmts) {
        if (s.out.tensor == t) out.push_back(&s.out);
        walk(s.value);
    }
    return out;
}

bool touches(const Statement &s, int t) { return s.out.tensor == t || reads_tensor(s, t); }

}  // namespace

std::vector<std::string> fold_scratch(Computation &c, const LoopTree &tree) {
    std::vector<std::string> log;
    for (size_t ni = 0; ni + 1 < tree.nests.size(); ++ni) {
        const Nest &copy = tree.nests[ni], &user = tree.nests[ni + 1];
        if (copy.shared == 0) continue;
        for (int s : copy.stmts) {
            const int t = c.stmts[size_t(s)].out.tensor;
            if (c.tensors[size_t(t)].kind != TensorKind::Scratch) continue;
            // Only these two nests may touch P.
            bool elsewhere = false;
            for (size_t nj = 0; nj < tree.nests.size(); ++nj)
                if (nj != ni && nj != ni + 1)
                    for (int o : tree.nests[nj].stmts) elsewhere |= touches(c.stmts[size_t(o)], t);
            if (elsewhere) continue;
            std::vector<Access *> acc = accesses_of(c, t);
            const Tensor &p = c.tensors[size_t(t)];
            std::vector<bool> fold(p.shape.size(), false);
            std::vector<std::string> names;
            for (size_t j = 0; j < p.shape.size(); ++j) {
                const Affine &f = acc[0]->index[j];
                if (f.terms.size() != 1 || f.terms[0].coef != 1 || f.offset != 0) continue;
                const int var = f.terms[0].var;
                bool same = true;  // every access indexes dimension j by var alone
                for (const Access *a : acc) same &= a->index[j] == f;
                if (same && walks_only_above(copy, var, copy.shared) &&
                    walks_only_above(user, var, copy.shared)) {
                    fold[j] = true;
                    names.push_back(c.vars[size_t(var)].name);
                }
            }
            if (names.empty()) continue;
            Tensor &q = c.tensors[size_t(t)];
            std::vector<int64_t> shape;
            for (size_t j = 0; j < fold.size(); ++j)
                if (!fold[j]) shape.push_back(q.shape[j]);
            q.shape = shape;
            for (Access *a : acc) {
                std::vector<Affine> index;
                for (size_t j = 0; j < fold.size(); ++j)
                    if (!fold[j]) index.push_back(a->index[j]);
                a->index = index;
            }
            log.push_back(fmt::format("{}: {}", q.name, fmt::join(names, ", ")));
        }
    }
    return log;
}

}  // namespace looptool::detail
