// Lowering, the storage-folding step (lower.h): after copy elision, before planning. No LLVM.
#pragma once

#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool::detail {

/// A `pack` inside a loop (Nest::shared) writes its scratch tensor P block by block: each
/// iteration of the shared loops writes one block, and the next nest reads it in the same
/// iteration. A dimension of P indexed by a variable that only the shared loops walk (in both
/// nests) therefore never holds two live blocks: it is dropped from P's storage, and P holds
/// one block, which stays in cache (a conv's 9.4 MB of packed weights become 295 KB).
///
/// A dimension indexed by a variable that the shared loops walk in blocks and the loops
/// below walk within the block (k blocks outside, the block's k inside) holds one block too,
/// indexed from the block's start: its extent becomes the block's (a padded row rounded up to
/// a line again), and the tensor is listed in `block_relative`, whose accesses the emission
/// rebases where the shared loops end (Slot::block_relative). That is a `pack` whose cut
/// cannot be made (an extent the block does not divide, or a padded copy of T in its own
/// layout): without it each block went to new lines of a P as large as T.
struct FoldedScratch {
    /// Per tensor, "P: v, w" (the folded dimensions' variables), then "(u from the block's
    /// start)" for the rebased ones: the lowering log.
    std::vector<std::string> log;
    std::vector<int> block_relative;  ///< tensors indexed from their block's start
};
/// Semantics are unchanged.
FoldedScratch fold_scratch(Computation &c, const LoopTree &tree);

}  // namespace looptool::detail
