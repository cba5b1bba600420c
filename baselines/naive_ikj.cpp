// Compiled with -O3 -march=native (benchmarks/CMakeLists.txt): the baseline a user gets from
// the compiler for the naive nest in a good loop order.
#include <cstring>

#include "baselines/reference_kernels.h"

namespace looptune::bench {

namespace {
Shape g_shape;
int g_threads = 1;
}  // namespace

void set_reference_shape(Shape s) { g_shape = s; }
Shape reference_shape() { return g_shape; }

void set_library_threads(int threads) {
    g_threads = threads < 1 ? 1 : threads;
    openblas_apply_threads();
}
int library_threads() { return g_threads; }

void naive_ikj_kernel(float *const *buffers, const volatile int32_t *) {
    const float *__restrict A = buffers[0];
    const float *__restrict B = buffers[1];
    float *__restrict C = buffers[3];
    const int64_t M = g_shape.m, N = g_shape.n, K = g_shape.k;
    std::memset(C, 0, sizeof(float) * size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) {
            const float a = A[i * K + k];
            for (int64_t j = 0; j < N; ++j) C[i * N + j] += a * B[k * N + j];
        }
}

}  // namespace looptune::bench
