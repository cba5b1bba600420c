// How many threads a run's parallel loops use unless told: every core the process may use, so
// that `taskset -c 0 looptool ...` or a container's CPU limit gives 1. Every command, the Python
// module and the kernel library take their default from default_threads().
#pragma once

#include <sched.h>

#include <vector>

namespace looptune {

/// The CPUs the calling thread may run on (sched_getaffinity), in order; empty if unknown.
inline std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

/// The cores the calling thread may run on (sched_getaffinity), at least 1.
inline int usable_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
    const int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

/// The threads a run uses when none is given: usable_cores().
inline int default_threads() { return usable_cores(); }

/// `threads` as asked, 0 standing for default_threads().
inline int resolve_threads(int threads) { return threads == 0 ? default_threads() : threads; }

}  // namespace looptune
