// Observation spaces of the environment (docs/observations.md has shapes and meanings).
//
//   runtime, flops          scalars: seconds and GFLOPS of the current schedule
//   ir, loop_tree           text: serialize() and dump() of the current program
//   loops_tensor            [max_loops, kLoopFeatures] float
//   stride_tensor           [kStrideBuckets] float
//   prev_actions_tensor     [kPrevActions, |action space|] float
//   threads                 scalar: the threads a parallel loop runs on (EnvConfig::threads)
//   machine_tensor          [kMachineFeatures] float in [0, 1]: the machine (machine_vector())
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/actions/actions.h"
#include "looptool/ir/loop_tree.h"
#include "util/machine.h"

namespace looptune {

inline constexpr int kStrideBuckets = 32;
inline constexpr int kPrevActions = 5;
/// Per-loop row: cursor, log2(size+1), log2(tail+1), in-compute-nest, unroll, vectorize,
/// valid (0 for padding rows), then kStrideBuckets stride-histogram buckets.
inline constexpr int kLoopScalarFeatures = 7;
inline constexpr int kLoopFeatures = kLoopScalarFeatures + kStrideBuckets;

/// The machine vector: log2 of the L1d, L2 and per-core L3 sizes, the vector width, the
/// single-core peak, the usable cores, the threads used per core and the threads used, each
/// scaled to [0, 1] (docs/observations.md has the scales), so one policy can act differently on
/// different CPUs.
inline constexpr int kMachineFeatures = 8;

struct Observation {
    enum class Kind { Scalar, Text, Tensor };
    std::string space;
    Kind kind = Kind::Scalar;
    double scalar = 0;
    std::string text;
    std::vector<int64_t> shape;
    std::vector<float> values;  // row-major, shape's product long
};

const std::vector<std::string> &observation_space_names();

/// Bucket of a stride in elements: 0 for stride 0, else 1 + floor(log2(|stride|)), capped at
/// kStrideBuckets - 1.
int stride_bucket(int64_t stride);

/// Rows for at most `max_loops` loops in tree order; when the tree has more, the window is the
/// one that starts as late as needed to include the cursor.
Observation loops_tensor(const looptool::Program &p, int max_loops);
Observation stride_tensor(const looptool::Program &p);
/// Most recent action first; rows past the history are zero.
Observation prev_actions_tensor(const std::vector<looptool::Action> &history,
                                const looptool::ActionSpace &space);

/// The machine vector of `m` running parallel loops on `threads` threads; figures of 0 (not
/// known) and figures beyond a scale's ends give its ends.
std::vector<float> machine_vector(const MachineFigures &m, int threads);
Observation machine_tensor(const std::vector<float> &vector);

}  // namespace looptune
