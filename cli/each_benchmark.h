// The loop every command that works through several benchmarks shares: with one, its error is
// the command's; over several, one that fails is reported and recorded and the run goes on.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace looptool::cli {

/// Runs `one(i)` for each of `labels`. A run that throws, over several labels: "error: WHY
/// (recorded as failed; going on)" on stderr, then with `json` the row {benchmark, failed,
/// error} (plus `extra`'s fields) in `results`, else `failed_line(i, why)` on stdout. Returns the
/// number that failed.
inline int each_benchmark(
    const std::vector<std::string> &labels, bool json, nlohmann::json &results,
    const nlohmann::json &extra, const std::function<void(size_t)> &one,
    const std::function<std::string(size_t, const std::string &)> &failed_line) {
    int failed = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
        try {
            one(i);
        } catch (const std::exception &e) {
            if (labels.size() == 1) throw;
            const std::string what = e.what(), first = what.substr(0, what.find('\n'));
            const std::string why =
                first.rfind(labels[i], 0) == 0 ? first : labels[i] + ": " + first;
            ++failed;
            fmt::print(stderr, "error: {} (recorded as failed; going on)\n", why);
            if (json) {
                nlohmann::json row = {{"benchmark", labels[i]}};
                row.update(extra);
                row.update({{"failed", true}, {"error", why}});
                results.push_back(row);
            } else {
                fmt::print("{}\n", failed_line(i, why));
            }
        }
    }
    return failed;
}

/// The exit code after each_benchmark(): 0, or 2 (the run finished, some benchmarks failed)
/// with "F of N benchmarks failed" on stderr.
inline int finish_benchmarks(int failed, size_t total) {
    if (failed) fmt::print(stderr, "{} of {} benchmarks failed\n", failed, total);
    return failed ? 2 : 0;
}

}  // namespace looptool::cli
