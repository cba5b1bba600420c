#include "looptool/ir/loop_tree.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "looptool/ir/error.h"

namespace looptool {

int LoopTree::num_loops() const {
    int n = 0;
    for (const auto &nest : nests) n += int(nest.loops.size());
    return n;
}

LoopTree::Pos LoopTree::pos(int flat) const {
    LT_CHECK(flat >= 0, fmt::format("negative loop index {}", flat));
    int rest = flat;
    for (size_t i = 0; i < nests.size(); ++i) {
        int n = int(nests[i].loops.size());
        if (rest < n) return {int(i), rest};
        rest -= n;
    }
    LT_CHECK(false, fmt::format("loop index {} out of range ({} loops)", flat, num_loops()));
}

int LoopTree::flat(Pos p) const {
    int f = 0;
    for (int i = 0; i < p.nest; ++i) f += int(nests[size_t(i)].loops.size());
    return f + p.depth;
}

const Loop &LoopTree::loop(int f) const {
    Pos p = pos(f);
    return nests[size_t(p.nest)].loops[size_t(p.depth)];
}

Loop &LoopTree::loop(int f) {
    Pos p = pos(f);
    return nests[size_t(p.nest)].loops[size_t(p.depth)];
}

int64_t inner_coverage(const Nest &nest, int depth) {
    int var = nest.loops[size_t(depth)].var;
    for (size_t d = size_t(depth) + 1; d < nest.loops.size(); ++d)
        if (nest.loops[d].var == var) return coverage(nest, int(d));
    return 1;
}

int64_t coverage(const Nest &nest, int depth) {
    const Loop &l = nest.loops[size_t(depth)];
    return l.size * inner_coverage(nest, depth) + l.tail;
}

LoopTree naive_loop_tree(const Computation &c) {
    LoopTree t;
    for (size_t s = 0; s < c.stmts.size(); ++s) {
        std::vector<int> used = c.stmt_vars(int(s));
        Nest nest;
        for (size_t v = 0; v < c.vars.size(); ++v)
            if (std::find(used.begin(), used.end(), int(v)) != used.end())
                nest.loops.push_back(Loop{int(v), c.vars[v].extent, 0});
        nest.stmts = {int(s)};
        t.nests.push_back(std::move(nest));
    }
    return t;
}

// Why nest `ni`'s loops (over `have`) do not fit statement `s` (over `need`): the variables one
// has and the other lacks, by name.
static std::string loops_mismatch(const Computation &c, size_t ni, int s,
                                  const std::vector<int> &need, const std::vector<int> &have) {
    std::vector<std::string> missing, extra;
    for (int v : need)
        if (!std::binary_search(have.begin(), have.end(), v))
            missing.push_back(c.vars[size_t(v)].name);
    for (int v : have)
        if (!std::binary_search(need.begin(), need.end(), v))
            extra.push_back(c.vars[size_t(v)].name);
    std::string why;
    if (!missing.empty()) why = fmt::format("no loop over {}", fmt::join(missing, ", "));
    if (!missing.empty() && !extra.empty()) why += "; ";
    if (!extra.empty())
        why += fmt::format("loops over {}, which it does not use", fmt::join(extra, ", "));
    return fmt::format(
        "nest {}: its loops do not iterate exactly over the variables of statement {} ({})", ni, s,
        why);
}

namespace {

// Every loop's variable known and its size and tail within the extent, innermost first, so that
// coverage() cannot overflow int64 (a wrapped-around coverage could otherwise pass as the
// extent).
void check_loop_bounds(const Computation &c, const Nest &nest, size_t ni) {
    for (size_t d = nest.loops.size(); d-- > 0;) {
        const Loop &l = nest.loops[d];
        if (l.var < 0 || size_t(l.var) >= c.vars.size())
            throw Error(fmt::format("nest {} loop {}: unknown variable id {}", ni, d, l.var));
        const int64_t extent = c.vars[size_t(l.var)].extent;
        if (l.size < 1 || l.size > extent || l.tail < 0 || l.tail > extent ||
            coverage(nest, int(d)) > extent)
            throw Error(fmt::format("nest {} loop {}: bad size {} / tail {} for {} of extent {}",
                                    ni, d, l.size, l.tail, c.vars[size_t(l.var)].name, extent));
    }
}

// Outermost first: tails below the inner coverage, each variable's loops covering its extent,
// only the innermost loop vectorized.
void check_loop_shapes(const Computation &c, const Nest &nest, size_t ni) {
    std::vector<int> nest_vars;
    for (size_t d = 0; d < nest.loops.size(); ++d) {
        const Loop &l = nest.loops[d];
        if (l.var < 0 || size_t(l.var) >= c.vars.size())
            throw Error(fmt::format("nest {} loop {}: unknown variable id {}", ni, d, l.var));
        if (l.size < 1 || l.tail < 0)
            throw Error(
                fmt::format("nest {} loop {}: bad size {} / tail {}", ni, d, l.size, l.tail));
        int64_t inner = inner_coverage(nest, int(d));
        if (l.tail >= inner && inner > 1)
            throw Error(fmt::format("nest {} loop {}: tail {} not below the inner coverage {}", ni,
                                    d, l.tail, inner));
        if (inner == 1 && l.tail != 0)
            throw Error(fmt::format("nest {} loop {}: innermost loop of {} has a tail", ni, d,
                                    c.vars[size_t(l.var)].name));
        if (std::find(nest_vars.begin(), nest_vars.end(), l.var) == nest_vars.end()) {
            nest_vars.push_back(l.var);
            if (coverage(nest, int(d)) != c.vars[size_t(l.var)].extent)
                throw Error(
                    fmt::format("nest {}: loops over {} cover {} elements but its extent is {}", ni,
                                c.vars[size_t(l.var)].name, coverage(nest, int(d)),
                                c.vars[size_t(l.var)].extent));
        }
        if (l.vectorize && d + 1 != nest.loops.size())
            throw Error(
                fmt::format("nest {} loop {}: only the innermost loop can be vectorized", ni, d));
    }
}

// Nest `ni`'s shared loops: it keeps one of its own, and the next nest (which shares none of
// its own) starts with the same loops.
void check_shared_loops(const LoopTree &t, size_t ni) {
    const Nest &nest = t.nests[ni];
    if (nest.shared < 0 || nest.shared >= int(nest.loops.size()))
        throw Error(fmt::format("nest {}: shares {} of its {} loops (it must keep one)", ni,
                                nest.shared, nest.loops.size()));
    if (nest.shared == 0) return;
    if (ni + 1 == t.nests.size())
        throw Error(fmt::format("nest {}: shares loops but no nest follows", ni));
    const Nest &next = t.nests[ni + 1];
    if (int(next.loops.size()) <= nest.shared)
        throw Error(fmt::format("nest {}: the next nest has no loops of its own", ni));
    for (int d = 0; d < nest.shared; ++d)
        if (!(nest.loops[size_t(d)] == next.loops[size_t(d)]) ||
            inner_coverage(nest, d) != inner_coverage(next, d))
            throw Error(
                fmt::format("nest {} loop {}: a shared loop differs from the next nest's", ni, d));
}

// The nest's statements known, each over exactly the variables the nest loops over; counts
// each statement in `seen`.
void check_nest_stmts(const Computation &c, const Nest &nest, size_t ni, std::vector<int> &seen) {
    std::vector<int> stmt_vars;  // of all the nest's statements
    for (int s : nest.stmts) {
        if (s < 0 || size_t(s) >= c.stmts.size())
            throw Error(fmt::format("nest {}: unknown statement id {}", ni, s));
        for (int v : c.stmt_vars(s)) stmt_vars.push_back(v);
    }
    // Shared loops over variables the statements do not use only repeat the nest.
    std::vector<int> have;
    for (size_t d = 0; d < nest.loops.size(); ++d) {
        const int v = nest.loops[d].var;
        const bool used = int(d) >= nest.shared ||
                          std::find(stmt_vars.begin(), stmt_vars.end(), v) != stmt_vars.end();
        if (used && std::find(have.begin(), have.end(), v) == have.end()) have.push_back(v);
    }
    std::sort(have.begin(), have.end());
    for (int s : nest.stmts) {
        seen[size_t(s)]++;
        std::vector<int> need = c.stmt_vars(s);
        std::sort(need.begin(), need.end());
        if (need != have) throw Error(loops_mismatch(c, ni, s, need, have));
    }
}

}  // namespace

namespace {
// The dimension of `a` whose index `var` moves by more than all its other terms together can:
// var alone (other terms only over variables of extent 1), or var as the outer part of a
// variable `pack` cut in two (tm * m_o + m_i). Two values of var then index disjoint elements
// there. (dimension, that index without its extent-1 terms), or dimension -1.
struct OwnDim {
    int dim = -1;
    Affine index;
    bool operator==(const OwnDim &) const = default;
};
OwnDim own_dim(const Computation &c, const Access &a, int var) {
    for (size_t i = 0; i < a.index.size(); ++i) {
        const Affine &f = a.index[i];
        const int64_t k = f.coef_of(var);
        if (k == 0) continue;
        OwnDim d{int(i), Affine{{}, f.offset}};
        int64_t span = 0;  // how far the other terms move the index
        for (const auto &t : f.terms) {
            const int64_t extent = c.vars[size_t(t.var)].extent;
            if (t.coef == 0 || extent == 1) continue;
            d.index.terms.push_back(t);
            if (t.var != var) span += std::abs(t.coef) * (extent - 1);
        }
        std::sort(d.index.terms.begin(), d.index.terms.end(),
                  [](const auto &x, const auto &y) { return x.var < y.var; });
        if (span < std::abs(k)) return d;
    }
    return {};
}
}  // namespace

const char *parallel_rule(const Computation &c, const LoopTree &t, int ni, int depth) {
    const Nest &nest = t.nests[size_t(ni)];
    const Loop &l = nest.loops[size_t(depth)];
    if (depth != 0) return "only the outermost loop of a nest can be parallel";
    if (nest.shared > 0 || (ni > 0 && t.nests[size_t(ni - 1)].shared > 0))
        return "the loop is shared with the copy nest of a packed block";
    if (l.unroll) return "the loop is unrolled";
    if (l.vectorize) return "the loop is vectorized";
    if (l.size + (l.tail > 0) < 2) return "the loop has a single iteration";
    std::vector<int> written;
    for (int s : nest.stmts) written.push_back(c.stmts[size_t(s)].out.tensor);
    for (int w : written) {
        std::optional<OwnDim> seen;
        for (int s : nest.stmts) {
            const Statement &stmt = c.stmts[size_t(s)];
            std::vector<const Access *> uses;
            collect_reads(stmt.value, uses);
            uses.push_back(&stmt.out);
            for (const Access *a : uses) {
                if (a->tensor != w) continue;
                const OwnDim d = own_dim(c, *a, l.var);
                if (d.dim < 0)
                    return "the loop's variable does not index a dimension of every tensor the "
                           "nest writes by itself or in blocks (a reduction over it would race)";
                if (seen && !(*seen == d))
                    return "a tensor the nest writes is accessed at two different elements "
                           "along the loop's variable";
                seen = d;
            }
        }
    }
    return nullptr;
}

void validate_loop_tree(const Computation &c, const LoopTree &t) {
    std::vector<int> seen(c.stmts.size(), 0);
    for (size_t ni = 0; ni < t.nests.size(); ++ni) {
        const Nest &nest = t.nests[ni];
        if (nest.stmts.empty()) throw Error(fmt::format("nest {} has no statements", ni));
        if (nest.loops.empty()) throw Error(fmt::format("nest {} has no loops", ni));
        check_loop_bounds(c, nest, ni);
        check_loop_shapes(c, nest, ni);
        check_shared_loops(t, ni);
        check_nest_stmts(c, nest, ni, seen);
        for (size_t d = 0; d < nest.loops.size(); ++d)
            if (nest.loops[d].parallel)
                if (const char *why = parallel_rule(c, t, int(ni), int(d)))
                    throw Error(fmt::format("nest {} loop {}: parallel: {}", ni, d, why));
    }
    for (size_t s = 0; s < seen.size(); ++s)
        if (seen[s] != 1)
            throw Error(
                fmt::format("statement {} is scheduled {} times (must be once)", s, seen[s]));
}

Program Program::naive(ComputationPtr c) {
    Program p;
    p.tree = naive_loop_tree(*c);
    p.comp = std::move(c);
    p.cursor = 0;
    return p;
}

bool Program::same_as(const Program &o) const {
    return *comp == *o.comp && tree == o.tree && cursor == o.cursor;
}

std::string schedule_key(const Program &p) {
    const Computation &c = *p.comp;
    std::string key = c.name;
    for (const auto &v : c.vars) key += fmt::format("|{}={}", v.name, v.extent);
    // A `pack`ed copy's layout (other tensors are the benchmark's own).
    for (size_t t = c.num_buffers(); t < c.tensors.size(); ++t)
        key += fmt::format("|S{}{}", c.tensors[t].name, fmt::join(c.tensors[t].shape, "x"));
    for (const auto &nest : p.tree.nests) {
        key += "|N";
        if (nest.shared) key += fmt::format("h{}", nest.shared);
        for (int s : nest.stmts) key += fmt::format("s{}", s);
        for (const auto &l : nest.loops)
            key += fmt::format(":{},{},{}{}{}{}", l.var, l.size, l.tail, l.unroll ? "u" : "",
                               l.vectorize ? "v" : "", l.parallel ? "p" : "");
    }
    return key;
}

std::vector<std::string> loop_names(const Computation &c, const Nest &n) {
    std::vector<std::string> names;
    std::vector<int> count(c.vars.size(), 0);
    for (const auto &l : n.loops)
        names.push_back(c.vars[size_t(l.var)].name +
                        std::string(size_t(count[size_t(l.var)]++), '\''));
    return names;
}

}  // namespace looptool
