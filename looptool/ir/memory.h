// Memory estimates made before allocating a problem's buffers, so that an oversized problem
// is refused at once with the figure instead of ending in std::bad_alloc (or swapping) minutes
// later.
#pragma once

#include <cstdint>
#include <string>

#include "looptool/ir/ir.h"

namespace looptool {

/// Bytes of one set of float buffers for every tensor of `c` (Buffers, make_buffers).
int64_t buffer_bytes(const Computation &c);

/// MemAvailable from /proc/meminfo, in bytes; -1 when it cannot be read.
int64_t available_memory();

/// "25.6 GB", "512.0 MB", "4.0 kB" (decimal units).
std::string format_bytes(double bytes);

/// Throws an Error naming `c`, `what` and both figures when `bytes` exceeds `max_memory`
/// (when > 0) or the memory available now.
void check_memory(const Computation &c, int64_t bytes, const std::string &what, int64_t max_memory);

}  // namespace looptool
