#include "experiments/compare.h"

#include <fmt/format.h>
#include <sched.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "baselines/onednn_conv.h"
#include "baselines/reference_kernels.h"
#include "env/environment.h"
#include "experiments/plot.h"
#include "looptool/check/interpreter.h"
#include "looptool/formats/csv.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "search/search.h"
#include "util/stats.h"

namespace looptune {

using namespace looptool;
namespace fs = std::filesystem;

std::vector<std::string> default_compare_methods() {
    std::vector<std::string> m = {"base"};
    for (const auto &a : search_algorithms()) m.push_back(a);
    m.push_back("openblas");
    m.push_back("onednn");
    m.push_back(bench::conv_method_name(bench::ConvLayout::Plain));
    m.push_back(bench::conv_method_name(bench::ConvLayout::Best));
    return m;
}

namespace {

const char *kHeader =
    "benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,"
    "judged_gflops,error";
// Results written before the judge's rounds (2026-11-26): no `judged_gflops`.
const char *kHeaderV2 =
    "benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,error";
// Results written before failed rows were recorded: no `error` either.
const char *kHeaderV1 =
    "benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops";

// A reason fit for one CSV field and one line: its first line, commas made semicolons.
std::string one_field(const std::string &why) {
    std::string s = why.substr(0, why.find('\n'));
    for (char &ch : s)
        if (ch == ',')
            ch = ';';
        else if (ch == '\r')
            ch = ' ';
    return s.empty() ? "failed" : s;
}

std::string join(const std::vector<double> &v) {
    std::string s;
    for (double x : v) s += fmt::format("{}{:.4f}", s.empty() ? "" : " ", x);
    return s;
}

std::string row_csv(const CompareRow &r) {
    return fmt::format("{},{},{:.4f},{:.5f},{:.4f},{:.4f},{},{},{},{},{}", r.benchmark, r.method,
                       r.gflops, r.fraction_of_peak, r.speedup, r.seconds, r.schedules, r.actions,
                       join(r.step_gflops), join(r.judged_gflops), r.error);
}

std::vector<CompareRow> read_rows(const std::string &path) {
    std::vector<CompareRow> rows;
    if (!fs::exists(path)) return rows;
    const std::vector<looptool::CsvRow> csv = looptool::parse_csv(read_file(path), path);
    if (csv.empty()) return rows;
    size_t fields = 11;
    if (csv[0].line == 1 && csv[0].fields == looptool::csv_header(kHeaderV1))
        fields = 9;
    else if (csv[0].line == 1 && csv[0].fields == looptool::csv_header(kHeaderV2))
        fields = 10;
    else if (csv[0].line != 1 || csv[0].fields != looptool::csv_header(kHeader))
        throw Error(
            fmt::format("{}: not a looptool compare results file (header differs); "
                        "use another --out directory",
                        path));
    for (size_t i = 1; i < csv.size(); ++i) {
        const auto &[lineno, f] = csv[i];
        if (f.size() != fields)
            throw Error(
                fmt::format("{}:{}: expected {} fields, got {}", path, lineno, fields, f.size()));
        try {
            CompareRow r{f[0],
                         f[1],
                         std::stod(f[2]),
                         std::stod(f[3]),
                         std::stod(f[4]),
                         std::stod(f[5]),
                         std::stoll(f[6]),
                         f[7],
                         {},
                         {},
                         fields >= 10 ? f[fields - 1] : ""};
            std::istringstream steps(f[8]);
            for (double x; steps >> x;) r.step_gflops.push_back(x);
            std::istringstream judged(fields == 11 ? f[9] : "");
            for (double x; judged >> x;) r.judged_gflops.push_back(x);
            rows.push_back(std::move(r));
        } catch (const std::exception &) {
            throw Error(fmt::format("{}:{}: malformed number", path, lineno));
        }
    }
    return rows;
}

void write_rows(const std::string &path, const std::vector<CompareRow> &rows) {
    fs::create_directories(fs::path(path).parent_path());  // only once there is a row to write
    std::string s = std::string(kHeader) + "\n";
    for (const auto &r : rows) s += row_csv(r) + "\n";
    write_file_atomically(path, s);
}

// The conv methods (onednn-conv-plain, -best) run only conv2d benchmarks, the others only matmul.
std::optional<bench::ConvLayout> conv_library(const std::string &method) {
    for (auto l : {bench::ConvLayout::Plain, bench::ConvLayout::Best})
        if (method == bench::conv_method_name(l)) return l;
    return std::nullopt;
}

bool is_library(const std::string &method) {
    return method == "openblas" || method == "onednn" || conv_library(method);
}

/// One call of a library kernel on fresh buffers, checked against the reference interpreter;
/// then each call of the returned function runs the full measurement protocol on the same
/// buffers (compare's judge calls it once per alternating round).
std::function<double()> library_measurer(const std::string &bench, const std::string &method,
                                         KernelFn fn, const Computation &c) {
    struct State {
        Computation comp;
        Buffers buffers;
        bench::Shape shape;
    };
    auto st = std::make_shared<State>(
        State{c, make_buffers(c, 1), {c.vars[0].extent, c.vars[2].extent, c.vars[1].extent}});
    bench::set_reference_shape(st->shape);
    const Reference want = compute_reference(c, st->buffers);
    int32_t cancel = 0;
    std::vector<float *> ptrs = st->buffers.pointers();
    fn(ptrs.data(), &cancel);
    Comparison cmp = compare_outputs(c, want, st->buffers);
    if (!cmp.ok)
        throw Error(fmt::format("{} {}: the library's result differs from the reference: {}", bench,
                                method, cmp.first_mismatch));
    return [st, fn] {
        bench::set_reference_shape(st->shape);  // the kernels read the shape from there
        return measure_kernel_uncut(fn, st->comp, st->buffers).median_gflops;
    };
}

bool is_matmul(const Computation &c) {
    if (c.tensors.size() != 4 || c.vars.size() != 3) return false;
    return c == make_matmul(c.vars[0].extent, c.vars[2].extent, c.vars[1].extent, c.name);
}

}  // namespace

std::vector<MethodSummary> summarize(const std::vector<CompareRow> &rows,
                                     const std::vector<std::string> &methods) {
    std::map<std::string, double> blas, dnnl, conv_plain, conv_best;
    for (const auto &r : rows) {
        if (r.method == "openblas") blas[r.benchmark] = r.gflops;
        if (r.method == "onednn") dnnl[r.benchmark] = r.gflops;
        if (r.method == bench::conv_method_name(bench::ConvLayout::Plain))
            conv_plain[r.benchmark] = r.gflops;
        if (r.method == bench::conv_method_name(bench::ConvLayout::Best))
            conv_best[r.benchmark] = r.gflops;
    }
    std::vector<MethodSummary> out;
    for (const auto &m : methods) {
        MethodSummary s{m};
        std::vector<double> g, sp, vs, vd, vp, vb;
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
            if (auto it = blas.find(r.benchmark); it != blas.end() && it->second > 0)
                vs.push_back(r.gflops / it->second);
            if (auto it = dnnl.find(r.benchmark); it != dnnl.end() && it->second > 0)
                vd.push_back(r.gflops / it->second);
            if (auto it = conv_plain.find(r.benchmark); it != conv_plain.end() && it->second > 0)
                vp.push_back(r.gflops / it->second);
            if (auto it = conv_best.find(r.benchmark); it != conv_best.end() && it->second > 0)
                vb.push_back(r.gflops / it->second);
        }
        if (s.benchmarks == 0 && s.failed == 0) continue;
        for (double x : g) s.mean_gflops += x / double(g.size());
        s.geomean_gflops = geomean(g);
        s.geomean_speedup = geomean(sp);
        s.mean_seconds = s.benchmarks ? sec / double(s.benchmarks) : 0;
        s.geomean_vs_openblas = vs.size() == g.size() ? geomean(vs) : 0;
        s.geomean_vs_onednn = vd.size() == g.size() ? geomean(vd) : 0;
        s.geomean_vs_onednn_conv_plain = vp.size() == g.size() ? geomean(vp) : 0;
        s.geomean_vs_onednn_conv_best = vb.size() == g.size() ? geomean(vb) : 0;
        out.push_back(s);
    }
    return out;
}

namespace {

void write_summary(const CompareConfig &c, const std::vector<CompareRow> &rows, double peak) {
    auto sums = summarize(rows, c.methods);
    std::string md = "# looptool compare\n\n";
    md += fmt::format(
        "Dataset `{}`, split `{}`, action space `{}`, {} actions per sequence, budget {} s "
        "per search, seed {}. Peak (MAX_GFLOPS) {:.1f} GFLOPS. Every final schedule is "
        "re-measured with the full protocol (docs/measurement.md) in the same run{}.\n\n",
        c.dataset_dir,
        c.split == Split::Test    ? "test"
        : c.split == Split::Train ? "train"
                                  : "all",
        c.space, c.max_steps, c.budget_s, c.seed, peak,
        c.judge_rounds > 1
            ? fmt::format(", then all methods' kernels of a benchmark in {} alternating rounds "
                          "(figures: medians)",
                          c.judge_rounds)
            : std::string());
    md +=
        "| method | benchmarks | failed | mean GFLOPS | geomean GFLOPS | geomean speedup over base "
        "| "
        "geomean vs OpenBLAS | geomean vs oneDNN | mean tuning s "
        "|\n|---|---|---|---|---|---|---|---|---|\n";
    auto ratio = [](double x) { return x > 0 ? fmt::format("{:.2f}x", x) : std::string("-"); };
    for (const auto &s : sums)
        md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f}x | {} | {} | {:.2f} |\n",
                          s.method, s.benchmarks, s.failed, s.mean_gflops, s.geomean_gflops,
                          s.geomean_speedup, ratio(s.geomean_vs_openblas),
                          ratio(s.geomean_vs_onednn), s.mean_seconds);
    if (std::any_of(sums.begin(), sums.end(),
                    [](const MethodSummary &s) { return s.geomean_vs_onednn_conv_plain > 0; })) {
        md +=
            "\nConv2d benchmarks against oneDNN's convolution (direct, forward inference, one "
            "thread): `onednn-conv-plain` on our NCHW/OIHW tensors, `onednn-conv-best` in its "
            "preferred blocked layouts (reorders not timed).\n\n| method | geomean vs "
            "onednn-conv-plain | geomean vs onednn-conv-best |\n|---|---|---|\n";
        for (const auto &s : sums)
            md += fmt::format("| {} | {} | {} |\n", s.method, ratio(s.geomean_vs_onednn_conv_plain),
                              ratio(s.geomean_vs_onednn_conv_best));
    }
    std::string failed;
    for (const auto &r : rows)
        if (r.failed()) {
            std::string why = r.error;
            for (size_t at = 0; (at = why.find('|', at)) != std::string::npos; at += 2)
                why.insert(at, "\\");
            failed += fmt::format("| {} | {} | {} |\n", r.benchmark, r.method, why);
        }
    if (!failed.empty())
        md +=
            "\n## Failed\n\nNot in the means above; a resumed run tries them again.\n\n"
            "| benchmark | method | error |\n|---|---|---|\n" +
            failed;
    if (c.neighbour_core >= 0)
        md += fmt::format(
            "\nCore {} copied 64 MB buffers throughout (`--neighbour-core`): every method tuned "
            "and was judged while another core streamed through the shared L3.\n",
            c.neighbour_core);
    md +=
        "\nOpenBLAS is cblas_sgemm (cblas_sgemv for M = 1), oneDNN is dnnl_sgemm (its own gemv "
        "path "
        "for M = 1); both on one thread, on the same buffers, each result checked against the "
        "reference interpreter.\n";
    md +=
        "\nPer benchmark: `results.csv`; plots: `plots/gflops.png`, `plots/tuning_time.png`, "
        "`plots/steps/<benchmark>.png`.\n";
    write_file_atomically((fs::path(c.out_dir) / "summary.md").string(), md);
}

void write_plots(const CompareConfig &c, const std::vector<CompareRow> &rows) {
    fs::create_directories(fs::path(c.out_dir) / "plots" / "steps");
    std::vector<std::string> benches;
    for (const auto &r : rows)
        if (std::find(benches.begin(), benches.end(), r.benchmark) == benches.end())
            benches.push_back(r.benchmark);
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
    for (const auto &b : benches) {
        std::vector<Series> curves;
        size_t longest = 1;
        for (const auto &r : rows)
            if (r.benchmark == b) longest = std::max(longest, r.step_gflops.size());
        for (const auto &r : rows) {
            if (r.benchmark != b) continue;
            if (is_library(r.method)) {  // a hand-tuned library as a flat reference line
                curves.push_back({r.method, {0.0, double(longest - 1)}, {r.gflops, r.gflops}});
                continue;
            }
            if (r.step_gflops.empty()) continue;
            Series s{r.method, {}, {}};
            for (size_t i = 0; i < r.step_gflops.size(); ++i) {
                s.x.push_back(double(i));
                s.y.push_back(r.step_gflops[i]);
            }
            curves.push_back(s);
        }
        if (!curves.empty())
            plot_lines((fs::path(c.out_dir) / "plots" / "steps" / (b + ".png")).string(),
                       {b + ": GFLOPS after each action", "step", "GFLOPS", false, 1000, 600},
                       curves);
    }
}

}  // namespace

namespace {

// The judge's figure for a final schedule. A kernel slower than the protocol's time cap gets no
// complete call in it, and a cut measurement's GFLOPS are only an upper bound: LoopTune's
// batch-64 convs take 3-7 s a call, and a 91-GFLOPS kernel of one read 292 GFLOPS (above the
// core's 235 peak) before this. Such a kernel is measured again with one warm-up and three calls
// under a cap that fits them (kUncutCapS, as measure_kernel_uncut does for the libraries), or the
// row fails saying how slow it is.
double judged_gflops(Environment &judge, const Program &p, bool *slow = nullptr) {
    StepInfo info;  // measured afresh: the cache may hold a cut figure of it
    double g = judge.measure_again(p, &info);
    if (slow) *slow = info.timed_out;
    if (!info.timed_out) return g;
    judge.set_measure_options(uncut_options(judge.measure_options()));
    g = judge.measure_again(p, &info);
    judge.reset_measure_options();
    if (info.timed_out)
        throw Error(
            fmt::format("the final schedule takes over {:.0f} s a call (at most {:.3g} "
                        "GFLOPS): not measured",
                        kUncutCapS / 4, g));
    return g;
}

// One method on one benchmark: tunes from the naive nest, re-measures the final schedule with
// the judge and checks it against the reference. Throws on any failure of this one row.
// Returns what measures the final kernel again (for the judge's alternating rounds), or nothing
// for `base` and a kernel too slow for the protocol's cap (its figure is already from calls of
// seconds each).
std::function<double()> measure_row(const CompareConfig &c, Environment &judge,
                                    const Program &naive, CompareRow &row) {
    const std::string &m = row.method;
    std::function<double()> again;
    if (auto layout = conv_library(m)) {
        again = bench::onednn_conv_measurer(row.benchmark, *layout, *naive.comp);
    } else if (is_library(m)) {
        again = library_measurer(row.benchmark, m,
                                 m == "openblas" ? bench::openblas_kernel : bench::onednn_kernel,
                                 *naive.comp);
    }
    if (again) {
        row.gflops = again();
        return again;
    }
    std::vector<Action> actions;
    if (m != "base") {
        EnvConfig cfg;
        cfg.action_space = c.space;
        cfg.store_path = c.store_path;
        cfg.max_memory = c.max_memory;
        cfg.max_steps = c.max_steps;
        Environment env(cfg);  // fresh caches: no method profits from another's work
        env.reset(naive);
        if (auto it = c.extra_methods.find(m); it != c.extra_methods.end()) {
            auto t = std::chrono::steady_clock::now();
            actions = it->second(env, naive);
            row.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
            row.schedules = env.counters().compiles + env.counters().store_hits;
        } else {
            SearchConfig sc;
            sc.budget_s = c.budget_s;
            sc.max_steps = c.max_steps;
            sc.seed = c.seed;
            SearchResult r = run_search(m, env, naive, sc);
            actions = r.actions;
            row.seconds = r.seconds;
            row.schedules = r.schedules_measured;
        }
    }
    // Each state on the way (unless final_only), then the final one, uncut.
    Program p = naive;
    for (Action a : actions) {
        if (!c.final_only) row.step_gflops.push_back(judge.evaluate(p));
        p = apply(p, a);
        row.actions += (row.actions.empty() ? "" : " ") + std::string(action_name(a));
    }
    bool slow = false;
    row.step_gflops.push_back(judged_gflops(judge, p, &slow));
    Comparison cmp = judge.verify(p);
    if (!cmp.ok)
        throw Error(fmt::format("the final schedule failed verification ({} of {}): {}",
                                cmp.mismatches, cmp.coverage(), cmp.first_mismatch));
    row.gflops = row.step_gflops.back();
    if (m == "base" || slow) return {};
    return [&judge, p] { return judged_gflops(judge, p); };
}

// Longest the judge's rounds may take on one benchmark (estimated), else they are skipped.
constexpr double kMaxJudgeRoundsS = 30;

// The judge's alternating rounds on one benchmark (CompareConfig::judge_rounds): every row
// measured in this run is measured again in turn, round after round, and its figure becomes
// the median of its rounds (and of the figure it had, for an odd count). One measurement per
// method, one method after the other, put mm49_512_4608's `tune` kernel at 59-94 GFLOPS from one
// run to the next while oneDNN's stayed at 97-107: slow phases of the machine hit whichever method
// was being measured (docs/performance.md, (v) and (w)).
void judge_rows(const CompareConfig &c, const std::string &bench, double flops,
                const std::vector<std::pair<std::string, std::function<double()>>> &again,
                std::vector<CompareRow> &rows, double peak) {
    if (c.judge_rounds < 2 || again.size() < 2) return;
    auto find = [&](const std::string &m) -> CompareRow * {
        for (CompareRow &r : rows)
            if (r.benchmark == bench && r.method == m && !r.failed()) return &r;
        return nullptr;
    };
    // What the rounds would take at the figures measured so far: a benchmark whose kernels
    // take a second a call (a batch-32 conv) would spend minutes on them; it keeps one
    // measurement per method.
    const looptool::MeasureOptions &m = c.judge_measure;
    double round_s = 0;
    for (const auto &[method, f] : again)
        if (const CompareRow *row = find(method); row && row->gflops > 0) {
            const double call_s = flops / (row->gflops * 1e9);
            round_s += (m.warmup + std::max(double(m.min_runs), m.min_time_s / call_s)) * call_s;
        }
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
    for (size_t i = 0; i < again.size(); ++i) {
        CompareRow *row = find(again[i].first);
        if (!row) continue;
        std::vector<double> f = figures[i];
        if (f.size() % 2 == 0) f.insert(f.begin(), row->gflops);  // an odd count, one median
        row->judged_gflops = f;
        std::nth_element(f.begin(), f.begin() + long(f.size() / 2), f.end());
        row->gflops = f[f.size() / 2];
        if (!row->step_gflops.empty()) row->step_gflops.back() = row->gflops;
        row->fraction_of_peak = row->gflops / peak;
    }
    if (const CompareRow *base = find("base"))
        for (CompareRow &r : rows)
            if (r.benchmark == bench && !r.failed() && r.method != "base")
                r.speedup = r.gflops / base->gflops;
}

}  // namespace

std::vector<CompareRow> run_compare(const CompareConfig &c) {
    if (c.methods.empty()) throw Error("compare: no methods");
    const auto builtin = default_compare_methods();
    std::set<std::string> known(builtin.begin(), builtin.end());
    for (const auto &[name, fn] : c.extra_methods) known.insert(name);
    for (const auto &m : c.methods)
        if (!known.count(m)) throw Error(fmt::format("compare: unknown method '{}'", m));
    if (c.out_dir.empty()) throw Error("compare: no output directory");
    if (fs::exists(c.out_dir) && !fs::is_directory(c.out_dir))
        throw Error(fmt::format("compare: --out {} is not a directory", c.out_dir));
    if (c.plots && !gnuplot_available())
        throw Error(
            "compare: gnuplot with the pngcairo terminal is not installed (apt-get install "
            "gnuplot-nox)");
    Dataset ds = Dataset::load(c.dataset_dir);
    std::vector<std::string> files = ds.files(c.split);
    std::optional<looptool::CacheNeighbour> neighbour;
    if (c.neighbour_core >= 0) neighbour.emplace(c.neighbour_core, sched_getcpu());
    if (!c.benchmarks.empty()) {
        std::vector<std::string> chosen;
        for (const auto &name : c.benchmarks) {
            auto it = std::find_if(files.begin(), files.end(), [&](const std::string &f) {
                return fs::path(f).filename().string() == name;
            });
            if (it == files.end())
                throw Error(fmt::format("compare: benchmark '{}' is not in the {} split of {}",
                                        name,
                                        c.split == Split::Test    ? "test"
                                        : c.split == Split::Train ? "train"
                                                                  : "whole",
                                        c.dataset_dir));
            chosen.push_back(*it);
        }
        files = chosen;
    }
    if (c.limit > 0 && size_t(c.limit) < files.size()) files.resize(size_t(c.limit));
    const bool want_blas =
        std::find(c.methods.begin(), c.methods.end(), "openblas") != c.methods.end();
    if (want_blas) bench::load_openblas("SkylakeX");
    if (std::find(c.methods.begin(), c.methods.end(), "onednn") != c.methods.end())
        bench::load_onednn();

    const std::string results_path = (fs::path(c.out_dir) / "results.csv").string();
    std::vector<CompareRow> rows = read_rows(results_path);
    // A measured row is kept; a failed one is tried again.
    auto done = [&](const std::string &b, const std::string &m) -> const CompareRow * {
        for (const auto &r : rows)
            if (r.benchmark == b && r.method == m && !r.failed()) return &r;
        return nullptr;
    };

    // The judge re-measures every final schedule with the full protocol, side by side.
    EnvConfig judge_cfg;
    judge_cfg.action_space = c.space;
    judge_cfg.max_steps = 1 << 30;
    judge_cfg.measure = c.judge_measure;
    judge_cfg.max_memory = c.max_memory;
    Environment judge(judge_cfg);
    const double peak = judge.max_gflops();

    const auto t0 = std::chrono::steady_clock::now();
    int computed = 0, total_pairs = int(files.size() * c.methods.size()), pairs_done = 0;
    for (const auto &f : files)
        for (const auto &m : c.methods)
            pairs_done += done(fs::path(f).filename().string(), m) != nullptr;
    const int pairs_todo = total_pairs - pairs_done;

    for (size_t bi = 0; bi < files.size(); ++bi) {
        const std::string bench_name = fs::path(files[bi]).filename().string();
        // A file that does not load fails each of its rows; the other benchmarks go on.
        Program naive;
        std::string load_error;
        try {
            naive = Program::naive(load_program_file(files[bi]).comp);
        } catch (const std::exception &e) {
            load_error = e.what();
        }
        bool judged = false;
        std::vector<std::pair<std::string, std::function<double()>>> again;  // per new row
        for (const auto &m : c.methods) {
            if (done(bench_name, m)) continue;
            CompareRow row;
            row.benchmark = bench_name;
            row.method = m;
            try {
                if (!load_error.empty()) throw Error(load_error);
                if (is_library(m) &&
                    !(conv_library(m) ? bench::is_conv2d(*naive.comp) : is_matmul(*naive.comp)))
                    continue;  // a library runs only its own kind of benchmark
                if (!judged) {
                    judge.reset(naive);
                    judged = true;
                }
                const double base =
                    done(bench_name, "base") ? done(bench_name, "base")->gflops : judge.gflops();
                if (auto f = measure_row(c, judge, naive, row)) again.emplace_back(m, f);
                row.fraction_of_peak = row.gflops / peak;
                // The base row is measured afresh by the judge (judged_gflops), like every
                // final schedule; the rows after it divide by that figure.
                row.speedup = m == "base" ? 1.0 : row.gflops / base;
            } catch (const std::exception &e) {
                row.gflops = row.fraction_of_peak = row.speedup = row.seconds = 0;
                row.schedules = 0;
                row.actions.clear();
                row.step_gflops.clear();
                row.error = one_field(e.what());
            }
            std::erase_if(rows, [&](const CompareRow &r) {
                return r.benchmark == bench_name && r.method == m;
            });
            rows.push_back(row);
            write_rows(results_path, rows);
            ++computed;
            if (row.failed() && c.on_failure) c.on_failure(row);
            if (c.progress) {
                double el =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                double rate = computed / el;
                c.progress(fmt::format(
                    "[{}/{}] {} {:<9} {} | {:.2f} runs/min | elapsed {} | ETA {}",
                    pairs_done + computed, total_pairs, bench_name, m,
                    row.failed()
                        ? std::string("FAILED")
                        : fmt::format("{:8.2f} GFLOPS {:5.2f}x base", row.gflops, row.speedup),
                    rate * 60, format_duration(el),
                    format_duration((pairs_todo - computed) / rate)));
            }
        }
        judge_rows(c, bench_name, load_error.empty() ? naive.comp->flops() : 0, again, rows, peak);
        if (again.size() >= 2 && c.judge_rounds >= 2) write_rows(results_path, rows);
    }
    if (rows.empty()) return rows;  // nothing to write (an empty split)
    write_summary(c, rows, peak);
    if (c.plots) write_plots(c, rows);
    return rows;
}

}  // namespace looptune
