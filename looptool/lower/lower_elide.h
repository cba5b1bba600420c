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

/// After `fuse` (docs/actions.md) a producer nest shares its loops with an epilogue nest that
/// reads the producer's temporary T at the element it writes to C. When T is read by that one
/// statement and written by the producer alone, and C is written by that statement alone and
/// read only after it in the same nest, this computes straight into C and the epilogue updates
/// C in place (`C = f(C, ...)`): each block of C is read back right after it is stored, so the
/// temporary's round trip through memory disappears. Ids stay stable; T is left untouched.
void elide_fused_temps(ElidedProgram &p);

}  // namespace looptool::detail
