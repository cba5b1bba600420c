// `lib build`: every kernel of a machine's schedule library (env/store/schedule_library.h)
// compiled with the export pipeline (looptool/jit/export.h, the JIT's lowering and IR
// pipeline, position-independent objects) into one shared library, one static library, a C
// header and a JSON manifest. The dispatch functions lt_sgemm and lt_sconv2d are C generated
// here (lib/dispatch_source.h), compiled and linked by the system C compiler; docs/export.md
// describes the library's contract.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "env/store/schedule_library.h"

namespace looptune {

struct KernelLibraryOptions {
    std::string out;      ///< output directory, created if missing
    std::string machine;  ///< written into the manifest
    std::string cpu;      ///< LLVM CPU name; empty: this host with its exact features
    /// The block kernel lt_sgemm tiles shapes it has no kernel for over (M, N, K).
    std::array<int64_t, 3> block = {64, 128, 256};
    /// Bytes the kernels assume their pointers aligned to (LowerOptions::buffer_align): 4 takes
    /// any float array without a copy (numpy's are 16-byte aligned); 64 is the JIT's lowering.
    int align = 4;
    /// C compiler and archiver; empty: $CC, else `cc`; $AR, else `ar`.
    std::string cc, ar;
    /// Threads a kernel's `parallel` loops run on (export's LowerOptions::threads). Above 1 a
    /// library with a parallel kernel carries looptool_threads.c's pool (export.h), compiled
    /// in with hidden symbols; the .so then links -pthread (and must not be dlclose'd once a
    /// parallel kernel ran: its workers wait in its code), and a program linking the .a links
    /// with -pthread.
    int threads = 1;
};

struct LibraryKernel {
    std::string function;  ///< the C function (lt_ + the entry's name)
    LibraryEntry entry;
};

struct KernelLibrary {
    std::vector<LibraryKernel> kernels;
    LibraryEntry block;              ///< the block kernel's schedule (shape = options.block)
    std::string block_source;        ///< "library" (an entry of that shape) or the seed chosen
    std::string cpu, triple;         ///< what the kernels were compiled for
    std::vector<std::string> files;  ///< the four files written, final paths
};

/// Compiles `entries` into options.out: liblooptune_kernels.so, liblooptune_kernels.a,
/// looptune_kernels.h and looptune_kernels.json. Each file is made in a staging directory
/// inside options.out and renamed into place only when all four exist, so a failure leaves no
/// new file. Throws looptool::Error when `entries` is empty, an entry's program does not parse
/// or has the wrong tensors for its kind, the compiler or archiver is missing or fails, or a
/// file cannot be written.
KernelLibrary build_kernel_library(const std::vector<LibraryEntry> &entries,
                                   const KernelLibraryOptions &options);

/// The entries of `machine` in the schedule library of the store at `store` (read only),
/// compiled by build_kernel_library(). An empty library is an Error naming the store, the
/// machine and the machines it does have.
KernelLibrary build_kernel_library_from_store(const std::string &store,
                                              KernelLibraryOptions options);

/// The block kernel's schedule for `shape`: the entry of that matmul shape in `entries` when
/// there is one, else the fastest of tune's seed schedules for it (search/seeds.h), each
/// measured briefly with the JIT and the winner checked against the reference. `source` gets
/// "library" or the seed's name.
LibraryEntry block_kernel_entry(const std::vector<LibraryEntry> &entries,
                                const std::array<int64_t, 3> &shape, std::string &source);

}  // namespace looptune
