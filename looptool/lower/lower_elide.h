// Lowering, the copy-elision step (lower.h, LowerOptions::elide_copies). No LLVM here.
#pragma once

#include "looptool/ir/loop_tree.h"

namespace looptool::detail {

/// A computation and tree after copy elision (LowerOptions::elide_copies).
struct ElidedProgram {
    Computation comp;
    LoopTree tree;
    bool elided = false;  ///< a `C = T` nest was folded into its producer
};

/// LoopTune writes a matmul as `T += A*B` then `C = T`. When the second statement is an
/// identity copy over the whole of C, T is read by that copy only and C is written and read
/// nowhere else, this computes straight into C and drops the copy from the tree (the
/// statement stays in the computation, so ids are stable).
ElidedProgram elide_copies(const Computation &c, const LoopTree &tree);

}  // namespace looptool::detail
