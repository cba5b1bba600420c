// What the side-by-side benchmarks (matmul_bench, conv_bench) share: the options that set
// their protocol (--rounds, --min-time, --pin, --json), pinning, and the full measurement
// protocol those options describe; and a neighbour that streams through the shared cache.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "looptool/measure/measure.h"

namespace looptune::bench {

struct SideBySide {
    int rounds = 3;          ///< alternating rounds per side; the median is the figure
    double min_time = 0.05;  ///< timed seconds per measurement, at least
    int pin = -1;            ///< core to pin to; -1: the current one
    std::string json_path;   ///< also write every figure here
    int core = -1;           ///< the core pinned to, after start()
    /// A core on which a thread copies 64 MB buffers while the benchmark runs: what another
    /// core's work does to the L3 all cores share (docs/decisions.md). -1: none.
    int neighbour = -1;

    void add_options(CLI::App &app) {
        app.add_option("--rounds", rounds, "Alternating rounds per side (median taken)")
            ->capture_default_str();
        app.add_option("--min-time", min_time, "Timed seconds per measurement, at least")
            ->capture_default_str();
        app.add_option("--pin", pin, "Core to pin to (-1: the current one)");
        app.add_option("--json", json_path, "Also write every figure to this JSON file");
        app.add_option("--neighbour-core", neighbour,
                       "Copy 64 MB buffers on this core meanwhile (another core's work streaming "
                       "through the shared L3)");
    }

    /// Pins this thread and returns the full protocol, each measurement capped at time_cap_s.
    looptool::MeasureOptions start(double time_cap_s) {
        core = looptool::pin_to_core(pin);
        looptool::MeasureOptions o;
        o.min_time_s = min_time;
        o.time_cap_s = time_cap_s;
        o.pin_core = core;
        if (neighbour >= 0)
            neighbour_ = std::make_unique<looptool::CacheNeighbour>(neighbour, core);
        return o;
    }

    /// The short protocol that ranks candidates before the full one measures the winner: 2
    /// warm-ups, at least 5 calls and `min_time_s`, on the core start() pinned to.
    looptool::MeasureOptions quick(double min_time_s, double time_cap_s) const {
        return {.warmup = 2,
                .min_runs = 5,
                .min_time_s = min_time_s,
                .max_runs = 1000,
                .time_cap_s = time_cap_s,
                .pin_core = core};
    }

private:
    std::unique_ptr<looptool::CacheNeighbour> neighbour_;
};

}  // namespace looptune::bench
