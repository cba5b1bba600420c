// The guided search's measurement protocol and its choices among measured kernels
// (guided_search.h): bounded measurements, fewer calls for long kernels, the step limit, and
// the final pick (robust to the shared cache, never below the start).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "looptool/ir/error.h"
#include "looptool/measure/traffic.h"
#include "tune/guided_search.h"

namespace looptune {

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

size_t choose_final(const std::vector<double> &gflops, const std::vector<bool> &fragile,
                    size_t start, double margin) {
    const size_t pick = prefer_robust(gflops, fragile, margin);
    return gflops[pick] < gflops.at(start) ? start : pick;
}

looptool::MeasureOptions fewer_long_calls(looptool::MeasureOptions o, double call_s, int least) {
    if (!(call_s > 0)) return o;
    const double needed = std::max(double(least), std::ceil(o.min_time_s / call_s));
    if (needed >= double(o.min_runs)) return o;
    o.min_runs = int(needed);
    o.warmup = std::min(o.warmup, call_s >= o.min_time_s ? 0 : 1);
    return o;
}

looptool::MeasureOptions start_options(const looptool::MeasureOptions &configured, double call_s,
                                       bool hopeless, double budget_s) {
    looptool::MeasureOptions o = fewer_long_calls(configured, call_s, 1);
    if (hopeless) {
        o.warmup = std::min(o.warmup, 1);
        o.min_runs = 1;
        o.time_cap_s = std::min(o.time_cap_s, kStartShare * budget_s);
    } else if (call_s * double(o.warmup + o.min_runs) > 0.5 * o.time_cap_s) {
        o = looptool::uncut_options(o);
    }
    return o;
}

void check_guided_config(const GuidedConfig &config, int episode) {
    if (!(config.budget_s > 0) || !std::isfinite(config.budget_s))
        throw looptool::Error(
            fmt::format("the budget must be positive and finite (got {})", config.budget_s));
    if (!(config.robust_margin >= 0 && config.robust_margin < 1))
        throw looptool::Error(
            fmt::format("the robust margin must be in [0, 1) (got {})", config.robust_margin));
    if (config.branches < 1)
        throw looptool::Error(
            fmt::format("the branch count must be at least 1 (got {})", config.branches));
    if (config.max_steps != 0 && config.max_steps < episode)
        throw looptool::Error(
            fmt::format("the step limit must be 0 (automatic) or at least the policy's episode "
                        "length {} (got {})",
                        episode, config.max_steps));
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
}

int guided_step_limit(const looptool::Computation &c, int policy_steps, int threads) {
    int long_vars = 0;
    for (const auto &v : c.vars) long_vars += v.extent > 256;
    // A whole policy episode after the longest seed: most rollouts start at a seed (an 8x32
    // tile is 17 actions with its write nest, a conv tile 35-50).
    size_t longest = 0;
    for (const TuneSeed &s :
         tune_seeds(c, kSeedSteps, looptool::ActionSpace::preset("full"), false, threads))
        longest = std::max(longest, s.actions.size());
    return std::max(policy_steps + 8 * long_vars, longest == 0 ? 0 : int(longest) + policy_steps);
}

}  // namespace looptune
