// The `pack` layout action (docs/actions.md), behind actions.h's why_illegal / try_apply.
//
// At a loop over variable v, `pack` copies the one input tensor T that the loop's nest reads
// without v (B under a matmul's m loop, the weights under a conv's output-row loop) into a
// scratch tensor P laid out in the order the nest walks T's variables, in a copy nest placed
// right before the nest, and the nest reads P instead: the register tile's loads of T become
// unit-stride and a block of T that the nest reuses is contiguous (what oneDNN's and
// OpenBLAS's packing of B does; docs/decisions.md.
//
// When the loops above v walk T in blocks (each is over a variable of T, or runs once: a conv's
// output-channel blocks), the copy nest shares them (Nest::shared): each block is copied right
// before the loops below use it, while it is in cache, and the lowering keeps one block of P
// (lower_fold.h): a variable walked both above and below (k blocks outside, the block's k
// inside) is cut where the block starts, so that its outer piece folds away too. Otherwise the
// whole of T is copied before the nest.
//
// P must be affine in the variables, so a variable of T that the nest walks in two separate
// pieces (n's 32-column blocks outside, its 32 columns innermost) becomes two variables in the
// computation, `n_o` and `n_i` with n = 32 * n_o + n_i, and every nest's loops over it are
// cut at 32 (a loop that straddles the cut becomes two). That needs 32 to divide n's extent:
// where it does not (a tail), the variable is kept whole where its inner piece would be (K^T's
// [d][j] for attention's scores at 197 tokens), and P's rows are padded to a line when that
// variable is last. Where P would then be T's own layout but T's rows do not start cache
// lines, P keeps T's layout with its rows padded to a line (PackPlan::pad). Copied block by
// block, P still holds one block in the lowering, a dimension walked above and below indexed
// from the block's start (lower_fold.h).
#pragma once

#include "looptool/ir/loop_tree.h"

namespace looptool::detail {

struct PackPlan {
    int nest = -1, depth = -1;
    int tensor = -1;  ///< T
    Access read;      ///< T's access in the nest (every read of T there is this one)
    /// P's dimensions in order: a variable of T, and for a variable in two pieces which one.
    struct Dim {
        int var = 0;
        bool inner = false;
    };
    std::vector<Dim> dims;
    std::vector<int64_t> cut;  ///< per variable: where it splits in two (the inner extent), or 0
    /// The copy runs block by block inside the nest's loops above `depth` (Nest::shared) when
    /// they walk T in blocks: each loop there is over a variable of T or runs once. Else the
    /// whole of T is copied before the nest.
    bool in_block = false;
    /// P's last dimension is padded to a multiple of kPackRowAlign elements. Either P keeps T's
    /// layout (no variable cut, dims: T's) where the nest walks T in that layout but T's rows
    /// are not 64-byte aligned, or P is reordered and its last dimension is a whole variable
    /// (a tail kept whole) that does not fill its last line; two lines long at least.
    bool pad = false;
    /// T is read with a stride (a 1x1 stride-2 conv's X[n, c, 2*ho + kh, 2*wo + kw], kh and kw
    /// of extent 1): P is the subsample the nest reads, one variable per dimension (`dims`, in
    /// T's order: P[n, c, ho, wo] = X[n, c, 2*ho, 2*wo]), copied whole before the nest, which
    /// then reads P[n, c, ho + kh, wo + kw]: a unit-stride conv whose rows are contiguous, so
    /// `flatten` and the tiles of a 1x1 conv apply (oneDNN's 1x1 kernels copy strided inputs
    /// the same way). Never larger than T.
    bool subsample = false;
};

/// Elements a padded P's rows are rounded up to (PackPlan::pad): 64 bytes, one line, so that
/// every row starts a line and a 16-float vector load at a multiple of 16 never crosses one.
inline constexpr int64_t kPackRowAlign = 16;
/// A padded P's row length.
inline int64_t padded_row(int64_t row) {
    return (row + kPackRowAlign - 1) / kPackRowAlign * kPackRowAlign;
}

/// nullptr when `pack` is legal at loop `depth` of nest `nest` (and fills `plan`); else why not.
const char *pack_plan(const Program &p, int nest, int depth, PackPlan &plan);
/// The packed program; the cursor stays on the same loop.
Program apply_pack(const Program &p, const PackPlan &plan);

/// pack_plan()'s answer for a read that is not an exact cover: nullptr when T's access indexes
/// each dimension by one variable of extent > 1 (plus variables of extent 1, which add nothing)
/// with a coefficient of 1 or more and an offset, each its own variable, and some coefficient
/// is above 1 (a strided read; PackPlan::subsample, `plan` filled); else why not.
const char *subsample_plan(const Computation &c, const Access &read, PackPlan &plan);
/// apply_pack() for a subsample plan.
Program apply_subsample(const Program &p, const PackPlan &plan);

}  // namespace looptool::detail
