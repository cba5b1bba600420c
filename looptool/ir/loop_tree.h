// The schedule: a loop tree over a computation's statements.
//
// The tree's root holds an ordered list of nests; each nest is a chain of loops (outermost
// first) with one or more statements at its leaf. Nests run one after another.
//
// A loop is (var, size, tail, annotations), with loop_tool's arithmetic: if the next inner
// loop over the same var covers `inner` elements (1 if there is none), the loop covers
// E = size * inner + tail elements: `size` full chunks of `inner`, then, when tail > 0, one
// partial chunk of `tail` elements in which the inner loops of that var run shortened (they
// get `tail` elements to cover and apply the same rule recursively). The outermost loop of
// each var covers the var's whole extent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/ir/ir.h"

namespace looptool {

struct Loop {
    int var = 0;
    int64_t size = 1;
    int64_t tail = 0;
    bool unroll = false;
    bool vectorize = false;
    /// The loop's iterations run across threads, in contiguous chunks (docs/actions.md,
    /// `parallel`; parallel_rule() says where that is allowed).
    bool parallel = false;
    bool operator==(const Loop &) const = default;
};

struct Nest {
    std::vector<Loop> loops;  // outermost first
    std::vector<int> stmts;   // statement ids at the leaf, executed in this order
    /// The first `shared` loops of this nest are the next nest's first `shared` loops (the same
    /// var, size, tail and annotations, covering the same elements): they run once, and each of
    /// their iterations runs this nest's remaining loops, then the next nest's. A `pack` placed
    /// inside a loop (docs/actions.md) copies each block of the input this way, right before the
    /// next nest uses it. The shared loops may walk variables this nest's statements do not use
    /// (the copy is then repeated, as written). 0: a nest of its own.
    int shared = 0;
    bool operator==(const Nest &) const = default;
};

struct LoopTree {
    std::vector<Nest> nests;

    int num_loops() const;
    /// Position of flat loop index i (tree order: nests in order, outermost loop first).
    struct Pos {
        int nest = 0;
        int depth = 0;
    };
    Pos pos(int flat) const;
    int flat(Pos p) const;
    const Loop &loop(int flat) const;
    Loop &loop(int flat);
    bool operator==(const LoopTree &) const = default;
};

/// Elements covered by one iteration of loop `depth` of `nest`: the coverage of the next inner
/// loop over the same var, or 1.
int64_t inner_coverage(const Nest &nest, int depth);
/// Elements covered by the whole loop: size * inner_coverage + tail.
int64_t coverage(const Nest &nest, int depth);

/// The naive nest every benchmark starts from: one nest per statement, looping over the
/// statement's variables in the computation's declaration order, unsplit. For matmul this is
/// LoopTune's m, k, n compute nest followed by the m, n write nest.
LoopTree naive_loop_tree(const Computation &c);

/// nullptr when loop `depth` of nest `ni` may run its iterations in parallel, else why not:
/// the outermost loop of a nest that shares no loops with another (a `pack`ed block's copy
/// nest), not unrolled or vectorized, with two iterations at least, whose variable alone indexes
/// one dimension of every tensor the nest writes, the same dimension, coefficient and offset in
/// every access of that tensor in the nest (reads included). Then two iterations touch disjoint
/// elements of what the nest writes, and read nothing another iteration writes; a reduction over
/// the variable is refused (its iterations would add into the same elements).
const char *parallel_rule(const Computation &c, const LoopTree &t, int ni, int depth);

/// Throws Error if the tree does not schedule exactly the computation's statements, each once,
/// with loops whose outermost per-var coverage equals the var's extent, or if a parallel loop
/// breaks parallel_rule().
void validate_loop_tree(const Computation &c, const LoopTree &t);

/// A computation, its schedule and the cursor (a flat loop index): one environment state.
struct Program {
    ComputationPtr comp;
    LoopTree tree;
    int cursor = 0;

    static Program naive(ComputationPtr c);
    const Computation &computation() const { return *comp; }
    /// Structural equality (computations compared by value).
    bool same_as(const Program &o) const;
};

/// Canonical text key of a schedule (computation name + shapes + loops; no cursor), used to
/// cache kernels and measurements.
std::string schedule_key(const Program &p);

/// Loop names in loop_tool's style: the outermost loop of var m is `m`, the next `m'`, ...
std::vector<std::string> loop_names(const Computation &c, const Nest &n);

}  // namespace looptool
