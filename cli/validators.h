// Range checks for command-line options, so a bad value is refused at parse time with one line
// naming the option ("--lr: nan is not a finite number"), before anything runs or is written.
// CLI11's own number validators let NaN through (every comparison with NaN is false) and accept
// "inf", so floating-point options use these instead.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace looptool::cli {

/// A finite number in [lo, hi] (either bound may be infinite; `open_lo` excludes lo).
inline CLI::Validator finite_in(double lo, double hi, bool open_lo = false) {
    std::string desc = open_lo ? fmt::format("> {}", lo) : fmt::format(">= {}", lo);
    if (std::isfinite(hi))
        desc = open_lo ? fmt::format("in ({}, {}]", lo, hi) : fmt::format("in [{}, {}]", lo, hi);
    return CLI::Validator(
        [lo, hi, open_lo, desc](std::string &s) -> std::string {
            double v = 0;
            if (!CLI::detail::lexical_cast(s, v)) return fmt::format("'{}' is not a number", s);
            if (!std::isfinite(v)) return fmt::format("{} is not a finite number", s);
            if (v < lo || v > hi || (open_lo && v == lo))
                return fmt::format("{} is not {}", s, desc);
            return {};
        },
        "FINITE " + desc);
}

/// A finite number > 0.
inline CLI::Validator positive() { return finite_in(0, INFINITY, /*open_lo=*/true); }
/// A finite number >= 0.
inline CLI::Validator non_negative() { return finite_in(0, INFINITY); }
/// A probability or fraction: finite, in [0, 1].
inline CLI::Validator unit_interval() { return finite_in(0, 1); }

/// An integer >= lo (integers cannot be NaN; CLI11 already refuses "1.5" and overflow).
inline CLI::Validator at_least(int64_t lo) {
    return CLI::Validator(
        [lo](std::string &s) -> std::string {
            int64_t v = 0;
            if (!CLI::detail::lexical_cast(s, v)) return fmt::format("'{}' is not an integer", s);
            if (v < lo) return fmt::format("{} is below the minimum {}", s, lo);
            return {};
        },
        fmt::format("INT >= {}", lo));
}

/// An integer in [lo, hi].
inline CLI::Validator int_in(int64_t lo, int64_t hi) {
    return CLI::Validator(
        [lo, hi](std::string &s) -> std::string {
            int64_t v = 0;
            if (!CLI::detail::lexical_cast(s, v)) return fmt::format("'{}' is not an integer", s);
            if (v < lo || v > hi) return fmt::format("{} is not in [{}, {}]", s, lo, hi);
            return {};
        },
        fmt::format("INT in [{}, {}]", lo, hi));
}

/// An unsigned 64-bit integer, for seeds: CLI11 converts "-1" to 2^64 - 1 without a word.
inline CLI::Validator unsigned_int() {
    return CLI::Validator(
        [](std::string &s) -> std::string {
            uint64_t v = 0;
            if (s.find('-') != std::string::npos || !CLI::detail::lexical_cast(s, v))
                return fmt::format("'{}' is not an integer in [0, 2^64)", s);
            return {};
        },
        "UINT");
}

}  // namespace looptool::cli
