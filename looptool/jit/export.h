// Export: a Program's kernel as files a C or C++ program links without looptune. From the
// same lowering (lower.h) and the same IR pipeline as the JIT, so the exported kernel is the
// kernel the tool measured; then LLVM's codegen writes an ELF object and assembly for the
// host CPU (or another one). The C function is
//     void NAME(const float *in0, ..., float *out0, ...);
// one pointer per tensor, inputs in declaration order then outputs, row-major, temporaries
// allocated inside (aligned_alloc/free, only when the lowering still needs them). No LLVM
// type appears in this header. With ExportOptions::lower.threads N > 1 a parallel loop runs on
// N threads through looptool_parallel_for, defined by looptool_threads.c (a small pthreads
// pool, exported_threads_runtime()) written beside the kernel.
#pragma once

#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"
#include "looptool/lower/lower.h"

namespace looptool {

struct ExportOptions {
    /// The C function's name; empty: the computation's name made a C identifier.
    std::string name;
    /// LLVM CPU name (e.g. znver4, skylake-avx512, x86-64-v3); empty: the host CPU with its
    /// exact feature list, as the JIT compiles.
    std::string cpu;
    LowerOptions lower;
};

struct ExportedKernel {
    std::string name;      ///< the C function
    std::string cpu;       ///< the CPU it was compiled for
    std::string triple;    ///< target triple
    std::string header;    ///< NAME.h
    std::string ir;        ///< NAME.ll: the module after the IR pipeline, as compiled
    std::string assembly;  ///< NAME.s
    std::string object;    ///< NAME.o (ELF bytes)
    std::string program;   ///< NAME.program: the schedule in our format (serialize())
    int threads = 1;       ///< threads its parallel loops run on
    /// looptool_threads.c when the kernel has a parallel loop (threads > 1); else empty.
    std::string runtime;
};

/// The C source of looptool_threads.c: `looptool_parallel_for` on a pthreads pool.
const char *exported_threads_runtime();

/// Compiles p. Throws Error for an invalid program, an unknown CPU or an LLVM failure.
ExportedKernel export_kernel(const Program &p, const ExportOptions &options = {});

/// Writes NAME.o, NAME.h, NAME.ll, NAME.s, NAME.program and, for a parallel kernel,
/// looptool_threads.c into dir (created if missing), each via a temporary file and a rename.
/// Returns the paths written. Throws Error naming the path that could not be written.
std::vector<std::string> write_exported_kernel(const ExportedKernel &k, const std::string &dir);

/// `text` as a C identifier: other characters become '_', a leading digit gets a '_' before.
std::string c_identifier(const std::string &text);

}  // namespace looptool
