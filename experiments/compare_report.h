// compare's reports: the per-method summary (means, ratios against the libraries, beat/tied/
// lost counts against a reference), written as summary.md and printed as a table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/compare.h"

namespace looptune {

/// Writes summary.md in c.out_dir: the run's settings, the table per method, the failed rows.
void write_summary(const CompareConfig &c, const std::vector<CompareRow> &rows, double peak);

/// "1 benchmark", "3 benchmarks": a count with its noun (English plural by `s`).
std::string count_of(int64_t n, const std::string &noun);

}  // namespace looptune
