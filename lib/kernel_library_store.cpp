// build_kernel_library_from_store(): the entries of one machine in a store's schedule library.
#include <fmt/format.h>

#include "lib/kernel_library.h"
#include "looptool/ir/error.h"

namespace looptune {

KernelLibrary build_kernel_library_from_store(const std::string &store,
                                              KernelLibraryOptions options) {
    auto library = ScheduleLibrary::open_read_only(store);
    const std::vector<LibraryEntry> entries = library->entries(options.machine);
    if (entries.empty()) {
        std::string others;
        for (const std::string &m : library->machines())
            others += fmt::format("{}{}", others.empty() ? "" : ", ", m);
        throw looptool::Error(fmt::format(
            "lib build: the schedule library of {} has no kernels for machine {} ({}); tune "
            "some first, e.g. `looptool tune --matmul 128,128,128 --store {}`",
            store, options.machine, others.empty() ? "it is empty" : "it has kernels for " + others,
            store));
    }
    return build_kernel_library(entries, options);
}

}  // namespace looptune
