// Lowering, the streaming-store step (lower.h, LowerOptions::stream_bytes): after planning,
// before emission. No LLVM here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/lower/lower_plan.h"

namespace looptool::detail {

/// Bytes of this machine's largest cache (util/machine.h: cpu0's highest level in sysfs); 32 MiB
/// when unknown.
int64_t last_level_cache_bytes();

/// An output of at least `min_bytes` (LowerOptions::stream_bytes: -1, half of
/// last_level_cache_bytes(); 0, none) that one assignment writes (`=`: each element once)
/// and no statement reads is stored with non-temporal hints (NestPlan::streamed): its lines go
/// to memory without first being read into the cache (a normal store's read for ownership moves
/// them twice) and without evicting what the kernel reads. Only worth it for a tensor the cache
/// cannot keep anyway, hence the size. Returns the streamed outputs' names, for the log.
std::vector<std::string> plan_streaming_stores(const Computation &c, std::vector<NestPlan> &plans,
                                               int64_t min_bytes);

}  // namespace looptool::detail
