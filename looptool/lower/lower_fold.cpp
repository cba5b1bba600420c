#include "looptool/lower/lower_fold.h"

#include "looptool/actions/action_pack.h"

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

// The deepest of the first `shared` loops that walks var, or -1.
int deepest_shared(const Nest &n, int var, int shared) {
    int at = -1;
    for (int d = 0; d < shared; ++d)
        if (n.loops[size_t(d)].var == var) at = d;
    return at;
}

// Whether one of the first `shared` loops walks var in more than one iteration.
bool moved_by_shared(const Nest &n, int var, int shared) {
    for (int d = 0; d < shared; ++d) {
        const Loop &l = n.loops[size_t(d)];
        if (l.var == var && l.size + (l.tail > 0) > 1) return true;
    }
    return false;
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

FoldedScratch fold_scratch(Computation &c, const LoopTree &tree) {
    FoldedScratch out;
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
            Tensor &p = c.tensors[size_t(t)];
            std::vector<bool> fold(p.shape.size(), false);
            std::vector<int64_t> block = p.shape;  // per dimension: its extent once rebased
            std::vector<std::string> names, rebased;
            for (size_t j = 0; j < p.shape.size(); ++j) {
                const Affine &f = acc[0]->index[j];
                if (f.terms.size() != 1 || f.terms[0].coef != 1 || f.offset != 0) continue;
                const int var = f.terms[0].var;
                bool same = true;  // every access indexes dimension j by var alone
                for (const Access *a : acc) same &= a->index[j] == f;
                if (!same) continue;
                const std::string &name = c.vars[size_t(var)].name;
                if (walks_only_above(copy, var, copy.shared) &&
                    walks_only_above(user, var, copy.shared)) {
                    fold[j] = true;
                    names.push_back(name);
                    continue;
                }
                // Walked in blocks above and within the block below, in both nests (the
                // shared loops are the same in both).
                const int d = deepest_shared(copy, var, copy.shared);
                if (d < 0) continue;
                int64_t extent = inner_coverage(copy, d);
                const bool padded =
                    j + 1 == p.shape.size() && p.shape[j] > c.vars[size_t(var)].extent;
                if (padded) extent = padded_row(extent);
                if (extent >= p.shape[j]) continue;
                block[j] = extent;
                rebased.push_back(name);
            }
            // The emission restarts a rebased tensor's pointer where the shared loops end, which
            // drops what every shared loop added to it: each other dimension must then be one
            // the shared loops do not move (folded dimensions are gone).
            bool others_stay = true;
            for (size_t j = 0; j < block.size(); ++j)
                if (!fold[j] && block[j] == p.shape[j])
                    for (const Access *a : acc)
                        for (const auto &term : a->index[j].terms)
                            others_stay &= !moved_by_shared(copy, term.var, copy.shared);
            if (!others_stay) {
                rebased.clear();
                block = p.shape;
            }
            if (names.empty() && rebased.empty()) continue;
            std::vector<int64_t> shape;
            for (size_t j = 0; j < fold.size(); ++j)
                if (!fold[j]) shape.push_back(block[j]);
            p.shape = shape;
            for (Access *a : acc) {
                std::vector<Affine> index;
                for (size_t j = 0; j < fold.size(); ++j)
                    if (!fold[j]) index.push_back(a->index[j]);
                a->index = index;
            }
            if (!rebased.empty()) {
                names.push_back(fmt::format("{} from the block's start", fmt::join(rebased, ", ")));
                out.block_relative.push_back(t);
            }
            out.log.push_back(fmt::format("{}: {}", p.name, fmt::join(names, ", ")));
        }
    }
    return out;
}

}  // namespace looptool::detail
