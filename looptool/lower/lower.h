// Lowering: a Program's loop tree to one LLVM IR function (used by the JIT, jit.h).
//
// Shapes are compile-time constants, so every loop's trip count and every tail chunk is
// static: a tail chunk re-emits the loop body with the smaller element count of its var.
// The generated code honours the annotations itself rather than hoping the optimiser will:
//  - unroll: the loop's iterations (tail included) become straight-line copies;
//  - vectorize: the innermost loop becomes explicit <W x float> IR, W its element count in
//    the current context (broadcast, vector load or gather per read; vector store,
//    horizontal reduce-add or scatter for the output);
//  - register tiles: around a loop over a reduction var with only unrolled/vectorized loops
//    or further reduction loops beneath it, the output tile is held in SSA accumulators
//    (loaded before, or started at the reduction's identity, 0, -inf or +inf, when that
//    region is the only pass over the reduction; FMAs or compare-and-selects inside; stored after).
// Addresses are base pointers advanced by one GEP per loop level (strength-reduced), so
// the optimiser's alias analysis and LICM can see through them.
//
// The LLVM module itself comes from detail::lower_to_module, declared in lower_internal.h
// (the JIT's and the object export's entry point) so that no LLVM type appears in this header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool {

/// The version of the code the lowering generates for a schedule, part of the measurement
/// store's machine fingerprint: bumped when an existing schedule's kernel changes, so that
/// figures measured with the older code are not reused (2: the prefetch step, 2026-11-26; 3:
/// libmvec's vector exp/log/tanh/erf, 2026-11-27; 4: nests fused by their common loops, exp
/// inline on vectors; 5: streaming stores of large outputs).
inline constexpr int kKernelCodeVersion = 5;

struct LowerOptions {
    /// Compute `T += ...` straight into C when the next statement is the identity copy
    /// `C = T` and T is read nowhere else (LoopTune's matmul/conv structure).
    bool elide_copies = true;
    /// Budget per nest, to keep compile time bounded: statement copies (static tails,
    /// unrolling; a vector statement is one) plus 8 per run-time loop copy and 64 per
    /// innermost run-time loop copy (LLVM's loop vectorizer makes those expensive). Past
    /// it, unrolling of loops with run-time loops inside is dropped; if still past it, the
    /// nest becomes plain loops with run-time bounds, ignoring its annotations.
    int64_t max_emission_cost = 1024;
    /// Leave the runtime functions kernels call (lower_runtime.h: the `pack` transpose) declared
    /// only, for a JIT that defines them once (Jit sets it); otherwise the module defines them.
    bool shared_runtime = false;
    /// Prefetch the next block of an input a register tile walks block by block, where the
    /// hardware does not (lower_prefetch.h).
    bool prefetch_blocks = true;
    /// Threads a parallel loop's iterations run on (docs/actions.md, `parallel`): above 1 its
    /// nest's outermost loop is outlined into a function of a range of iterations, which the
    /// kernel hands to the JIT's thread pool (`looptool_parallel_for`, lower_runtime.h); 1
    /// ignores the mark (plain loops, no pool call).
    int threads = 1;
    /// Lane counts (bits 4, 8, 16) of glibc's libmvec variants that exp, log, tanh and erf may
    /// call on vectors (the JIT and the exporter set the target's; lower_math.h); 0: libm's
    /// scalar functions only.
    unsigned vector_math = 0;
    /// Bytes every input and output pointer is assumed aligned to, a power of two from 4 to 64:
    /// 64, the JIT's buffers, lets vector accesses at multiples of 16 floats be aligned ones; 4
    /// takes any float pointer (a kernel library called on numpy's 16-byte aligned arrays), and
    /// on AVX hardware its unaligned vector accesses of aligned data cost the same.
    int buffer_align = 64;
    /// Run the loops consecutive nests start with once, a row's passes one after another
    /// while it is in cache, where that is legal, and keep a temporary only those nests use
    /// to one row (lower_fuse.h).
    bool fuse_rows = true;
    /// Store an output of at least this many bytes that one assignment writes and nothing
    /// reads with non-temporal hints (lower_stream.h); -1: half this machine's last-level
    /// cache, so that only a tensor the cache cannot keep streams; 0: never.
    int64_t stream_bytes = -1;
};

/// What the lowering did, for tests and --verbose.
struct LoweringSummary {
    int register_tiles = 0;           ///< tile regions emitted with SSA accumulators
    int zero_start_tiles = 0;         ///< of those, started at the identity (no load)
    bool copy_elided = false;         ///< a `C = T` nest was folded into its producer
    int relaxed_nests = 0;            ///< nests over max_emission_cost: copy-only unrolls dropped
    int generic_nests = 0;            ///< nests still over it: plain loops
    int64_t static_statements = 0;    ///< statement copies emitted in total
    int transposed_copies = 0;        ///< copy loops emitted as calls to the 16x16 transpose
    int prefetched_reads = 0;         ///< reads whose next block is prefetched (lower_prefetch.h)
    int parallel_nests = 0;           ///< nests whose outermost loop runs on the thread pool
    int streamed_stores = 0;          ///< vector stores emitted non-temporal (lower_stream.h)
    std::vector<int> zeroed_tensors;  ///< tensors set to their reduction's identity at entry
};

struct LoweredIR {
    std::string ir;  ///< textual LLVM IR of the module, before optimisation
    LoweringSummary summary;
};

/// Lowers p to an LLVM module exporting `void fn_name(float *const *, const volatile
/// int32_t *)` (the KernelFn ABI of jit.h) and returns its IR text. Throws Error if the
/// computation or the tree are invalid.
LoweredIR lower_to_llvm_ir(const Program &p, const std::string &fn_name = "looptool_kernel",
                           const LowerOptions &options = {});

}  // namespace looptool
