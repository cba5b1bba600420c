// The machine's figures every layer may read: cache sizes from sysfs, the vector width from the
// CPU's features, the cores the process may use. One reader, so the lowering, the traffic model
// and the observation never disagree about the caches. The measured peak is added by
// looptool::this_machine() (looptool/measure/machine.h), which needs the measurement code.
#pragma once

#include <cstdint>
#include <exception>
#include <fstream>
#include <string>

#include "util/threads.h"

namespace looptune {

/// What sysfs says of cpu0's caches, each in its sane range or the fallback (a container or a
/// VM without /sys/devices/system/cpu reads as the fallbacks).
struct CacheSizes {
    int64_t l1d = int64_t(32) << 10;  ///< level-1 data cache
    int64_t l2 = int64_t(1) << 20;    ///< level-2 cache (private on the x86 CPUs seen)
    int64_t l3 = int64_t(32) << 20;   ///< the level-3 cache's whole size (shared)
    int l3_sharing = 1;               ///< cpus that share that L3 (shared_cpu_list)
    int64_t llc = int64_t(32) << 20;  ///< the highest level's whole size (the L3 when there is one)
    int64_t l3_per_core() const { return l3 / (l3_sharing > 0 ? l3_sharing : 1); }
};

/// The figures of one machine: what an observation's machine vector is made of and what a
/// measurement store keeps per fingerprint.
struct MachineFigures {
    int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  ///< per core (L3: its size / sharers)
    int vector_bits = 128;                              ///< 512 (AVX-512), 256 (AVX2) or 128
    int cores = 1;                                      ///< cores the process may use
    double peak_gflops = 0;                             ///< single-core peak; 0: not known
};

namespace machine_detail {

/// "48K", "2048K", "32M", "1G" (sysfs' size), or -1.
inline int64_t parse_cache_size(const std::string &text) {
    try {
        size_t used = 0;
        int64_t v = std::stoll(text, &used);
        const std::string unit = text.substr(used);
        const int shift = unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : 0;
        if (shift == 0 && !unit.empty()) return -1;
        v <<= shift;
        return v > 0 ? v : -1;
    } catch (const std::exception &) {
        return -1;
    }
}

/// CPUs in a list such as "0-3,8-11" or "5"; 0 when it does not parse.
inline int count_cpus(const std::string &list) {
    int n = 0;
    size_t at = 0;
    while (at < list.size()) {
        size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        const std::string part = list.substr(at, end - at);
        try {
            const size_t dash = part.find('-');
            const int lo = std::stoi(part.substr(0, dash));
            const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
            if (hi < lo) return 0;
            n += hi - lo + 1;
        } catch (const std::exception &) {
            return 0;
        }
        at = end + 1;
    }
    return n;
}

inline bool in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

}  // namespace machine_detail

/// Reads `dir`/index0..index9 (level, type, size, shared_cpu_list), by default cpu0's caches.
/// A size outside its level's sane range (L1d 4 KiB-4 MiB, L2 64 KiB-1 GiB, L3 256 KiB-64 GiB)
/// keeps the fallback: a wrong figure would size every tile by it.
inline CacheSizes read_cache_sizes(const std::string &dir = "/sys/devices/system/cpu/cpu0/cache") {
    using namespace machine_detail;
    CacheSizes c;
    int top_level = 0;
    for (int i = 0; i < 10; ++i) {
        const std::string index = dir + "/index" + std::to_string(i);
        std::ifstream level_in(index + "/level"), size_in(index + "/size");
        std::ifstream type_in(index + "/type"), shared_in(index + "/shared_cpu_list");
        int level = 0;
        std::string size_text, type, shared;
        if (!(level_in >> level) || !(size_in >> size_text)) continue;
        type_in >> type;
        shared_in >> shared;
        const int64_t bytes = parse_cache_size(size_text);
        if (bytes <= 0 || type == "Instruction") continue;
        if (level == 1 && in_range(bytes, int64_t(4) << 10, int64_t(4) << 20)) c.l1d = bytes;
        if (level == 2 && in_range(bytes, int64_t(64) << 10, int64_t(1) << 30)) c.l2 = bytes;
        if (level == 3 && in_range(bytes, int64_t(256) << 10, int64_t(64) << 30)) {
            c.l3 = bytes;
            if (const int n = count_cpus(shared); n > 0) c.l3_sharing = n;
        }
        if (level >= top_level && in_range(bytes, int64_t(64) << 10, int64_t(64) << 30))
            top_level = level, c.llc = bytes;
    }
    return c;
}

/// This machine's caches, read once per process.
inline const CacheSizes &cache_sizes() {
    static const CacheSizes sizes = read_cache_sizes();
    return sizes;
}

/// The widest vector the host CPU runs: 512 bits with AVX-512F, 256 with AVX2, else 128.
inline int host_vector_bits() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 512;
    if (__builtin_cpu_supports("avx2")) return 256;
    return 128;
}

/// This machine's figures without the peak (peak_gflops 0).
inline MachineFigures host_figures_without_peak() {
    const CacheSizes &c = cache_sizes();
    MachineFigures m;
    m.l1d_bytes = c.l1d;
    m.l2_bytes = c.l2;
    m.l3_bytes = c.l3_per_core();
    m.vector_bits = host_vector_bits();
    m.cores = usable_cores();
    return m;
}

}  // namespace looptune
