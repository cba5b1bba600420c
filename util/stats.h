// Summary statistics and durations, written once for every layer.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace looptune {

/// The median (the mean of the two middle values for an even count); 0 for no values.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The geometric mean; 0 for no values. Values at or below 1e-12 count as 1e-12, so a failed
/// (zero) figure pulls the mean down instead of making it undefined.
inline double geomean(const std::vector<double> &v) {
    if (v.empty()) return 0;
    double s = 0;
    for (double x : v) s += std::log(std::max(x, 1e-12));
    return std::exp(s / double(v.size()));
}

/// A duration for progress lines: "42s", "3m07s", "2h05m"; "?" when negative or not finite.
inline std::string format_duration(double seconds) {
    if (seconds < 0 || !std::isfinite(seconds)) return "?";
    const auto t = static_cast<int64_t>(seconds);
    if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
    if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}s", t);
}

}  // namespace looptune
