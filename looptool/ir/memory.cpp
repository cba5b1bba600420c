#include "looptool/ir/memory.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "looptool/ir/error.h"

namespace looptool {

int64_t buffer_bytes(const Computation &c) {
    int64_t n = 0;
    for (const auto &t : c.tensors) n += t.num_elements() * int64_t(sizeof(float));
    return n;
}

int64_t available_memory() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream s(line);
        std::string key, unit;
        int64_t kb = -1;
        if (s >> key >> kb >> unit && key == "MemAvailable:" && kb >= 0) return kb * 1024;
    }
    return -1;
}

std::string format_bytes(double bytes) {
    if (bytes >= 1e9) return fmt::format("{:.1f} GB", bytes / 1e9);
    if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
    return fmt::format("{:.1f} kB", bytes / 1e3);
}

void check_memory(const Computation &c, int64_t bytes, const std::string &what,
                  int64_t max_memory) {
    if (max_memory > 0 && bytes > max_memory)
        throw Error(fmt::format("{}: needs {} for {}, above the memory limit of {} (--max-memory)",
                                c.name, format_bytes(double(bytes)), what,
                                format_bytes(double(max_memory))));
    const int64_t avail = available_memory();
    if (avail >= 0 && bytes > avail)
        throw Error(fmt::format(
            "{}: needs {} for {}, above the {} available (MemAvailable in /proc/meminfo)", c.name,
            format_bytes(double(bytes)), what, format_bytes(double(avail))));
}

}  // namespace looptool
