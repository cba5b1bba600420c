// The random-schedule check: many random legal action sequences on odd shapes, each program
// run by the scheduled interpreter and by its JIT kernel and compared with the reference.
// benchmarks/random_schedule_check runs it at benchmark size (docs/reliability.md); a test
// runs a small count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/jit/jit.h"

namespace looptool {

struct ScheduleCheckOptions {
    int sequences = 10000;         ///< random action sequences to check
    uint64_t seed = 1;             ///< everything (shapes, actions, inputs) follows from it
    int max_actions = 20;          ///< each sequence has 1..max_actions legal actions
    int64_t max_volume = 1 << 20;  ///< cap on a shape's iteration count, keeps the reference fast
    int max_failures_kept = 10;    ///< failures described in full, the first ones
    /// The actions drawn from (ActionSpace::preset): "full", or "layout" to draw `pack` and
    /// `flatten` too (copies made block by block inside shared loops, lower_fold.h), or
    /// "threads" to draw `parallel` as well (the Jit's threads run the parallel loops).
    std::string space = "full";
    /// The programs drawn: "contractions" (matmul ~80%, conv2d and elementwise add the rest),
    /// "reductions" (max, min and sum reductions, softmax and layernorm, row_ops.h) or "all"
    /// (either, half and half).
    std::string programs = "contractions";
    /// Sequences before this one are drawn (same shapes and actions) but not run, to replay
    /// one sequence of a long check at once.
    int start = 0;
    /// Print each sequence (index, shape, actions) to stderr before running it, so a crash
    /// (a signal cannot be caught and reported) names the sequence that caused it.
    bool progress = false;
};

struct ScheduleCheckResult {
    int sequences = 0;
    int64_t actions = 0;             ///< actions applied over all sequences
    int distinct_shapes = 0;         ///< distinct computations (kind and extents)
    int interpreter_mismatches = 0;  ///< scheduled interpreter vs the reference
    int jit_mismatches = 0;          ///< JIT kernel vs the reference
    int errors = 0;                  ///< an Error or InternalError while checking
    double seconds = 0;
    std::vector<std::string> failures;  ///< the first failures: shape, actions, what differed
    bool ok() const { return interpreter_mismatches == 0 && jit_mismatches == 0 && errors == 0; }
};

/// Draws a computation of `programs` with extents from {1, 2, 3, 5, 7, 16, 17, 37, 64, 100,
/// 129} (so non-square and skinny shapes, tails and extents of 1), walks 1..max_actions random
/// legal actions of the space, and checks the result with verify_schedule() and with the
/// kernel `jit` compiles. Throws Error for an unknown `programs`.
ScheduleCheckResult check_random_schedules(const ScheduleCheckOptions &options, Jit &jit);

}  // namespace looptool
