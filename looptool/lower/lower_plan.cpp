#include "looptool/lower/lower_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "looptool/ir/error.h"

namespace looptool::detail {

Expansion expand(const Loop &l, int64_t total, int64_t chunk, bool vector_safe) {
    if (l.vectorize && vector_safe && total > 1) return Expansion::Vector;
    if (l.unroll || l.vectorize || total / chunk <= 1) return Expansion::Unrolled;
    return Expansion::Loop;
}

std::vector<VectorPiece> vector_pieces(int64_t total, bool masked) {
    std::vector<VectorPiece> pieces;
    for (int64_t start = 0; start < total;) {
        int64_t w = 1;
        while (w * 2 <= total - start) w *= 2;
        pieces.push_back({start, w, w});
        start += w;
    }
    if (!masked) return pieces;
    // The narrow pieces at the end (at least two) become one masked piece.
    size_t first = pieces.size();
    while (first > 0 && pieces[first - 1].width < kMaskedPieceMax) --first;
    if (pieces.size() - first < 2) return pieces;
    const int64_t start = pieces[first].start, lanes = total - start;
    int64_t w = 1;
    while (w < lanes) w *= 2;
    pieces.resize(first);
    pieces.push_back({start, w, lanes});
    return pieces;
}

const char *nest_mode_name(NestMode m) {
    switch (m) {
        case NestMode::Static: return "static";
        case NestMode::Relaxed: return "relaxed";
        case NestMode::Generic: return "generic";
    }
    LT_CHECK(false, "not a NestMode");
}

int NestPlan::slot(const Access &a) const {
    auto it = slot_of.find(&a);
    LT_CHECK(it != slot_of.end(), "an access of the nest has no slot");
    return it->second;
}

size_t NestPlan::position(int s) const {
    auto it = std::find(nest.stmts.begin(), nest.stmts.end(), s);
    LT_CHECK(it != nest.stmts.end(), fmt::format("statement {} is not in the nest", s));
    return size_t(it - nest.stmts.begin());
}

namespace {

/// What the plan of one nest needs to know about the rest of the tree.
struct TreeContext {
    std::set<int> scheduled;   // statements in the tree
    std::set<int> later_nest;  // statements scheduled in nests after this one
};

void add_slots(const Computation &c, NestPlan &p) {
    auto add = [&](const Access &a) {
        Slot s{a.tensor, std::vector<int64_t>(c.vars.size(), 0), 0};
        const Tensor &t = c.tensors[size_t(a.tensor)];
        for (size_t d = 0; d < a.index.size(); ++d) {
            s.offset += t.stride(d) * a.index[d].offset;
            for (const auto &term : a.index[d].terms)
                s.coef[size_t(term.var)] += t.stride(d) * term.coef;
        }
        p.slot_of[&a] = int(p.slots.size());
        p.slots.push_back(std::move(s));
    };
    for (int s : p.nest.stmts) {
        const Statement &stmt = c.stmts[size_t(s)];
        p.out_slot.push_back(int(p.slots.size()));
        add(stmt.out);
        std::vector<const Access *> reads;
        collect_reads(stmt.value, reads);
        for (auto *a : reads) add(*a);
    }
}

bool vector_safe(const Computation &c, const Nest &nest) {
    for (int s : nest.stmts) {
        const Access &w = c.stmts[size_t(s)].out;
        for (int o : nest.stmts) {
            const Statement &other = c.stmts[size_t(o)];
            std::vector<const Access *> uses;
            collect_reads(other.value, uses);
            if (o != s) uses.push_back(&other.out);
            for (auto *a : uses)
                if (a->tensor == w.tensor && !(a->index == w.index)) return false;
        }
    }
    return true;
}

// Tile region of statement s: the outermost loop over a reduction var (a var not in the
// output access) such that every loop from it inwards is unrolled, vectorized or over a
// reduction var, so the output elements touched below it are fixed at that point.
int region_start(const Computation &c, const Nest &nest, int s) {
    const Statement &stmt = c.stmts[size_t(s)];
    if (stmt.reduce == ReduceKind::None || reads_tensor(stmt, stmt.out.tensor)) return -1;
    for (int o : nest.stmts)
        if (o != s && (c.stmts[size_t(o)].out.tensor == stmt.out.tensor ||
                       reads_tensor(c.stmts[size_t(o)], stmt.out.tensor)))
            return -1;
    const std::vector<int> outv = vars_of(stmt.out);
    int r = -1;
    for (size_t d = nest.loops.size(); d-- > 0;) {
        const Loop &l = nest.loops[d];
        bool red = std::find(outv.begin(), outv.end(), l.var) == outv.end();
        if (!(l.unroll || l.vectorize || red)) break;
        if (red) r = int(d);
    }
    return r;
}

// Accumulators may start at the reduction's identity (zero for a sum) when this region is the
// only pass over the reduction for each of its output elements and nothing else touches the
// output before.
bool zero_start_ok(const Computation &c, const Nest &nest, const TreeContext &tree, int s, int r) {
    const Statement &stmt = c.stmts[size_t(s)];
    const std::vector<int> outv = vars_of(stmt.out);
    for (int d = 0; d < r; ++d)
        if (std::find(outv.begin(), outv.end(), nest.loops[size_t(d)].var) == outv.end())
            return false;
    if (!is_exact_cover(c, stmt.out)) return false;
    // The only writer but those in later nests (a fused epilogue updating the output in place),
    // and every reader runs in a later nest (region_start already excluded readers in this
    // nest). Statements dropped by copy elision do not count.
    for (int o : tree.scheduled)
        if (o != s && c.stmts[size_t(o)].out.tensor == stmt.out.tensor && !tree.later_nest.count(o))
            return false;
    for (int o : tree.scheduled)
        if (reads_tensor(c.stmts[size_t(o)], stmt.out.tensor) && !tree.later_nest.count(o))
            return false;
    return true;
}

using CostMemo = std::map<std::pair<size_t, std::vector<int64_t>>, int64_t>;

// Estimated cost of emitting the nest from depth d in context `avail`: one unit per
// statement copy, plus a loop weight per run-time loop copy. Innermost run-time loops weigh
// most: the loop vectorizer turns each into a vector body, a remainder and checks, and
// costs ~2-4 ms of IR passes and codegen per copy (256 unrolled copies of the naive n loop
// took ~0.9 s to compile).
int64_t emission_cost(const NestPlan &p, size_t d, std::vector<int64_t> &avail, CostMemo &memo) {
    const Nest &nest = p.nest;
    if (d == nest.loops.size()) return int64_t(nest.stmts.size());
    auto key = std::make_pair(d, avail);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const size_t v = size_t(nest.loops[d].var);
    const int64_t chunk = p.inner[d], total = avail[v], nfull = total / chunk, rem = total % chunk;
    int64_t n = 0;
    const Expansion e = p.expansion(d, total);
    if (e == Expansion::Vector) {
        n = int64_t(nest.stmts.size() * p.pieces(total).size());
    } else {
        avail[v] = chunk;
        if (nfull > 0) {
            const int64_t body = emission_cost(p, d + 1, avail, memo);
            n += e == Expansion::Unrolled ? nfull * body
                                          : (d + 1 == nest.loops.size() ? 64 : 8) + body;
        }
        if (rem > 0) {
            avail[v] = rem;
            n += emission_cost(p, d + 1, avail, memo);
        }
        avail[v] = total;
    }
    n = std::min<int64_t>(n, int64_t(1) << 40);
    memo[key] = n;
    return n;
}

// `nest` with unroll dropped from every loop that has a plain (run-time) loop beneath it:
// such copies are not straight-line code anyway, and they multiply the loops to compile.
Nest unroll_only_straight_line(Nest nest) {
    bool plain_below = false;
    for (size_t d = nest.loops.size(); d-- > 0;) {
        Loop &l = nest.loops[d];
        if (plain_below) l.unroll = false;
        if (!l.unroll && !l.vectorize) plain_below = true;
    }
    return nest;
}

NestPlan plan_nest(const Computation &c, const Nest &nest, const TreeContext &tree) {
    NestPlan p;
    p.nest = nest;
    for (size_t d = 0; d < nest.loops.size(); ++d) p.inner.push_back(inner_coverage(nest, int(d)));
    add_slots(c, p);
    p.vector_safe = vector_safe(c, nest);
    for (const Loop &l : nest.loops)
        if (l.vectorize) {
            p.masked_tails = true;
            for (int o : p.out_slot)
                if (p.slots[size_t(o)].coef[size_t(l.var)] == 0) p.masked_tails = false;
        }
    for (int s : nest.stmts) {
        const int r = region_start(c, nest, s);
        p.region.push_back(r);
        p.zero_start.push_back(r >= 0 && zero_start_ok(c, nest, tree, s, r));
    }
    p.streamed.assign(nest.stmts.size(), false);
    std::vector<int64_t> avail;
    for (const auto &v : c.vars) avail.push_back(v.extent);
    CostMemo memo;
    p.cost = emission_cost(p, 0, avail, memo);
    return p;
}

}  // namespace

std::vector<NestPlan> plan_nests(const Computation &c, const LoopTree &tree,
                                 const LowerOptions &options) {
    TreeContext ctx;
    for (const auto &nest : tree.nests) ctx.scheduled.insert(nest.stmts.begin(), nest.stmts.end());
    std::vector<NestPlan> plans;
    for (size_t ni = 0; ni < tree.nests.size(); ++ni) {
        ctx.later_nest.clear();
        for (size_t nj = ni + 1; nj < tree.nests.size(); ++nj)
            ctx.later_nest.insert(tree.nests[nj].stmts.begin(), tree.nests[nj].stmts.end());
        // Over the budget, first drop the unrolling that only copies loops; then fall back to
        // plain loops.
        NestPlan p = plan_nest(c, tree.nests[ni], ctx);
        if (p.cost > options.max_emission_cost) {
            p = plan_nest(c, unroll_only_straight_line(tree.nests[ni]), ctx);
            p.mode = p.cost > options.max_emission_cost ? NestMode::Generic : NestMode::Relaxed;
        }
        plans.push_back(std::move(p));
    }
    // Nests sharing loops are emitted together (lower_emit.cpp): generic code has no static
    // context to hand to the others, so all of a chain are generic if one is.
    for (size_t a = 0; a < plans.size();) {
        size_t b = a;
        bool generic = false;
        for (; b < plans.size(); ++b) {
            generic |= plans[b].mode == NestMode::Generic;
            if (!plans[b].nest.shared) break;
        }
        for (size_t n = a; n <= b && n < plans.size(); ++n)
            if (generic) plans[n].mode = NestMode::Generic;
        a = b + 1;
    }
    return plans;
}

namespace {

void collect_keys(const NestPlan &p, const Slot &o, size_t d, std::vector<int64_t> avail,
                  std::vector<int64_t> stat, std::vector<AccKey> &keys) {
    auto off = [&] {
        int64_t x = o.offset;
        for (size_t v = 0; v < stat.size(); ++v) x += o.coef[v] * stat[v];
        return x;
    };
    if (d == p.nest.loops.size()) {
        keys.push_back({off(), 1, 0, 1});
        return;
    }
    const size_t v = size_t(p.nest.loops[d].var);
    const int64_t chunk = p.inner[d], total = avail[v], nfull = total / chunk, rem = total % chunk,
                  base = stat[v];
    const Expansion e = p.expansion(d, total);
    if (e == Expansion::Vector) {
        // As emit_stmt keys them: a one-lane piece is a scalar (stride 0).
        for (const VectorPiece &piece : p.pieces(total)) {
            stat[v] = base + piece.start;
            keys.push_back({off(), piece.width, piece.width > 1 ? o.coef[v] : 0, piece.lanes});
        }
        return;
    }
    // A run-time loop's iterations share one context: the first stands for all.
    const bool unrolled = e == Expansion::Unrolled;
    for (int64_t i = 0; i < (unrolled ? nfull : std::min<int64_t>(nfull, 1)); ++i) {
        stat[v] = base + (unrolled ? i * chunk : 0);
        avail[v] = chunk;
        collect_keys(p, o, d + 1, avail, stat, keys);
    }
    if (rem > 0) {
        stat[v] = base + nfull * chunk;
        avail[v] = rem;
        collect_keys(p, o, d + 1, avail, stat, keys);
    }
}

}  // namespace

std::optional<std::vector<AccKey>> tile_keys(const NestPlan &plan, size_t pos, size_t d,
                                             const std::vector<int64_t> &avail,
                                             const std::vector<int64_t> &stat) {
    std::vector<AccKey> keys;
    collect_keys(plan, plan.slots[size_t(plan.out_slot[pos])], d, avail, stat, keys);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    // Every element must belong to one accumulator only; a vectorized reduction var with a
    // tail (two partial-sum widths for one element) is left to plain loads and stores.
    std::map<int64_t, size_t> owner;
    int64_t regs = 0;
    for (size_t k = 0; k < keys.size(); ++k) {
        regs += (keys[k].w + 15) / 16;
        const int64_t lanes = keys[k].stride == 0 ? 1 : keys[k].lanes;
        for (int64_t l = 0; l < lanes; ++l)
            if (!owner.emplace(keys[k].off + l * keys[k].stride, k).second) return std::nullopt;
    }
    // Past a few hundred vector registers the accumulators only spill and bloat the code.
    if (regs > 256) return std::nullopt;
    return keys;
}

std::string describe(const Computation &c, const NestPlan &p) {
    const std::vector<std::string> names = loop_names(c, p.nest);
    std::vector<std::string> loops, tiles;
    for (size_t d = 0; d < p.nest.loops.size(); ++d) {
        const Loop &l = p.nest.loops[d];
        loops.push_back(fmt::format("{}:{}{}{}{}{}", names[d], l.size,
                                    l.tail ? fmt::format("r{}", l.tail) : "", l.unroll ? "u" : "",
                                    l.vectorize ? "v" : "", l.parallel ? "p" : ""));
    }
    for (size_t i = 0; i < p.nest.stmts.size(); ++i)
        if (p.region[i] >= 0)
            tiles.push_back(fmt::format("s{} at {}{}", p.nest.stmts[i], names[size_t(p.region[i])],
                                        p.zero_start[i] ? " from zero" : ""));
    return fmt::format("{} [{}] stmts {} slots {} vector {} tiles [{}] cost {}",
                       nest_mode_name(p.mode), fmt::join(loops, " "), fmt::join(p.nest.stmts, ","),
                       p.slots.size(), p.vector_safe ? "safe" : "unsafe", fmt::join(tiles, ", "),
                       p.cost);
}

}  // namespace looptool::detail
