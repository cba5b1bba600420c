// Buffers for a computation's tensors and the scheduled interpreter, run_schedule(): the
// definition of the loop semantics. The double-precision reference that every transformation
// and every JIT kernel is checked against is in looptool/check/verify.h.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool {

namespace detail {
/// Storage of at least `bytes`, 64-byte aligned (unaligned buffers ran 25-35% slower in
/// kernels); from 4 MB on, in 2 MB huge pages where the kernel grants them (interpreter.cpp).
void *allocate_buffer(size_t bytes);
void free_buffer(void *p, size_t bytes);
}  // namespace detail

/// The allocator of tensor storage: detail::allocate_buffer().
template <typename T>
struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U> &) {}
    T *allocate(size_t n) { return static_cast<T *>(detail::allocate_buffer(n * sizeof(T))); }
    void deallocate(T *p, size_t n) { detail::free_buffer(p, n * sizeof(T)); }
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

/// Fills every tensor but the inputs with `value`: NaN before a kernel runs makes an element it
/// does not write, or a temporary it does not zero, show up in the comparison.
void fill_non_inputs(const Computation &c, Buffers &b, float value);

/// Executes a loop tree exactly as scheduled (tails included), in float: a float kernel that
/// verify_schedule() (looptool/check/verify.h) checks against the double-precision reference. Every
/// tensor a reduction writes is first filled with the reduction's identity, as the kernel does.
void run_schedule(const Program &p, Buffers &b);

}  // namespace looptool
