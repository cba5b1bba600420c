#include "looptool/lower/lower_stream.h"

#include <fstream>

namespace looptool::detail {
namespace {

// "1024K", "32768K", "32M" (sysfs' cache size), or -1.
int64_t parse_size(const std::string &text) {
    try {
        size_t used = 0;
        int64_t v = std::stoll(text, &used);
        const std::string unit = text.substr(used);
        if (unit == "K") v <<= 10;
        if (unit == "M") v <<= 20;
        return v > 0 ? v : -1;
    } catch (const std::exception &) {
        return -1;
    }
}

int64_t read_last_level_cache_bytes() {
    int best_level = 0;
    int64_t bytes = -1;
    for (int i = 0; i < 8; ++i) {
        const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
        std::ifstream level(dir + "/level"), size(dir + "/size");
        int lv = 0;
        std::string text;
        if (!(level >> lv) || !(size >> text) || lv < best_level) continue;
        if (const int64_t b = parse_size(text); b > 0) best_level = lv, bytes = b;
    }
    return bytes > 0 ? bytes : int64_t(32) << 20;
}

}  // namespace

int64_t last_level_cache_bytes() {
    static const int64_t bytes = read_last_level_cache_bytes();
    return bytes;
}

std::vector<std::string> plan_streaming_stores(const Computation &c, std::vector<NestPlan> &plans,
                                               int64_t min_bytes) {
    std::vector<std::string> names;
    if (min_bytes < 0) min_bytes = last_level_cache_bytes() / 2;
    if (min_bytes == 0) return names;
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        const Tensor &ten = c.tensors[t];
        if (ten.kind != TensorKind::Output || ten.num_elements() * 4 < min_bytes) continue;
        int writers = 0, assignments = 0;
        bool read = false;
        for (const Statement &s : c.stmts) {
            read |= reads_tensor(s, int(t));
            if (s.out.tensor != int(t)) continue;
            ++writers;
            assignments += s.reduce == ReduceKind::None;
        }
        if (read || writers != 1 || assignments != 1) continue;
        for (NestPlan &p : plans)
            for (size_t i = 0; i < p.nest.stmts.size(); ++i)
                if (c.stmts[size_t(p.nest.stmts[i])].out.tensor == int(t)) p.streamed[i] = true;
        names.push_back(ten.name);
    }
    return names;
}

}  // namespace looptool::detail
