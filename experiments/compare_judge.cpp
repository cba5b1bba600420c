#include "experiments/compare_judge.h"

#include <fmt/format.h>

#include <algorithm>

namespace looptune {

namespace {

// Longest the judge's rounds may take on one benchmark (estimated), else they are skipped.
constexpr double kMaxJudgeRoundsS = 30;

CompareRow *find_row(std::vector<CompareRow> &rows, const std::string &bench,
                     const std::string &method) {
    for (CompareRow &r : rows)
        if (r.benchmark == bench && r.method == method && !r.failed()) return &r;
    return nullptr;
}

// What one round would take at the figures measured so far: a benchmark whose kernels take a
// second a call (a batch-32 conv) would spend minutes on them.
double round_seconds(const CompareConfig &c, const std::string &bench, double flops,
                     const Remeasurers &again, std::vector<CompareRow> &rows) {
    const looptool::MeasureOptions &m = c.judge_measure;
    double round_s = 0;
    for (const auto &[method, f] : again)
        if (const CompareRow *row = find_row(rows, bench, method); row && row->gflops > 0) {
            const double call_s = flops / (row->gflops * 1e9);
            round_s += (m.warmup + std::max(double(m.min_runs), m.min_time_s / call_s)) * call_s;
        }
    return round_s;
}

// Each row's figure becomes the median of its rounds (and of the figure it had, for an even
// count of rounds: one median).
void take_medians(const std::string &bench, const Remeasurers &again,
                  const std::vector<std::vector<double>> &figures, std::vector<CompareRow> &rows,
                  double peak) {
    for (size_t i = 0; i < again.size(); ++i) {
        CompareRow *row = find_row(rows, bench, again[i].first);
        if (!row) continue;
        std::vector<double> f = figures[i];
        if (f.size() % 2 == 0) f.insert(f.begin(), row->gflops);  // an odd count, one median
        row->judged_gflops = f;
        std::nth_element(f.begin(), f.begin() + long(f.size() / 2), f.end());
        row->gflops = f[f.size() / 2];
        if (!row->step_gflops.empty()) row->step_gflops.back() = row->gflops;
        row->fraction_of_peak = row->gflops / peak;
    }
    if (const CompareRow *base = find_row(rows, bench, "base"))
        for (CompareRow &r : rows)
            if (r.benchmark == bench && !r.failed() && r.method != "base")
                r.speedup = r.gflops / base->gflops;
}

}  // namespace

void judge_rows(const CompareConfig &c, const std::string &bench, double flops,
                const Remeasurers &again, std::vector<CompareRow> &rows, double peak) {
    if (c.judge_rounds < 2 || again.size() < 2) return;
    const double round_s = round_seconds(c, bench, flops, again, rows);
    if (round_s * c.judge_rounds > kMaxJudgeRoundsS) {
        if (c.progress)
            c.progress(
                fmt::format("{}: the judge's rounds would take ~{:.0f} s; one "
                            "measurement per method stands\n",
                            bench, round_s * c.judge_rounds));
        return;
    }
    std::vector<std::vector<double>> figures(again.size());
    try {
        for (int r = 0; r < c.judge_rounds; ++r)
            for (size_t i = 0; i < again.size(); ++i) figures[i].push_back(again[i].second());
    } catch (const std::exception &e) {  // the single figures stand; the run goes on
        if (c.progress)
            c.progress(
                fmt::format("{}: the judge's rounds failed ({}); one measurement per "
                            "method stands\n",
                            bench, e.what()));
        return;
    }
    take_medians(bench, again, figures, rows, peak);
}

}  // namespace looptune
