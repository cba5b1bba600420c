// A prefix of a program's outermost loop: the same schedule run on the first few iterations of
// the loop that walks its main nest's data, for measuring kernels whose one call takes too long.
//
// Why not a band of rows: a kernel's speed on a large shape depends on what each iteration of
// its outermost loop reads again (an nm order re-reads all of A for every panel of columns, an
// mn order all of B for every block of rows). Cutting the rows of every candidate (whatever its
// order) shrinks A and makes the nm orders look 5-15% faster than they are
// (docs/decisions.md). Cutting each candidate's own outermost loop keeps every iteration as it
// is in the whole kernel: the same loops inside, the same tensors and strides; only fewer of them.
//
// The prefix is a new computation: the outermost loop's variable covers its first `elements`, and
// the tensors a statement writes (not the packed copies) are cut to them where a dimension is
// indexed by that variable alone (so the lowering still sees an output written whole: copy
// elision and accumulators started at zero are the same as in the whole kernel). The inputs keep
// their shapes and strides. Every nest's loops over the variable are cut to cover the prefix.
#pragma once

#include <cstdint>
#include <optional>

#include "looptool/ir/loop_tree.h"

namespace looptool {

struct OuterPrefix {
    Program program;  ///< the schedule on the prefix computation
    int var = -1;     ///< the variable cut
    int64_t elements = 0, extent = 0;
    /// Iterations of the main nest's loop over `var` kept, of `of_iterations`.
    int64_t iterations = 0, of_iterations = 0;
    /// Some of the work does not shrink with the prefix (a nest without `var`: B packed before
    /// an mn order's row loop; an output zeroed at entry when `var` is a reduction): measured
    /// at two prefix lengths, the whole kernel's time is the line through them.
    bool has_fixed_work = false;
};

/// The main nest's loop a prefix cuts: its outermost loop that is the outermost over its
/// variable and runs at least 4 iterations (the main nest: the first with a reduction
/// statement, else the first). -1 when there is none.
int prefix_loop_depth(const Program &p, int *main_nest = nullptr);

/// `p` on the first `iterations` iterations of prefix_loop_depth()'s loop (full chunks: the
/// loop's tail is left out). nullopt when there is no such loop, when `iterations` is not below
/// its size, or when the cut breaks a nest shared with the next (a pack's copy nest splits the
/// variable differently): the caller then measures `p` itself.
std::optional<OuterPrefix> outer_prefix(const Program &p, int64_t iterations);

/// The fewest iterations (at least 2) of prefix_loop_depth()'s loop with `target_flops` or more;
/// 0 when that is more than `max_share` of them (the whole kernel is then cheap enough).
int64_t prefix_iterations(const Program &p, double target_flops, double max_share = 0.125);

}  // namespace looptool
