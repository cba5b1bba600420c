// Verification of a kernel's outputs against a double-precision reference with a forward error
// bound (docs/measurement.md, "Verification"): every comparison of results goes through
// compare_outputs() here.
//
// The reference evaluates each statement in double from the float inputs, keeping temporaries
// in double, and carries for every element a bound on how far ANY float evaluation of the
// same computation (any loop order, split, vectorized or unrolled reduction, FMA or not) may
// lie from it: gamma_{n-1} * (sum of |terms|) for a sum of n terms, the largest term bound for
// a max or min (0 when its terms are exact: the float result must then be the reference's
// value exactly), u * |result| per rounding op, propagated through temporaries. A kernel
// passes when every checked element lies within `tolerance` times its bound; NaN and
// infinities are compared as classes. An element without a finite bound cannot be checked
// and fails the comparison.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/check/interpreter.h"

namespace looptool {

struct ReferenceOptions {
    /// Term evaluations (statement domain points) the full reference may cost; above it a
    /// seeded random sample of output elements is computed, each from its own reduction.
    /// 2^25 terms: well under a second of CPU (docs/measurement.md).
    double max_terms = double(int64_t(1) << 25);
    /// Output elements checked at least when sampling, whatever the cost.
    int64_t min_sample = 64;
    uint64_t sample_seed = 1;
    /// Print progress on stderr once the reference has taken more than 1 s.
    bool progress = false;
};

/// Reference values and error bounds of (a sample of) the output elements.
struct Reference {
    struct Output {
        int tensor = 0;
        std::vector<int64_t> index;  ///< flat indices checked; empty: every element, in order
        std::vector<double> value;   ///< the reference in double
        std::vector<double> bound;   ///< allowed |float - value|; +inf: cannot be bounded
    };
    std::vector<Output> outputs;
    int64_t checked = 0;  ///< output elements with a reference value
    int64_t total = 0;    ///< output elements of the computation
    bool sampled() const { return checked < total; }
};

/// Term evaluations of the full reference (sum of the statements' domain sizes).
double reference_cost(const Computation &c);
/// Bytes the reference of `c` holds at its peak under `options` (full or sampled).
int64_t reference_bytes(const Computation &c, const ReferenceOptions &options = {});

/// The reference for the input tensors of `inputs` (other tensors of `inputs` are ignored).
Reference compute_reference(const Computation &c, const Buffers &inputs,
                            const ReferenceOptions &options = {});

struct Comparison {
    bool ok = true;
    /// Largest |got - reference| / bound over the checked elements with a finite bound.
    double max_error_ratio = 0;
    std::string first_mismatch;  ///< empty when ok
    int64_t checked = 0, total = 0;
    /// Elements that failed: beyond the bound, or unbounded.
    int64_t mismatches = 0;
    /// Of the mismatches, elements without a finite error bound (the float evaluation may
    /// overflow or divide by zero): they cannot be checked, so they fail.
    int64_t unbounded = 0;
    /// "all 4096 output elements" or "a random sample of 512 of 4096 output elements".
    std::string coverage() const;
    /// What failed: "3 of all 4096 output elements differ beyond 1 x the error bound", and
    /// how many could not be checked (no finite bound).
    std::string failures(double tolerance) const;
};

/// Compares the output tensors of `got` with the reference: an element matches when
/// |got - value| <= tolerance * bound, or both are NaN, or both are the same infinity; an
/// element whose bound is infinite is a mismatch (counted in `unbounded` too).
/// `tolerance` must be finite and >= 0 (an Error otherwise).
Comparison compare_outputs(const Computation &c, const Reference &want, const Buffers &got,
                           double tolerance = 1);

/// The full reference rounded to float into the non-input tensors of `b` (inputs kept).
void run_reference(const Computation &c, Buffers &b);

/// Runs the scheduled interpreter (a float kernel) on random inputs from `seed` and compares
/// it with the reference.
Comparison verify_schedule(const Program &p, uint64_t seed = 1, double tolerance = 1,
                           const ReferenceOptions &options = {});

/// Throws an Error unless `tolerance` is finite and >= 0; `what` names the option.
void check_tolerance(double tolerance, const std::string &what = "tolerance");

}  // namespace looptool
