// Tuning with a policy that cannot collapse: the policy guides a small measured search.
//
// First, whatever the budget (so the search is never worse than either on the same
// measurements, but for GuidedConfig::robust_margin):
//   1. seeds: a few members of the `tile` template (tile_schedules.h), or for n = 1
//      k-vectorized dot products, are measured, when the start is a matmul's naive nest;
//   2. the policy's chained rollout (chained_rollout(), ranked_rollout.h): its greedy episodes
//      continued from each other's end up to the step limit, unmeasured, each episode's end
//      measured: a schedule longer than one episode (a packed tile, a conv's 20-50 actions)
//      costs a measurement per episode, not one per state, and its figure bounds what follows;
//   3. the greedy rollout (tune_with_policy) runs to its end.
// Then, while the budget (counted from the start) lasts, best-first refinement: the best
// measured state with an untried branch is expanded: branch 0 continues it with a fresh greedy
// rollout of the policy, branch i > 0 takes the i-th best action by Q-value and then follows
// the policy greedily (a rollout that backtracks to the best measured state). Every state a
// rollout visits becomes a node.
// A rollout is at most the policy's own episode length (what it was trained on); chaining
// rollouts from measured states reaches longer schedules, up to guided_step_limit() actions
// from the start. Every state is measured once (the environment's cache and store); with a cost
// model (GuidedConfig::rank) only the states it ranks best are (ranked_rollout.h).
#pragma once

#include <string>
#include <vector>

#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "tune/policy.h"

namespace looptune {

class CostModel;

struct GuidedConfig {
    /// Wall clock of the search, seconds, from its start: no rollout step starts that would end
    /// after it at the average cost of a measured state so far (the seeds and the greedy
    /// rollout are always measured, whatever they cost).
    double budget_s = 0.5;
    int branches = 3;        ///< actions by Q-value tried from each expanded state
    int max_steps = 0;       ///< actions from the start; 0: guided_step_limit()
    bool greedy = false;     ///< only the greedy rollout (tune --greedy)
    bool tile_seeds = true;  ///< measure a few `tile` members (or dot products) as seeds
    /// Measure with bounded_options() (fewer calls, a time cap from the best so far) instead
    /// of the environment's configured protocol.
    bool bounded_measurements = true;
    /// A batched conv2d of more images than this is searched on a slice of this many
    /// (conv_batch_slice(), tile_schedules.h) and the result applied to the whole batch; 0: on
    /// the whole batch; 1 is refused (a batch loop of one packs differently). LoopTune's batch-32
    /// and batch-64 convs on 256x256 images take 1-7 s a call: every measurement of a search within
    /// a budget was cut short, so the choice was blind (docs/decisions.md);
    /// two images take 1/16-1/32 of that.
    int64_t batch_slice = 2;
    /// And a conv2d (or its batch slice) is searched on a band of its output rows
    /// (conv_band_rows(), conv_row_band(), tile_schedules.h) when a band with at least this
    /// many GFLOPs is at most half its rows; 0: on every row. Two images of LoopTune's 256x256
    /// convs still take 20-130 ms a call.
    double band_gflops = 0.1;
    /// And a kernel of more than 8x this many GFLOPs is measured during the search on a prefix
    /// of its own outermost loop with about this many (looptool/measure/prefix.h,
    /// Environment::set_prefix_flops()), and the finalists on prefixes kFinalPrefix times
    /// longer (up to half the loop); the figures are then the prefixes'; 0: whole kernels.
    /// On matmuls of 2-17 GFLOPs (0.04-0.17 s a call) the search measured 1.3-8 s whole.
    double prefix_gflops = 0.25;
    /// The fastest finalist is passed over for one within this fraction of it that does not
    /// depend on the L3 other cores share (prefer_robust(), depends_on_shared_cache()); 0: the
    /// fastest as measured. In [0, 1). Such a kernel 10% faster on a quiet machine and 5x
    /// slower while other cores stream through the L3 costs more on average once that happens
    /// 2.5% of the time (docs/decisions.md).
    double robust_margin = 0.1;
    /// A cost model that ranks schedules before they are measured (ranked_rollout.h says
    /// where); nullptr: every state a rollout visits is measured, until the budget ends.
    const CostModel *rank = nullptr;
};

/// Calls of the best kernel so far a new measurement may take during the search.
inline constexpr double kBoundCalls = 4.5;
/// Calls of the best kernel so far a new state's first call may take: one twice as slow as
/// the best cannot win, and measuring it to the cap cost deep shapes (10 ms a call) 45 ms
/// per slow state of the greedy rollout (docs/decisions.md).
inline constexpr double kFirstCallCalls = 2;
/// The shortest first-call cap the search sets (bounded_options()).
inline constexpr double kMinFirstCallCapS = 0.001;

/// The search's measurement protocol, from the environment's configured one: one warm-up and
/// three timed calls at least (as configured when fewer), the same minimum time, and once a
/// best is known (best_gflops > 0) a time cap of kBoundCalls calls of the best (never below
/// twice the minimum time plus 5 ms, never above the configured cap). A state as fast as the
/// best completes its four calls; one up to ~2x slower is measured from the calls that fit;
/// a slower one is cut at the cap, its GFLOPS then an upper bound below best / kBoundCalls.
/// And the first call is capped at kFirstCallCalls of the best's (at least kMinFirstCallCapS):
/// a state whose one call takes longer cannot win and is cut there, not at the cap.
/// Slow intermediate states thus cost a few of the best's call times, not up to the cap.
/// Where the best's calls are long, fewer of them (fewer_long_calls()). Without a best (the
/// search's first measurement) the minimum time alone sets the number of calls.
looptool::MeasureOptions bounded_options(const looptool::MeasureOptions &configured, double flops,
                                         double best_gflops);

/// `o` with no more timed calls than its minimum time needs when a call takes `call_s` (at
/// least `least`), and one warm-up, or none when one call fills the minimum time alone (a cold
/// start is then a small part of it); `o` itself when its calls fit in the minimum time. A
/// 2048^3 matmul takes 0.16 s a call: with three timed calls per state and the configured
/// protocol for its five finalists, `tune` took 13 s of a 0.5 s budget (docs/decisions.md).
looptool::MeasureOptions fewer_long_calls(looptool::MeasureOptions o, double call_s, int least);
/// Timed calls of a finalist at least (fewer_long_calls()): its figure is a median of three.
inline constexpr int kFinalCalls = 3;
/// The share of the budget the finals spend at most measuring a start the search cut short at
/// under half the best (it cannot win; its figure is reported, an upper bound when cut again):
/// a naive nest's one call can take longer than the whole search among fast kernels.
inline constexpr double kStartShare = 0.1;
/// The finals' protocol for the start, a call of which takes `call_s` as far as the search
/// knows: the configured one with fewer calls when one is long, and uncut when they would not
/// fit the time cap; for a `hopeless` start (cut short at under half the best: it cannot win, and
/// its call time is not known) one warm-up and one call at least within kStartShare of
/// `budget_s`, its figure an upper bound when cut there again.
looptool::MeasureOptions start_options(const looptool::MeasureOptions &configured, double call_s,
                                       bool hopeless, double budget_s);
/// Rounds in which the chosen kernel and the best seed are measured alternately.
inline constexpr int kJudgeRounds = 3;

/// A kernel tune measured again at the end of the search (GuidedResult::finalists).
struct GuidedFinalist {
    std::string found_by;
    std::vector<looptool::Action> actions;  ///< from the start
    /// With the configured protocol; 0: cut short at under half the best during the search,
    /// not measured again.
    double gflops = 0;
};

struct GuidedResult {
    looptool::Program best;
    double base_gflops = 0, best_gflops = 0;
    /// The start's measurement was cut short (by the search's bound with --greedy or
    /// --full-measurements; else it is measured in full with the finalists): base_gflops then
    /// comes from the calls that fit, or is an upper bound.
    bool base_cut_short = false;
    std::vector<looptool::Action> actions;  ///< from the start to `best`
    std::string found_by;                   ///< "greedy", "tile 8x32 mn", "rollout", ...
    /// The fastest finalist's GFLOPS when `tune` took another within the robust margin that
    /// does not depend on the shared cache (prefer_robust()); 0 otherwise.
    double passed_over_gflops = 0;
    /// The best seed (empty: none were measured) and its GFLOPS, measured again with the
    /// configured protocol beside the finalists, then judged beside the chosen kernel in
    /// kJudgeRounds alternating rounds: what the policy added to the seeds (the demonstrations'
    /// schedules) is the ratio of the rounds' medians, where it exceeds their spread.
    std::string best_seed;
    double best_seed_gflops = 0;
    std::vector<looptool::Action> best_seed_actions;  ///< from the start to the best seed
    /// The chosen kernel is the best seed's (the actions after it only move the cursor).
    bool same_as_seed = false;
    /// The judged rounds, in order (the first: the finals' figures); empty when same_as_seed.
    std::vector<double> seed_rounds, best_rounds;
    /// Every seed measured, in order, with the search's last figure for it: a bounded
    /// measurement, or for a finalist the full protocol's (docs/training.md).
    std::vector<std::pair<std::string, double>> seed_gflops;
    /// The kernels the choice was among, in the order they were taken (the best measured first;
    /// above one thread each one's counterpart across `parallel`: guided_finals.h); empty with
    /// --greedy or --full-measurements.
    std::vector<GuidedFinalist> finalists;
    PolicyTuneResult greedy;  ///< the greedy rollout, always run
    int max_steps = 0;        ///< the step limit used
    int rollouts = 0;         ///< rollouts after the greedy one
    int64_t schedules = 0;    ///< distinct schedules compiled or found in the store
    /// Kernels timed (the finalists' and judged rounds' measurements included; store and
    /// cache hits not).
    int64_t measurements = 0;
    double seconds = 0;
    /// One call of the chosen kernel, in seconds, on what was searched (the computation, or its
    /// slice or band): with the seeds and the greedy rollout measured whatever the budget, a
    /// call of a tenth of the budget or more makes the search longer than the budget.
    double call_seconds = 0;
    /// Searched on a slice of this many images of a batch of `batch` (GuidedConfig::batch_slice;
    /// 0: on the computation itself). Then `best` and `actions` are the whole batch's, and every
    /// figure and `greedy`'s programs the slice's: GFLOPS of the same schedule on fewer images
    /// (the batch's naive nest is never run).
    int64_t slice_images = 0, batch = 0;
    /// Likewise searched on a band of `band_rows` of its `rows` output rows
    /// (GuidedConfig::band_gflops; 0: on every row).
    int64_t band_rows = 0, rows = 0;
    /// Measurements taken on a prefix of the kernel's outermost loop (GuidedConfig::prefix_gflops):
    /// then best_gflops and the others are estimates from prefixes.
    int64_t prefix_measurements = 0;
};

/// Actions from the start a guided search may take on `c`: the policy's episode length, plus 8
/// (a split, its moves and a swap: one cache block) for each loop variable longer than 256
/// (LoopTune's grid ends at 256; beyond it schedules need k and n blocks, 35+ actions), and at
/// least the longest of its seeds (tune_seeds() on `threads`: parallel variants are longer) plus
/// one policy episode after it.
int guided_step_limit(const looptool::Computation &c, int policy_steps, int threads = 1);
/// With bounded measurements, the best few distinct schedules (and the greedy rollout's best and
/// the best seed) are measured again with the configured protocol at the end (with fewer calls
/// when a call is long, at least kFinalCalls: fewer_long_calls()); the budget keeps time for it.
inline constexpr int kFinalists = 3;
/// The finalists' prefixes are this many times the search's (GuidedConfig::prefix_gflops): a
/// prefix of two or three iterations can run a few percent faster than the whole kernel
/// (docs/decisions.md).
inline constexpr double kFinalPrefix = 4;

/// A kernel that reads more than kFragileShortRuns times its data again in short runs from a
/// set beyond a core's share of the L3 (looptool::estimate_traffic(), shared_cache_bytes) runs
/// fast only while the L3, which other cores share, holds that set: with another core streaming
/// through the L3 such kernels ran up to 2-8x slower, the others kept 0.92 of their speed in
/// geomean, none less than half (docs/decisions.md).
inline constexpr double kFragileShortRuns = 2.0;
/// (With `cache_bytes` of L2; private_cache_bytes(): this machine's.)
bool depends_on_shared_cache(const looptool::Program &p, int64_t cache_bytes);
bool depends_on_shared_cache(const looptool::Program &p);
/// Of kernels measured at `gflops`, `fragile` those that depend on the shared cache: the
/// fastest, unless it is fragile and one that is not is within `margin` of it (then the fastest
/// of those). On 9 shapes the family's best such kernel was within 1.2% of its fastest
/// (docs/decisions.md); GuidedConfig::robust_margin is 10%.
size_t prefer_robust(const std::vector<double> &gflops, const std::vector<bool> &fragile,
                     double margin);
/// The finalist tune returns: prefer_robust()'s pick, or the start (index `start`) when that
/// pick measured slower than it, so tune never returns a kernel slower than its start.
size_t choose_final(const std::vector<double> &gflops, const std::vector<bool> &fragile,
                    size_t start, double margin);

/// Throws looptool::Error for a configuration guided_search() refuses (`episode`: the policy's).
void check_guided_config(const GuidedConfig &config, int episode);

/// Tunes `start` in `env` (configured with policy.env_config()). Throws looptool::Error for a
/// non-positive budget, fewer than one branch or a negative step limit.
GuidedResult guided_search(const Policy &policy, Environment &env, const looptool::Program &start,
                           const GuidedConfig &config = {});

}  // namespace looptune
