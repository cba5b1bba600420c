#include "agents/guided_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "agents/tile_schedules.h"
#include "looptool/error.h"
#include "looptool/traffic.h"

namespace looptune {

using looptool::Action;
using looptool::Program;

looptool::MeasureOptions bounded_options(const looptool::MeasureOptions &configured, double flops,
                                         double best_gflops) {
    looptool::MeasureOptions o = configured;
    o.warmup = std::min(o.warmup, 1);
    if (!(best_gflops > 0 && flops > 0)) {
        o.min_runs = std::min(o.min_runs, 1);
        return o;
    }
    o.min_runs = std::min(o.min_runs, 3);
    const double best_s = flops / (best_gflops * 1e9);
    const double bound = std::max(kBoundCalls * best_s, 2 * o.min_time_s + 0.005);
    o.time_cap_s = std::min(o.time_cap_s, bound);
    // One call longer than kFirstCallCalls of the best's says as much, without waiting for
    // the cap (never below kMinFirstCallCapS: a fast kernel's first call may be cold).
    const double first = std::max(kFirstCallCalls * best_s, kMinFirstCallCapS);
    if (first < o.time_cap_s) o.first_call_cap_s = first;
    return fewer_long_calls(o, best_s, 1);
}

bool depends_on_shared_cache(const Program &p, int64_t cache_bytes) {
    return looptool::estimate_traffic(p.computation(), p.tree, cache_bytes).shared_cache_ratio() >
           kFragileShortRuns;
}

bool depends_on_shared_cache(const Program &p) {
    return depends_on_shared_cache(p, looptool::private_cache_bytes());
}

size_t prefer_robust(const std::vector<double> &gflops, const std::vector<bool> &fragile,
                     double margin) {
    if (gflops.empty()) throw looptool::Error("prefer_robust: no kernel");
    const size_t fastest = size_t(std::max_element(gflops.begin(), gflops.end()) - gflops.begin());
    if (!fragile[fastest]) return fastest;
    size_t pick = fastest;
    for (size_t i = 0; i < gflops.size(); ++i)
        if (!fragile[i] && gflops[i] >= (1 - margin) * gflops[fastest] &&
            (pick == fastest || gflops[i] > gflops[pick]))
            pick = i;
    return pick;
}

looptool::MeasureOptions fewer_long_calls(looptool::MeasureOptions o, double call_s, int least) {
    if (!(call_s > 0)) return o;
    const double needed = std::max(double(least), std::ceil(o.min_time_s / call_s));
    if (needed >= double(o.min_runs)) return o;
    o.min_runs = int(needed);
    o.warmup = std::min(o.warmup, call_s >= o.min_time_s ? 0 : 1);
    return o;
}

int guided_step_limit(const looptool::Computation &c, int policy_steps) {
    int long_vars = 0;
    for (const auto &v : c.vars) long_vars += v.extent > 256;
    // A whole policy episode after the longest seed: most rollouts start at a seed. An 8x32
    // tile is 17 actions with its write nest, a conv tile 35-50 (seven loops to order, then
    // the write nest and the pack). Before, the limit was 16 on LoopTune's 64..256 grid, where
    // no tile seed fit, so none was measured there.
    size_t longest = 0;
    for (const TuneSeed &s : tune_seeds(c, kSeedSteps, looptool::ActionSpace::preset("full")))
        longest = std::max(longest, s.actions.size());
    return std::max(policy_steps + 8 * long_vars, longest == 0 ? 0 : int(longest) + policy_steps);
}

using Seed = TuneSeed;

namespace {

/// The seeds that apply from the naive nest, within the step limit and the action space. The
/// layout actions `flatten` and `pack` are allowed outside it: a seed is measured, not chosen
/// by the policy, and the policy's actions go on from the state it reaches.
std::vector<Seed> applicable(const looptool::Computation &c, std::vector<Seed> candidates,
                             int limit, const looptool::ActionSpace &space) {
    std::vector<Seed> out;
    const Program naive = Program::naive(std::make_shared<const looptool::Computation>(c));
    for (Seed &s : candidates) {
        Program p = naive;
        bool ok = int(s.actions.size()) <= limit;
        for (Action a : s.actions) {
            const bool layout = a == Action::Flatten || a == Action::Pack;
            ok = ok && (space.index_of(a) >= 0 || layout) && looptool::is_legal(p, a);
            if (ok) p = looptool::apply(p, a);
        }
        if (ok) out.push_back(std::move(s));
    }
    return out;
}

}  // namespace

bool band_hides_row_sweeps(const ConvShape &whole) {
    // Half the L2 cache (1 MiB on Zen 4 and Zen 5), the rest for the weights and the outputs.
    return whole.ci * whole.ho * whole.wo * 4 > (int64_t(1) << 19);
}

/// The starting points worth a measurement each within a budget of a fraction of a second.
/// For n >= 2, `tile` members: the tile that wins most of LoopTune's grid (8x32; 16x16 when
/// n < 32, where a 32-wide tile leaves n unsplit: mm1000_17_300 reached 67 GFLOPS with 16x16,
/// 4 with 8x32), a wide and a narrow one, and for deep or large shapes the k-blocked (k blocks
/// of 128 and 256) and k/n-blocked schedules (docs/performance.md, (b)). For n = 1 (a GEMV on the
/// other side) nothing in the tile family vectorizes, so the seeds are dot products: n above k, k
/// split by 64 (or 16) and its inner part vectorized as partial sums (mm64_1_1216: 46 GFLOPS
/// against the naive nest's 1.8).
std::vector<TuneSeed> tune_seeds(const looptool::Computation &c, int limit,
                                 const looptool::ActionSpace &space, bool row_band) {
    // A conv2d: the conv family's members that win most often on real layers (section m of
    // docs/performance.md): row tiles along wo, the channel-vectorized tiles with W packed for
    // narrow images, and the flat tile for 1x1 convs.
    if (const auto cs = conv_shape(c)) {
        std::vector<ConvTileSchedule> tiles = {{8, 32, "mh"},
                                               {16, 16, "hm"},
                                               {4, 64, "hm"},
                                               {64, 4, "mh", false, true, true},
                                               {32, 8, "mh", false, true, true}};
        if (cs->wo <= 14) tiles.push_back({32, int(cs->wo), "mh", false, true, true});
        // Rows of 15-28 columns: 16 channels x the whole row (one vector of weights, up to 28
        // accumulators). `tile` took it on the real 5x5 layers (conv1_64_31_31__192_64_5_5: 111
        // GFLOPS, `tune` without it 92; docs/performance.md, (u)).
        else if (cs->wo <= 28)
            tiles.push_back({16, int(cs->wo), "mh", false, true, true});
        // Many input channels on a wide image: 16 channels at a time (their weights, 18 KB
        // for 32 output channels, stay in L1 along the row; a 256-column image's channel
        // planes are 256 KB apart, all in one cache set): 108.6 GFLOPS against 92.0 without
        // on one image of conv64_128_256_256__32_128_3_3 (docs/performance.md, (q)).
        if (cs->ci >= 64 && cs->ci % 16 == 0 && cs->wo >= 32)
            tiles.push_back({32, 8, "mh", false, true, true, 1, 16});
        if (cs->hw > 0) tiles.push_back({8, 32, "mh", true});
        // On a band of rows (a large image), no tile that sweeps every row once per block of
        // output channels, more than twice: the band's input stays in L2 (or L3) from one block
        // to the next, the whole image's does not. On a Zen 4 core the 8x32 mh tile ran
        // 94-104 GFLOPS on 14-row bands of LoopTune's 256x256 convs and `tune` took it, then
        // 30-38 on every row, where the 4x64 hm tile (each row's input kept across the blocks)
        // ran 103-105 (conv32_32_256_256__64_32_3_3, 2-16 images; docs/performance.md, (t)).
        if (row_band)
            std::erase_if(tiles, [&](const ConvTileSchedule &t) {
                return t.outer == "mh" && cs->co > 2 * int64_t(t.tm);
            });
        std::vector<Seed> candidates;
        for (const ConvTileSchedule &t : tiles) try {
                candidates.push_back({"tile " + t.name(), conv_tile_actions(c, t)});
            } catch (const looptool::Error &) {
                // not expressible for this layer (a pack needs tm | co, flat a 1x1 conv)
            }
        return applicable(c, std::move(candidates), limit, space);
    }
    const int M = c.var_index("m"), N = c.var_index("n"), K = c.var_index("k");
    if (M < 0 || N < 0 || K < 0 || c.stmts.size() != 2) return {};
    const int64_t m = c.vars[size_t(M)].extent, n = c.vars[size_t(N)].extent,
                  k = c.vars[size_t(K)].extent;
    std::vector<Seed> candidates;
    if (n == 1) {
        for (Action split : {Action::Split64, Action::Split16})
            candidates.push_back({fmt::format("dot k{}", looptool::split_factor(split)),
                                  {Action::Down, Action::Down, Action::SwapUp, Action::Down, split,
                                   Action::Down, Action::Vectorize}});
    } else {
        std::vector<TileSchedule> tiles;
        if (n < 32)
            tiles = {{16, 16, 0, "mn"}, {8, 16, 0, "mn"}, {8, 32, 0, "mn"}};
        else
            tiles = {{8, 32, 0, "mn"}, {4, 64, 0, "mn"}, {8, 16, 0, "nm"}};
        // From k = 512 (m > 16) the 4x64 tile's column panels outermost: on 12 random shapes
        // with k = 549-1011 (a Zen 4 core, docs/performance.md (w)) 4x64 nm was 0.97x the
        // fastest member in geomean, 4x64 mn 0.89x; on the deeper random shapes 0.93-0.94x
        // against 0.84-0.88x.
        if (k >= 512 && m > 16 && n >= 32) tiles[1].outer = "nm";
        // Wide rows of B (n >= 1024, m > 16), k not a multiple of 1024 (where A's 16 rows would
        // fall in one L1 set): 16x16 nm instead of 8x16 nm. On 10 random such shapes (the n1024
        // check of docs/performance.md (w)) the best seed went from 0.985x to 0.991x the best
        // member (worst 0.945x -> 0.964x); `tile` found it on mm128_3072_768 (95.2 GFLOPS
        // against 88.9 for `tune`; side by side 99.3 against the seeds' best 97.9; (x)).
        if (n >= 1024 && m > 16 && k % 1024 != 0) tiles[2] = {16, 16, 0, "nm"};
        // 4x64 nkm's k blocks: 128 rows, or 64 where B's rows do not start lines (16 does not
        // divide n): a row's 64 floats then touch 5 lines, and a 128-row block (40 KB) no longer
        // fits a 32 KB L1; a 64-row one does. On 22 random and real-model such shapes with k =
        // 1057-3071 (a Zen 4 core, side by side, docs/performance.md (aa)) kb64 was 0.974x the
        // fastest member measured in geomean, kb128 0.897x (0.937x with each block of B copied,
        // rows padded); the best seed went from 0.966x to 0.998x (worst 0.794x -> 0.976x). On
        // 12 other such shapes (k = 539-1698): 0.942x against 0.879x; the best seed 0.979x ->
        // 0.991x, no shape lower. (Zen 5's L1 holds 48 KB: not measured there.)
        const int nkm_kb = n % 16 != 0 ? 64 : 128;
        // k blocks of 128 and 256 outermost: on a quiet Zen 5 core kb128 won `tile` on
        // mm128_1024_1024 (190 GFLOPS, against 119 for the search without it), mm49_512_4608,
        // mm35_700_2048 and mm128_768_768, kb256 on mm128_2304_768 and mm196_256_2304.
        if (k >= 512 && k < 1024 && m > 16) {
            // 16x16 mn instead of kb128: it was the fastest member on 8 of 12 random shapes
            // with k = 549-1011 (and 2 of 5 random ones with k = 512); with it and 4x64 nm the
            // best seed went from 0.960x to 1.000x the fastest member there (worst 0.898x ->
            // 1.000x), and from 0.982x to 0.995x on the k = 512 ones (docs/performance.md (w)).
            tiles.push_back({16, 16, 0, "mn"});
            // 4x64 kb128 nkm (its next k block prefetched, lower_prefetch.h) instead of 8x32
            // kb256 kmn: faster on 5 of 7 shapes side by side (mm128_2304_768: 0.95x and 0.91x
            // oneDNN in two runs against 0.79x and 0.62x; 6 random ones with k = 525-931, both
            // processes: 0.87-0.97x against 0.68-0.90x on 4, 0.02-0.03x slower on 2;
            // docs/performance.md (x)).
            tiles.push_back(n >= 64 ? TileSchedule{4, 64, nkm_kb, "nkm"}
                                    : TileSchedule{8, 32, 256, "kmn"});
        }
        // Below k = 512 with wide rows of B (n >= 1024, m > 16), 16x16 mn too: on 10 random such
        // shapes with k = 146-896 (a Zen 4 core, every seed and candidate side by side,
        // docs/performance.md (aa)) it was the fastest on 3 of the 6 with k < 512, and the best
        // seed went from 0.985x to 0.997x the fastest measured (worst 0.914x -> 0.980x); on 10
        // others chosen after (k = 65-471) 0.991x -> 0.995x (worst 0.951x -> 0.965x). A seed
        // there costs a few ms: B is read once per 16 rows of a short k.
        if (k < 512 && n >= 1024 && m > 16) tiles.push_back({16, 16, 0, "mn"});
        // Deeper (k >= 1024), instead of kb256: the 16x16 tile, and 4x64 with k blocks of 128
        // inside column panels. Every member side by side on 22 of the generator's random
        // shapes with k = 1077-3476 (a Zen 4 core, two processes, docs/performance.md (v)):
        // 16x16 mn was the fastest on 10 (where A's rows are not 4 KB-aligned: at k = 3072 it
        // runs at half speed, 16 rows in one L1 set), 4x64 kb128 nkm never below 0.92x the
        // fastest. With both, the best seed went from 0.949x to 0.996x the fastest member
        // (geomean; the worst shape from 0.62x to 0.97x); without 8x32 kb256 kmn too, the same.
        // (Each seed costs `tune` a compile and a few calls: on those shapes the seeds and the
        // greedy rollout alone fill the 0.5 s budget.)
        // Where k is a multiple of 1024, A's rows are 4 KB apart and a tile's rows all fall in
        // one L1 set: 16x16 mn ran at 0.47x the best member on 10 random shapes with such k
        // (and m a multiple of 8), 8x16 mn with A packed (rows interleaved by a register
        // transpose) at 0.97x; on mm128_768_3072 the packed one ran 106 GFLOPS, 8x16 mn 103,
        // 16x16 mn 51 (docs/performance.md (w)).
        if (k >= 1024 && m > 16) {
            tiles.push_back({8, 32, 128, "kmn"});
            TileSchedule packed_a{8, 16, 0, "mn"};
            packed_a.pack_a = true;
            tiles.push_back(k % 1024 == 0 && m % 8 == 0 ? packed_a : TileSchedule{16, 16, 0, "mn"});
            // First where its 64 columns fit: the first seed is measured without a bound (there
            // is no best yet), and 4x64 kb128 nkm, its next k block prefetched, is never far
            // from the best member on deep reductions (0.74x at worst on 7 random shapes with
            // k >= 1024, n >= 64), where 8x32 mn, first before, fell to 0.34x: on
            // mm55_1208_3397 it ran 15.6 GFLOPS, 29 ms a call, and `tune` took 0.71 s.
            tiles.insert(n >= 64 ? tiles.begin() : tiles.end(), {4, 64, nkm_kb, "nkm"});
        }
        // Decode-time shapes (m <= 16): B is streamed once, k blocks of 128 rows; with m = 8 the
        // 8x32 tile reads each block once (mm8_1024_1024: 185 GFLOPS against 139 with the two
        // 4-row tiles of 4x64, which read it twice); with m <= 8 blocks of 8 rows, so only 8 rows
        // of B stream at a time (mm8_4096_4096: 80 GFLOPS against 63 with 128; the m = 1 GEMVs
        // mm1_4096_4096 and mm1_4096_11008 1.4x faster, at oneDNN's sgemv or above). A block of
        // 256 rows never won there.
        if (k >= 512 && m <= 16) {
            tiles.push_back({m == 8 ? 8 : 4, m == 8 ? 32 : 64, 128, "kmn"});
            if (m <= 8) tiles.push_back({m == 8 ? 4 : 8, 64, 8, "kmn"});
        }
        // B of 4 MB or more streamed by a few rows of A (1 < m <= 16): 4x64 with k blocks of
        // 128 inside column panels, whose next block the lowering prefetches (lower_prefetch.h).
        // On a Zen 4 core, side by side in two runs: mm8_4096_4096 65.6 and 62.5 GFLOPS against
        // 56.4 and 43.2 for the best seed before (4x64 kb8 kmn) and 30.7 and 27.0 for oneDNN;
        // mm8_11008_4096 74.8 and 72.2 against 60.6 and 40.8, oneDNN 30.1 and 28.1
        // (docs/performance.md (x)). Not for m = 1, where it ran at 0.4x kb8 kmn.
        if (k >= 512 && m > 1 && m <= 16 && k * n >= (int64_t(1) << 20))
            tiles.push_back({4, 64, 128, "nkm"});
        if (m >= 512 && n >= 512 && k >= 512) tiles.push_back({8, 32, 256, "knmN", true, 512});
        // B's rows 4 KB apart or more (n >= 1024): every row of a tile's k x 64 panel falls in
        // one L1 set and its own page; packed, the panel is contiguous. The copy costs 1/m of the
        // multiply, so m >= 32. mm128_4096_1024: 167 GFLOPS against 116 unpacked,
        // mm128_3072_1024 175 against 127 (`tile --space layout` found these first).
        if (n >= 1024 && m >= 32) {
            tiles.push_back({4, 64, 0, "nm", true, 0, true});
            if (k >= 2048) tiles.push_back({8, 32, 256, "nkm", true, 0, true});
            // Where B's rows do not start lines (16 does not divide n: most shapes) and k <
            // 1024, also 8x16 mn with a copy of B whose rows are padded to one (`pack`'s padded
            // rows). Every member side by side on 12 random such shapes (a Zen 4 core, two
            // processes, docs/performance.md (y)): it was the closest to the fastest (0.963x in
            // geomean; unpacked 0.872x), and the best seed went from 0.973x to 0.995x the
            // fastest member (worst 0.933x -> 0.982x); on 12 other random shapes, 0.945x ->
            // 0.984x, the fastest member on 5 of them. Not for deeper k (0.20-0.82x the fastest
            // on three shapes with k = 1536-2298, where 4x64 kb128 nkm leads).
            if (n % 16 != 0 && k < 1024) tiles.push_back({8, 16, 0, "mn", true, 0, true});
        }
        for (const TileSchedule &t : tiles) {
            try {
                candidates.push_back({"tile " + t.name(), tile_actions(c, t)});
            } catch (const looptool::Error &) {
                // not expressible for this shape
            }
        }
    }
    return applicable(c, std::move(candidates), limit, space);
}

namespace {

struct Node {
    Program program;
    std::vector<Action> path;  // from the start
    double gflops = 0;
    int next_branch = 0;  // 0: continue with a fresh rollout; i > 0: the i-th best action
    std::string origin;
};

class Search {
public:
    Search(const Policy &policy, Environment &env, const GuidedConfig &config, int limit,
           double flops)
        : policy_(policy), env_(env), config_(config), limit_(limit), flops_(flops) {}

    /// No step starts that would, at the average cost of a measured state so far, end after
    /// 95% of the budget (so the budget bounds the search's end, not the start of its last
    /// step). The 5% are for what those estimates miss: aiming at the budget itself, half of
    /// the real-model set ended within 10 ms of it, a median of 0.499 s for 0.5 s
    /// (docs/performance.md (w)).
    bool out_of_time() const {
        const double t = elapsed();
        return t + (nodes_.empty() ? 0.0 : t / double(nodes_.size())) + finals_reserve() >=
               0.95 * config_.budget_s;
    }

    /// Time kept for re-measuring the finalists (and the greedy rollout's best) with the
    /// configured protocol: per kernel its warm-ups, then at least its minimum time and runs of
    /// the best kernel so far. (Counting the runs alone, LoopTune's split ended at 0.51-0.52 s
    /// of a 0.5 s budget.)
    double finals_reserve() const {
        if (!config_.bounded_measurements || best_gflops_ <= 0) return 0;
        // A kernel measured on prefixes: about the finalists' prefix (rounded up to whole
        // iterations, or two prefixes).
        const double prefix = final_prefix_flops();
        const double measured = prefix > 0 && flops_ > 2 * prefix ? 1.5 * prefix : flops_;
        const double call_s = measured / (best_gflops_ * 1e9);
        const looptool::MeasureOptions m =
            fewer_long_calls(env_.config().measure, call_s, kFinalCalls);
        // The finalists, the greedy rollout's best, the best seed, the best that does not
        // depend on the shared cache.
        return (kFinalists + 3) *
               (double(m.warmup) * call_s + std::max(m.min_time_s, double(m.min_runs) * call_s));
    }

    /// The finalists' prefixes, FLOPs (0: whole kernels).
    double final_prefix_flops() const { return kFinalPrefix * config_.prefix_gflops * 1e9; }

    /// Seconds a call of the best kernel so far takes.
    double best_call_s() const { return flops_ / (best_gflops_ * 1e9); }

    /// The configured protocol, with fewer calls when the best kernel's call is long
    /// (fewer_long_calls()).
    looptool::MeasureOptions finals_options() const {
        return fewer_long_calls(env_.config().measure, best_call_s(), kFinalCalls);
    }

    /// The best few distinct schedules, and the greedy rollout's best (so the result is never
    /// below it on the same figures), measured again with the configured protocol: a bounded
    /// measurement of 3-4 calls ranked a kernel above one that the full protocol puts 5-20%
    /// ahead (docs/performance.md, section n). Returns the index of the winner.
    size_t final_choice(GuidedResult &r) {
        std::vector<size_t> order(nodes_.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return nodes_[a].gflops > nodes_[b].gflops; });
        std::vector<size_t> finals;
        std::vector<std::string> keys;
        auto take = [&](size_t i) {
            const std::string key = looptool::schedule_key(nodes_[i].program);
            if (std::find(keys.begin(), keys.end(), key) != keys.end()) return;
            keys.push_back(key);
            finals.push_back(i);
        };
        for (size_t i : order)
            if (finals.size() < size_t(kFinalists)) take(i);
        // The best seed too, so what the policy added to the seeds is on the same protocol.
        size_t best_seed = seed_nodes_.empty() ? 0 : seed_nodes_.front();
        for (size_t i : seed_nodes_)
            if (nodes_[i].gflops > nodes_[best_seed].gflops) best_seed = i;
        if (!seed_nodes_.empty()) take(best_seed);
        // The greedy rollout's best, found by its schedule (a seed may have reached it first).
        // When the rollout never improved on the start there is nothing to keep it above.
        const std::string greedy_key = looptool::schedule_key(r.greedy.best);
        if (!r.greedy.best_actions.empty())
            for (size_t i = 0; i < nodes_.size(); ++i)
                if (looptool::schedule_key(nodes_[i].program) == greedy_key) {
                    take(i);
                    break;
                }
        // When every finalist depends on the shared cache, the best state that does not.
        auto fragile = [&](size_t i) { return depends_on_shared_cache(nodes_[i].program); };
        if (std::all_of(finals.begin(), finals.end(), fragile))
            for (size_t i : order)
                if (!fragile(i)) {
                    take(i);
                    break;
                }
        // A finalist the search's bound cut short at under half the best cannot win: it keeps
        // its figure (then an upper bound), as measuring it in full would take up to the 1 s cap
        // (the greedy rollout's best on a conv: 1-3 GFLOPS against 150+, 0.4-0.9 s a layer).
        const double top = nodes_[finals.front()].gflops;
        std::vector<bool> again(finals.size());
        for (size_t f = 0; f < finals.size(); ++f)
            again[f] =
                !(env_.cut_short(nodes_[finals[f]].program) && 2 * nodes_[finals[f]].gflops < top);
        env_.reset_measure_options();
        // (With fewer calls than configured the figures are not the store's to keep.)
        const looptool::MeasureOptions fin = finals_options();
        if (fin.min_runs != env_.measure_options().min_runs) env_.set_measure_options(fin);
        env_.set_prefix_flops(final_prefix_flops(), 0.5);
        std::vector<double> gflops(finals.size());
        std::vector<bool> fragile_finals(finals.size());
        for (size_t f = 0; f < finals.size(); ++f) {
            Node &n = nodes_[finals[f]];
            if (again[f]) n.gflops = env_.measure_again(n.program);
            if (again[f] && keys[f] == greedy_key) r.greedy.best_gflops = n.gflops;
            gflops[f] = again[f] ? n.gflops : 0;  // (cut short: cannot win)
            fragile_finals[f] = fragile(finals[f]);
        }
        const size_t fastest =
            size_t(std::max_element(gflops.begin(), gflops.end()) - gflops.begin());
        const size_t chosen = prefer_robust(gflops, fragile_finals, config_.robust_margin);
        if (chosen != fastest) r.passed_over_gflops = gflops[fastest];
        const size_t win = finals[chosen];
        // The best seed among those measured again (the best one by the search's figures is):
        // the full protocol may rank another seed finalist above it.
        // (A finalist is found by its schedule: another node may have reached a seed's first.)
        for (size_t i : seed_nodes_) {
            const auto f =
                std::find(keys.begin(), keys.end(), looptool::schedule_key(nodes_[i].program));
            if (f == keys.end()) continue;
            const double g = nodes_[finals[size_t(f - keys.begin())]].gflops;
            if (g > r.best_seed_gflops) {
                r.best_seed_gflops = g;
                r.best_seed = nodes_[i].origin;
                r.best_seed_actions = nodes_[i].path;
            }
        }
        return win;
    }

    /// Before each measurement: the search's protocol (bounded_options()) from the best so far.
    void bound_next_measurement() {
        if (!config_.bounded_measurements) return;
        env_.set_measure_options(bounded_options(env_.config().measure, flops_, best_gflops_));
        env_.set_prefix_flops(config_.prefix_gflops * 1e9);
    }
    double elapsed() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }

    /// Records a measured state once (by schedule and cursor); returns its node's index.
    size_t add(const Program &p, std::vector<Action> path, double gflops, int next_branch,
               const std::string &origin) {
        const std::string key = looptool::schedule_key(p) + "@" + std::to_string(p.cursor);
        if (auto it = index_.find(key); it != index_.end()) return it->second;
        best_gflops_ = std::max(best_gflops_, gflops);
        index_.emplace(key, nodes_.size());
        nodes_.push_back({p, std::move(path), gflops, next_branch, origin});
        return nodes_.size() - 1;
    }

    /// Measures a seed from the naive nest `start` (tune_seeds() checked that it applies).
    void add_seed(const Program &start, const Seed &s) {
        Program t = start;
        for (Action a : s.actions) t = looptool::apply(t, a);
        bound_next_measurement();
        seed_nodes_.push_back(add(t, s.actions, env_.evaluate(t), 0, s.name));
    }

    /// The best measured state that still has a branch to try and room for another action.
    Node *next_to_expand() {
        Node *pick = nullptr;
        for (Node &n : nodes_)
            if (n.next_branch < config_.branches && int(n.path.size()) < limit_ &&
                (!pick || n.gflops > pick->gflops))
                pick = &n;
        return pick;
    }

    /// From `from`: its branch-th action by Q-value (branch 0: the greedy one), then the policy
    /// greedily, for at most the policy's episode and the step limit, while time remains.
    void rollout(size_t from_index, int branch) {
        ++rollouts_;
        const Node from = nodes_[from_index];  // a copy: add() may reallocate nodes_
        const std::string origin =
            from.origin.ends_with(" + policy") ? from.origin : from.origin + " + policy";
        bound_next_measurement();
        env_.reset(from.program);  // a fresh episode of the policy's length from this state
        std::vector<float> q = policy_.q_values(env_);
        std::vector<int> order(q.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q[a] > q[b]; });
        if (branch >= int(order.size()) || std::isinf(q[size_t(order[size_t(branch)])])) return;
        std::vector<Action> path = from.path;
        int a = order[size_t(branch)];
        size_t last = nodes_.size();
        while (a >= 0 && int(path.size()) < limit_ && !out_of_time()) {
            bound_next_measurement();
            env_.step_index(a);
            path.push_back(env_.action_space().actions[size_t(a)]);
            last = add(env_.program(), path, env_.gflops(), 1, origin);
            a = policy_.act(env_);
        }
        // Stopped by the policy's episode length, not by the policy: continuing is a branch.
        if (last < nodes_.size() && a < 0 && env_.steps_taken() >= env_.config().max_steps)
            nodes_[last].next_branch = 0;
    }

    /// tune_with_policy() (the policy's greedy episode from `start`), each measurement within
    /// the search's bound; the start becomes the node "naive".
    PolicyTuneResult greedy_rollout(const Program &start) {
        const auto t0 = std::chrono::steady_clock::now();
        PolicyTuneResult g;
        bound_next_measurement();
        env_.reset(start);
        g.base_gflops = g.best_gflops = g.final_gflops = env_.gflops();
        g.best = g.final = env_.program();
        add(start, {}, g.base_gflops, 1, "naive");
        while (env_.steps_taken() < env_.config().max_steps) {
            const int a = policy_.act(env_);
            if (a < 0) break;
            bound_next_measurement();
            env_.step_index(a);
            g.actions.push_back(env_.action_space().actions[size_t(a)]);
            g.step_gflops.push_back(env_.gflops());
            best_gflops_ = std::max(best_gflops_, env_.gflops());
            if (env_.gflops() > g.best_gflops) {
                g.best_gflops = env_.gflops();
                g.best = env_.program();
                g.best_actions = g.actions;
            }
        }
        g.final = env_.program();
        g.final_gflops = env_.gflops();
        g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return g;
    }

    /// `win`, or when its actions do not apply to `whole` (an unroll of the batch loop, longer
    /// there), the best measured state whose actions do (the naive nest's always do); `out`
    /// gets its actions applied to `whole`.
    const Node &transfer(const Node &win, const Program &whole, Program &out) const {
        std::vector<const Node *> order;
        for (const Node &n : nodes_) order.push_back(&n);
        std::stable_sort(order.begin(), order.end(),
                         [](const Node *a, const Node *b) { return a->gflops > b->gflops; });
        order.insert(order.begin(), &win);
        for (const Node *n : order) {
            Program p = whole;
            bool ok = true;
            for (size_t i = 0; ok && i < n->path.size(); ++i) {
                ok = looptool::is_legal(p, n->path[i]);
                if (ok) p = looptool::apply(p, n->path[i]);
            }
            if (ok) {
                out = std::move(p);
                return *n;
            }
        }
        throw looptool::Error("guided search: no state applies to the whole computation");
    }

    /// The search from `start`; with `whole`, `start` is a part of it (conv_batch_slice(),
    /// conv_row_band()) and the result is the best state's actions applied to `whole`;
    /// `row_band`: `start` is a band of rows (tune_seeds()' row_band).
    GuidedResult run(const Program &start, const Program *whole = nullptr, bool row_band = false) {
        GuidedResult r;
        const auto counters0 = env_.counters();
        const int64_t prefix0 = env_.prefix_measurements();
        r.max_steps = limit_;
        const bool naive_start =
            looptool::schedule_key(start) == looptool::schedule_key(Program::naive(start.comp));
        const std::vector<Seed> seeds =
            !config_.greedy && config_.tile_seeds && naive_start
                ? tune_seeds(*start.comp, limit_, env_.action_space(), row_band)
                : std::vector<Seed>{};
        // The seeds before the greedy rollout, whatever the budget: they are fast kernels,
        // cheap to measure, while on a shape unlike LoopTune's grid the rollout alone can spend
        // the budget measuring slow states (mm1000_17_300: 0.72 s for 9 schedules; 128x768x768:
        // 1.6 s, and the blocked seeds, last in the list, were never reached after it).
        // The seeds first: the first one is measured without a bound (there is no best yet;
        // a seed is a fast kernel, the naive nest of a large shape is not), every later
        // measurement within a bound from the best so far.
        for (size_t i = 0; i < seeds.size(); ++i) {
            if (i == 0) {
                Program t = start;
                for (Action a : seeds[0].actions) t = looptool::apply(t, a);
                bound_next_measurement();
                env_.reset(t);  // the benchmark's buffers, and the seed's measurement
                seed_nodes_.push_back(add(t, seeds[0].actions, env_.gflops(), 0, seeds[0].name));
            } else {
                add_seed(start, seeds[i]);
            }
        }
        r.greedy = greedy_rollout(start);
        r.base_gflops = r.greedy.base_gflops;
        r.base_cut_short = env_.cut_short(start);
        // The greedy rollout's states (the start's branch 0 is that rollout): each continues
        // the rollout, so only the last one may continue with a fresh rollout.
        Program p = start;
        for (size_t i = 0; i < r.greedy.actions.size(); ++i) {
            p = looptool::apply(p, r.greedy.actions[i]);
            add(p, {r.greedy.actions.begin(), r.greedy.actions.begin() + long(i) + 1},
                r.greedy.step_gflops[i], i + 1 == r.greedy.actions.size() ? 0 : 1, "greedy");
        }
        if (!config_.greedy) {
            while (!out_of_time()) {
                Node *n = next_to_expand();
                if (!n) break;
                const int branch = n->next_branch++;
                rollout(size_t(n - nodes_.data()), branch);
            }
        }
        // The best measured state (on a tie the earliest), or the best finalist.
        const Node *best = &nodes_.front();
        for (const Node &n : nodes_)
            if (n.gflops > best->gflops) best = &n;
        // (--greedy is the greedy rollout alone: its best, as measured.)
        if (config_.bounded_measurements && !config_.greedy) best = &nodes_[final_choice(r)];
        if (whole)
            best = &transfer(*best, *whole, r.best);
        else
            r.best = best->program;
        r.best_gflops = best->gflops;
        r.call_seconds = best->gflops > 0 ? flops_ / (best->gflops * 1e9) : 0;
        r.actions = best->path;
        r.found_by = best->origin;
        for (size_t i : seed_nodes_) r.seed_gflops.emplace_back(nodes_[i].origin, nodes_[i].gflops);
        r.rollouts = rollouts_;
        r.prefix_measurements = env_.prefix_measurements() - prefix0;
        r.schedules = env_.counters().compiles + env_.counters().store_hits - counters0.compiles -
                      counters0.store_hits;
        r.seconds = elapsed();
        return r;
    }

    /// Puts the environment back on its configured protocol (and drops what was cut short
    /// from its cache), however the search ends.
    ~Search() {
        if (config_.bounded_measurements) env_.reset_measure_options();
    }

private:
    const Policy &policy_;
    Environment &env_;
    const GuidedConfig &config_;
    const int limit_;
    const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    std::vector<Node> nodes_;
    std::unordered_map<std::string, size_t> index_;
    std::vector<size_t> seed_nodes_;  // the seeds' nodes
    int rollouts_ = 0;
    const double flops_;
    double best_gflops_ = 0;  // the best measured so far, bounds the next measurement
};

}  // namespace

GuidedResult guided_search(const Policy &policy, Environment &env, const Program &start,
                           const GuidedConfig &config) {
    if (!(config.budget_s > 0) || !std::isfinite(config.budget_s))
        throw looptool::Error(
            fmt::format("the budget must be positive and finite (got {})", config.budget_s));
    if (!(config.robust_margin >= 0 && config.robust_margin < 1))
        throw looptool::Error(
            fmt::format("the robust margin must be in [0, 1) (got {})", config.robust_margin));
    if (config.branches < 1)
        throw looptool::Error(
            fmt::format("the branch count must be at least 1 (got {})", config.branches));
    const int episode = env.config().max_steps;
    if (config.max_steps != 0 && config.max_steps < episode)
        throw looptool::Error(
            fmt::format("the step limit must be 0 (automatic) or at least the policy's episode "
                        "length {} (got {})",
                        episode, config.max_steps));
    auto limit = [&](const looptool::Computation &c) {
        return config.max_steps > 0 ? config.max_steps : guided_step_limit(c, episode);
    };
    const bool naive_start =
        looptool::schedule_key(start) == looptool::schedule_key(Program::naive(start.comp));
    // One image would not do: a batch loop that runs once lets `pack` copy block by block where
    // the whole batch's copies the whole tensor, so the same actions would do other things.
    if (config.batch_slice < 0 || config.batch_slice == 1)
        throw looptool::Error(fmt::format(
            "the batch slice must be 0 (none) or at least 2 images (got {})", config.batch_slice));
    if (!(config.band_gflops >= 0) || !std::isfinite(config.band_gflops))
        throw looptool::Error(fmt::format(
            "the band's GFLOPs must be 0 (no band) or positive (got {})", config.band_gflops));
    if (!(config.prefix_gflops >= 0) || !std::isfinite(config.prefix_gflops))
        throw looptool::Error(
            fmt::format("the prefix's GFLOPs must be 0 (whole kernels) or positive (got {})",
                        config.prefix_gflops));
    // The computation searched: the whole one, or a conv's slice of images and band of rows.
    const auto slice = config.batch_slice > 0 && naive_start
                           ? conv_batch_slice(*start.comp, config.batch_slice)
                           : std::nullopt;
    const int64_t rows =
        config.band_gflops > 0 && naive_start
            ? conv_band_rows(slice ? *slice : *start.comp, config.band_gflops * 1e9)
            : 0;
    const auto part = rows > 0 ? conv_row_band(slice ? *slice : *start.comp, rows) : slice;
    if (part) {
        const auto sc = std::make_shared<const looptool::Computation>(*part);
        const ConvShape whole = *conv_shape(*start.comp);
        GuidedResult r =
            Search(policy, env, config, limit(*sc), sc->flops())
                .run(Program::naive(sc), &start, rows > 0 && band_hides_row_sweeps(whole));
        if (slice) {
            r.slice_images = config.batch_slice;
            r.batch = whole.batch;
        }
        if (rows > 0) {
            r.band_rows = rows;
            r.rows = whole.ho;
        }
        return r;
    }
    return Search(policy, env, config, limit(*start.comp), start.comp->flops()).run(start);
}

}  // namespace looptune
