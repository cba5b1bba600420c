// Lowering, the planning step (lower.h): one plan per nest, after copy elision (lower_elide.h).
//
// A NestPlan is a plain value computed from the computation and the tree alone, without LLVM:
// the pointer slots of the nest's accesses, whether vector code is safe, where each
// statement's register tile starts and whether it starts at zero, the emission cost and the
// mode (static, relaxed or generic). Emission (lower_emit.h) only reads it. How a loop is
// expanded in a static context is decided by expand(), the one rule that the cost estimate,
// the tile-key walk and emission all follow.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "looptool/ir/loop_tree.h"
#include "looptool/lower/lower.h"

namespace looptool::detail {

/// One tensor access of a nest in flat (row-major element) form:
/// element = offset + sum_v coef[v] * index_v.
struct Slot {
    int tensor = 0;
    std::vector<int64_t> coef;  ///< per var
    int64_t offset = 0;
    /// Indexed from the start of the block the shared loops of a `pack` are at (a scratch
    /// tensor fold_scratch rebased, lower_fold.h): the emission restarts its pointer at the
    /// tensor's base where the shared loops end.
    bool block_relative = false;
    bool operator==(const Slot &) const = default;
};

/// How one loop is emitted in a static context where `total` elements of its var are left.
enum class Expansion {
    Vector,    ///< explicit <total x float> code for the whole loop
    Unrolled,  ///< straight-line copies: every full chunk, then the tail
    Loop,      ///< a run-time loop over the full chunks, then the tail as one static copy
};

/// The expansion rule: vectorized loops become vector code when it is safe and more than one
/// element is left; unrolled loops, vectorized ones that cannot be, and loops with at most
/// one full chunk become static copies; the rest are run-time loops.
Expansion expand(const Loop &l, int64_t total, int64_t chunk, bool vector_safe);

/// A piece of a Vector-expanded loop: a `width`-lane vector from element `start` of its
/// range, of which the first `lanes` are real (lanes < width: a masked piece).
struct VectorPiece {
    int64_t start = 0, width = 0, lanes = 0;
};
/// Widest vector register in floats (AVX-512); masked pieces are at most this wide.
inline constexpr int64_t kMaskedPieceMax = 16;
/// How a Vector-expanded loop of `total` elements is emitted: power-of-two pieces, largest
/// first (24 -> 16 + 8, 56 -> 32 + 16 + 8). LLVM legalizes an odd width such as <24 x float>
/// through the stack lane by lane: a tail of one <24 x float> ran 20x slower and compiled 6x
/// slower than 16 + 8 (docs/decisions.md). With `masked`, two or more pieces narrower than
/// kMaskedPieceMax become one masked piece of the next power of two (14 -> 16 with 14 lanes,
/// 7 -> 8 with 7, 27 -> 16 + 16 with 11; 24 stays 16 + 8): a 14-column conv row is one FMA
/// per output channel instead of three (section m). The cost estimate, the tile keys and
/// emission all cut a vector loop with this.
std::vector<VectorPiece> vector_pieces(int64_t total, bool masked = false);

enum class NestMode {
    Static,   ///< annotations honoured as written
    Relaxed,  ///< over the budget: unrolling of loops with a run-time loop beneath dropped
    Generic,  ///< still over it: plain loops with run-time bounds, annotations ignored
};
const char *nest_mode_name(NestMode m);

struct NestPlan {
    Nest nest;  ///< the nest as emitted (Relaxed: copy-only unrolls dropped)
    NestMode mode = NestMode::Static;
    std::vector<int64_t> inner;  ///< per depth: elements one iteration covers
    std::vector<Slot> slots;     ///< each leaf statement's output, then its reads
    std::vector<int> out_slot;   ///< per leaf statement: the slot of its output
    /// Slot of each access; the keys point into the Computation the plan was made for.
    std::unordered_map<const Access *, int> slot_of;
    /// Vector code runs each statement for all lanes before the next one; safe when every
    /// tensor written in the nest is accessed through one index expression by all its users.
    bool vector_safe = true;
    /// The vectorized loop's tail may be a masked piece (vector_pieces): every leaf statement
    /// writes an element per lane (no vectorized reduction var), so the lanes past the real
    /// ones are never stored; loads and stores of them are masked.
    bool masked_tails = false;
    std::vector<int> region;  ///< per leaf statement: depth its register tile starts, or -1
    /// Per leaf statement: that tile starts at the reduction's identity, zero for a sum (no load).
    std::vector<bool> zero_start;
    int64_t cost = 0;  ///< emission cost of `nest` (LowerOptions::max_emission_cost)
    /// Per slot: prefetch, with each vector load, the lines this many elements ahead (the
    /// same element in the next block; lower_prefetch.h), or 0. Empty: none.
    std::vector<int64_t> prefetch;
    /// Per leaf statement: its output's full, aligned vector stores are non-temporal
    /// (lower_stream.h).
    std::vector<bool> streamed;

    Expansion expansion(size_t depth, int64_t total) const {
        return expand(nest.loops[depth], total, inner[depth], vector_safe);
    }
    std::vector<VectorPiece> pieces(int64_t total) const {
        return vector_pieces(total, masked_tails);
    }
    int slot(const Access &a) const;
    /// Position of statement s among the leaf statements.
    size_t position(int s) const;
};

/// Plans every nest of `tree` in order (the tree as left by elide_copies).
std::vector<NestPlan> plan_nests(const Computation &c, const LoopTree &tree,
                                 const LowerOptions &options);

/// A register-tile accumulator: `w` lanes starting at element `off` relative to the output
/// slot's current base pointer, `stride` elements apart, the first `lanes` of them real.
/// stride 0 with w > 1 holds w partial sums of one element (a vectorized reduction var),
/// added up when stored.
struct AccKey {
    int64_t off = 0, w = 1, stride = 0;
    int64_t lanes = 1;  ///< real lanes (< w: a masked accumulator)
    auto operator<=>(const AccKey &) const = default;
};

/// The accumulators of leaf statement `pos`'s register tile started at depth d in the static
/// context (avail, stat: per var, elements left and static index offset), sorted and unique.
/// Walks the contexts below d as emission does: every static copy, one full and one tail
/// context per run-time loop. None when no tile can hold them: an element in two
/// accumulators (a vectorized reduction var with a tail) or over 256 vector registers.
std::optional<std::vector<AccKey>> tile_keys(const NestPlan &plan, size_t pos, size_t d,
                                             const std::vector<int64_t> &avail,
                                             const std::vector<int64_t> &stat);

/// One line per plan, for the lowering log (LOOPTOOL_LOG_LOWERING) and tests' messages.
std::string describe(const Computation &c, const NestPlan &plan);

}  // namespace looptool::detail
