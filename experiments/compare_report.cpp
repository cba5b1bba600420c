#include "experiments/compare_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "baselines/onednn_conv.h"
#include "experiments/compare_methods.h"
#include "looptool/formats/text_format.h"
#include "search/search.h"
#include "util/stats.h"

namespace looptune {

namespace fs = std::filesystem;

namespace {

// GFLOPS per benchmark of one method's rows (failed ones at 0: no ratio is taken over them).
std::map<std::string, double> gflops_of(const std::vector<CompareRow> &rows,
                                        const std::string &method) {
    std::map<std::string, double> g;
    for (const auto &r : rows)
        if (r.method == method) g[r.benchmark] = r.gflops;
    return g;
}

// The figures of a row as a range: its judged rounds, or its one measurement.
std::pair<double, double> range_of(const CompareRow &r) {
    if (r.judged_gflops.empty()) return {r.gflops, r.gflops};
    const auto [lo, hi] = std::minmax_element(r.judged_gflops.begin(), r.judged_gflops.end());
    return {*lo, *hi};
}

const CompareRow *measured(const std::vector<CompareRow> &rows, const std::string &bench,
                           const std::string &method) {
    for (const auto &r : rows)
        if (r.benchmark == bench && r.method == method && !r.failed()) return &r;
    return nullptr;
}

// The reference row of each benchmark (CompareConfig::against), and its name for reports.
struct References {
    std::map<std::string, const CompareRow *> of;  // by benchmark
    std::string label;
};

References references(const std::vector<CompareRow> &rows, const std::string &against) {
    References refs;
    std::set<std::string> used;
    for (const auto &r : rows) {
        const CompareRow *ref = nullptr;
        if (!against.empty())
            ref = measured(rows, r.benchmark, against);
        else if (!(ref = measured(rows, r.benchmark, "onednn")))
            ref = measured(rows, r.benchmark, "base");
        if (!ref) continue;
        refs.of[r.benchmark] = ref;
        used.insert(ref->method);
    }
    if (used.size() == 1) refs.label = *used.begin();
    if (used.size() > 1) refs.label = "onednn (base where onednn did not run)";
    return refs;
}

// Beat, tied or lost to the reference on each benchmark where both were measured.
void count_against(const std::vector<CompareRow> &rows, const References &refs, MethodSummary &s) {
    s.against = refs.label;
    for (const auto &r : rows) {
        if (r.method != s.method || r.failed()) continue;
        auto it = refs.of.find(r.benchmark);
        if (it == refs.of.end() || it->second->method == s.method) continue;
        const auto [lo, hi] = range_of(r);
        const auto [ref_lo, ref_hi] = range_of(*it->second);
        if (lo > ref_hi)
            ++s.beat;
        else if (hi < ref_lo)
            ++s.lost;
        else
            ++s.tied;
    }
}

double geomean_if_all(const std::vector<double> &v, size_t n) {
    return v.size() == n ? geomean(v) : 0;
}

MethodSummary summarize_method(const std::vector<CompareRow> &rows, const std::string &m) {
    const auto blas = gflops_of(rows, "openblas"), dnnl = gflops_of(rows, "onednn");
    const auto conv_plain = gflops_of(rows, bench::conv_method_name(bench::ConvLayout::Plain));
    const auto conv_best = gflops_of(rows, bench::conv_method_name(bench::ConvLayout::Best));
    MethodSummary s{m};
    std::vector<double> g, sp, vs, vd, vp, vb;
    auto ratio = [](const std::map<std::string, double> &ref, const CompareRow &r,
                    std::vector<double> &out) {
        if (auto it = ref.find(r.benchmark); it != ref.end() && it->second > 0)
            out.push_back(r.gflops / it->second);
    };
    double sec = 0;
    for (const auto &r : rows) {
        if (r.method != m) continue;
        if (r.failed()) {
            ++s.failed;
            continue;
        }
        ++s.benchmarks;
        g.push_back(r.gflops);
        sp.push_back(r.speedup);
        sec += r.seconds;
        ratio(blas, r, vs);
        ratio(dnnl, r, vd);
        ratio(conv_plain, r, vp);
        ratio(conv_best, r, vb);
    }
    for (double x : g) s.mean_gflops += x / double(g.size());
    s.geomean_gflops = geomean(g);
    s.geomean_speedup = geomean(sp);
    s.mean_seconds = s.benchmarks ? sec / double(s.benchmarks) : 0;
    s.geomean_vs_openblas = geomean_if_all(vs, g.size());
    s.geomean_vs_onednn = geomean_if_all(vd, g.size());
    s.geomean_vs_onednn_conv_plain = geomean_if_all(vp, g.size());
    s.geomean_vs_onednn_conv_best = geomean_if_all(vb, g.size());
    return s;
}

std::string ratio(double x) { return x > 0 ? fmt::format("{:.2f}x", x) : std::string("-"); }

std::string counts(const MethodSummary &s) {
    if (s.compared() == 0) return "-";
    return fmt::format("{}/{}/{}", s.beat, s.tied, s.lost);
}

const char *split_name(Split s) {
    switch (s) {
        case Split::Test: return "test";
        case Split::Train: return "train";
        case Split::All: return "all";
    }
    return "all";
}

// The step limits of the run: --steps, or each tuning method's own, the most common first.
std::string steps_text(const CompareConfig &c) {
    auto text = [](int n) {
        return n >= kUncutSteps ? std::string("uncut") : fmt::format("{}", n);
    };
    if (c.max_steps > 0) return fmt::format("{} actions per sequence", c.max_steps);
    std::map<int, std::vector<std::string>> by_steps;
    for (const auto &m : c.methods)
        if (int n = method_steps(c, m); n > 0) by_steps[n].push_back(m);
    if (by_steps.empty()) return fmt::format("{} actions per sequence", kLoopTuneSteps);
    auto most = std::max_element(
        by_steps.begin(), by_steps.end(),
        [](const auto &a, const auto &b) { return a.second.size() < b.second.size(); });
    std::string s = fmt::format("{} actions per sequence", text(most->first));
    std::string others;
    for (const auto &[n, ms] : by_steps)
        if (n != most->first)
            others +=
                fmt::format("{}{}: {}", others.empty() ? "" : "; ", fmt::join(ms, ", "), text(n));
    return others.empty() ? s : fmt::format("{} ({})", s, others);
}

std::string settings_text(const CompareConfig &c, double peak) {
    return fmt::format(
        "Dataset `{}`, split `{}`, action space `{}`, {}, budget {} s per search, seed {}, {}. "
        "Peak (MAX_GFLOPS, the threads' roof) {:.1f} GFLOPS. Every final schedule is re-measured "
        "with the full protocol (docs/measurement.md) in the same run{}.\n\n",
        c.dataset_dir, split_name(c.split), c.space, steps_text(c), c.budget_s, c.seed,
        count_of(c.threads, "thread"), peak,
        c.judge_rounds > 1
            ? fmt::format(", then all methods' kernels of a benchmark in {} alternating rounds "
                          "(figures: medians)",
                          c.judge_rounds)
            : std::string());
}

std::string methods_table(const std::vector<MethodSummary> &sums) {
    const std::string against = sums.empty() ? "" : sums[0].against;
    std::string md =
        "| method | benchmarks | failed | mean GFLOPS | geomean GFLOPS | geomean speedup over base "
        "| geomean vs OpenBLAS | geomean vs oneDNN | mean tuning s |";
    md += against.empty() ? "\n|---|---|---|---|---|---|---|---|---|\n"
                          : fmt::format(
                                " beat / tied / lost vs {} |\n"
                                "|---|---|---|---|---|---|---|---|---|---|\n",
                                against);
    for (const auto &s : sums) {
        md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {} | {} | {} | {:.2f} |", s.method,
                          s.benchmarks, s.failed, s.mean_gflops, s.geomean_gflops,
                          ratio(s.geomean_speedup), ratio(s.geomean_vs_openblas),
                          ratio(s.geomean_vs_onednn), s.mean_seconds);
        md += against.empty() ? "\n" : fmt::format(" {} |\n", counts(s));
    }
    if (!against.empty())
        md += fmt::format(
            "\nBeat / tied / lost: on how many benchmarks all of a method's judged figures were "
            "above those of {}, their ranges overlapped, or all were below (with one measurement "
            "each, tied means equal).\n",
            against);
    return md;
}

std::string conv_table(const std::vector<MethodSummary> &sums) {
    if (std::none_of(sums.begin(), sums.end(),
                     [](const MethodSummary &s) { return s.geomean_vs_onednn_conv_plain > 0; }))
        return "";
    std::string md =
        "\nConv2d benchmarks against oneDNN's convolution (direct, forward inference, on "
        "compare's threads): `onednn-conv-plain` on our NCHW/OIHW tensors, `onednn-conv-best` in "
        "its "
        "preferred blocked layouts (reorders not timed).\n\n| method | geomean vs "
        "onednn-conv-plain | geomean vs onednn-conv-best |\n|---|---|---|\n";
    for (const auto &s : sums)
        md += fmt::format("| {} | {} | {} |\n", s.method, ratio(s.geomean_vs_onednn_conv_plain),
                          ratio(s.geomean_vs_onednn_conv_best));
    return md;
}

std::string failed_table(const std::vector<CompareRow> &rows) {
    std::string failed;
    for (const auto &r : rows)
        if (r.failed()) {
            std::string why = r.error;
            for (size_t at = 0; (at = why.find('|', at)) != std::string::npos; at += 2)
                why.insert(at, "\\");
            failed += fmt::format("| {} | {} | {} |\n", r.benchmark, r.method, why);
        }
    if (failed.empty()) return "";
    return "\n## Failed\n\nNot in the means above; a resumed run tries them again.\n\n"
           "| benchmark | method | error |\n|---|---|---|\n" +
           failed;
}

}  // namespace

std::string count_of(int64_t n, const std::string &noun) {
    return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

std::vector<MethodSummary> summarize(const std::vector<CompareRow> &rows,
                                     const std::vector<std::string> &methods,
                                     const std::string &against) {
    const References refs = references(rows, against);
    std::vector<MethodSummary> out;
    for (const auto &m : methods) {
        MethodSummary s = summarize_method(rows, m);
        if (s.benchmarks == 0 && s.failed == 0) continue;
        count_against(rows, refs, s);
        out.push_back(s);
    }
    return out;
}

void write_summary(const CompareConfig &c, const std::vector<CompareRow> &rows, double peak) {
    const auto sums = summarize(rows, c.methods, c.against);
    std::string md = "# looptool compare\n\n" + settings_text(c, peak);
    md += methods_table(sums) + conv_table(sums) + failed_table(rows);
    if (c.neighbour_core >= 0)
        md += fmt::format(
            "\nCore {} copied 64 MB buffers throughout (`--neighbour-core`): every method tuned "
            "and was judged while another core streamed through the shared L3.\n",
            c.neighbour_core);
    md +=
        "\nOpenBLAS is cblas_sgemm (cblas_sgemv for M = 1), oneDNN is dnnl_sgemm (its own gemv "
        "path for M = 1); both on the same buffers and on as many threads as our kernels "
        "(oneDNN: omp_set_num_threads, OpenBLAS: openblas_set_num_threads), each result checked "
        "against the reference interpreter.\n";
    md +=
        "\nPer benchmark: `results.csv`; plots: `plots/gflops.png`, `plots/tuning_time.png`, "
        "`plots/steps/<benchmark>.png`.\n";
    looptool::write_file_atomically((fs::path(c.out_dir) / "summary.md").string(), md);
}

std::string format_summary_table(const std::vector<MethodSummary> &sums, const std::string &out_dir,
                                 bool plots) {
    const std::string against = sums.empty() ? "" : sums[0].against;
    size_t w = 10;  // the method column fits the longest name
    for (const auto &m : sums) w = std::max(w, m.method.size());
    std::string s =
        fmt::format("{:<{}} {:>5} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}{}\n", "method", w,
                    "n", "failed", "mean GF", "geomean GF", "speedup", "vs BLAS", "vs oneDNN",
                    "mean s", against.empty() ? "" : fmt::format(" {:>14}", "beat/tied/lost"));
    for (const auto &m : sums)
        s += fmt::format("{:<{}} {:>5} {:>6} {:>10.1f} {:>10.1f} {:>9} {:>9} {:>9} {:>9.2f}{}\n",
                         m.method, w, m.benchmarks, m.failed, m.mean_gflops, m.geomean_gflops,
                         ratio(m.geomean_speedup), ratio(m.geomean_vs_openblas),
                         ratio(m.geomean_vs_onednn), m.mean_seconds,
                         against.empty() ? "" : fmt::format(" {:>14}", counts(m)));
    if (!against.empty())
        s += fmt::format(
            "beat/tied/lost against {}: benchmarks where the method's judged figures were all "
            "above the reference's, overlapped them, or were all below\n",
            against);
    if (std::any_of(sums.begin(), sums.end(),
                    [](const MethodSummary &m) { return m.geomean_vs_onednn_conv_plain > 0; })) {
        s += fmt::format("\n{:<18} {:>13} {:>13}\n", "method", "vs conv plain", "vs conv best");
        for (const auto &m : sums)
            s += fmt::format("{:<18} {:>13} {:>13}\n", m.method,
                             ratio(m.geomean_vs_onednn_conv_plain),
                             ratio(m.geomean_vs_onednn_conv_best));
    }
    s += fmt::format("results in {}/results.csv, summary.md{}\n", out_dir, plots ? ", plots/" : "");
    return s;
}

}  // namespace looptune
