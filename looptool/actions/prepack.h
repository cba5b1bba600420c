// Packs of constant inputs done once, outside the kernel's calls (docs/actions.md, `pack`).
//
// Inference runs a layer many times with the same weights, and a library reorders them into its
// blocked layout once (oneDNN's weight reorder). A schedule whose `pack` copies only inputs the
// user declares constant splits into two programs over the same buffers: `prepare`, the copy
// nests alone, which write each packed tensor P whole, and `run`, the rest, which reads P as an
// input. Calling prepare once, then run, computes what the schedule computes; only run is
// timed. P is then a buffer of the caller (not one block kept in cache, lower_fold.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool {

struct Prepacked {
    /// The copy nests of the constant inputs' packs, each P an output. Its tensors are run's
    /// buffers (its scratch tensors excepted): both take the same buffer array.
    Program prepare;
    /// The schedule without those nests; each P is an input after the original buffers.
    Program run;
    std::vector<std::string> packed;  ///< P's names, in run's tensor order
};

/// Throws Error unless each name in `constant` is an input tensor of c.
void check_constant_inputs(const Computation &c, const std::vector<std::string> &constant);

/// The split of p when some copy nest of a `pack` reads only inputs named in `constant` (see
/// above); std::nullopt when none does (the schedule has nothing to prepare). Names that are not
/// inputs of p are an Error (check_constant_inputs).
std::optional<Prepacked> split_prepacked(const Program &p,
                                         const std::vector<std::string> &constant);

}  // namespace looptool
