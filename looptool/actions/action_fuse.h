// The `fuse` action (compute-at; docs/actions.md), behind actions.h's why_illegal / try_apply.
//
// With the cursor on loop `depth` of a producer nest whose one statement writes tensor T, `fuse`
// moves the next nest (the consumer: elementwise statements that read T at the element they
// write, such as a matmul's bias, activation and residual add) inside the producer's loops
// 0..depth: the producer's nest shares them with the consumer's (Nest::shared), so each
// iteration computes a block of T completely and then runs the epilogue over that block while
// it is in registers or L1, instead of a second pass over the whole of T. The consumer's own
// loops become the producer's loops below the cursor over T's variables (its splits, unrolls
// and vectorization), without the reduction loops. The lowering then computes the block straight
// into the consumer's output when T is read nowhere else (lower_elide.h).
//
// Legal when (checked here only, then applied):
//  - the producer nest has one statement and T is written whole: one variable per dimension;
//  - the next nest has only `=` statements, reads T, and every read of T there is at the same
//    index, one variable per dimension (those variables are renamed to the producer's); every
//    variable of the consumer indexes T; what the consumer writes the producer does not read,
//    and a tensor the consumer writes it reads only at the element it writes;
//  - no loop at or above the cursor is over a variable T does not use (a reduction variable):
//    the reduction of each element of the block is complete where the epilogue runs;
//  - the producer keeps a loop of its own, no nest shares loops with either nest already, and
//    the producer's loops are not parallel (a nest sharing loops runs on one thread).
#pragma once

#include "looptool/actions/actions.h"
#include "looptool/ir/loop_tree.h"

namespace looptool::detail {

struct FusePlan {
    int nest = -1, depth = -1;
    /// Per variable of the computation: the variable the consumer's statements use instead.
    std::vector<int> rename;
    bool renamed = false;  ///< some consumer variable is renamed
    Nest consumer;         ///< the consumer's nest after the move
};

/// nullptr when `fuse` is legal at loop `depth` of nest `nest` (and fills `plan`); else why not.
const char *fuse_plan(const Program &p, int nest, int depth, FusePlan &plan);
/// The fused program; the cursor stays on the same loop.
Program apply_fuse(const Program &p, const FusePlan &plan);

/// True when nest `ni` shares loops with the next because `pack` made it the copy of a block
/// (it writes a scratch tensor), not because `fuse` moved the next nest inside its loops.
bool is_block_copy(const Computation &c, const LoopTree &t, int ni);

/// nullptr when action `a` at `pos` keeps the loops two nests share (Nest::shared) as `pack` or
/// `fuse` made them; else why not.
const char *shared_loops_rule(const Computation &c, const LoopTree &t, LoopTree::Pos pos, Action a);

}  // namespace looptool::detail
