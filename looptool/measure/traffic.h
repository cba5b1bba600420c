// The bytes a schedule moves between the core's private cache (L2) and what lies beyond it
// (the L3 other cores share, then memory): a reuse model over the loop tree.
//
// Why: two kernels within a few percent of each other on a quiet machine can differ 5-10x when
// another core streams through the shared L3 (docs/decisions.md): an mn order that sweeps all
// of a large B once per block of rows of A slows down, an nkm order that keeps what it reuses
// in L2 does not. This model tells them apart without running them.
//
// The model, per loop (a node of the tree, nests joined where they share loops): when all its
// iterations' data fit in the cache, it moves each line it touches once; when one iteration's
// data fit, consecutive iterations keep what they share, so again each line once; otherwise
// every iteration moves what its children move. A tensor's lines in a subtree come from its
// accesses' affine indices and the spans the subtree's loops give each variable (several
// accesses of a tensor: the largest); unaligned runs count their partial lines. A run is what
// the hardware streams: the contiguous elements the innermost loops read before a loop moves
// to another row, while at most 16 rows are read side by side.
//
// What sets kernels apart under a neighbour is not the bytes: the 4x64 mn tile moves twice what
// 8x32 mn moves and kept 84-100% of its speed. It is reading again, in runs shorter than 4
// lines, a set too large to stay in this core's share of the L3 (shared_cache_bytes).
#pragma once

#include <cstdint>

#include "looptool/ir/loop_tree.h"

namespace looptool {

struct TrafficEstimate {
    double bytes = 0;             ///< moved beyond the cache by one call
    double compulsory_bytes = 0;  ///< every line the call touches, once
    /// Of what moves more than once, the bytes moved in contiguous runs shorter than 4 lines
    /// from a set larger than a core's share of the L3: on a quiet machine they come from the
    /// L3, their latency hidden; while other cores stream through it, from memory, each run a
    /// full latency.
    double shared_cache_bytes = 0;
    /// bytes / compulsory_bytes: 1 when everything reused stays in the cache.
    double ratio() const { return compulsory_bytes > 0 ? bytes / compulsory_bytes : 1.0; }
    /// shared_cache_bytes / compulsory_bytes.
    double shared_cache_ratio() const {
        return compulsory_bytes > 0 ? shared_cache_bytes / compulsory_bytes : 0.0;
    }
};

/// The estimate for `t` scheduling `c` with a cache of `cache_bytes`.
TrafficEstimate estimate_traffic(const Computation &c, const LoopTree &t, int64_t cache_bytes);

/// This machine's L2 per core (util/machine.h: cpu0's level-2 cache in sysfs, read once); 1 MiB
/// when it cannot be read.
int64_t private_cache_bytes();

}  // namespace looptool
