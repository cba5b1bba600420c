// Chains of nests that share loops (Nest::shared): a packed block's copy, the matmul that reads
// it and the matmul's fused epilogue, each sharing loops with the next.
#pragma once

#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool {

/// The nests that nest `n` runs inside its own loops, each at the depth where its shared loops
/// end, outermost first. In a chain of nests each sharing loops with the next, nest i runs
/// inside the nearest later nest l whose own loops reach that depth (l ends the chain, or
/// shares no more loops than i), every nest between them sharing more: those loops are l's.
/// The interpreter and the lowering both run a chain this way.
struct Attached {
    int nest = 0, depth = 0;
};
std::vector<Attached> attached_nests(const LoopTree &t, int n);

}  // namespace looptool
