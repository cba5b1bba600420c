#include "looptool/lower/lower_elide.h"

#include <utility>

namespace looptool::detail {

// Computing straight into C saves a pass over two m*n buffers: a small but consistent gain on
// tiled kernels (docs/decisions.md); the naive nest is unchanged.
ElidedProgram elide_copies(const Computation &comp, const LoopTree &tree) {
    ElidedProgram r{comp, tree, false};
    Computation &c = r.comp;
    const int ns = int(c.stmts.size());
    auto writers = [&](int t) {
        int n = 0;
        for (const auto &s : c.stmts) n += s.out.tensor == t;
        return n;
    };
    auto readers = [&](int t) {
        int n = 0;
        for (const auto &s : c.stmts) n += reads_tensor(s, t);
        return n;
    };
    // Position of a statement in execution order: (nest, slot at the leaf).
    auto where = [&](int s) {
        for (size_t n = 0; n < r.tree.nests.size(); ++n) {
            const auto &st = r.tree.nests[n].stmts;
            for (size_t i = 0; i < st.size(); ++i)
                if (st[i] == s) return std::pair<int, int>(int(n), int(i));
        }
        return std::pair<int, int>(-1, -1);
    };
    for (int s1 = 0; s1 < ns; ++s1) {
        const Statement &copy = c.stmts[size_t(s1)];
        if (copy.reduce != ReduceKind::None || copy.value.op != OpKind::Read) continue;
        const int t = copy.value.access.tensor, out = copy.out.tensor;
        if (t == out || c.tensors[size_t(t)].kind != TensorKind::Temp) continue;
        if (c.tensors[size_t(t)].shape != c.tensors[size_t(out)].shape) continue;
        if (!(copy.value.access.index == copy.out.index) || !is_exact_cover(c, copy.out)) continue;
        if (writers(t) != 1 || readers(t) != 1 || writers(out) != 1 || readers(out) != 0) continue;
        int s0 = -1;
        for (int s = 0; s < ns; ++s)
            if (c.stmts[size_t(s)].out.tensor == t) s0 = s;
        if (reads_tensor(c.stmts[size_t(s0)], t)) continue;
        if (where(s0) >= where(s1)) continue;  // the copy must run after the producer
        if (const int n1 = where(s1).first; n1 > 0 && r.tree.nests[size_t(n1 - 1)].shared)
            continue;  // a packed block's copy runs inside the copy nest's loops
        c.stmts[size_t(s0)].out.tensor = out;
        auto [n, i] = where(s1);
        auto &stmts = r.tree.nests[size_t(n)].stmts;
        stmts.erase(stmts.begin() + i);
        if (stmts.empty()) r.tree.nests.erase(r.tree.nests.begin() + n);
        r.elided = true;
    }
    return r;
}

}  // namespace looptool::detail
