// PNG plots through gnuplot (Debian's gnuplot-nox): results people would rather see than read.
// Every plot is written to a temporary file and renamed into place.
#pragma once

#include <string>
#include <vector>

namespace looptune {

struct Series {
    std::string title;
    std::vector<double> x, y;
};

struct PlotSpec {
    std::string title, xlabel, ylabel;
    bool log_y = false;
    int width = 1200, height = 600;
};

/// Lines (with points), one per series, each with its own dash pattern and marker (a line
/// drawn over another stays visible); a linear y axis starts at 0.
void plot_lines(const std::string &png_path, const PlotSpec &spec,
                const std::vector<Series> &series);

/// The gnuplot commands (data inline) plot_lines runs, without the terminal and output lines.
std::string lines_script(const PlotSpec &spec, const std::vector<Series> &series);

/// Grouped bars: one group per category, one bar per series (series[i].y[j] is category j).
void plot_bars(const std::string &png_path, const PlotSpec &spec,
               const std::vector<std::string> &categories, const std::vector<Series> &series);

/// True when a gnuplot binary that can write PNG is on PATH.
bool gnuplot_available();

}  // namespace looptune
