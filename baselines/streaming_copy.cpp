// The streaming copy of onednn_rowop.h, compiled -O3 -march=native. A copy of at least half the
// last-level cache (the lowering's streaming threshold, lower_stream.h) stores with non-temporal
// hints at the widest vector, as our kernels store such outputs: a plain store (and glibc's memcpy
// at these sizes, measured) first reads its line, three transfers a line instead of two, which
// would set the roof too low. Smaller copies are a plain loop (a memcpy), which the cache keeps.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "util/machine.h"

namespace looptune::bench {

namespace {

void plain_copy(const float *__restrict x, float *__restrict y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
void stream_vector(const float *x, float *y) { _mm512_stream_ps(y, _mm512_loadu_ps(x)); }
#elif defined(__AVX__)
constexpr int64_t kLanes = 8;
void stream_vector(const float *x, float *y) { _mm256_stream_ps(y, _mm256_loadu_ps(x)); }
#else
constexpr int64_t kLanes = 4;
void stream_vector(const float *x, float *y) { _mm_stream_ps(y, _mm_loadu_ps(x)); }
#endif

}  // namespace

void streaming_copy(const float *__restrict x, float *__restrict y, int64_t n) {
    if (n * int64_t(sizeof(float)) < looptune::cache_sizes().llc / 2) return plain_copy(x, y, n);
    // Plain stores up to y's first vector boundary (a streaming store must be aligned).
    int64_t i = 0;
    while (i < n && reinterpret_cast<uintptr_t>(y + i) % (kLanes * sizeof(float)) != 0) {
        y[i] = x[i];
        ++i;
    }
    for (; i + kLanes <= n; i += kLanes) stream_vector(x + i, y + i);
    _mm_sfence();  // the streamed lines reach memory before the caller reads y
    plain_copy(x + i, y + i, n - i);
}

}  // namespace looptune::bench
