// A process that links OpenBLAS (through LibTorch) has it loaded, reading OPENBLAS_CORETYPE
// (Haswell on some machines), before main() runs. On a CPU with AVX-512 such a process restarts
// itself once with OpenBLAS's AVX-512 kernels (SkylakeX) and one OpenBLAS thread, the settings
// compare's OpenBLAS method and LibTorch's GEMMs want (docs/decisions.md). Not under MPI: a rank
// must not exec before MPI_Init (export the variables in the job script instead).
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace looptune {

/// Restarts the process as described above when OpenBLAS is loaded with other settings;
/// returns when no restart is needed (or exec failed: the OpenBLAS users then say what they
/// found). LOOPTUNE_NO_RESTART set: never (it is set before the exec, so it restarts once).
inline void restart_for_openblas(char **argv) {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    const bool mpi =
        std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
    const char *core = std::getenv("OPENBLAS_CORETYPE");
    const char *threads = std::getenv("OPENBLAS_NUM_THREADS");
    const bool linked = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD) != nullptr;
    if (!linked || !avx512 || mpi || std::getenv("LOOPTUNE_NO_RESTART") ||
        (core && std::string(core) == "SkylakeX" && threads && std::string(threads) == "1"))
        return;
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("LOOPTUNE_NO_RESTART", "1", 1);  // never loop
    execv("/proc/self/exe", argv);
}

}  // namespace looptune
