#include "looptool/actions/action_pack.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "looptool/actions/actions.h"
#include "looptool/ir/error.h"

namespace looptool::detail {
namespace {

bool uses_var(const Access &a, int v) {
    const std::vector<int> vars = vars_of(a);
    return std::find(vars.begin(), vars.end(), v) != vars.end();
}

// Whether every loop over u in `n` can be cut at `cut` elements: loops outside the cut walk
// whole multiples of it, and a loop that straddles it walks chunks that divide it.
bool cuts_at(const Nest &n, int u, int64_t cut) {
    for (size_t d = 0; d < n.loops.size(); ++d) {
        if (n.loops[d].var != u) continue;
        const int64_t in = inner_coverage(n, int(d)), cov = coverage(n, int(d));
        if (in >= cut) {
            if (in % cut != 0 || n.loops[d].tail % cut != 0) return false;
        } else if (cov > cut && (cut % in != 0 || cov % cut != 0)) {
            return false;
        }
    }
    return true;
}

// T's variables in its own layout, outermost first: per dimension, by decreasing coefficient
// (A[m, 256*k_o + k_i]: m, k_o, k_i). `a` is an exact cover.
std::vector<int> layout_vars(const Access &a) {
    std::vector<int> vars;
    for (const Affine &f : a.index) {
        std::vector<Affine::Term> terms = f.terms;
        std::sort(terms.begin(), terms.end(),
                  [](const Affine::Term &x, const Affine::Term &y) { return x.coef > y.coef; });
        for (const Affine::Term &t : terms) vars.push_back(t.var);
    }
    return vars;
}

// Whether variable u can be cut at `cut` in every nest, and its pieces named.
bool can_cut(const Program &p, int u, int64_t cut) {
    const Computation &c = *p.comp;
    if (c.vars[size_t(u)].extent % cut != 0) return false;
    for (const Nest &n : p.tree.nests)
        if (!cuts_at(n, u, cut)) return false;
    for (const char *suffix : {"_o", "_i"})
        if (c.var_index(c.vars[size_t(u)].name + suffix) >= 0) return false;
    return true;
}

// P's dimensions (plan.dims) and cuts (plan.cut): the runs of T's variables in the nest's loop
// order, a variable in two runs cut where the second starts. With `at_cursor`, a variable
// walked above the cursor starts a new run at its first loop below it. A variable that cannot
// be cut there (the inner piece does not divide its extent: a tile's tail) is kept whole in
// the place of its inner run instead, so the tile still reads it contiguously (attention's K
// at 197 tokens: [d][j], j's 32-wide tiles and the tail's 5 columns one row of P); its outer
// run then adds nothing to P. nullptr unless a variable is walked in three pieces.
const char *plan_dims(const Program &p, const std::vector<bool> &of_t, bool at_cursor,
                      PackPlan &plan) {
    const Computation &c = *p.comp;
    const Nest &nest = p.tree.nests[size_t(plan.nest)];
    plan.dims.clear();
    plan.cut.assign(c.vars.size(), 0);
    std::vector<int> pieces(c.vars.size(), 0);
    std::vector<bool> above(c.vars.size(), false);
    for (size_t d = 0; d < nest.loops.size(); ++d) {
        const int u = nest.loops[d].var;
        if (!of_t[size_t(u)]) continue;
        const bool new_run = at_cursor && int(d) >= plan.depth && above[size_t(u)];
        above[size_t(u)] = int(d) < plan.depth;  // below: its run there has started
        if (!new_run && !plan.dims.empty() && plan.dims.back().var == u) continue;
        if (++pieces[size_t(u)] > 2)
            return "the nest walks a variable of the input in three pieces";
        if (pieces[size_t(u)] == 2) plan.cut[size_t(u)] = coverage(nest, int(d));
        plan.dims.push_back({u, pieces[size_t(u)] == 2});
    }
    for (size_t u = 0; u < c.vars.size(); ++u) {
        if (plan.cut[u] == 0 || can_cut(p, int(u), plan.cut[u])) continue;
        plan.cut[u] = 0;
        std::erase_if(plan.dims,
                      [&](const PackPlan::Dim &d) { return d.var == int(u) && !d.inner; });
        for (PackPlan::Dim &d : plan.dims) d.inner = d.inner && d.var != int(u);
    }
    return nullptr;
}

// The one input T the nest reads without v, and its one access there (`tensor`, `read`).
const char *find_invariant_read(const Computation &c, const Nest &nest, int v, int &tensor,
                                const Access *&read) {
    tensor = -1;
    read = nullptr;
    for (int s : nest.stmts) {
        std::vector<const Access *> reads;
        collect_reads(c.stmts[size_t(s)].value, reads);
        for (const Access *r : reads) {
            if (c.tensors[size_t(r->tensor)].kind != TensorKind::Input || uses_var(*r, v)) continue;
            if (tensor >= 0 && r->tensor != tensor)
                return "two inputs of the nest are invariant in this loop";
            if (read && !(*read == *r)) return "the invariant input is read two ways";
            tensor = r->tensor;
            read = r;
        }
    }
    if (tensor < 0) return "no input of the nest is invariant in this loop";
    return nullptr;
}

// Block by block when the loops above `depth` walk T in blocks (at least one of them does) and
// T is walked below (else there is no block to copy).
bool walks_in_blocks(const Nest &nest, int depth, const std::vector<bool> &of_t) {
    bool blocks = false, only_t = true, below = false;
    for (int d = 0; d < depth; ++d) {
        const Loop &l = nest.loops[size_t(d)];
        blocks |= of_t[size_t(l.var)] && l.size + (l.tail > 0) > 1;
        only_t &= of_t[size_t(l.var)] || (l.size == 1 && l.tail == 0);
    }
    for (size_t d = size_t(depth); d < nest.loops.size(); ++d)
        below |= of_t[size_t(nest.loops[d].var)];
    return blocks && only_t && below;
}

// Whether P's planned dimensions differ from T's own layout.
bool reorders(const PackPlan &plan, const std::vector<int> &layout) {
    bool reordered = plan.dims.size() != layout.size();
    for (size_t i = 0; i < plan.dims.size() && !reordered; ++i)
        reordered |= plan.dims[i].inner || plan.dims[i].var != layout[i];
    return reordered;
}

// Where T cannot be reordered (`why`): P as T's rows padded to a line, where they do not start
// one (PackPlan::pad), since a 16-float load of a row that is not 64-byte aligned straddles two
// lines (docs/decisions.md). Not rows shorter than two lines (a conv's 3-wide kernel rows would
// grow 5x). nullptr when P is padded; else why not.
const char *plan_padding(const Computation &c, const Tensor &t, const std::vector<int> &layout,
                         const char *why, PackPlan &plan) {
    const int64_t row = t.shape.back();
    if (!is_identity_cover(c, plan.read) || row % kPackRowAlign == 0 || row < 2 * kPackRowAlign)
        return why;
    if (t.num_elements() / row * padded_row(row) > kMaxScratchElements)
        return "the padded copy would exceed the scratch limit (64 MB)";
    plan.pad = true;
    plan.dims.clear();
    for (int u : layout) plan.dims.push_back({u, false});
    plan.cut.assign(c.vars.size(), 0);
    return nullptr;
}

// A reordered P whose last dimension is a whole variable of two lines or more that does not
// fill its last line (a tail kept whole, plan_dims()) gets its rows padded to one
// (PackPlan::pad), so every row of P starts a line, as the tile's vector loads expect.
void pad_reordered(const Computation &c, const Tensor &t, PackPlan &plan) {
    const PackPlan::Dim last = plan.dims.back();
    const int64_t row = c.vars[size_t(last.var)].extent;
    plan.pad = !last.inner && plan.cut[size_t(last.var)] == 0 && row % kPackRowAlign != 0 &&
               row >= 2 * kPackRowAlign &&
               t.num_elements() / row * padded_row(row) <= kMaxScratchElements;
}

}  // namespace

const char *pack_plan(const Program &p, int ni, int depth, PackPlan &plan) {
    const Computation &c = *p.comp;
    const Nest &nest = p.tree.nests[size_t(ni)];
    const int v = nest.loops[size_t(depth)].var;

    int tensor = -1;
    const Access *read = nullptr;
    if (const char *why = find_invariant_read(c, nest, v, tensor, read)) return why;
    // T[i, j, ...], or a dimension in pieces an earlier `pack` cut (A[m, 256*k_o + k_i] once A
    // is packed in k blocks): P's elements are named by variables alone.
    const Tensor &t = c.tensors[size_t(tensor)];
    if (t.num_elements() > kMaxScratchElements)
        return "the packed copy would exceed the scratch limit (64 MB)";
    if (c.tensor_index(t.name + "_packed") >= 0) return "the input is packed already";
    if (!is_exact_cover(c, *read)) {  // a strided read: its subsample, or nothing
        plan = PackPlan{ni, depth, tensor, *read, {}, std::vector<int64_t>(c.vars.size(), 0)};
        return subsample_plan(c, *read, plan);
    }

    std::vector<bool> of_t(c.vars.size(), false);
    const std::vector<int> layout = layout_vars(*read);
    for (int u : layout) of_t[size_t(u)] = true;
    plan = PackPlan{ni, depth, tensor, *read, {}, std::vector<int64_t>(c.vars.size(), 0)};
    plan.in_block = walks_in_blocks(nest, depth, of_t);
    const char *why = plan_dims(p, of_t, false, plan);
    if (!why && !reorders(plan, layout)) why = "the nest already walks the input in its own layout";
    if (why) return plan_padding(c, t, layout, why, plan);
    pad_reordered(c, t, plan);
    // Block by block, a variable walked both above the cursor and below (k in "nkm": k blocks
    // outside, the block's k inside) is cut where the block starts too, so that the lowering
    // keeps one block of P (lower_fold.h) instead of all of T's k: else each block is written
    // to new lines of a P as large as T's k panel, beyond L2 (docs/decisions.md). Where that
    // cut cannot be made (a third piece, an extent it does not divide), P is cut as before,
    // and the lowering indexes that variable from the block's start instead (lower_fold.h).
    if (plan.in_block) {
        PackPlan folded = plan;
        if (plan_dims(p, of_t, true, folded) == nullptr) {
            pad_reordered(c, t, folded);
            plan = std::move(folded);
        }
    }
    return nullptr;
}

namespace {

// The cut variables: u = cut * u_o + u_i, u_o keeping u's id and u_i a new variable.
struct CutVars {
    const std::vector<int64_t> &cut;  // per variable: the inner extent, or 0 (PackPlan::cut)
    std::vector<int> inner_var;       // per cut variable: its inner piece, else -1

    // `a` with u = cut * u_o + u_i wherever u appears.
    Access access(const Access &a) const {
        Access b{a.tensor, {}};
        for (const Affine &f : a.index) {
            Affine g{{}, f.offset};
            for (const auto &term : f.terms) {
                const int lo = inner_var[size_t(term.var)];
                if (lo < 0) {
                    g.terms.push_back(term);
                    continue;
                }
                g.terms.push_back({term.var, term.coef * cut[size_t(term.var)]});
                g.terms.push_back({lo, term.coef});
            }
            b.index.push_back(std::move(g));
        }
        return b;
    }
};

// q's variables: c's, each cut one in two pieces.
CutVars cut_vars(const Computation &c, const PackPlan &plan, Computation &q) {
    CutVars cv{plan.cut, std::vector<int>(c.vars.size(), -1)};
    q.vars = c.vars;
    for (size_t u = 0; u < c.vars.size(); ++u)
        if (const int64_t cut = plan.cut[u]) {
            q.vars[u] = {c.vars[u].name + "_o", c.vars[u].extent / cut};
            cv.inner_var[u] = int(q.vars.size());
            q.vars.push_back({c.vars[u].name + "_i", cut});
        }
    return cv;
}

// P, laid out as plan.dims over q's variables, and its access `packed_at` (a variable per
// dimension).
Tensor packed_tensor(const Computation &c, const Computation &q, const PackPlan &plan,
                     const CutVars &cv, Access &packed_at) {
    const Tensor &t = c.tensors[size_t(plan.tensor)];
    Tensor packed{t.name + "_packed", {}, TensorKind::Scratch};
    packed_at = Access{int(c.tensors.size()), {}};
    for (const PackPlan::Dim &d : plan.dims) {
        const int var = d.inner ? cv.inner_var[size_t(d.var)] : d.var;
        packed.shape.push_back(q.vars[size_t(var)].extent);
        packed_at.index.push_back(Affine::of_var(var));
    }
    if (plan.pad) packed.shape.back() = padded_row(packed.shape.back());
    return packed;
}

// q's statements: statement 0 copies T into P; then c's, the nest's reading P.
void rewrite_stmts(const Program &p, const PackPlan &plan, const CutVars &cv,
                   const Access &packed_at, Computation &q) {
    const Computation &c = *p.comp;
    const Nest &nest = p.tree.nests[size_t(plan.nest)];
    q.stmts.push_back({packed_at, ReduceKind::None, Expr::read(cv.access(plan.read))});
    std::function<Expr(const Expr &, bool)> expr = [&](const Expr &e, bool in_nest) {
        Expr r = e;
        if (e.op == OpKind::Read)
            r.access = in_nest && e.access.tensor == plan.tensor ? packed_at : cv.access(e.access);
        for (Expr &arg : r.args) arg = expr(arg, in_nest);
        return r;
    };
    for (size_t s = 0; s < c.stmts.size(); ++s) {
        const bool in_nest =
            std::find(nest.stmts.begin(), nest.stmts.end(), int(s)) != nest.stmts.end();
        q.stmts.push_back(
            {cv.access(c.stmts[s].out), c.stmts[s].reduce, expr(c.stmts[s].value, in_nest)});
    }
}

// p's nests in `tree`, over the packed computation's statements (one later) and with each loop
// over a cut variable cut. Returns the cursor loop's depth in the packed nest.
int cut_nests(const Program &p, const PackPlan &plan, const CutVars &cv, LoopTree &tree) {
    int at = plan.depth;
    for (size_t ni = 0; ni < p.tree.nests.size(); ++ni) {
        const Nest &n = p.tree.nests[ni];
        Nest m;
        for (int s : n.stmts) m.stmts.push_back(s + 1);
        for (size_t d = 0; d < n.loops.size(); ++d) {
            if (int(ni) == plan.nest && int(d) == plan.depth) at = int(m.loops.size());
            // A fused pair's shared loops, once cut (a loop may become two, alike in both).
            if (int(d) == n.shared) m.shared = int(m.loops.size());
            const Loop &l = n.loops[d];
            const int lo = cv.inner_var[size_t(l.var)];
            if (lo < 0) {
                m.loops.push_back(l);
                continue;
            }
            const int64_t cut = plan.cut[size_t(l.var)];
            const int64_t in = inner_coverage(n, int(d)), cov = coverage(n, int(d));
            if (in >= cut) {
                m.loops.push_back({l.var, l.size, l.tail / cut, l.unroll, l.vectorize});
            } else if (cov <= cut) {
                m.loops.push_back({lo, l.size, l.tail, l.unroll, l.vectorize});
            } else {  // straddles the cut: chunks of `cut`, then the loop's own chunks inside
                m.loops.push_back({l.var, cov / cut, 0, l.unroll, false});
                m.loops.push_back({lo, cut / in, 0, l.unroll, l.vectorize});
            }
        }
        tree.nests.push_back(std::move(m));
    }
    return at;
}

// A transposing copy whose rows (its innermost loop, a tail kept whole) are not a multiple of
// 8: those rows in blocks of 16 walked outermost (after the shared loops), the last block
// shorter, so that each full block is a 16-row transpose in registers (lower_emit.cpp) and
// only the tail's rows are copied element by element.
void transpose_rows_in_blocks(Nest &copy) {
    const Loop rows = copy.loops.back();
    if (rows.size <= kPackRowAlign || rows.size % 8 == 0) return;
    copy.loops.back() = {rows.var, kPackRowAlign, 0, false, false};
    copy.loops.insert(copy.loops.begin() + copy.shared, {rows.var, rows.size / kPackRowAlign,
                                                         rows.size % kPackRowAlign, false, false});
}

// The copy nest: P's dimensions in order, inside the user's loops above the cursor (depth `at`
// in r's nest plan.nest) when P is copied block by block. Its innermost loop is vectorized when
// it fits a vector and T is contiguous along it too (B's panel rows); a transposing copy (a
// conv's weights, output channels innermost) stays scalar: vectorized, it is a gather, slow to
// compile and no faster.
Nest copy_nest(const Program &r, const PackPlan &plan, const CutVars &cv, const Access &packed_at,
               int at) {
    Nest copy{{}, {0}};
    const Nest &user = r.tree.nests[size_t(plan.nest)];
    if (plan.in_block) {  // the user's loops above the cursor, then P's other dimensions
        copy.loops.assign(user.loops.begin(), user.loops.begin() + at);
        copy.shared = at;
    }
    for (const Affine &f : packed_at.index) {
        // The part of P's dimension one iteration of the shared loops covers: all of it, or
        // what the innermost shared loop over its variable leaves (k blocks outside, k inside).
        const int var = f.terms[0].var;
        int64_t left = r.comp->vars[size_t(var)].extent;
        bool shared_var = false;
        for (int d = 0; d < copy.shared; ++d)
            if (user.loops[size_t(d)].var == var) {
                left = inner_coverage(user, d);
                shared_var = true;
            }
        if (left > 1 || !shared_var) copy.loops.push_back({var, left, 0, false, false});
    }
    if (copy.loops.size() == size_t(copy.shared)) {  // one element per block: a loop of one
        const int var = packed_at.index.back().terms[0].var;
        copy.loops.push_back({var, 1, 0, false, false});
    }
    const int t_last = layout_vars(plan.read).back();
    const int last_var = copy.loops.back().var;
    const bool contiguous = last_var == t_last || last_var == cv.inner_var[size_t(t_last)];
    // A contiguous run longer than a vector (a padded P's whole rows) in vectors of 16.
    if (contiguous && copy.loops.back().size > kMaxVectorWidth) {
        Loop &run = copy.loops.back();
        const int64_t e = run.size;
        run = {last_var, e / kPackRowAlign, e % kPackRowAlign, false, false};
        copy.loops.push_back({last_var, kPackRowAlign, 0, false, false});
    }
    if (!contiguous) transpose_rows_in_blocks(copy);
    Loop &innermost = copy.loops.back();
    innermost.vectorize = contiguous && innermost.size >= 2 && innermost.size <= kMaxVectorWidth;
    return copy;
}

}  // namespace

Program apply_pack(const Program &p, const PackPlan &plan) {
    if (plan.subsample) return apply_subsample(p, plan);
    const Computation &c = *p.comp;
    Computation q;
    q.name = c.name;
    const CutVars cv = cut_vars(c, plan, q);
    Access packed_at;
    Tensor packed = packed_tensor(c, q, plan, cv, packed_at);
    q.tensors = c.tensors;
    q.tensors.push_back(std::move(packed));
    rewrite_stmts(p, plan, cv, packed_at, q);
    q.validate();

    Program r;
    r.comp = std::make_shared<const Computation>(std::move(q));
    const int at = cut_nests(p, plan, cv, r.tree);  // the cursor loop's depth, once cut
    Nest copy = copy_nest(r, plan, cv, packed_at, at);
    r.tree.nests.insert(r.tree.nests.begin() + plan.nest, std::move(copy));
    r.cursor = r.tree.flat({plan.nest + 1, at});
    validate_loop_tree(*r.comp, r.tree);
    return r;
}

}  // namespace looptool::detail
