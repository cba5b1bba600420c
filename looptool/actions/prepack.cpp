#include "looptool/actions/prepack.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

// Whether nest n is a pack's copy of constant inputs: one statement, `P[...] = T[...]`, P a
// scratch tensor no other statement writes, T an input named in `constant`.
bool copies_constant(const Computation &c, const Nest &n,
                     const std::vector<std::string> &constant) {
    if (n.stmts.size() != 1) return false;
    const Statement &s = c.stmts[size_t(n.stmts[0])];
    if (s.reduce != ReduceKind::None || s.value.op != OpKind::Read) return false;
    if (c.tensors[size_t(s.out.tensor)].kind != TensorKind::Scratch) return false;
    const Tensor &t = c.tensors[size_t(s.value.access.tensor)];
    if (t.kind != TensorKind::Input || std::ranges::find(constant, t.name) == constant.end())
        return false;
    for (size_t o = 0; o < c.stmts.size(); ++o)
        if (int(o) != n.stmts[0] && c.stmts[o].out.tensor == s.out.tensor) return false;
    return true;
}

// Tensor ids renumbered (`to`): statements' accesses follow.
Statement renumbered(const Statement &s, const std::vector<int> &to) {
    std::function<void(Expr &)> expr = [&](Expr &e) {
        if (e.op == OpKind::Read) e.access.tensor = to[size_t(e.access.tensor)];
        for (Expr &a : e.args) expr(a);
    };
    Statement r = s;
    r.out.tensor = to[size_t(r.out.tensor)];
    expr(r.value);
    return r;
}

// c's tensors in the split's order: the caller's buffers, then the prepacked tensors (kind
// `packed_kind`), then the other scratch tensors; `to` maps old ids to new ones.
std::vector<Tensor> reordered(const Computation &c, const std::vector<bool> &prepacked,
                              TensorKind packed_kind, std::vector<int> &to) {
    std::vector<Tensor> out;
    to.assign(c.tensors.size(), -1);
    for (int pass = 0; pass < 3; ++pass)
        for (size_t t = 0; t < c.tensors.size(); ++t) {
            const int group = t < c.num_buffers() ? 0 : prepacked[t] ? 1 : 2;
            if (group != pass) continue;
            to[t] = int(out.size());
            out.push_back(c.tensors[t]);
            if (group == 1) out.back().kind = packed_kind;
        }
    return out;
}

// A copy nest on its own: without the shared loops over variables its statement does not use
// (they run once: a pack's copy shares only such loops, PackPlan::in_block, and a repeat would
// copy the same again), none parallel (prepare runs once, outside the timed calls).
void alone_copy(const Computation &c, Nest &m) {
    const std::vector<int> used = c.stmt_vars(m.stmts[0]);
    std::erase_if(m.loops,
                  [&](const Loop &l) { return std::ranges::find(used, l.var) == used.end(); });
    m.shared = 0;
    for (Loop &l : m.loops) l.parallel = false;
}

// The nests of p that `keep` selects, over statements renumbered by `stmt_to`. A removed nest
// between two kept ones that shared loops with it leaves them sharing the loops all three
// shared (the chain's minimum); `alone` makes every kept nest one of its own instead.
LoopTree kept_nests(const Computation &c, const LoopTree &t, const std::vector<bool> &keep,
                    const std::vector<int> &stmt_to, bool alone) {
    LoopTree out;
    for (size_t i = 0; i < t.nests.size(); ++i) {
        const Nest &n = t.nests[i];
        if (!keep[i]) {
            if (!out.nests.empty())
                out.nests.back().shared = std::min(out.nests.back().shared, n.shared);
            continue;
        }
        Nest m = n;
        if (alone) alone_copy(c, m);  // over c's statement ids
        for (int &s : m.stmts) s = stmt_to[size_t(s)];
        out.nests.push_back(std::move(m));
    }
    if (!out.nests.empty()) out.nests.back().shared = 0;
    return out;
}

// The part of the split whose nests `keep` selects (the copies for prepare, the rest for run).
Program part(const Program &p, const std::vector<bool> &copy_nest, bool prepare,
             const std::vector<bool> &prepacked, const std::string &name) {
    const Computation &c = *p.comp;
    Computation q;
    q.name = name;
    q.vars = c.vars;
    std::vector<int> to;
    q.tensors = reordered(c, prepacked, prepare ? TensorKind::Output : TensorKind::Input, to);
    // Prepare allocates none of run's scratch tensors.
    if (prepare) q.tensors.resize(q.num_buffers());
    std::vector<bool> keep(copy_nest.size());
    std::vector<bool> stmt_kept(c.stmts.size(), false);
    for (size_t i = 0; i < keep.size(); ++i) {
        keep[i] = copy_nest[i] == prepare;
        if (keep[i])
            for (int s : p.tree.nests[i].stmts) stmt_kept[size_t(s)] = true;
    }
    std::vector<int> stmt_to(c.stmts.size(), -1);
    for (size_t s = 0; s < c.stmts.size(); ++s)
        if (stmt_kept[s]) {
            stmt_to[s] = int(q.stmts.size());
            q.stmts.push_back(renumbered(c.stmts[s], to));
        }
    q.validate();
    Program r;
    r.comp = std::make_shared<const Computation>(std::move(q));
    r.tree = kept_nests(c, p.tree, keep, stmt_to, prepare);
    validate_loop_tree(*r.comp, r.tree);
    return r;
}

}  // namespace

void check_constant_inputs(const Computation &c, const std::vector<std::string> &constant) {
    for (const std::string &name : constant) {
        const int t = c.tensor_index(name);
        if (t < 0)
            throw Error(
                fmt::format("constant input {}: {} has no tensor of that name", name, c.name));
        if (c.tensors[size_t(t)].kind != TensorKind::Input)
            throw Error(fmt::format("constant input {}: it is not an input of {}", name, c.name));
    }
}

std::optional<Prepacked> split_prepacked(const Program &p,
                                         const std::vector<std::string> &constant) {
    const Computation &c = *p.comp;
    check_constant_inputs(c, constant);
    std::vector<bool> copy_nest(p.tree.nests.size(), false), prepacked(c.tensors.size(), false);
    bool any = false;
    for (size_t i = 0; i < p.tree.nests.size(); ++i) {
        const Nest &n = p.tree.nests[i];
        if (!copies_constant(c, n, constant)) continue;
        copy_nest[i] = any = true;
        prepacked[size_t(c.stmts[size_t(n.stmts[0])].out.tensor)] = true;
    }
    if (!any) return std::nullopt;
    // Named after the whole schedule: kernels are cached by schedule_key(), which names no
    // tensor kind, and two schedules may leave the same run nests over P in other layouts.
    const std::string tag = fmt::format("{:016x}", std::hash<std::string>{}(schedule_key(p)));
    Prepacked out;
    out.prepare = part(p, copy_nest, true, prepacked, c.name + "_prepare_" + tag);
    out.run = part(p, copy_nest, false, prepacked, c.name + "_run_" + tag);
    const Computation &run = *out.run.comp;
    for (size_t t = c.num_buffers(); t < run.num_buffers(); ++t)
        out.packed.push_back(run.tensors[t].name);
    return out;
}

}  // namespace looptool
