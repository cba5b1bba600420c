// tune's seed rules: the members of the `tile` template (or dot products) a guided search
// measures first from a matmul's or conv2d's naive nest, and training starts episodes from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "env/environment.h"
#include "looptool/actions/actions.h"
#include "search/cache_blocks.h"
#include "search/tile_schedules.h"

namespace looptune {

/// A starting point of the search: a member of the `tile` template (or a dot product), as
/// actions from the naive nest.
struct TuneSeed {
    std::string name;
    std::vector<looptool::Action> actions;
};

/// A matmul's sides as the seed rules see them (variables named m, n, k; two statements: the
/// form `generate` writes).
struct MatmulShape {
    int64_t m = 0, n = 0, k = 0;
};
std::optional<MatmulShape> matmul_shape(const looptool::Computation &c);

/// One seed rule: why it holds, where it applies, and the schedule it seeds.
template <typename Shape, typename Schedule>
struct SeedRule {
    const char *why;
    bool (*applies)(const Shape &);
    Schedule (*schedule)(const Shape &);
};
using MatmulSeedRule = SeedRule<MatmulShape, TileSchedule>;
using ConvSeedRule = SeedRule<ConvShape, ConvTileSchedule>;

/// The longest seed (in actions) the rules write; guided_step_limit() makes room for it.
inline constexpr int kSeedSteps = 96;

/// The rules, in the order their seeds are measured (docs/tune.md lists them).
const std::vector<MatmulSeedRule> &matmul_seed_rules();
const std::vector<ConvSeedRule> &conv_seed_rules();

/// Whether a band of a conv's rows hides what sweeping every row once per block of output
/// channels costs (tune_seeds()' row_band then leaves those tiles out): where an image's input
/// (about ci x ho x wo floats) outgrows half the L2 cache. A smaller one stays in L2 from one
/// block to the next on the whole image as on the band.
bool band_hides_row_sweeps(const ConvShape &whole);
/// Floats in the widest vector register the CPU has (16 with AVX-512, 8 with AVX, else 4).
int64_t simd_floats();
/// The row rule: in every nest of two loops or more whose innermost loop walks contiguous floats
/// in each access that uses its variable (a row of a softmax, a layernorm, an elementwise op),
/// that loop split by `w` (when longer) and its inner part vectorized; the outermost loops stay
/// plain, so the lowering runs each row's passes one after another (LowerOptions::fuse_rows).
/// It holds on any CPU: every pass over a row then moves whole vector registers of contiguous
/// floats, a reduction keeps w / simd_floats() independent vector accumulators (reassociated
/// within verify.h's bound), and a row of the passes' temporaries is a few KB, within any L1.
/// The actions from the naive nest, or none when no nest qualifies or no split makes `w`.
std::optional<std::vector<looptool::Action>> row_vector_actions(const looptool::Computation &c,
                                                                int64_t w);
/// The seeds guided_search() measures first on `c`'s naive nest: those of the rules that apply,
/// within `limit` actions, with actions of `space` (and the layout actions `flatten` and `pack`,
/// outside it); for n = 1 two dot products. Training starts episodes from them too
/// (TrainConfig::seed_starts). With `row_band` (`c` is a band of a conv's output rows,
/// conv_row_band()), no conv tile that sweeps every row more than twice, once per block of
/// output channels: a band cannot show what that costs. With `threads` > 1, each seed also comes
/// with its nests' outermost loops made `parallel` where legal and at least `threads` long (the
/// tile's row or column blocks), those variants first; a tile whose k block is outermost instead
/// as column bands (n blocks outermost and parallel, each thread streaming its share of B's rows).
std::vector<TuneSeed> tune_seeds(const looptool::Computation &c, int limit,
                                 const looptool::ActionSpace &space, bool row_band = false,
                                 int threads = 1);

/// The seed rules alone (compare's `seeds` ablation): every seed of tune_seeds() on the naive
/// nest `start`, measured in `env` (reset to `start`); the fastest one's actions, or none when the
/// naive nest is faster or no rule applies.
std::vector<looptool::Action> best_seed_actions(Environment &env, const looptool::Program &start,
                                                int limit);

}  // namespace looptune
