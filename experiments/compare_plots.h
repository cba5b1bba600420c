// compare's PNG plots: GFLOPS and tuning time per benchmark and method (bars), and per
// benchmark the GFLOPS after each action of every method (lines; the libraries as flat lines).
#pragma once

#include <string>
#include <vector>

#include "experiments/compare.h"
#include "experiments/plot.h"

namespace looptune {

/// Writes plots/gflops.png, plots/tuning_time.png and plots/steps/<benchmark>.png in c.out_dir.
void write_plots(const CompareConfig &c, const std::vector<CompareRow> &rows);

/// The lines of `bench`'s step plot: one per method with figures. A method whose actions are
/// those of a method before it draws the same line: its title says so ("greedy2 (same actions
/// as greedy1)"), and plot_lines gives each line its own dashes and markers.
std::vector<Series> step_series(const std::vector<CompareRow> &rows, const std::string &bench);

}  // namespace looptune
