// The judge's alternating rounds on one benchmark (CompareConfig::judge_rounds): after every
// method ran, each new row's final kernel is measured again in turn, round after round, and its
// figure becomes the median of its rounds. Measured one method after the other, once each, a
// slow phase of the machine hits whichever method is being measured; in alternating rounds it
// hits every method alike.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "experiments/compare.h"

namespace looptune {

/// Per new row of a benchmark (by method): what measures its final kernel again.
using Remeasurers = std::vector<std::pair<std::string, std::function<double()>>>;

/// Runs the rounds of `bench` (of `flops` per call) and updates its rows in `rows`: judged
/// figures, median GFLOPS, fraction of `peak`, speedups over base. Skipped (with a progress
/// line) when they would take too long or when a measurement fails: the single figures stand.
void judge_rows(const CompareConfig &c, const std::string &bench, double flops,
                const Remeasurers &again, std::vector<CompareRow> &rows, double peak);

}  // namespace looptune
