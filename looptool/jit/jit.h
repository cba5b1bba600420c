// The JIT: lowers a Program's loop tree to LLVM IR (lower.h) and compiles it with ORC LLJIT
// for the host CPU. A thin class in the style of LLVM's KaleidoscopeJIT; no LLVM type
// appears in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "looptool/ir/loop_tree.h"
#include "looptool/lower/lower.h"

namespace looptool {

/// A compiled kernel. `buffers` holds one 64-byte aligned pointer per tensor, in tensor-id
/// order (Buffers::pointers()). The kernel zeroes the reduction outputs it needs zeroed
/// itself. `cancel` is polled once per iteration of each nest's outermost loops: when it
/// becomes non-zero the kernel returns early (used by the measurement time cap); results are
/// then meaningless.
using KernelFn = void (*)(float *const *buffers, const volatile int32_t *cancel);

struct JitOptions {
    /// Print the loop tree and the LLVM IR before and after optimisation to stderr.
    bool verbose = false;
    /// Run the IR pipeline (inlining, cleanup, LICM, loop and SLP vectorization; see
    /// jit.cpp) before codegen. The lowering already emits register tiles, unrolled and
    /// vectorized code; the passes clean up and vectorize the loops left plain.
    bool optimize_ir = true;
    /// Lowering choices (copy elision, the static-expansion budget). Its `threads` is set
    /// from `threads` below.
    LowerOptions lower;
    /// Threads a `parallel` loop runs on, the caller's included (thread_pool.h): the Jit's
    /// pool has threads - 1 workers, started at the first parallel call. 0: the cores the
    /// process may use (default_threads(), util/threads.h). 1: parallel marks are ignored, no pool.
    int threads = 0;
    /// Compiled kernels kept at most; past it the least recently used one is freed. Every
    /// kernel holds a few memory mappings, and a long training run compiles tens of
    /// thousands: unbounded, it ran out of mappings (ENOMEM) after ~30,000 kernels.
    size_t max_cached_kernels = 4096;
    /// exp, log, tanh and erf on vectors call glibc's libmvec at the widths the CPU allows
    /// (AVX-512: 16 lanes, AVX2: 8; lower_math.h), loaded at creation; false, or no libmvec:
    /// libm's scalar functions lane by lane.
    bool vector_math = true;
};

struct Kernel {
    KernelFn fn = nullptr;
    double compile_ms = 0;  // 0 when it came from the cache
    bool cached = false;
};

/// Not thread-safe: use one Jit per thread (the kernel cache and the optimiser's
/// TargetMachine are unsynchronised; LLVM optimises on the thread that compiles).
class Jit {
public:
    /// Sets up LLJIT for the host CPU and its features. Throws Error if LLVM cannot.
    static std::unique_ptr<Jit> create(JitOptions options = {});
    ~Jit();
    Jit(const Jit &) = delete;
    Jit &operator=(const Jit &) = delete;

    /// The kernel for p's schedule, compiled on first use and cached by schedule_key(p)
    /// (the cursor is not part of the key). Throws Error on a lowering or LLVM failure.
    /// The function stays valid until max_cached_kernels other kernels have been compiled
    /// or looked up since (then it may be freed): call it right away, do not keep it.
    Kernel compile(const Program &p);
    /// The LLVM IR the lowering produces for p (before optimisation), for inspection.
    std::string llvm_ir(const Program &p);

    /// The threads parallel loops run on (JitOptions::threads resolved).
    int threads() const;
    std::string host_cpu() const;       // e.g. "znver5"
    std::string host_features() const;  // e.g. "+avx512f,+fma,..."
    size_t cache_size() const;

private:
    struct Impl;
    explicit Jit(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace looptool
