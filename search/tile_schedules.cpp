#include "search/tile_schedules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>

#include "looptool/gen/canonical_form.h"
#include "looptool/ir/error.h"
#include "search/search.h"
#include "search/seeds.h"

namespace looptune {

using looptool::Action;

namespace {

Action split_action(int64_t factor) {
    for (Action a : looptool::all_actions())
        if (looptool::split_factor(a) == factor) return a;
    throw looptool::Error(fmt::format("no split action with factor {}", factor));
}

/// Builds the sequence by applying each action to a program as it goes, so every step is
/// checked for legality and the cursor position is always known.
class Builder {
public:
    explicit Builder(const looptool::Computation &c)
        : p_(looptool::Program::naive(std::make_shared<const looptool::Computation>(c))) {}

    void act(Action a) {
        p_ = looptool::apply(p_, a);
        out_.push_back(a);
    }
    void go(int flat) {
        while (p_.cursor < flat) act(Action::Down);
        while (p_.cursor > flat) act(Action::Up);
    }
    /// Depth of the `level`-th loop (0: outermost) over `var` in nest `nest`, or -1.
    int depth_of(int nest, int var, int level) const {
        const auto &loops = p_.tree.nests[size_t(nest)].loops;
        for (size_t d = 0; d < loops.size(); ++d)
            if (loops[d].var == var && level-- == 0) return int(d);
        return -1;
    }
    int flat(int nest, int depth) const { return p_.tree.flat({nest, depth}); }
    const looptool::Loop &loop(int nest, int depth) const {
        return p_.tree.nests[size_t(nest)].loops[size_t(depth)];
    }
    /// Splits the outermost loop over `var` of nest `nest` by `factor`, unless the factor
    /// covers the whole extent (then the loop itself is the inner dimension). Returns whether
    /// it split.
    bool split(int nest, int var, int64_t factor, int64_t extent, int level = 0) {
        if (factor <= 0 || factor >= extent) return false;
        go(flat(nest, depth_of(nest, var, level)));
        act(split_action(factor));
        return true;
    }
    int depth_innermost(int nest) const {
        return int(p_.tree.nests[size_t(nest)].loops.size()) - 1;
    }
    int cursor() const { return p_.cursor; }
    const looptool::Computation &comp() const { return *p_.comp; }
    std::vector<Action> take() { return std::move(out_); }

private:
    looptool::Program p_;
    std::vector<Action> out_;
};

}  // namespace

std::vector<Action> tile_actions(const looptool::Computation &c, const TileSchedule &s) {
    const auto roles = looptool::generated_matmul(c);
    if (!roles) throw looptool::Error(fmt::format("{} is not a matmul in generate's form", c.name));
    const int M = roles->m, N = roles->n, K = roles->k;
    const int top = int(roles->batch >= 0) + int(roles->batch2 >= 0);  // batch loops outermost
    const int64_t em = c.vars[size_t(M)].extent, en = c.vars[size_t(N)].extent,
                  ek = c.vars[size_t(K)].extent;
    Builder b(c);

    // 1. Splits of the compute nest (nest 0): each leaves the cursor's loop outer, new inner.
    const bool ms = b.split(0, M, s.tm, em);
    // With an n block: split n by nb first, then the block by tn (n, N, n_i).
    const bool nbs = s.nb > 0 && b.split(0, N, s.nb, en);
    const bool ns = nbs ? b.split(0, N, s.tn, s.nb, 1) : b.split(0, N, s.tn, en);
    const bool ks = s.kb > 0 && b.split(0, K, s.kb, ek);
    const int n_inner = int(nbs) + int(ns);  // level of n_i

    // 2. Order: the outer loops as asked, then k (or k_i), m_i, n_i. Moving each target loop up
    // to its place never swaps two loops of one variable: same-variable loops are already in
    // their target relative order (outer first).
    struct Id {
        int var, level;
    };
    std::vector<Id> order;
    for (char ch : s.outer) {
        if (ch == 'm' && ms) order.push_back({M, 0});
        if (ch == 'n' && (ns || nbs)) order.push_back({N, 0});
        if (ch == 'N' && nbs && ns) order.push_back({N, 1});
        if (ch == 'k' && ks) order.push_back({K, 0});
    }
    order.push_back({K, ks ? 1 : 0});
    order.push_back({M, ms ? 1 : 0});
    order.push_back({N, n_inner});
    for (size_t i = 0; i < order.size(); ++i) {
        const int at = top + int(i);
        int d = b.depth_of(0, order[i].var, order[i].level);
        LT_CHECK(d >= at, "tile order: target loop above its place");
        if (d == at) continue;
        // One place away: swapping the loop above it down is the same move; take whichever is
        // nearer the cursor (this gives the hand schedule's 12-step sequence).
        if (d == at + 1 &&
            std::abs(b.cursor() - b.flat(0, at)) < std::abs(b.cursor() - b.flat(0, d))) {
            b.go(b.flat(0, at));
            b.act(Action::SwapDown);
            continue;
        }
        b.go(b.flat(0, d));
        for (; d > at; --d) b.act(Action::SwapUp);
    }

    // 3. Annotations: unroll the tile rows, vectorize the tile columns (innermost).
    const int dm = b.depth_of(0, M, ms ? 1 : 0);
    if (b.loop(0, dm).size > 1) {
        b.go(b.flat(0, dm));
        b.act(Action::Unroll);
    }
    b.go(b.flat(0, b.depth_of(0, N, n_inner)));
    b.act(Action::Vectorize);

    // 4. The write nest (nest 1: m, n): vectorize 16 columns at a time.
    if (s.vectorize_write) {
        const bool wn = b.split(1, N, 16, en);
        b.go(b.flat(1, b.depth_of(1, N, wn ? 1 : 0)));
        b.act(Action::Vectorize);
    }
    // 5. A packed in the order the tile walks it (A^T where tm does not divide m), then
    // B (illegal after a block-by-block pack of A: in "mn", inside the m blocks).
    if (s.pack_a) {
        b.go(b.flat(0, b.depth_of(0, N, 0)));
        b.act(Action::Pack);
    }
    if (s.pack) {
        b.go(b.flat(0, b.depth_of(0, M, 0)));
        b.act(Action::Pack);
    }
    return b.take();
}

namespace {

// The vars of a conv2d by role: T[n, m, ho, wo] += X[n, c, s ho + kh, s wo + kw] * W[m, c, kh, kw],
// and the nest that computes it: 0, or 1 after a padding nest P[n, c, h + p, w + p] += In[n, c,
// h, w] (variables h and w, else -1).
struct ConvVars {
    int n = -1, m = -1, ho = -1, wo = -1, c = -1, kh = -1, kw = -1;
    int nest = 0, h = -1, w = -1;
};

// The var an index expression is, alone (coefficient 1, no offset), or -1.
int single_var(const looptool::Affine &a) {
    return a.terms.size() == 1 && a.terms[0].coef == 1 && a.offset == 0 ? a.terms[0].var : -1;
}

// A conv2d with its temporary and copy (the tile's compute and write nests), X the product's
// first operand, a padding statement over n and c themselves.
std::optional<ConvVars> conv_vars(const looptool::Computation &c) {
    const auto r = looptool::conv_roles(c);
    if (!r || r->temp < 0) return {};
    const int first = r->pad_stmt >= 0 ? 1 : 0;
    if (c.stmts[size_t(first)].value.args[0].access.tensor != r->x) return {};
    if (first) {
        const auto &in = c.stmts[0].value.access.index;
        if (single_var(in[0]) != r->n || single_var(in[1]) != r->c) return {};
    }
    return ConvVars{r->n, r->m, r->ho, r->wo, r->c, r->kh, r->kw, first, r->h, r->wv};
}

}  // namespace

std::optional<ConvShape> conv_shape(const looptool::Computation &c) {
    const auto v = conv_vars(c);
    if (!v) return std::nullopt;
    auto e = [&](int var) { return c.vars[size_t(var)].extent; };
    return ConvShape{e(v->m), e(v->wo), e(v->kh) == 1 && e(v->kw) == 1 ? e(v->ho) * e(v->wo) : 0,
                     e(v->c), e(v->n),  e(v->ho)};
}

namespace {

// `c` with `var` of extent `extent`, and every tensor dimension indexed by `var` alone of that
// size.
looptool::Computation shrunk(const looptool::Computation &c, int var, int64_t extent,
                             std::string name) {
    looptool::Computation out = c;
    out.name = std::move(name);
    out.vars[size_t(var)].extent = extent;
    auto shrink = [&](const looptool::Access &a) {
        for (size_t d = 0; d < a.index.size(); ++d)
            if (single_var(a.index[d]) == var) out.tensors[size_t(a.tensor)].shape[d] = extent;
    };
    for (const looptool::Statement &s : c.stmts) {
        shrink(s.out);
        std::vector<const looptool::Access *> reads;
        looptool::collect_reads(s.value, reads);
        for (const looptool::Access *a : reads) shrink(*a);
    }
    out.validate();
    return out;
}

// A loop of the compute nest: the `level`-th (0: outermost) over `var`.
struct LoopId {
    int var, level;
};

// Which of a conv tile's splits happened (a factor that covers the extent does not split).
struct ConvSplits {
    bool m = false, wo = false, ho = false, c = false;
};

// The compute nest's loops, outermost first, in the order `s` asks for after the splits.
std::vector<LoopId> conv_tile_order(const ConvVars &v, const ConvTileSchedule &s,
                                    const ConvSplits &split) {
    std::vector<LoopId> order = {{v.n, 0}};
    const LoopId m_o{v.m, 0}, ho{v.ho, 0};
    if (s.vector_m && (s.flat || v.ho < 0))
        throw looptool::Error("the vector_m conv tile is not flat");
    if (s.vector_m) {
        if (split.m) order.push_back(m_o);
        order.push_back(ho);
        if (split.c) order.push_back({v.c, 0});
    } else if (v.ho < 0) {
        if (split.m) order.push_back(m_o);
    } else if (s.outer == "hm") {
        order.push_back(ho);
        if (split.m) order.push_back(m_o);
    } else {
        if (split.m) order.push_back(m_o);
        order.push_back(ho);
    }
    if (split.wo) order.push_back({v.wo, 0});
    const LoopId m_i{v.m, split.m ? 1 : 0}, wo_i{v.wo, split.wo ? 1 : 0}, ho_i{v.ho, 1};
    for (LoopId r : {LoopId{v.c, split.c ? 1 : 0}, LoopId{v.kh, 0}, LoopId{v.kw, 0}})
        order.push_back(r);
    if (split.ho) order.push_back(ho_i);
    order.push_back(s.vector_m ? wo_i : m_i);
    order.push_back(s.vector_m ? m_i : wo_i);
    return order;
}

// Moves each loop of nest `nest` up to its place, outermost first (loops of one var keep their
// order).
void move_into_order(Builder &b, int nest, const std::vector<LoopId> &order) {
    for (size_t i = 0; i < order.size(); ++i) {
        int d = b.depth_of(nest, order[i].var, order[i].level);
        LT_CHECK(d >= int(i), "conv tile order: target loop above its place");
        if (d == int(i)) continue;
        b.go(b.flat(nest, d));
        for (; d > int(i); --d) b.act(Action::SwapUp);
    }
}

// The write nest (naive order n, ho, wo, m): m moved out to depth 1 so the contiguous wo is
// innermost, then 16 columns at a time.
void vectorize_conv_write(Builder &b, const ConvVars &v) {
    const int nest = v.nest + 1;
    for (int d = b.depth_of(nest, v.m, 0); d > 1; --d) {
        b.go(b.flat(nest, d));
        b.act(Action::SwapUp);
    }
    const int wvar = v.wo;
    const bool wn = b.split(nest, wvar, 16, b.comp().vars[size_t(wvar)].extent);
    b.go(b.flat(nest, b.depth_of(nest, wvar, wn ? 1 : 0)));
    b.act(Action::Vectorize);
}

// The padding nest (n, c, h, w: w contiguous in the input and the padded copy), 16 columns at a
// time: its copy then runs at about the speed of memory.
void vectorize_padding(Builder &b, const ConvVars &v) {
    const bool wn = b.split(0, v.w, 16, b.comp().vars[size_t(v.w)].extent);
    b.go(b.flat(0, b.depth_of(0, v.w, wn ? 1 : 0)));
    b.act(Action::Vectorize);
}

// Whether the conv reads X with a stride.
bool strided(const looptool::Computation &c) {
    const auto r = looptool::conv_roles(c);
    return r && (r->stride_h > 1 || r->stride_w > 1);
}

// A subsample's copy nest (its innermost loop over X's columns, P contiguous along it): the
// columns a vector at a time, split by the widest vector where longer.
void vectorize_subsample(Builder &b, int nest) {
    const int var = b.loop(nest, b.depth_innermost(nest)).var;
    const int64_t w = simd_floats(), extent = b.comp().vars[size_t(var)].extent;
    const bool split = b.split(nest, var, w, extent);
    b.go(b.flat(nest, b.depth_of(nest, var, split ? 1 : 0)));
    if (b.loop(nest, b.depth_of(nest, var, split ? 1 : 0)).size > 1) b.act(Action::Vectorize);
}

}  // namespace

std::optional<looptool::Computation> conv_batch_slice(const looptool::Computation &c,
                                                      int64_t images) {
    const auto v = conv_vars(c);
    if (images < 1) throw looptool::Error(fmt::format("a slice of {} images", images));
    const int64_t batch = v ? c.vars[size_t(v->n)].extent : 0;
    if (!v || batch <= images) return std::nullopt;
    // n indexes each of its tensors' first dimension alone (conv_vars)
    return shrunk(c, v->n, images, fmt::format("{} ({} of {} images)", c.name, images, batch));
}

std::optional<looptool::Computation> conv_row_band(const looptool::Computation &c, int64_t rows) {
    const auto v = conv_vars(c);
    if (rows < 1) throw looptool::Error(fmt::format("a band of {} rows", rows));
    const int64_t ho = v ? c.vars[size_t(v->ho)].extent : 0;
    if (!v || ho <= rows) return std::nullopt;
    return shrunk(c, v->ho, rows, fmt::format("{} ({} of {} rows)", c.name, rows, ho));
}

int64_t conv_band_rows(const looptool::Computation &c, double flops) {
    const auto v = conv_vars(c);
    if (!v) return 0;
    const int64_t ho = c.vars[size_t(v->ho)].extent;
    const double per_row = c.flops() / double(ho);
    int64_t rows = 8 + ho % 8;
    while (double(rows) * per_row < flops && 2 * rows <= ho) rows += 8;
    return 2 * rows <= ho ? rows : 0;
}

namespace {

// ConvTileSchedule::parallel: the channel blocks (m_o, just split off) moved to the top of the
// compute nest and marked parallel, before the rest of the tile is built below them.
void parallel_channel_blocks(Builder &b, int cn, const ConvVars &v, const ConvTileSchedule &s,
                             bool m_split) {
    if (!m_split || s.pack || s.vector_m || (!s.flat && s.outer != "mh"))
        throw looptool::Error("a parallel conv tile is unpacked, mh or flat, with m split");
    int d = b.depth_of(cn, v.m, 0);
    b.go(b.flat(cn, d));
    for (; d > 0; --d) b.act(Action::SwapUp);
    b.act(Action::Parallel);
}

}  // namespace

std::vector<Action> conv_tile_actions(const looptool::Computation &c, const ConvTileSchedule &s) {
    auto v = conv_vars(c);
    if (!v) throw looptool::Error(fmt::format("{} is not a conv2d from make_conv2d", c.name));
    Builder b(c);
    if (v->nest > 0) vectorize_padding(b, *v);
    if (s.flat && strided(c)) {
        // X read with a stride (a 1x1 stride-2 conv): its subsample packed first, a copy nest
        // before the compute nest, which then reads dense rows that flatten.
        b.go(b.flat(v->nest, b.depth_of(v->nest, v->m, 0)));
        b.act(Action::Pack);
        vectorize_subsample(b, v->nest++);
    }
    const int cn = v->nest;  // the compute nest
    if (s.flat) {
        // ho and wo become one var (wo's role from now on; flatten keeps ho's id and drops
        // wo's); illegal, so an Error, unless kh and kw are 1 and ho sits right above wo.
        b.go(b.flat(cn, b.depth_of(cn, v->ho, 0)));
        b.act(Action::Flatten);
        auto var = [w = v->wo](int x) { return x > w ? x - 1 : x; };
        *v = {var(v->n),  var(v->m),  -1,      var(v->ho), var(v->c),
              var(v->kh), var(v->kw), v->nest, var(v->h),  var(v->w)};
    }
    auto extent = [&](int var) { return b.comp().vars[size_t(var)].extent; };
    ConvSplits split;
    split.m = b.split(cn, v->m, s.tm, extent(v->m));
    if (s.parallel) parallel_channel_blocks(b, cn, *v, s, split.m);
    split.wo = b.split(cn, v->wo, s.tw, extent(v->wo));
    split.ho = s.vector_m && s.th > 1 && b.split(cn, v->ho, s.th, extent(v->ho));
    if (s.cb > 0 && !s.vector_m) throw looptool::Error("channel blocks are for vector_m tiles");
    split.c = s.cb > 0 && b.split(cn, v->c, s.cb, extent(v->c));
    if (s.cb > 0 && !split.c)  // the same schedule as the member without blocks
        throw looptool::Error(
            fmt::format("blocks of {} cover all {} input channels", s.cb, extent(v->c)));
    std::vector<LoopId> order = conv_tile_order(*v, s, split);
    if (s.parallel) std::swap(order[0], order[1]);  // m_o above n
    move_into_order(b, cn, order);
    const LoopId m_i{v->m, split.m ? 1 : 0}, wo_i{v->wo, split.wo ? 1 : 0};
    const int du = s.vector_m ? b.depth_of(cn, v->wo, wo_i.level) : b.depth_of(cn, v->m, m_i.level);
    if (b.loop(cn, du).size > 1) {
        b.go(b.flat(cn, du));
        b.act(Action::Unroll);
    }
    if (split.ho) {  // th output rows too: each weight vector feeds th * tw FMAs
        b.go(b.flat(cn, b.depth_of(cn, v->ho, 1)));
        b.act(Action::Unroll);
    }
    const LoopId vec = s.vector_m ? m_i : wo_i;
    b.go(b.flat(cn, b.depth_of(cn, vec.var, vec.level)));
    b.act(Action::Vectorize);
    vectorize_conv_write(b, *v);
    // W packed under the output rows (or, flat, under the fused rows and columns).
    if (s.pack || s.vector_m) {
        b.go(b.flat(cn, b.depth_of(cn, v->ho >= 0 ? v->ho : v->wo, 0)));
        b.act(Action::Pack);
    }
    return b.take();
}

std::string format_actions(const std::vector<Action> &actions) {
    std::string s;
    for (Action a : actions) s += (s.empty() ? "" : ",") + std::string(looptool::action_name(a));
    return s;
}

}  // namespace looptune

namespace looptune::detail {

namespace {
/// Measures a member's state; false once the search is out of time. Within the step limit, a
/// schedule's prefix is what an agent could reach: the state it ends in is measured, like every
/// other search does with its paths. Nothing is measured for a member with an action outside
/// the space or one illegal on the way.
bool evaluate_member(SearchState &state, Environment &env, const looptool::Program &start,
                     const SearchConfig &config, std::vector<Action> actions) {
    if (int(actions.size()) > config.max_steps) actions.resize(size_t(config.max_steps));
    for (Action a : actions)
        if (env.action_space().index_of(a) < 0) return true;
    looptool::Program p = start;
    try {
        for (Action a : actions) p = looptool::apply(p, a);
    } catch (const looptool::Error &) {
        return true;
    }
    return state.evaluate(p, actions) >= 0;
}
}  // namespace

SearchResult tile_template(Environment &env, const looptool::Program &start,
                           const SearchConfig &config) {
    SearchState state(env, start, config);
    const looptool::Computation &c = *start.comp;
    const auto conv = conv_vars(c);
    if (!conv && !looptool::generated_matmul(c))
        throw looptool::Error(
            fmt::format("the tile search needs a matmul or a conv2d; {} is neither", c.name));
    // The family is written from the naive nest; from any other start its sequences mean
    // something else.
    if (looptool::schedule_key(start) !=
        looptool::schedule_key(looptool::Program::naive(start.comp)))
        throw looptool::Error("the tile search starts from the naive nest only");
    // Each family as its action sequences (empty: not expressible for this shape). The layout
    // members only where the action space has `pack`.
    const bool layout = env.action_space().index_of(Action::Pack) >= 0;
    std::vector<std::function<std::vector<Action>()>> family;
    const bool parallel =
        env.config().threads > 1 && env.action_space().index_of(Action::Parallel) >= 0;
    if (conv) {
        const ConvShape cs = *conv_shape(c);
        for (ConvTileSchedule s : conv_schedule_family(cs.co, cs.wo, cs.hw, layout)) {
            family.push_back([&c, s] { return conv_tile_actions(c, s); });
            s.parallel = true;  // where the tile allows it (else not expressible)
            if (parallel) family.push_back([&c, s] { return conv_tile_actions(c, s); });
        }
    } else {
        const auto r = *looptool::generated_matmul(c);
        for (const TileSchedule &s :
             schedule_family(c.vars[size_t(r.m)].extent, c.vars[size_t(r.n)].extent,
                             c.vars[size_t(r.k)].extent, layout))
            family.push_back([&c, s] { return tile_actions(c, s); });
    }
    // Above one thread, each member also with the naive nest's outermost loop made parallel
    // first (the cursor starts there; splits keep the mark on the outer part): after the tile,
    // the walk back up to it would not fit in an agent's episode. A member that then moves
    // that loop down, or unrolls it, has no such variant. (A conv of one image: its own
    // parallel members above.)
    for (const auto &make : family) {
        if (state.out_of_time()) break;
        std::vector<Action> actions;
        try {
            actions = make();
        } catch (const looptool::Error &) {
            continue;  // not expressible for this shape
        }
        std::vector<std::vector<Action>> variants;
        if (parallel) {
            variants.push_back({Action::Parallel});
            variants.back().insert(variants.back().end(), actions.begin(), actions.end());
        }
        variants.push_back(std::move(actions));
        for (std::vector<Action> &v : variants)
            if (!evaluate_member(state, env, start, config, v)) return state.finish("tile");
    }
    return state.finish("tile");
}

}  // namespace looptune::detail
