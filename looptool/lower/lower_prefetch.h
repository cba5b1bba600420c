// Lowering, the prefetch step (lower.h, LowerOptions::prefetch_blocks): after planning, before
// emission. No LLVM here.
#pragma once

#include <string>
#include <vector>

#include "looptool/lower/lower_plan.h"

namespace looptool::detail {

/// A register tile that walks a block of an input per iteration of a block loop outside it
/// (B's k x 64 block of a "4x64 kb128 nkm" tile, for each k block) reads the next block only
/// once this one is done, and the hardware's prefetchers, which stay within a 4 KB page, do not
/// fetch it: a block whose rows are a page or more apart is read line by line from L3 or memory
/// at the first tile's pace. Per such vector read (unit stride along the nest's vectorized
/// loop) this sets NestPlan::prefetch to the distance of the same element in the next block:
/// the block loop is the innermost loop above the tile's reduction loop whose variable moves
/// the read, when a loop below walks the same variable or it is a loop a `pack`'s copy nest
/// shares with its user (one block per iteration), and the distance is a page or more.
/// Broadcast (scalar) reads are not prefetched: A's next row tile, prefetched with each of its
/// broadcasts, halved the 4x64 kb128 nkm tile on five deep shapes (docs/decisions.md).
/// Emission then prefetches those lines into L2 alongside each load. Returns one line per
/// prefetched read, "nest N: B +131072", for the lowering log.
std::vector<std::string> plan_prefetches(const Computation &c, std::vector<NestPlan> &plans);

}  // namespace looptool::detail
