#include "search/seeds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "looptool/gen/canonical_form.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "looptool/measure/traffic.h"
#include "search/thread_variants.h"
#include "util/machine.h"

namespace looptune {

using looptool::Action;
using looptool::Program;

namespace {

/// The seeds that apply from the naive nest, within the step limit and the action space. The
/// layout actions `flatten` and `pack`, `parallel` and `fuse` are allowed outside it: a seed is
/// measured, not chosen by the policy, and the policy's actions go on from the state it reaches.
std::vector<TuneSeed> applicable(const looptool::Computation &c, std::vector<TuneSeed> candidates,
                                 int limit, const looptool::ActionSpace &space) {
    std::vector<TuneSeed> out;
    const Program naive = Program::naive(std::make_shared<const looptool::Computation>(c));
    for (TuneSeed &s : candidates) {
        Program p = naive;
        bool ok = int(s.actions.size()) <= limit;
        for (Action a : s.actions) {
            const bool layout = a == Action::Flatten || a == Action::Pack ||
                                a == Action::Parallel || a == Action::Fuse;
            ok = ok && (space.index_of(a) >= 0 || layout) && looptool::is_legal(p, a);
            if (ok) p = looptool::apply(p, a);
        }
        if (ok) out.push_back(std::move(s));
    }
    return out;
}

int nkm_kb(const MatmulShape &s) { return int(nkm_k_block(s.n, cache_sizes().l1d)); }

TileSchedule packed(TileSchedule t) {
    t.pack = true;
    return t;
}

TileSchedule packed_a(TileSchedule t) {
    t.pack_a = true;
    return t;
}

// clang-format off
/// In the order they are measured (the first has no bound to be cut at). The evidence for each
/// rule, measured side by side against every member of the family, is in docs/decisions.md.
const std::vector<MatmulSeedRule> kMatmulRules = {
    {"deep and wide: 4x64 kb nkm, first (never far from the best member on deep reductions)",
     [](const MatmulShape &s) { return s.k >= 1024 && s.m > 16 && s.n >= 64; },
     [](const MatmulShape &s) { return TileSchedule{4, 64, nkm_kb(s), "nkm"}; }},
    {"narrow n: 16x16 mn (a 32-wide tile would leave n unsplit)",
     [](const MatmulShape &s) { return s.n < 32; },
     [](const MatmulShape &) { return TileSchedule{16, 16, 0, "mn"}; }},
    {"the tile that wins most of LoopTune's grid: 8x32 mn",
     [](const MatmulShape &s) { return s.n >= 32; },
     [](const MatmulShape &) { return TileSchedule{8, 32, 0, "mn"}; }},
    {"narrow n: 8x16 mn",
     [](const MatmulShape &s) { return s.n < 32; },
     [](const MatmulShape &) { return TileSchedule{8, 16, 0, "mn"}; }},
    {"a wide tile, column panels outermost from k = 512 (B's panel reused across rows)",
     [](const MatmulShape &s) { return s.n >= 32; },
     [](const MatmulShape &s) { return TileSchedule{4, 64, 0, s.k >= 512 && s.m > 16 ? "nm" : "mn"}; }},
    {"narrow n: 8x32 mn",
     [](const MatmulShape &s) { return s.n < 32; },
     [](const MatmulShape &) { return TileSchedule{8, 32, 0, "mn"}; }},
    {"a narrow tile, columns outermost; 16x16 on wide rows of B whose k does not put A's rows in one L1 set",
     [](const MatmulShape &s) { return s.n >= 32; },
     [](const MatmulShape &s) {
         const bool wide = s.n >= 1024 && s.m > 16 && s.k % 1024 != 0;
         return wide ? TileSchedule{16, 16, 0, "nm"} : TileSchedule{8, 16, 0, "nm"}; }},
    {"medium depth (512 <= k < 1024): 16x16 mn",
     [](const MatmulShape &s) { return s.k >= 512 && s.k < 1024 && s.m > 16; },
     [](const MatmulShape &) { return TileSchedule{16, 16, 0, "mn"}; }},
    {"medium depth: k-blocked panels, 4x64 kb nkm (its next block prefetched), or 8x32 kb256 kmn below 64 columns",
     [](const MatmulShape &s) { return s.k >= 512 && s.k < 1024 && s.m > 16; },
     [](const MatmulShape &s) {
         return s.n >= 64 ? TileSchedule{4, 64, nkm_kb(s), "nkm"} : TileSchedule{8, 32, 256, "kmn"}; }},
    {"shallow with wide rows of B: 16x16 mn (B read once per 16 rows)",
     [](const MatmulShape &s) { return s.k < 512 && s.n >= 1024 && s.m > 16; },
     [](const MatmulShape &) { return TileSchedule{16, 16, 0, "mn"}; }},
    {"deep (k >= 1024): 8x32 with k blocks of 128, kmn",
     [](const MatmulShape &s) { return s.k >= 1024 && s.m > 16; },
     [](const MatmulShape &) { return TileSchedule{8, 32, 128, "kmn"}; }},
    {"deep: 16x16 mn, or 8x16 mn with A packed where k puts a tile's rows of A in one L1 set",
     [](const MatmulShape &s) { return s.k >= 1024 && s.m > 16; },
     [](const MatmulShape &s) {
         return s.k % 1024 == 0 && s.m % 8 == 0 ? packed_a({8, 16, 0, "mn"})
                                                 : TileSchedule{16, 16, 0, "mn"}; }},
    {"deep with narrow n: 4x64 kb nkm, last",
     [](const MatmulShape &s) { return s.k >= 1024 && s.m > 16 && s.n < 64; },
     [](const MatmulShape &s) { return TileSchedule{4, 64, nkm_kb(s), "nkm"}; }},
    {"decode-time (m <= 16): B streamed once in k blocks of 128; 8x32 reads each block once when m = 8",
     [](const MatmulShape &s) { return s.k >= 512 && s.m <= 16; },
     [](const MatmulShape &s) {
         return s.m == 8 ? TileSchedule{8, 32, 128, "kmn"} : TileSchedule{4, 64, 128, "kmn"}; }},
    {"decode-time, m <= 8: k blocks of 8 rows, so only 8 rows of B stream at a time",
     [](const MatmulShape &s) { return s.k >= 512 && s.m <= 8; },
     [](const MatmulShape &s) { return TileSchedule{s.m == 8 ? 4 : 8, 64, 8, "kmn"}; }},
    {"B of 4 MB or more streamed by a few rows of A: 4x64 kb128 nkm, the next block prefetched",
     [](const MatmulShape &s) {
         return s.k >= 512 && s.m > 1 && s.m <= 16 && s.k * s.n >= (int64_t(1) << 20); },
     [](const MatmulShape &) { return TileSchedule{4, 64, 128, "nkm"}; }},
    {"large on every side: a kb256 x nb block of B kept in half the L2 while m sweeps",
     [](const MatmulShape &s) { return s.m >= 512 && s.n >= 512 && s.k >= 512; },
     [](const MatmulShape &) {
         return TileSchedule{8, 32, 256, "knmN", true, int(l2_n_block(256, cache_sizes().l2))}; }},
    {"B's rows 4 KB apart or more: 4x64 nm with B's panels packed (the copy costs 1/m of the multiply)",
     [](const MatmulShape &s) { return s.n >= 1024 && s.m >= 32; },
     [](const MatmulShape &) { return packed({4, 64, 0, "nm"}); }},
    {"and deep: 8x32 kb256 nkm with B packed",
     [](const MatmulShape &s) { return s.n >= 1024 && s.m >= 32 && s.k >= 2048; },
     [](const MatmulShape &) { return packed({8, 32, 256, "nkm"}); }},
    {"and rows of B off the cache lines, k < 1024: 8x16 mn with B copied into padded rows",
     [](const MatmulShape &s) { return s.n >= 1024 && s.m >= 32 && s.n % 16 != 0 && s.k < 1024; },
     [](const MatmulShape &) { return packed({8, 16, 0, "mn"}); }},
};

const std::vector<ConvSeedRule> kConvRules = {
    {"row tiles along wo, channels outermost", [](const ConvShape &) { return true; },
     [](const ConvShape &) { return ConvTileSchedule{8, 32, "mh"}; }},
    {"square tile, rows outermost", [](const ConvShape &) { return true; },
     [](const ConvShape &) { return ConvTileSchedule{16, 16, "hm"}; }},
    {"wide tile, rows outermost (each row's input kept across channel blocks)",
     [](const ConvShape &) { return true; },
     [](const ConvShape &) { return ConvTileSchedule{4, 64, "hm"}; }},
    {"channel-vectorized tile, W packed (narrow images)", [](const ConvShape &) { return true; },
     [](const ConvShape &) { return ConvTileSchedule{64, 4, "mh", false, true, true}; }},
    {"channel-vectorized tile, W packed", [](const ConvShape &) { return true; },
     [](const ConvShape &) { return ConvTileSchedule{32, 8, "mh", false, true, true}; }},
    {"rows of up to 14 columns: 32 channels x the whole row",
     [](const ConvShape &s) { return s.wo <= 14; },
     [](const ConvShape &s) { return ConvTileSchedule{32, int(s.wo), "mh", false, true, true}; }},
    {"rows of 15-28 columns: 16 channels x the whole row (one vector of weights)",
     [](const ConvShape &s) { return s.wo > 14 && s.wo <= 28; },
     [](const ConvShape &s) { return ConvTileSchedule{16, int(s.wo), "mh", false, true, true}; }},
    {"many input channels on a wide image: 16 channels at a time (their weights stay in L1)",
     [](const ConvShape &s) { return s.ci >= 64 && s.ci % 16 == 0 && s.wo >= 32; },
     [](const ConvShape &) { return ConvTileSchedule{32, 8, "mh", false, true, true, 1, 16}; }},
    {"1x1 convs: the flat tile over ho * wo", [](const ConvShape &s) { return s.hw > 0; },
     [](const ConvShape &) { return ConvTileSchedule{8, 32, "mh", true}; }},
};
// clang-format on

/// Each seed of `seeds` that ends with `pack` under an outer loop, with the pack moved to the
/// outermost loop of its nest instead: the copy nest then shares no loop with the conv's and
/// both can be `parallel` (parallel_rule() refuses a shared loop), each thread packing its own
/// output channels' weights. The copy is the same; only the block just packed is no longer
/// hot in the cache when the tile reads it. Only their parallel variants are seeds.
std::vector<TuneSeed> packed_on_top(const looptool::Computation &c,
                                    const std::vector<TuneSeed> &seeds) {
    std::vector<TuneSeed> out;
    const Program naive = Program::naive(std::make_shared<const looptool::Computation>(c));
    for (const TuneSeed &s : seeds) {
        if (s.actions.empty() || s.actions.back() != Action::Pack) continue;
        TuneSeed top{s.name + " packed on top", {s.actions.begin(), s.actions.end() - 1}};
        Program p = naive;
        try {
            for (Action a : top.actions) p = looptool::apply(p, a);
        } catch (const looptool::Error &) {
            continue;
        }
        const int depth = p.tree.pos(p.cursor).depth;
        if (depth == 0) continue;  // packed there already
        top.actions.insert(top.actions.end(), size_t(depth), Action::Up);
        top.actions.push_back(Action::Pack);
        out.push_back(std::move(top));
    }
    return out;
}

std::vector<TuneSeed> conv_seeds(const looptool::Computation &c, const ConvShape &cs,
                                 bool row_band) {
    std::vector<TuneSeed> candidates;
    for (const ConvSeedRule &r : kConvRules) {
        if (!r.applies(cs)) continue;
        const ConvTileSchedule t = r.schedule(cs);
        // On a band of rows, no tile that sweeps every row more than twice, once per block of
        // output channels: the band's input stays in cache from one block to the next, the
        // whole image's does not.
        if (row_band && t.outer == "mh" && cs.co > 2 * int64_t(t.tm)) continue;
        try {
            candidates.push_back({"tile " + t.name(), conv_tile_actions(c, t)});
        } catch (const looptool::Error &) {
            // not expressible for this layer (a pack needs tm | co, flat a 1x1 conv)
        }
    }
    return candidates;
}

/// B's n is not its innermost dimension (attention's K in Q.K^T: n = j, rows H D floats apart):
/// the tile's vector loads over n would be gathers, so each seed is also tried with B packed.
bool b_strided_along_n(const looptool::Computation &c) {
    const auto r = looptool::generated_matmul(c);
    if (!r) return false;
    for (const looptool::Statement &st : c.stmts)
        if (st.value.op == looptool::OpKind::Mul)
            for (const looptool::Expr &e : st.value.args)
                if (e.access.tensor == r->b) return e.access.index.back().terms[0].var != r->n;
    return false;
}

/// The n blocks of a column band (band_schedules()): split factors, multiples of tn giving the
/// threads a block each at least. Two rules pull apart, so both are seeded and measured: the
/// widest block (the longest contiguous runs of each row of B a thread streams; a run that
/// starts and ends inside a page costs the prefetchers a new start) and, where it is another,
/// the one that, dealt to the threads in contiguous chunks as the pool deals them
/// (ThreadPool::run), gives the busiest thread the fewest columns (of equals the widest).
std::vector<int64_t> band_blocks(int64_t n, int64_t tn, int threads) {
    int64_t widest = 0, even = 0, even_load = n + 1;
    for (Action a : looptool::all_actions()) {
        const int64_t f = looptool::split_factor(a), blocks = f > 0 ? (n + f - 1) / f : 0;
        if (f <= tn || f % tn != 0 || blocks < threads) continue;
        int64_t load = 0;
        for (int64_t t = 0; t < threads; ++t)
            load = std::max(load,
                            std::min((t + 1) * blocks / threads * f, n) - t * blocks / threads * f);
        widest = std::max(widest, f);
        if (load < even_load || (load == even_load && f > even)) even = f, even_load = load;
    }
    std::vector<int64_t> out;
    if (widest > 0) out.push_back(widest);
    if (even > 0 && even != widest) out.push_back(even);
    return out;
}

/// A tile whose outermost loop is its k block (a reduction: never parallel) as column bands:
/// n blocks of band_blocks() outermost, then the tile's own order over the tiles inside a block
/// ("kmn" becomes "nkmN"). Each thread then streams its contiguous share of every row of B in
/// the tile's order, where the same tile parallel over its rows or columns would sweep a narrow
/// strip of B down every row. None for a tile that is not of that form.
std::vector<TileSchedule> band_schedules(const MatmulShape &s, const TileSchedule &t, int threads) {
    if (t.kb <= 0 || t.kb >= s.k || t.nb > 0 || t.outer.empty() || t.outer[0] != 'k') return {};
    std::vector<TileSchedule> out;
    for (int64_t nb : band_blocks(s.n, t.tn, threads)) {
        TileSchedule b = t;
        b.nb = int(nb);
        std::replace(b.outer.begin(), b.outer.end(), 'n', 'N');
        b.outer = "n" + b.outer;
        out.push_back(b);
    }
    return out;
}

/// The seeds of the rules, and above one thread the column bands of those whose k block is
/// outermost (band_schedule(): only their parallel variants are seeds).
struct MatmulSeeds {
    std::vector<TuneSeed> seeds, bands;
};

MatmulSeeds matmul_seeds(const looptool::Computation &c, const MatmulShape &s, int threads) {
    MatmulSeeds out;
    std::vector<TuneSeed> &candidates = out.seeds;
    // n = 1 (a GEMV on the other side): nothing in the tile family vectorizes; dot products,
    // n above k, k split and its inner part vectorized as partial sums.
    if (s.n == 1) {
        for (Action split : {Action::Split64, Action::Split16})
            candidates.push_back({fmt::format("dot k{}", looptool::split_factor(split)),
                                  {Action::Down, Action::Down, Action::SwapUp, Action::Down, split,
                                   Action::Down, Action::Vectorize}});
        return out;
    }
    const bool strided = b_strided_along_n(c);
    for (const MatmulSeedRule &r : kMatmulRules) {
        if (!r.applies(s)) continue;
        TileSchedule t = r.schedule(s);
        for (int packed = 0; packed <= int(strided && !t.pack); ++packed) {
            t.pack = t.pack || packed;
            try {
                candidates.push_back({"tile " + t.name(), tile_actions(c, t)});
                if (threads > 1)
                    for (const TileSchedule &b : band_schedules(s, t, threads))
                        out.bands.push_back({"tile " + b.name(), tile_actions(c, b)});
            } catch (const looptool::Error &) {
                // not expressible for this shape
            }
        }
    }
    return out;
}

/// `s` with the outermost loop of every nest made parallel where that is legal and has `threads`
/// iterations at least (a tile's row or column blocks; the copy nests too), or nothing when the
/// nest that reduces (the matmul's or conv's work) is not among them (parallel_actions()).
std::optional<TuneSeed> parallel_variant(const looptool::Computation &c, const TuneSeed &s,
                                         int threads) {
    Program p = Program::naive(std::make_shared<const looptool::Computation>(c));
    try {
        for (Action a : s.actions) p = looptool::apply(p, a);
    } catch (const looptool::Error &) {
        return std::nullopt;  // applicable() leaves it out too
    }
    const auto more = parallel_actions(p, threads);
    if (!more) return std::nullopt;
    TuneSeed out{s.name + " parallel", s.actions};
    out.actions.insert(out.actions.end(), more->begin(), more->end());
    return out;
}

/// With threads > 1, the parallel variants (parallel_variant) of `bands` (seeds offered only
/// parallel: column bands, packs on top) and then of each seed first, then the seeds.
std::vector<TuneSeed> with_parallel(const looptool::Computation &c, std::vector<TuneSeed> seeds,
                                    int threads, const std::vector<TuneSeed> &bands = {}) {
    if (threads < 2) return seeds;
    std::vector<TuneSeed> out;
    for (const TuneSeed &b : bands)
        if (auto v = parallel_variant(c, b, threads)) out.push_back(std::move(*v));
    for (const TuneSeed &s : seeds)
        if (auto v = parallel_variant(c, s, threads)) out.push_back(std::move(*v));
    out.insert(out.end(), seeds.begin(), seeds.end());
    return out;
}

/// `s` followed by `fuse` at the innermost legal level of the first nest where one is (the
/// matmul's, after a copy of B where `pack` copies all of it first: right above its first loop
/// over the reduction, so the epilogue runs on each register tile), or nullopt where no level
/// is legal (a k block outermost).
std::optional<TuneSeed> fused_variant(const looptool::Computation &c, const TuneSeed &s) {
    Program p = Program::naive(std::make_shared<const looptool::Computation>(c));
    try {
        for (Action a : s.actions) p = looptool::apply(p, a);
    } catch (const looptool::Error &) {
        return std::nullopt;
    }
    for (int n = 0; n < int(p.tree.nests.size()); ++n)
        for (int d = int(p.tree.nests[size_t(n)].loops.size()) - 1; d >= 0; --d) {
            const int at = p.tree.flat({n, d});
            Program q = p;
            q.cursor = at;
            if (!looptool::is_legal(q, Action::Fuse)) continue;
            TuneSeed out{s.name + " fused", s.actions};
            const Action move = at < p.cursor ? Action::Up : Action::Down;
            out.actions.insert(out.actions.end(), size_t(std::abs(at - p.cursor)), move);
            out.actions.push_back(Action::Fuse);
            return out;
        }
    return std::nullopt;
}

/// A matmul with an epilogue (generate --epilogue): the matmul's seeds, each fused where it can
/// be; with threads > 1 the unfused tiles' parallel variants first (a fused nest pair runs on
/// one thread).
std::vector<TuneSeed> epilogue_seeds(const looptool::Computation &c,
                                     const looptool::MatmulEpilogue &e, int threads) {
    const MatmulShape s{e.m, e.n, e.k};
    const MatmulSeeds m = matmul_seeds(looptool::make_matmul(e.m, e.n, e.k), s, threads);
    const std::vector<TuneSeed> &tiles = m.seeds;
    std::vector<TuneSeed> out;
    if (threads > 1)
        for (const auto *list : {&m.bands, &tiles})
            for (const TuneSeed &t : *list)
                if (auto v = parallel_variant(c, t, threads)) out.push_back(std::move(*v));
    for (const TuneSeed &t : tiles) out.push_back(fused_variant(c, t).value_or(t));
    return out;
}

// Whether every access of `nest` that uses var uses it in its last dimension alone, with
// coefficient 1 (the var walks contiguous floats), and one does.
bool walks_rows(const looptool::Computation &c, const looptool::Nest &nest, int var) {
    bool used = false;
    for (int s : nest.stmts) {
        const looptool::Statement &st = c.stmts[size_t(s)];
        std::vector<const looptool::Access *> acc;
        looptool::collect_reads(st.value, acc);
        acc.push_back(&st.out);
        for (const looptool::Access *a : acc)
            for (size_t d = 0; d < a->index.size(); ++d) {
                const looptool::Affine &f = a->index[d];
                if (f.coef_of(var) == 0) continue;
                if (d + 1 != a->index.size() || f.terms.size() != 1 || f.coef_of(var) != 1)
                    return false;
                used = true;
            }
    }
    return used;
}

}  // namespace

int64_t simd_floats() {
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx")) return 8;
    return 4;
}

std::optional<std::vector<Action>> row_vector_actions(const looptool::Computation &c, int64_t w) {
    Program p = Program::naive(std::make_shared<const looptool::Computation>(c));
    std::vector<Action> acts;
    auto go = [&](Action a) {
        p = looptool::apply(p, a);
        acts.push_back(a);
    };
    auto move_to = [&](int flat) {
        while (p.cursor < flat) go(Action::Down);
        while (p.cursor > flat) go(Action::Up);
    };
    std::optional<Action> split;
    for (Action a : looptool::all_actions())
        if (looptool::split_factor(a) == w) split = a;
    if (!split || w > looptool::kMaxVectorWidth) return std::nullopt;
    bool any = false;
    for (size_t n = 0; n < p.tree.nests.size(); ++n) {
        const looptool::Nest &nest = p.tree.nests[n];
        const int d = int(nest.loops.size()) - 1, var = nest.loops.back().var;
        // A one-float row has nothing to vectorize (a single iteration cannot be).
        if (d < 1 || c.vars[size_t(var)].extent < 2 || !walks_rows(c, nest, var)) continue;
        move_to(p.tree.flat({int(n), d}));
        if (c.vars[size_t(var)].extent > w) {
            go(*split);
            move_to(p.tree.flat({int(n), d + 1}));
        }
        go(Action::Vectorize);
        any = true;
    }
    if (!any) return std::nullopt;
    return acts;
}

const std::vector<MatmulSeedRule> &matmul_seed_rules() { return kMatmulRules; }
const std::vector<ConvSeedRule> &conv_seed_rules() { return kConvRules; }

std::optional<MatmulShape> matmul_shape(const looptool::Computation &c) {
    const auto r = looptool::generated_matmul(c);
    if (!r) return std::nullopt;
    return MatmulShape{c.vars[size_t(r->m)].extent, c.vars[size_t(r->n)].extent,
                       c.vars[size_t(r->k)].extent};
}

bool band_hides_row_sweeps(const ConvShape &whole) {
    // Half of this core's L2, the rest for the weights and the outputs.
    return whole.ci * whole.ho * whole.wo * 4 > looptool::private_cache_bytes() / 2;
}

std::vector<TuneSeed> tune_seeds(const looptool::Computation &c, int limit,
                                 const looptool::ActionSpace &space, bool row_band, int threads) {
    if (const auto cs = conv_shape(c)) {
        std::vector<TuneSeed> seeds = conv_seeds(c, *cs, row_band);
        const std::vector<TuneSeed> top =
            threads > 1 ? packed_on_top(c, seeds) : std::vector<TuneSeed>{};
        return applicable(c, with_parallel(c, std::move(seeds), threads, top), limit, space);
    }
    if (const auto s = matmul_shape(c)) {
        MatmulSeeds m = matmul_seeds(c, *s, threads);
        return applicable(c, with_parallel(c, std::move(m.seeds), threads, m.bands), limit, space);
    }
    if (const auto e = looptool::matmul_epilogue(c))
        return applicable(c, epilogue_seeds(c, *e, threads), limit, space);
    // Rows: 4 and 2 vector registers of lanes per piece of a row (kept in registers as
    // independent accumulators of a reduction over the row).
    std::vector<TuneSeed> rows;
    for (int64_t regs : {4, 2})
        if (auto a = row_vector_actions(c, regs * simd_floats()))
            rows.push_back({fmt::format("rows v{}", regs * simd_floats()), std::move(*a)});
    return applicable(c, with_parallel(c, rows, threads), limit, space);
}

std::vector<looptool::Action> best_seed_actions(Environment &env, const looptool::Program &start,
                                                int limit) {
    std::vector<looptool::Action> best;
    env.reset(start);  // the benchmark's buffers
    double best_gflops = env.evaluate(start);
    for (const TuneSeed &s : tune_seeds(*start.comp, limit, env.action_space())) {
        looptool::Program p = start;
        for (looptool::Action a : s.actions) p = looptool::apply(p, a);
        if (const double g = env.evaluate(p); g > best_gflops) {
            best_gflops = g;
            best = s.actions;
        }
    }
    return best;
}

}  // namespace looptune
