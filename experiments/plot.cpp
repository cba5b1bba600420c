#include "experiments/plot.h"

#include <fmt/format.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptune {

using looptool::Error;

namespace {

std::string quote(const std::string &s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        out += ch;
    }
    return out + "\"";
}

std::string header(const PlotSpec &spec) {
    std::string s = fmt::format("set title {}\nset xlabel {}\nset ylabel {}\nset grid ytics\n",
                                quote(spec.title), quote(spec.xlabel), quote(spec.ylabel));
    s += "set key below\n";  // a legend beside the plot took half its width
    if (spec.log_y) s += "set logscale y\n";
    return s;
}

// Runs gnuplot on `script` (data inline) writing a temporary PNG, then renames it into place.
void run_gnuplot(const std::string &png_path, const PlotSpec &spec, const std::string &script) {
    const std::string tmp_png = fmt::format("{}.tmp.{}.png", png_path, ::getpid());
    const std::string gp = fmt::format("{}.tmp.{}.gp", png_path, ::getpid());
    looptool::write_file_atomically(
        gp, fmt::format("set terminal pngcairo size {},{} noenhanced\nset output {}\n{}",
                        spec.width, spec.height, quote(tmp_png), script));
    std::string cmd = fmt::format("gnuplot {} 2>&1", quote(gp));
    FILE *pipe = ::popen(cmd.c_str(), "r");
    std::string output;
    if (pipe) {
        char buf[512];
        while (std::fgets(buf, sizeof buf, pipe)) output += buf;
    }
    int status = pipe ? ::pclose(pipe) : -1;
    std::filesystem::remove(gp);
    std::error_code ec;
    if (status != 0 || !std::filesystem::exists(tmp_png) ||
        std::filesystem::file_size(tmp_png, ec) == 0) {
        std::filesystem::remove(tmp_png, ec);
        throw Error(fmt::format("gnuplot failed to write {}: {}", png_path, output));
    }
    std::filesystem::rename(tmp_png, png_path, ec);
    if (ec) throw Error(fmt::format("{}: cannot rename into place: {}", png_path, ec.message()));
}

}  // namespace

bool gnuplot_available() {
    return std::system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0;
}

std::string lines_script(const PlotSpec &spec, const std::vector<Series> &series) {
    std::string s = header(spec);
    // An axis of non-negative figures (GFLOPS, speedups) starts at 0, so ratios read true; one
    // with negative values (rewards) keeps gnuplot's range.
    bool negative = false;
    for (const Series &sr : series)
        for (double y : sr.y) negative = negative || y < 0;
    if (!spec.log_y && !negative) s += "set yrange [0:*]\n";
    std::string plot = "plot ";
    std::string data;
    for (size_t i = 0; i < series.size(); ++i) {
        // Dash patterns 1-5 and markers 1-12 (pngcairo's), so coinciding lines stay apart.
        plot += fmt::format("{}'-' using 1:2 with linespoints lw 2 dt {} pt {} title {}",
                            i ? ", " : "", i % 5 + 1, i % 12 + 1, quote(series[i].title));
        for (size_t j = 0; j < series[i].x.size() && j < series[i].y.size(); ++j)
            data += fmt::format("{} {}\n", series[i].x[j], series[i].y[j]);
        data += "e\n";
    }
    return s + plot + "\n" + data;
}

void plot_lines(const std::string &png_path, const PlotSpec &spec,
                const std::vector<Series> &series) {
    if (series.empty()) throw Error(fmt::format("{}: nothing to plot", png_path));
    run_gnuplot(png_path, spec, lines_script(spec, series));
}

void plot_bars(const std::string &png_path, const PlotSpec &spec,
               const std::vector<std::string> &categories, const std::vector<Series> &series) {
    if (series.empty() || categories.empty())
        throw Error(fmt::format("{}: nothing to plot", png_path));
    std::string s = header(spec);
    s += "set style data histogram\nset style histogram cluster gap 1\nset style fill solid 0.9 "
         "border -1\n";
    s += "set boxwidth 0.9\nset xtics rotate by -45\n";
    s += spec.log_y ? "set yrange [*:*]\n" : "set yrange [0:*]\n";  // bars start at zero
    std::string plot = "plot ";
    std::string data;
    for (size_t i = 0; i < series.size(); ++i) {
        plot +=
            fmt::format("{}'-' using 2:xtic(1) title {}", i ? ", " : "", quote(series[i].title));
        for (size_t j = 0; j < categories.size(); ++j) {
            double y = j < series[i].y.size() ? series[i].y[j] : 0;
            // Log axes cannot show zero; a bar at a tiny positive value reads as "nothing".
            if (spec.log_y && y <= 0) y = 1e-4;
            data += fmt::format("{} {}\n", quote(categories[j]), y);
        }
        data += "e\n";
    }
    run_gnuplot(png_path, spec, s + plot + "\n" + data);
}

}  // namespace looptune
