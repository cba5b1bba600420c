// The guided search's finalists (guided_search.h): which measured states are measured again
// with the configured protocol before tune chooses, and above one thread the other side of
// `parallel` of the best of them (search/thread_variants.h), so that whether the kernel runs on
// one thread or on all is measured, not the policy's or a seed rule's guess.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "looptool/actions/actions.h"
#include "tune/policy.h"

namespace looptune {

/// A state the guided search measured (or, for a counterpart, will measure with the finals).
struct SearchNode {
    looptool::Program program;
    std::vector<looptool::Action> path;  ///< from the start
    double gflops = 0;
    int next_branch = 0;  ///< 0: continue with a fresh rollout; i > 0: the i-th best action
    std::string origin;   ///< "greedy", "tile 8x32 mn", "... + policy", ...
};

/// The finalists' nodes, distinct by schedule, in the order they were taken.
struct Finals {
    std::vector<size_t> nodes;
    std::vector<std::string> keys;
    /// Adds node `i` unless a finalist has its schedule.
    void take(const std::vector<SearchNode> &all, size_t i);
    /// The finalist with node `i`'s schedule, or -1.
    long find(const std::vector<SearchNode> &all, size_t i) const;
};

/// The best `best` distinct schedules as measured; the best seed (`seed`: what the policy added
/// to the seeds is then on the same protocol); the greedy rollout's best (`greedy`, when it
/// improved on the start: so the result is never below it); the start (`start`: so it is never
/// below the start either, and its figure is a full measurement); and the best that does not
/// depend on the shared cache when every other one does.
Finals pick_finals(const std::vector<SearchNode> &nodes, int best, std::optional<size_t> seed,
                   const PolicyTuneResult &greedy, size_t start);

/// Finalists whose counterpart across `parallel` tune measures too, at most: every finalist but
/// the start (the best measured, the best seed, the greedy rollout's best, a robust one), so
/// whichever wins the final measurement was measured on both sides.
inline constexpr int kThreadCounterparts = 6;

/// With `threads` > 1, for each finalist (pick_finals(): the greedy rollout's best is one): the
/// same schedule on the other side of `parallel`, a node to measure
/// with the finalists where it is not one already: its parallel variant (parallel_actions())
/// when no loop is parallel, else its serial version (serial_path()). None on one thread, for
/// the start, or where the variant does not exist. `start` is the search's start (the paths'
/// origin).
std::vector<SearchNode> thread_counterparts(const std::vector<SearchNode> &nodes, const Finals &f,
                                            const looptool::Program &start, int threads);

}  // namespace looptune
