#include "looptool/measure/prefix.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

int main_nest_of(const Program &p) {
    const Computation &c = *p.comp;
    for (size_t n = 0; n < p.tree.nests.size(); ++n)
        for (int s : p.tree.nests[n].stmts)
            if (c.stmts[size_t(s)].reduce != ReduceKind::None) return int(n);
    return 0;
}

bool outermost_of_its_var(const Nest &nest, int depth) {
    for (int d = 0; d < depth; ++d)
        if (nest.loops[size_t(d)].var == nest.loops[size_t(depth)].var) return false;
    return true;
}

// Cuts the outermost loop over `var` of `nest` to cover `elements`; false when it cannot
// (its chunks are larger than the prefix).
bool cut_nest(Nest &nest, int var, int64_t elements) {
    for (size_t d = 0; d < nest.loops.size(); ++d) {
        if (nest.loops[d].var != var) continue;
        const int64_t inner = inner_coverage(nest, int(d));
        if (elements / inner < 1) return false;
        nest.loops[d].size = elements / inner;
        nest.loops[d].tail = elements % inner;
        return true;
    }
    return true;  // the nest does not walk `var`
}

}  // namespace

int prefix_loop_depth(const Program &p, int *main_nest) {
    const int mn = main_nest_of(p);
    if (main_nest) *main_nest = mn;
    const Nest &nest = p.tree.nests[size_t(mn)];
    for (size_t d = 0; d < nest.loops.size(); ++d)
        if (outermost_of_its_var(nest, int(d)) && nest.loops[d].size >= 4) return int(d);
    return -1;
}

std::optional<OuterPrefix> outer_prefix(const Program &p, int64_t iterations) {
    int mn = 0;
    const int depth = prefix_loop_depth(p, &mn);
    if (depth < 0) return std::nullopt;
    const Nest &main = p.tree.nests[size_t(mn)];
    const Loop &loop = main.loops[size_t(depth)];
    if (iterations < 1 || iterations >= loop.size) return std::nullopt;

    OuterPrefix out;
    out.var = loop.var;
    out.extent = p.comp->vars[size_t(loop.var)].extent;
    out.elements = iterations * inner_coverage(main, depth);
    out.iterations = iterations;
    out.of_iterations = loop.size;

    Computation c = *p.comp;
    c.vars[size_t(out.var)].extent = out.elements;
    // The tensors statements write, cut where the variable leads a dimension's index (alone, or
    // as the top digit of a dimension `pack` cut: T[8*m_o + m_i, n]); the inputs and the packed
    // copies keep their layout. (A tensor two statements write is cut once: its dimension no
    // longer covers the whole extent the second time.)
    for (const Statement &s : c.stmts) {
        Tensor &t = c.tensors[size_t(s.out.tensor)];
        if (t.kind != TensorKind::Temp && t.kind != TensorKind::Output) continue;
        for (size_t d = 0; d < s.out.index.size(); ++d) {
            const int64_t coef = s.out.index[d].coef_of(out.var);
            if (coef > 0 && s.out.index[d].offset == 0 && t.shape[d] == coef * out.extent)
                t.shape[d] = coef * out.elements;
        }
    }
    // A reduction over the variable: its output is not cut and starts from its identity at entry.
    for (const Statement &s : c.stmts)
        if (s.reduce != ReduceKind::None) {
            const std::vector<int> ov = vars_of(s.out);
            if (std::find(ov.begin(), ov.end(), out.var) == ov.end()) out.has_fixed_work = true;
        }

    LoopTree tree = p.tree;
    for (Nest &nest : tree.nests) {
        if (!cut_nest(nest, out.var, out.elements)) return std::nullopt;
        const bool walks = std::any_of(nest.loops.begin(), nest.loops.end(),
                                       [&](const Loop &l) { return l.var == out.var; });
        if (!walks) out.has_fixed_work = true;
    }
    for (size_t n = 0; n + 1 < tree.nests.size(); ++n) {
        const Nest &a = tree.nests[n], &b = tree.nests[n + 1];
        for (int d = 0; d < a.shared; ++d)
            if (!(a.loops[size_t(d)] == b.loops[size_t(d)])) return std::nullopt;
    }
    try {
        c.validate();
        validate_loop_tree(c, tree);
    } catch (const Error &) {
        return std::nullopt;  // an access the cut leaves out of bounds: measure p itself
    }
    out.program = Program{std::make_shared<const Computation>(std::move(c)), std::move(tree), 0};
    return out;
}

int64_t prefix_iterations(const Program &p, double target_flops, double max_share) {
    int mn = 0;
    const int depth = prefix_loop_depth(p, &mn);
    if (depth < 0) return 0;
    const Nest &main = p.tree.nests[size_t(mn)];
    const Loop &loop = main.loops[size_t(depth)];
    const double share =
        double(inner_coverage(main, depth)) / double(p.comp->vars[size_t(loop.var)].extent);
    // In double until it is known to fit the loop (a huge target must not overflow int64).
    const double r = std::max(2.0, std::ceil(target_flops / (p.comp->flops() * share)));
    return r <= max_share * double(loop.size) ? int64_t(r) : 0;
}

}  // namespace looptool
