// `pack` of an input read with a stride (PackPlan::subsample, action_pack.h): the subsample
// the nest reads, copied into a dense scratch tensor before the nest.
#include <algorithm>
#include <functional>
#include <memory>

#include "looptool/actions/action_pack.h"
#include "looptool/ir/error.h"

namespace looptool::detail {
namespace {

// The variable that walks the dimension `f` indexes: its one variable of extent > 1, or its
// first when every one has extent 1; -1 when two have extent > 1 or it has none.
int walking_var(const Computation &c, const Affine &f) {
    int v = -1;
    for (const Affine::Term &t : f.terms) {
        if (c.vars[size_t(t.var)].extent == 1) {
            if (v < 0) v = t.var;
            continue;
        }
        if (v >= 0 && c.vars[size_t(v)].extent > 1) return -1;
        v = t.var;
    }
    return v;
}

// Whether the copy reads T's dimension `f` at v itself (coefficient 1, no offset); otherwise
// it loops over a variable of its own, v's name + "_s": the nest's variables then appear in
// P's accesses with coefficient 1 only, so `flatten` (ho and wo into one) still applies.
bool copies_as_is(const Affine &f, int v) { return f.coef_of(v) == 1 && f.offset == 0; }

}  // namespace

const char *subsample_plan(const Computation &c, const Access &read, PackPlan &plan) {
    const char *why =
        "the invariant input is indexed neither by variables in mixed radix, one set per "
        "dimension, nor by one variable per dimension with a stride";
    std::vector<bool> seen(c.vars.size(), false);
    bool strided = false;
    plan.dims.clear();
    for (const Affine &f : read.index) {
        const int v = walking_var(c, f);
        if (v < 0 || seen[size_t(v)] || f.coef_of(v) < 1 || f.offset < 0) return why;
        seen[size_t(v)] = true;
        strided |= f.coef_of(v) > 1 && c.vars[size_t(v)].extent > 1;
        if (!copies_as_is(f, v) && c.var_index(c.vars[size_t(v)].name + "_s") >= 0)
            return "a variable already has the name of the subsample's copy variable";
        plan.dims.push_back({v, false});
    }
    if (!strided) return why;
    plan.in_block = false;
    plan.pad = false;
    plan.subsample = true;
    return nullptr;
}

Program apply_subsample(const Program &p, const PackPlan &plan) {
    const Computation &c = *p.comp;
    LT_CHECK(plan.subsample && plan.dims.size() == plan.read.index.size(),
             "apply_subsample: not a subsample plan");
    Computation q = c;
    q.stmts.clear();
    std::vector<int> copy_var;  // per dimension of P: the copy nest's variable
    const Tensor &t = c.tensors[size_t(plan.tensor)];
    Tensor packed{t.name + "_packed", {}, TensorKind::Scratch};
    // The copy P[v...] = T[a v + o ...], and the nest's read of P: v plus the variables of
    // extent 1 (each 0), so a conv's X[n, c, 2*ho + kh, 2*wo + kw] becomes P[n, c, ho + kh,
    // wo + kw], a unit-stride conv's read.
    const Access packed_at{int(c.tensors.size()), {}};
    Access written = packed_at, source{plan.tensor, {}}, nest_read = packed_at;
    for (size_t d = 0; d < plan.dims.size(); ++d) {
        const int v = plan.dims[d].var;
        const Affine &f = plan.read.index[d];
        int u = v;
        if (!copies_as_is(f, v)) {
            u = int(q.vars.size());
            q.vars.push_back({c.vars[size_t(v)].name + "_s", c.vars[size_t(v)].extent});
        }
        copy_var.push_back(u);
        packed.shape.push_back(c.vars[size_t(v)].extent);
        written.index.push_back(Affine::of_var(u));
        source.index.push_back(Affine{{{u, f.coef_of(v)}}, f.offset});
        Affine g = Affine::of_var(v);
        for (const Affine::Term &term : f.terms)
            if (term.var != v) g.terms.push_back({term.var, 1});
        nest_read.index.push_back(std::move(g));
    }
    q.tensors.push_back(std::move(packed));
    q.stmts.push_back({written, ReduceKind::None, Expr::read(source)});
    const Nest &nest = p.tree.nests[size_t(plan.nest)];
    std::function<Expr(const Expr &)> in_nest = [&](const Expr &e) {
        Expr r = e;
        if (e.op == OpKind::Read && e.access.tensor == plan.tensor) r.access = nest_read;
        for (Expr &arg : r.args) arg = in_nest(arg);
        return r;
    };
    for (size_t s = 0; s < c.stmts.size(); ++s) {
        Statement st = c.stmts[s];
        if (std::find(nest.stmts.begin(), nest.stmts.end(), int(s)) != nest.stmts.end())
            st.value = in_nest(st.value);
        q.stmts.push_back(std::move(st));
    }
    q.validate();

    Program r;
    r.comp = std::make_shared<const Computation>(std::move(q));
    Nest copy{{}, {0}};
    for (int u : copy_var)
        copy.loops.push_back({u, r.comp->vars[size_t(u)].extent, 0, false, false});
    r.tree = p.tree;
    for (Nest &n : r.tree.nests)
        for (int &s : n.stmts) ++s;
    r.tree.nests.insert(r.tree.nests.begin() + plan.nest, std::move(copy));
    r.cursor = r.tree.flat({plan.nest + 1, plan.depth});
    validate_loop_tree(*r.comp, r.tree);
    return r;
}

}  // namespace looptool::detail
