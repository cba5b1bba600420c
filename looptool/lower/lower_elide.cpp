#include "looptool/lower/lower_elide.h"

#include <algorithm>
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

namespace {
Expr with_tensor(const Expr &e, int from, int to) {
    Expr r = e;
    if (e.op == OpKind::Read && e.access.tensor == from) r.access.tensor = to;
    for (Expr &arg : r.args) arg = with_tensor(arg, from, to);
    return r;
}
}  // namespace

// The epilogue then reads what the producer's register tile has just stored, which LLVM forwards
// from the stores, and the store it overwrites is dead: the epilogue runs on the tile.
void elide_fused_temps(ElidedProgram &r) {
    Computation &c = r.comp;
    for (size_t n = 0; n + 1 < r.tree.nests.size(); ++n) {
        const Nest &prod = r.tree.nests[n], &cons = r.tree.nests[n + 1];
        if (prod.shared == 0 || prod.stmts.size() != 1) continue;
        Statement &s0 = c.stmts[size_t(prod.stmts[0])];
        const int t = s0.out.tensor;
        if (c.tensors[size_t(t)].kind != TensorKind::Temp) continue;
        // Each shared loop walks T's elements: the epilogue then runs once per element, after
        // its reduction (a file may share loops the statements do not use, repeating them).
        const std::vector<int> tv = vars_of(s0.out);
        bool blocks = true;
        for (int d = 0; d < prod.shared; ++d)
            blocks =
                blocks && std::find(tv.begin(), tv.end(), prod.loops[size_t(d)].var) != tv.end();
        if (!blocks) continue;
        std::vector<int> writers_t, readers_t;
        for (size_t s = 0; s < c.stmts.size(); ++s) {
            if (c.stmts[s].out.tensor == t) writers_t.push_back(int(s));
            if (reads_tensor(c.stmts[s], t)) readers_t.push_back(int(s));
        }
        if (writers_t.size() != 1 || readers_t.size() != 1) continue;
        const auto at = std::find(cons.stmts.begin(), cons.stmts.end(), readers_t[0]);
        if (at == cons.stmts.end()) continue;
        Statement &s1 = c.stmts[size_t(*at)];
        const int out = s1.out.tensor;
        if (c.tensors[size_t(out)].shape != c.tensors[size_t(t)].shape ||
            !(s1.out.index == s0.out.index))
            continue;
        bool alone = true;  // C: written by s1 only, read only after it in this nest
        for (size_t s = 0; s < c.stmts.size(); ++s) {
            if (int(s) == *at) continue;
            const auto pos = std::find(cons.stmts.begin(), cons.stmts.end(), int(s));
            alone = alone && c.stmts[s].out.tensor != out &&
                    (!reads_tensor(c.stmts[s], out) || pos > at);
        }
        if (!alone) continue;
        s0.out.tensor = out;
        s1.value = with_tensor(s1.value, t, out);
        r.elided = true;
    }
}

}  // namespace looptool::detail
