#include "looptool/actions/action_fuse.h"

#include <algorithm>
#include <functional>
#include <memory>

namespace looptool::detail {

namespace {

/// The variable of each dimension of `a` when every dimension is one variable, coefficient 1, no
/// offset, each variable once; false otherwise.
bool one_var_per_dim(const Access &a, std::vector<int> &vars) {
    vars.clear();
    for (const Affine &f : a.index) {
        if (f.offset != 0 || f.terms.size() != 1 || f.terms[0].coef != 1) return false;
        if (std::find(vars.begin(), vars.end(), f.terms[0].var) != vars.end()) return false;
        vars.push_back(f.terms[0].var);
    }
    return true;
}

bool contains(const std::vector<int> &v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

Access renamed(const Access &a, const std::vector<int> &rename) {
    Access r = a;
    for (Affine &f : r.index)
        for (Affine::Term &t : f.terms) t.var = rename[size_t(t.var)];
    return r;
}

Expr renamed(const Expr &e, const std::vector<int> &rename) {
    Expr r = e;
    if (e.op == OpKind::Read) r.access = renamed(e.access, rename);
    for (Expr &arg : r.args) arg = renamed(arg, rename);
    return r;
}

/// The consumer's statements, checked: `=` only, T read at one index, the one the producer
/// writes or (`renamable`) one of one variable per dimension (its variables returned in `cv`),
/// which is also the element each statement writes;
/// a tensor the consumer writes is neither T nor read by the producer, and the consumer reads it
/// only at that element.
const char *check_consumer(const Computation &c, const Nest &cons, const Statement &ps,
                           bool renamable, std::vector<int> &cv) {
    const int t = ps.out.tensor;
    const Access *first = nullptr;
    for (int s : cons.stmts) {
        const Statement &st = c.stmts[size_t(s)];
        if (st.reduce != ReduceKind::None)
            return "the next nest reduces (only elementwise statements move)";
        std::vector<const Access *> reads;
        collect_reads(st.value, reads);
        for (const Access *r : reads) {
            if (r->tensor != t) continue;
            if (!first) first = r;
            if (!(r->index == first->index)) return "the next nest reads the output at two indices";
        }
    }
    if (!first) return "the next nest does not read this nest's output";
    if (first->index == ps.out.index)
        cv = vars_of(ps.out);  // the element written, no renaming
    else if (!renamable || !one_var_per_dim(*first, cv))
        return "the next nest reads the output other than at one variable per dimension";
    for (int s : cons.stmts) {
        const Statement &st = c.stmts[size_t(s)];
        for (int v : c.stmt_vars(s))
            if (!contains(cv, v))
                return "the next nest loops over a variable the output does not use";
        if (!(st.out.index == first->index))
            return "the next nest writes another element than the one it reads";
        const int w = st.out.tensor;
        if (w == t) return "the next nest writes this nest's output";
        if (reads_tensor(ps, w)) return "the next nest writes a tensor this nest reads";
        for (int s2 : cons.stmts) {
            std::vector<const Access *> reads;
            collect_reads(c.stmts[size_t(s2)].value, reads);
            for (const Access *r : reads)
                if (r->tensor == w && !(r->index == st.out.index))
                    return "the next nest reads a tensor it writes at another element";
        }
    }
    return nullptr;
}

/// The consumer's loops: the producer's loops 0..depth, then its loops below over T's variables
/// `tv` in their order (the reduction loops left out), or one loop of a single iteration when
/// none is left (a nest keeps one loop of its own). Only the innermost stays vectorized.
Nest consumer_nest(const Nest &prod, int depth, const std::vector<int> &tv,
                   const std::vector<int> &stmts) {
    Nest n;
    n.stmts = stmts;
    for (size_t d = 0; d < prod.loops.size(); ++d)
        if (int(d) <= depth || contains(tv, prod.loops[d].var)) n.loops.push_back(prod.loops[d]);
    if (int(n.loops.size()) == depth + 1)
        n.loops.push_back(Loop{prod.loops[size_t(depth)].var, 1, 0, false, false, false});
    for (size_t d = 0; d + 1 < n.loops.size(); ++d) n.loops[d].vectorize = false;
    return n;
}

/// `flatten` and `pack` rewrite the computation's variables before any parallel mark. `pack`
/// keeps a fused pair's shared loops alike (a cut applies to every nest), so it may pack the
/// producer of a fused pair, not its epilogue (its copy would come between the two); one packed
/// block at a time. `flatten` comes before `fuse` and `pack`'s blocks.
const char *layout_rule(const Computation &c, const LoopTree &t, int before, Action a) {
    if (a == Action::Pack && before > 0) return "the nest shares loops with the nest before it";
    for (size_t n = 0; n < t.nests.size(); ++n) {
        if (t.nests[n].shared > 0 && is_block_copy(c, t, int(n)))
            return "the program has a packed block already";
        if (t.nests[n].shared > 0 && a == Action::Flatten)
            return "the program has a fused nest (flatten comes before fuse)";
        if (t.nests[n].loops[0].parallel) return "the program has a parallel loop already";
    }
    return nullptr;
}

}  // namespace

const char *fuse_plan(const Program &p, int ni, int depth, FusePlan &plan) {
    const Computation &c = *p.comp;
    const LoopTree &t = p.tree;
    const Nest &prod = t.nests[size_t(ni)];
    // A packed block's copy before it may share its loops (a chain, attached_nests()).
    if (prod.shared > 0 ||
        (ni > 0 && t.nests[size_t(ni - 1)].shared > 0 && !is_block_copy(c, t, ni - 1)))
        return "the nest shares loops with another nest already";
    if (size_t(ni) + 1 >= t.nests.size()) return "no nest follows this one";
    const Nest &cons = t.nests[size_t(ni) + 1];
    if (cons.shared > 0) return "the next nest shares loops with another nest already";
    if (prod.stmts.size() != 1) return "the nest has more than one statement";
    const Statement &ps = c.stmts[size_t(prod.stmts[0])];
    std::vector<int> tv, cv;
    // One variable per dimension, or a variable `pack` cut in two (T[m, 64 n_o + n_i]).
    const bool renamable = one_var_per_dim(ps.out, tv) && is_identity_cover(c, ps.out);
    if (!renamable && !is_exact_cover(c, ps.out))
        return "the nest does not write its whole output at one variable per dimension";
    if (!renamable) tv = vars_of(ps.out);
    for (int d = 0; d <= depth; ++d)
        if (!contains(tv, prod.loops[size_t(d)].var))
            return "a loop at or above the cursor is over a reduction variable (the reduction "
                   "is not complete there)";
    if (depth + 1 >= int(prod.loops.size()))
        return "the cursor is on the innermost loop (the nest would keep no loop of its own)";
    if (prod.loops[0].parallel) return "the nest is parallel (fuse before parallel)";
    if (const char *why = check_consumer(c, cons, ps, renamable, cv)) return why;

    plan = {ni, depth, {}, false, consumer_nest(prod, depth, tv, cons.stmts)};
    plan.rename.resize(c.vars.size());
    for (size_t v = 0; v < c.vars.size(); ++v) plan.rename[v] = int(v);
    for (size_t i = 0; i < cv.size(); ++i) {
        plan.rename[size_t(cv[i])] = tv[i];
        plan.renamed = plan.renamed || cv[i] != tv[i];
    }
    return nullptr;
}

/// True when nest `ni` shares loops with the next because `pack` made it the copy of a block
/// (it writes a scratch tensor), not because `fuse` moved the next nest inside its loops.
bool is_block_copy(const Computation &c, const LoopTree &t, int ni) {
    const Nest &n = t.nests[size_t(ni)];
    return n.shared > 0 &&
           c.tensors[size_t(c.stmts[size_t(n.stmts[0])].out.tensor)].kind == TensorKind::Scratch;
}

/// A packed block's copy nest and the loops it shares with its user (Nest::shared) stay as
/// `pack` made them: a change to one side only would copy a block the other does not read. The
/// loops a fused producer shares with its epilogue stay as `fuse` made them; the loops below
/// them, each nest's own, may change. `fuse` and `pack` leave the loops as they are (they only
/// add a nest that shares them, or cut a variable in every nest alike): their own plans decide.
const char *shared_loops_rule(const Computation &c, const LoopTree &t, LoopTree::Pos pos,
                              Action a) {
    if (a == Action::Up || a == Action::Down) return nullptr;
    const Nest &nest = t.nests[size_t(pos.nest)];
    const Loop &cur = nest.loops[size_t(pos.depth)];
    if (is_block_copy(c, t, pos.nest)) return "the loop belongs to the copy nest of a packed block";
    const int before = pos.nest > 0 ? t.nests[size_t(pos.nest - 1)].shared : 0;
    if (a == Action::Fuse) return nullptr;
    if (a == Action::Flatten || a == Action::Pack) return layout_rule(c, t, before, a);
    const int shared = std::max(nest.shared, before);
    const char *why = pos.depth < before && is_block_copy(c, t, pos.nest - 1)
                          ? "the loop is shared with the copy nest of a packed block"
                          : "the loop is shared with a fused nest";
    if (pos.depth < shared || (shared > 0 && a == Action::SwapUp && pos.depth == shared))
        return why;
    if (a == Action::Merge)
        for (int d = pos.depth - 1; d >= 0; --d)
            if (nest.loops[size_t(d)].var == cur.var) {
                if (d < shared) return why;
                break;
            }
    return nullptr;
}

Program apply_fuse(const Program &p, const FusePlan &plan) {
    Program r = p;
    if (plan.renamed) {
        Computation q = *p.comp;
        for (int s : plan.consumer.stmts) {
            Statement &st = q.stmts[size_t(s)];
            st.out = renamed(st.out, plan.rename);
            st.value = renamed(st.value, plan.rename);
        }
        q.validate();
        r.comp = std::make_shared<const Computation>(std::move(q));
    }
    r.tree.nests[size_t(plan.nest)].shared = plan.depth + 1;
    r.tree.nests[size_t(plan.nest) + 1] = plan.consumer;
    validate_loop_tree(*r.comp, r.tree);
    return r;
}

}  // namespace looptool::detail
