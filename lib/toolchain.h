// The system tools `lib build` links with: a C compiler (compiles the dispatch, links the
// shared library) and an archiver (the static library).
#pragma once

#include <string>
#include <vector>

namespace looptune {

struct Toolchain {
    std::vector<std::string> cc;  ///< the compiler and any words of $CC after it
    std::string ar;
};

/// `cc` (else $CC, else "cc") and `ar` (else $AR, else "ar"), each found on PATH (or given as a
/// path). Throws looptool::Error naming the tool that is missing and how to provide it.
Toolchain find_toolchain(const std::string &cc, const std::string &ar);

/// In `dir`: compiles dispatch.c (beside looptune_kernels.h) to position-independent code
/// (-O3; -march=native when `native`), links it with `objects` into liblooptune_kernels.so
/// (cc -shared) and archives them into liblooptune_kernels.a. With `threads`, also
/// looptool_threads.c (-pthread, hidden symbols), and the .so links -pthread. Throws
/// looptool::Error with the tool's command and its first lines of output when one fails.
void link_library(const Toolchain &tools, const std::string &dir, std::vector<std::string> objects,
                  bool native, bool threads = false);

}  // namespace looptune
