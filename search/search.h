// Search baselines over the environment's action mask: greedy1/2, beam2/4 dfs/bfs, random and
// genetic, plus `tile`, an expert template of register-tile schedules for matmuls. Each is
// deterministic for a seed, bounded by a step limit (actions per sequence) and a wall-clock
// budget, shares the environment's measurement cache and store, and returns
// the best schedule with its action sequence and a best-so-far curve.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "env/environment.h"

namespace looptune {

/// LoopTune's step limit: actions per sequence of its agents and of the blind searches here.
inline constexpr int kLoopTuneSteps = 10;
/// A step limit that never cuts: the tile template's sequences are as long as the schedule
/// needs (12-20 actions for a matmul tile, 40-50 for a conv one).
inline constexpr int kUncutSteps = 1 << 30;

struct SearchConfig {
    /// Actions per sequence; 0: what the algorithm needs (SearchAlgorithm::default_steps).
    int max_steps = 0;
    double budget_s = 60;         ///< wall-clock budget, seconds
    uint64_t seed = 0;            ///< random and genetic
    int64_t max_schedules = 0;    ///< stop after this many distinct schedules (0: no limit)
    int population = 16;          ///< genetic: sequences per generation
    int generations = 1000;       ///< genetic: upper bound (the budget usually ends it first)
    double crossover_rate = 0.7;  ///< genetic: probability a child is a crossover
    double mutation_rate = 0.15;  ///< genetic: per-gene probability of a random action
    int tournament = 3;           ///< genetic: tournament size
};

struct CurvePoint {
    double seconds = 0;
    double best_gflops = 0;
    int64_t schedules = 0;  ///< distinct schedules measured so far
};

struct SearchResult {
    std::string algo;
    looptool::Program best;
    double best_gflops = 0;
    double base_gflops = 0;
    std::vector<looptool::Action> actions;  ///< from the start state to `best`
    int64_t schedules_measured = 0;         ///< distinct schedules evaluated
    double seconds = 0;
    bool budget_exhausted = false;
    std::vector<CurvePoint> curve;  ///< one point per improvement
};

/// One search by name. search_table() is the one list of them: `search --algo` and its help,
/// `compare --methods` and the tests read it; nothing else spells the names out.
struct SearchAlgorithm {
    std::string name;
    std::string help;  ///< one line for --help
    std::function<SearchResult(Environment &, const looptool::Program &, const SearchConfig &)> run;
    /// The step limit it runs with when none is given (SearchConfig::max_steps 0): LoopTune's
    /// for the blind searches; kUncutSteps for `tile`, whose sequences cut short are not the
    /// template's schedules.
    int default_steps = kLoopTuneSteps;
};
const std::vector<SearchAlgorithm> &search_table();
/// The names of search_table(), in its order.
const std::vector<std::string> &search_algorithms();

/// The step limit of `algo` when none is given (SearchAlgorithm::default_steps).
/// Throws looptool::Error for an unknown algorithm name.
int default_steps(const std::string &algo);

/// Runs `algo` from `start` (usually the naive nest) in `env`'s action space, with the step
/// limit config.max_steps or, for 0, default_steps(algo).
/// Throws looptool::Error for an unknown algorithm name or a negative step limit.
SearchResult run_search(const std::string &algo, Environment &env, const looptool::Program &start,
                        const SearchConfig &config);

namespace detail {

/// Shared bookkeeping of a search: budget, distinct schedules, best-so-far and its path.
class SearchState {
public:
    SearchState(Environment &env, const looptool::Program &start, const SearchConfig &config);
    bool out_of_time() const;
    /// GFLOPS of `p` reached by `path` from the start; updates the best. Returns -1 when the
    /// budget (time or max_schedules) is exhausted (nothing measured).
    double evaluate(const looptool::Program &p, const std::vector<looptool::Action> &path);
    std::vector<looptool::Action> legal_actions(const looptool::Program &p) const;
    SearchResult finish(std::string algo);
    Environment &env;
    const SearchConfig &config;

private:
    double elapsed() const;
    looptool::Program best_;
    double best_gflops_ = 0, base_gflops_ = 0;
    std::vector<looptool::Action> best_path_;
    std::vector<CurvePoint> curve_;
    std::unordered_set<std::string> seen_;
    int64_t distinct_ = 0;
    bool exhausted_ = false;
    int64_t start_ns_ = 0;
};

SearchResult greedy(Environment &env, const looptool::Program &start, const SearchConfig &c,
                    int lookahead);
SearchResult beam(Environment &env, const looptool::Program &start, const SearchConfig &c,
                  int width, bool depth_first);
SearchResult random_walks(Environment &env, const looptool::Program &start, const SearchConfig &c);
SearchResult genetic(Environment &env, const looptool::Program &start, const SearchConfig &c);
/// Expert template, not a blind search: the register-tile schedule family of
/// tile_schedules.h (tiles 8x32, 8x16, 4x64, ... in both outer orders, k blocks for deep k),
/// each measured once, cut to the step limit. Matmuls from the naive nest only.
SearchResult tile_template(Environment &env, const looptool::Program &start, const SearchConfig &c);

}  // namespace detail
}  // namespace looptune
