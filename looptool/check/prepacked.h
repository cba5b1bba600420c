// A prepacked schedule (looptool/actions/prepack.h) run and checked: prepare once, then run, on
// the original computation's buffers with a buffer per packed tensor after them.
#pragma once

#include <cstdint>

#include "looptool/actions/prepack.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/jit/jit.h"

namespace looptool {

/// Appends to `b`, the original computation's buffers, a zeroed buffer for each packed tensor.
void add_packed_buffers(const Prepacked &s, Buffers &b);
/// Drops them again (b as the original computation's buffers).
void drop_packed_buffers(const Prepacked &s, Buffers &b);

/// The scheduled interpreter (run_schedule): prepare, then run, on `b` with the packed buffers.
void run_prepacked_schedule(const Prepacked &s, Buffers &b);
/// The kernels: prepare's, then run's, on `b` with the packed buffers. Returns run's kernel,
/// valid as Jit::compile's (call it right away).
KernelFn run_prepacked_kernels(Jit &jit, const Prepacked &s, Buffers &b);

/// verify_schedule() for a split of p: the interpreter's prepare then run, on random inputs from
/// `seed`, against the reference of p's computation.
Comparison verify_prepacked_schedule(const Program &p, const Prepacked &s, uint64_t seed = 1,
                                     double tolerance = 1);

}  // namespace looptool
