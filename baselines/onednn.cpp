// oneDNN's sgemm through dlopen, like OpenBLAS (openblas.cpp): Debian's libdnnl.so.2 (oneDNN
// 2.6) is built with OpenMP (it links libgomp), so its thread count is OpenMP's. LibTorch may
// have loaded libgomp before main() with OMP_NUM_THREADS unset, so the environment alone is
// not enough: omp_set_num_threads(library_threads()) is called on the library's own libgomp as
// well, by the thread that calls oneDNN.
#include <dlfcn.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>
#include <sched.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "baselines/reference_kernels.h"
#include "looptool/ir/error.h"
#include "util/threads.h"

namespace looptune::bench {

namespace {
// The header gives the types; the library itself is loaded at run time (load_onednn).
using SgemmFn = decltype(&dnnl_sgemm);
SgemmFn g_sgemm = nullptr;
decltype(&dnnl_version) g_version = nullptr;
int (*g_max_threads)() = nullptr;
void (*g_set_threads)(int) = nullptr;
void (*g_parallel)(void (*)(void *), void *, unsigned, unsigned) = nullptr;  // libgomp's ABI
int (*g_thread_num)() = nullptr;

// Taken before main(), while no measurement has pinned the thread.
const std::vector<int> g_process_cpus = allowed_cpus();

struct Placement {
    std::vector<int> others;
};

void place_self(void *p) {
    const auto &at = *static_cast<const Placement *>(p);
    const int t = g_thread_num();
    if (t == 0 || at.others.empty()) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(at.others[size_t(t - 1) % at.others.size()], &set);
    sched_setaffinity(0, sizeof(set), &set);
}

// OpenMP's workers keep the CPU mask of the thread that made them: made while a measurement had
// pinned its caller, they would all share the caller's core (one thread's speed, or a spinning
// barrier's milliseconds a call). As looptool's pool does, each worker goes to a core other than
// the caller's, again whenever the caller's core changes.
void place_workers() {
    thread_local int placed_for = -1;
    const int cpu = sched_getcpu();
    if (library_threads() < 2 || !g_parallel || cpu < 0 || cpu == placed_for) return;
    placed_for = cpu;
    Placement at;
    for (int c : g_process_cpus)
        if (c != cpu) at.others.push_back(c);
    g_parallel(place_self, &at, unsigned(library_threads()), 0);
}
void record_core(void *p) {
    cpu_set_t set;
    int core = -1;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1)
        for (int c = 0; c < CPU_SETSIZE && core < 0; ++c)
            if (CPU_ISSET(c, &set)) core = c;
    (*static_cast<std::vector<int> *>(p))[size_t(g_thread_num())] = core;
}
}  // namespace

std::vector<int> onednn_thread_cores() {
    load_onednn();
    if (!g_parallel) return {};
    std::vector<int> cores(size_t(library_threads()), -2);
    g_parallel(record_core, &cores, unsigned(library_threads()), 0);
    return cores;
}

void load_onednn() {
    if (g_sgemm) return;
    const std::string threads = std::to_string(library_threads());
    setenv("OMP_NUM_THREADS", threads.c_str(), 1);
    setenv("DNNL_NUM_THREADS", threads.c_str(), 1);
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        throw looptool::Error(fmt::format(
            "cannot load libdnnl.so.2 (oneDNN; apt-get install libdnnl-dev): {}", dlerror()));
    g_sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "dnnl_sgemm"));
    g_version = reinterpret_cast<decltype(&dnnl_version)>(dlsym(h, "dnnl_version"));
    if (!g_sgemm) throw looptool::Error("libdnnl.so.2 has no dnnl_sgemm");
    // The libgomp oneDNN resolved against (already loaded, so RTLD_NOLOAD finds it).
    if (void *omp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) {
        g_set_threads = reinterpret_cast<void (*)(int)>(dlsym(omp, "omp_set_num_threads"));
        g_max_threads = reinterpret_cast<int (*)()>(dlsym(omp, "omp_get_max_threads"));
        g_thread_num = reinterpret_cast<int (*)()>(dlsym(omp, "omp_get_thread_num"));
        g_parallel = reinterpret_cast<decltype(g_parallel)>(dlsym(omp, "GOMP_parallel"));
        if (!g_thread_num) g_parallel = nullptr;
    }
    if (!g_set_threads)
        throw looptool::Error(
            "libdnnl.so.2 is not linked with libgomp: cannot set its thread count");
    g_set_threads(library_threads());
}

void *onednn_symbol(const char *name) {
    load_onednn();
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!h) throw looptool::Error("libdnnl.so.2 is not loaded after load_onednn()");
    void *f = dlsym(h, name);
    if (!f)
        throw looptool::Error(fmt::format("libdnnl.so.2 has no {} (oneDNN 2.x expected)", name));
    return f;
}

void onednn_check(int status, const char *what) {
    if (status != 0)
        throw looptool::Error(fmt::format("oneDNN: {} failed (status {})", what, status));
}

std::string onednn_version() {
    if (!g_version) return "unknown";
    const dnnl_version_t *v = g_version();
    const char *runtime = v->cpu_runtime == DNNL_RUNTIME_SEQ   ? "sequential"
                          : v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP"
                          : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                                                               : "other";
    return fmt::format("oneDNN {}.{}.{} ({} runtime, {} OpenMP threads)", v->major, v->minor,
                       v->patch, runtime, g_max_threads ? g_max_threads() : -1);
}

void onednn_set_threads() {
    load_onednn();
    g_set_threads(library_threads());
    place_workers();
}

void onednn_kernel(float *const *buffers, const volatile int32_t *) {
    // OpenMP's thread count is per calling thread, and the measurement may call from a thread
    // other than load_onednn's; the call costs nanoseconds against microseconds of sgemm.
    onednn_set_threads();
    const Shape s = reference_shape();
    // oneDNN's gemm driver takes M = 1 (and N = 1) to its own gemv kernels, so this is also
    // what a user calls for a decode-time GEMV.
    const dnnl_status_t status = g_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, buffers[0], s.k, buffers[1],
                                         s.n, 0.0f, buffers[3], s.n);
    if (status != dnnl_success) std::abort();  // only bad arguments fail: a bug of ours
}

}  // namespace looptune::bench
