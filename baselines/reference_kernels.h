// What a user could run instead of a looptune schedule, with the JIT's kernel signature
// (KernelFn) and the buffers of make_matmul (A, B, T, C; C is the output, T is unused):
//  - the naive i-k-j loop nest compiled by g++ -O3 -march=native (naive_ikj.cpp);
//  - OpenBLAS sgemm, loaded at run time so its CPU kernels can be chosen first (openblas.cpp);
//  - oneDNN's sgemm (dnnl_sgemm, oneDNN 2.6 from Debian), the reference,
//    loaded the same way so that its thread count is ours to set (onednn.cpp).
// Both libraries run on set_library_threads() threads (1 unless compare --threads says more).
// For M = 1 (a decode-time GEMV) each library gets the call a user would make: OpenBLAS's
// cblas_sgemv (its sgemm in Debian's 0.3.21 does not forward to gemv), oneDNN's dnnl_sgemm
// (whose driver dispatches M = 1 to its gemv kernels itself).
// KernelFn is a plain function pointer, so the shape travels in a global set by
// set_reference_shape(); the benchmarks run one kernel at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace looptune::bench {

struct Shape {
    int64_t m = 0, n = 0, k = 0;
};
void set_reference_shape(Shape s);
Shape reference_shape();

/// Threads the library kernels run on, at least 1 (default 1): oneDNN's OpenMP threads
/// (omp_set_num_threads on each call, OpenMP's count being per calling thread) and OpenBLAS's
/// (openblas_set_num_threads, applied now if it is loaded, else when load_openblas loads it).
/// Call it before the first library call is measured: the libraries' worker threads are made
/// by the first call that needs them and keep the CPU mask of the thread that made them.
void set_library_threads(int threads);
int library_threads();

/// C = A * B with loops i, k, j (k before j so the inner loop is contiguous), compiled with
/// -O3 -march=native. Zeroes C first.
void naive_ikj_kernel(float *const *buffers, const volatile int32_t *cancel);

/// Loads libopenblas.so.0 with OPENBLAS_CORETYPE=`coretype` and OPENBLAS_NUM_THREADS set
/// before the library initialises (this machine's environment sets OPENBLAS_CORETYPE=Haswell,
/// i.e. AVX2 kernels). Must run before anything else loads OpenBLAS; throws looptool::Error if
/// the library or cblas_sgemm cannot be found, or if it was already loaded with another core.
void load_openblas(const std::string &coretype = "SkylakeX");
/// The core OpenBLAS reports (openblas_get_corename), e.g. "SkylakeX".
std::string openblas_core();
std::string openblas_config();
/// Gives a loaded OpenBLAS library_threads() threads (set_library_threads calls it).
void openblas_apply_threads();

/// cblas_sgemm(RowMajor, NoTrans, NoTrans, m, n, k, 1, A, k, B, n, 0, C, n); for m = 1,
/// cblas_sgemv(RowMajor, Trans, k, n, 1, B, n, A, 1, 0, C, 1).
void openblas_kernel(float *const *buffers, const volatile int32_t *cancel);

/// Loads libdnnl.so.2 with OMP_NUM_THREADS (and DNNL_NUM_THREADS) set to library_threads()
/// and sets that many OpenMP threads; throws looptool::Error if the library or dnnl_sgemm
/// cannot be found.
void load_onednn();
/// Symbol `name` of the libdnnl.so.2 load_onednn() loads (loading it first); throws
/// looptool::Error naming what is missing (oneDNN 2.x expected).
void *onednn_symbol(const char *name);
/// Throws looptool::Error "oneDNN: `what` failed (status N)" unless `status` is dnnl_success (0).
void onednn_check(int status, const char *what);
/// library_threads() OpenMP threads for oneDNN calls made by the calling thread (OpenMP's
/// count is per thread), each worker on a core other than the caller's; loads oneDNN first.
void onednn_set_threads();
/// The core each thread of a library_threads() OpenMP team is pinned to (-1: not pinned to
/// one); empty when libgomp's entry points were not found. For tests of the placement.
std::vector<int> onednn_thread_cores();
/// "oneDNN 2.6.x (OpenMP runtime, N OpenMP threads)".
std::string onednn_version();
/// dnnl_sgemm('N', 'N', m, n, k, 1, A, k, B, n, 0, C, n), row-major.
void onednn_kernel(float *const *buffers, const volatile int32_t *cancel);

}  // namespace looptune::bench
