#include "experiments/compare_plots.h"

#include <algorithm>
#include <filesystem>

#include "experiments/compare_methods.h"

namespace looptune {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> benchmarks_of(const std::vector<CompareRow> &rows) {
    std::vector<std::string> benches;
    for (const auto &r : rows)
        if (std::find(benches.begin(), benches.end(), r.benchmark) == benches.end())
            benches.push_back(r.benchmark);
    return benches;
}

void write_bars(const CompareConfig &c, const std::vector<CompareRow> &rows,
                const std::vector<std::string> &benches) {
    auto value = [&](const std::string &b, const std::string &m, auto field) {
        for (const auto &r : rows)
            if (r.benchmark == b && r.method == m) return field(r);
        return 0.0;
    };
    std::vector<Series> gflops, seconds;
    for (const auto &m : c.methods) {
        Series g{m, {}, {}}, t{m, {}, {}};
        for (const auto &b : benches) {
            g.y.push_back(value(b, m, [](const CompareRow &r) { return r.gflops; }));
            t.y.push_back(value(b, m, [](const CompareRow &r) { return r.seconds; }));
        }
        gflops.push_back(g);
        if (m != "base" && !is_library(m)) seconds.push_back(t);
    }
    plot_bars((fs::path(c.out_dir) / "plots" / "gflops.png").string(),
              {"GFLOPS per benchmark and method", "benchmark", "GFLOPS", false, 1600, 700}, benches,
              gflops);
    if (!seconds.empty())
        plot_bars(
            (fs::path(c.out_dir) / "plots" / "tuning_time.png").string(),
            {"Tuning time per benchmark and method", "benchmark", "seconds (log)", true, 1600, 700},
            benches, seconds);
}

}  // namespace

std::vector<Series> step_series(const std::vector<CompareRow> &rows, const std::string &bench) {
    std::vector<Series> curves;
    std::vector<const CompareRow *> drawn;  // the schedules' rows with a line so far
    size_t longest = 1;
    for (const auto &r : rows)
        if (r.benchmark == bench) longest = std::max(longest, r.step_gflops.size());
    for (const auto &r : rows) {
        if (r.benchmark != bench) continue;
        if (is_library(r.method)) {  // a hand-tuned library as a flat reference line
            curves.push_back({r.method, {0.0, double(longest - 1)}, {r.gflops, r.gflops}});
            continue;
        }
        if (r.step_gflops.empty()) continue;
        Series s{r.method, {}, {}};
        auto same = std::find_if(drawn.begin(), drawn.end(),
                                 [&](const CompareRow *d) { return d->actions == r.actions; });
        if (same != drawn.end()) s.title += " (same actions as " + (*same)->method + ")";
        drawn.push_back(&r);
        for (size_t i = 0; i < r.step_gflops.size(); ++i) {
            s.x.push_back(double(i));
            s.y.push_back(r.step_gflops[i]);
        }
        curves.push_back(s);
    }
    return curves;
}

void write_plots(const CompareConfig &c, const std::vector<CompareRow> &rows) {
    fs::create_directories(fs::path(c.out_dir) / "plots" / "steps");
    const std::vector<std::string> benches = benchmarks_of(rows);
    write_bars(c, rows, benches);
    for (const auto &b : benches) {
        const std::vector<Series> curves = step_series(rows, b);
        if (!curves.empty())
            plot_lines((fs::path(c.out_dir) / "plots" / "steps" / (b + ".png")).string(),
                       {b + ": GFLOPS after each action", "step", "GFLOPS", false, 1000, 600},
                       curves);
    }
}

}  // namespace looptune
