// Lowering, the row-fusion step (lower.h, LowerOptions::fuse_rows): after folding scratch
// blocks, before planning. No LLVM.
#pragma once

#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool::detail {

/// Consecutive nests that start with the same loops run those loops once (Nest::shared, a
/// chain of nests each sharing them with the next) when that is legal: the loops are plain
/// (not unrolled, vectorized or parallel), each nest keeps a loop of its own, no nest of the
/// run already shares loops, and every tensor one nest of the run writes and another touches
/// is indexed, in every access of the run, by each shared loop's variable alone in one
/// dimension (the same dimension, coefficient and offset). Iteration i of every nest then
/// touches only its own slice of what the others write, so running them slice by slice
/// computes what running them one after another does. A softmax's four passes over a row
/// (max, exp, sum, divide) then run while the row is in L1.
///
/// A temporary the run alone touches, written by no reduction, whose dimension indexed by a
/// shared loop's variable only the shared loops walk, never holds two live slices: that
/// dimension is dropped from its storage (the row of exponentials becomes one row) and the
/// kernel allocates it (FusedRows::kernel_owned), so it never travels to memory. The caller's
/// buffer for it is then left untouched, as a temporary's contents are no result.
struct FusedRows {
    std::vector<std::string> log;   ///< per run: "nests 0-3 share i; E: i"
    std::vector<int> kernel_owned;  ///< temporaries the kernel allocates (folded)
};
/// Semantics are unchanged.
FusedRows fuse_rows(Computation &c, LoopTree &tree);

}  // namespace looptool::detail
