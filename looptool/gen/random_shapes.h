// A seeded random-shape spec for matmul datasets, beside LoopTune's range syntax
// (generate.h): the shapes users run are not LoopTune's 64..256 step-16 grid.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "looptool/gen/generate.h"

namespace looptool {

/// The kinds of shape drawn, each with its own share of the count (RandomShapeSpec::share):
///  - LogUniform: m, n, k each log-uniform over 1..4096;
///  - Skinny: one of m, n, k log-uniform over 1..16, the other two over 16..4096;
///  - Ragged: every size log-uniform over 17..1024 and not a multiple of 8 (so neither of 16);
///  - Large: sizes log-uniform over 256..4096 with a working set (A, B and C in FP32) above
///    `l2_bytes`.
enum class ShapeFamily { LogUniform, Skinny, Ragged, Large };
const char *shape_family_name(ShapeFamily f);

struct RandomShapeSpec {
    int count = 100;             ///< distinct shapes to draw
    uint64_t seed = 0;           ///< same seed, same shapes, on every machine (std::mt19937_64)
    int64_t l2_bytes = 1 << 20;  ///< what "exceeds L2" means (generate: this core's L2)
    /// Upper bound on m*n*k: a 4096^3 matmul's naive nest runs for minutes, too long to tune
    /// on; the default is 1024^3 * 2.
    int64_t max_macs = int64_t(1) << 31;
    /// Shares of the count, in ShapeFamily order; the last family takes the remainder.
    double share[4] = {0.4, 0.2, 0.2, 0.2};
    /// Names never drawn (LoopTune's 25 test benchmarks, passed by the caller).
    std::set<std::string> excluded;
};

struct RandomShape {
    MatmulShape shape;
    ShapeFamily family;
};

/// Draws spec.count distinct shapes, ordered by name. Throws Error for an absurd request: a
/// count outside 1..100000, a bound that no shape of a family can meet, or shares that are
/// negative or do not sum to 1.
std::vector<RandomShape> random_matmul_shapes(const RandomShapeSpec &spec);

}  // namespace looptool
