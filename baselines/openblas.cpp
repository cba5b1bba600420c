// OpenBLAS through dlopen: OPENBLAS_CORETYPE is read once, when the library initialises, so it
// must be in the environment before the library is loaded; linking it normally would load it
// (with this machine's OPENBLAS_CORETYPE=Haswell) before main() runs.
#include <dlfcn.h>
#include <fmt/format.h>

#include <strings.h>

#include <cstdlib>
#include <string>

#include "baselines/reference_kernels.h"
#include "looptool/ir/error.h"

namespace looptune::bench {

namespace {
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
using SgemvFn = void (*)(int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
SgemmFn g_sgemm = nullptr;
SgemvFn g_sgemv = nullptr;
void (*g_set_threads)(int) = nullptr;
char *(*g_corename)() = nullptr;
char *(*g_config)() = nullptr;
}  // namespace

void load_openblas(const std::string &coretype) {
    if (g_sgemm) return;
    if (void *loaded = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD)) {
        // Something linked it (LibTorch does): usable only if it started with the core type
        // wanted, i.e. OPENBLAS_CORETYPE was in the environment when the process started.
        auto corename = reinterpret_cast<char *(*)()>(dlsym(loaded, "openblas_get_corename"));
        const std::string core = corename ? corename() : "unknown";
        if (strcasecmp(core.c_str(), coretype.c_str()) != 0)
            throw looptool::Error(fmt::format(
                "OpenBLAS was loaded at start-up with core type {}, not {}: start the process with "
                "OPENBLAS_CORETYPE={}",
                core, coretype, coretype));
    }
    // Debian's OpenBLAS is the pthreads build: openblas_set_num_threads starts more threads
    // than the environment's count when asked (OMP_NUM_THREADS is for an OpenMP build).
    const std::string threads = std::to_string(library_threads());
    setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
    setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
    setenv("OMP_NUM_THREADS", threads.c_str(), 1);
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) throw looptool::Error(fmt::format("cannot load libopenblas.so.0: {}", dlerror()));
    g_sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    g_corename = reinterpret_cast<char *(*)()>(dlsym(h, "openblas_get_corename"));
    g_config = reinterpret_cast<char *(*)()>(dlsym(h, "openblas_get_config"));
    g_sgemv = reinterpret_cast<SgemvFn>(dlsym(h, "cblas_sgemv"));
    if (!g_sgemm || !g_sgemv)
        throw looptool::Error("libopenblas.so.0 has no cblas_sgemm or cblas_sgemv");
    g_set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
    if (!g_set_threads) throw looptool::Error("libopenblas.so.0 has no openblas_set_num_threads");
    openblas_apply_threads();
}

void openblas_apply_threads() {
    if (g_set_threads) g_set_threads(library_threads());
}

std::string openblas_core() { return g_corename ? g_corename() : "unknown"; }
std::string openblas_config() { return g_config ? g_config() : "unknown"; }

void openblas_kernel(float *const *buffers, const volatile int32_t *) {
    const Shape s = reference_shape();
    const int M = int(s.m), N = int(s.n), K = int(s.k);
    if (M == 1) {  // C[1,n] = A[1,k] B[k,n] is y = B^T x: what a user calls for a GEMV
        g_sgemv(RowMajor, Trans, K, N, 1.0f, buffers[1], N, buffers[0], 1, 0.0f, buffers[3], 1);
        return;
    }
    g_sgemm(RowMajor, NoTrans, NoTrans, M, N, K, 1.0f, buffers[0], K, buffers[1], N, 0.0f,
            buffers[3], N);
}

}  // namespace looptune::bench
