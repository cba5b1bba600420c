// compare's results.csv: one row per benchmark and method, read back when a run is resumed
// (also the files written before the `error` and `judged_gflops` columns existed).
#pragma once

#include <string>
#include <vector>

#include "experiments/compare.h"

namespace looptune {

/// The rows of `path`; none when it does not exist. Throws looptool::Error naming the file
/// and line for a file that is not compare's or a malformed row.
std::vector<CompareRow> read_rows(const std::string &path);

/// Writes every row to `path` atomically, creating its directory (only once there is a row).
void write_rows(const std::string &path, const std::vector<CompareRow> &rows);

/// A reason fit for one CSV field and one line: its first line, commas made semicolons.
std::string one_field(const std::string &why);

}  // namespace looptune
