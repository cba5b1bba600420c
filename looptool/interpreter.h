// Reference execution, used to check every transformation and every JIT kernel:
//  - run_reference(): schedule-independent plain loops over each statement's full domain,
//    accumulating in double precision;
//  - run_schedule(): executes a loop tree exactly as scheduled (tails included), in float.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "looptool/loop_tree.h"

namespace looptool {

/// Allocates 64-byte aligned storage (unaligned buffers ran 25-35% slower in kernels).
template <typename T>
struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U> &) {}
    T *allocate(size_t n) {
        return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(64)));
    }
    void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    bool operator==(const AlignedAllocator &) const { return true; }
};

using TensorData = std::vector<float, AlignedAllocator<float>>;

/// One buffer per tensor, indexed by tensor id, row-major, 64-byte aligned.
struct Buffers {
    std::vector<TensorData> data;
    /// Pointers in tensor-id order, the argument a JIT kernel takes.
    std::vector<float *> pointers();
};

/// Inputs uniformly random in [-1, 1) from `seed`; every other tensor zero.
Buffers make_buffers(const Computation &c, uint64_t seed);

void run_reference(const Computation &c, Buffers &b);
void run_schedule(const Program &p, Buffers &b);

struct Comparison {
    bool ok = true;
    double max_rel_error = 0;
    std::string first_mismatch;  // empty when ok
};

/// Compares the output tensors. An element's relative error is |got - want| divided by
/// max(|want|, 1e-2 * max |want| over the tensor), so tiny reference values near zero are
/// judged on the tensor's scale.
Comparison compare_outputs(const Computation &c, const Buffers &want, const Buffers &got,
                           double tolerance = 1e-4);

/// Runs the reference and the scheduled interpreter on the same random inputs and compares.
Comparison verify_schedule(const Program &p, uint64_t seed = 1, double tolerance = 1e-4);

}  // namespace looptool
