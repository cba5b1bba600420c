#include "experiments/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include "baselines/onednn_conv.h"
#include "baselines/onednn_matmul_postops.h"
#include "baselines/onednn_primitive.h"
#include "baselines/onednn_rowop.h"
#include "baselines/reference_kernels.h"
#include "experiments/compare_judge.h"
#include "experiments/compare_methods.h"
#include "experiments/compare_plots.h"
#include "experiments/compare_report.h"
#include "experiments/compare_rows.h"
#include "experiments/plot.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "search/search.h"
#include "util/stats.h"
#include "util/threads.h"

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
    for (const char *r : {bench::kOnednnSoftmax, bench::kOnednnLayernorm, bench::kStreamingCopy})
        m.push_back(r);
    m.push_back(bench::kOnednnMatmul);
    return m;
}

namespace {

bool contains(const std::vector<std::string> &v, const std::string &x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

// A registered method needs its own action space and, when --steps is given, that step limit.
void check_environment(const CompareConfig &c, const std::string &m) {
    const EnvConfig env = method_environment(c, m);
    if (env.action_space != c.space)
        throw Error(
            fmt::format("compare: method '{}' runs in its own action space '{}', not --space {}: "
                        "give --space {}",
                        m, env.action_space, c.space, env.action_space));
    if (c.max_steps > 0 && env.max_steps != c.max_steps)
        throw Error(
            fmt::format("compare: method '{}' runs with its own step limit of {} actions, not "
                        "--steps {}: leave --steps out or give --steps {}",
                        m, env.max_steps, c.max_steps, env.max_steps));
}

// Errors of the configuration, before anything runs or is written.
void check_config(const CompareConfig &c) {
    if (c.methods.empty()) throw Error("compare: no methods");
    if (c.threads < 1)
        throw Error(
            fmt::format("compare: {} threads: give 1 or more (0: every usable core)", c.threads));
    std::vector<std::string> known = default_compare_methods();
    known.push_back(bench::kOnednnMatmul);  // asked for by name: on matmuls "onednn" runs already
    for (const auto &[name, method] : c.extra_methods) known.push_back(name);
    for (const auto &m : c.methods) {
        const std::string x = unprepacked(m);
        if (!contains(known, x) || (is_prepacked(m) && (x == "base" || is_library(x))))
            throw Error(
                fmt::format("compare: unknown method '{}' (known: {}; a search or "
                            "registered method may end in {})",
                            m, fmt::join(known, ", "), kPrepackedSuffix));
        if (is_prepacked(m) && c.constant_inputs.empty())
            throw Error(fmt::format(
                "compare: method '{}' needs the inputs declared constant (--const)", m));
    }
    if (!c.against.empty() && !contains(c.methods, c.against))
        throw Error(fmt::format("compare: --against {} is not one of the methods compared ({})",
                                c.against, fmt::join(c.methods, ", ")));
    for (const auto &m : c.methods)
        if (c.extra_methods.count(unprepacked(m))) check_environment(c, m);
    if (c.out_dir.empty()) throw Error("compare: no output directory");
    if (fs::exists(c.out_dir) && !fs::is_directory(c.out_dir))
        throw Error(fmt::format("compare: --out {} is not a directory", c.out_dir));
    if (c.plots && !gnuplot_available())
        throw Error(
            "compare: gnuplot with the pngcairo terminal is not installed (apt-get install "
            "gnuplot-nox)");
}

const char *split_text(Split s) {
    switch (s) {
        case Split::Test: return "test";
        case Split::Train: return "train";
        case Split::All: return "whole";
    }
    return "whole";
}

// The benchmark files of the split, of --benchmarks and --limit; an empty selection is an error.
std::vector<std::string> select_files(const CompareConfig &c) {
    Dataset ds = Dataset::load(c.dataset_dir);
    std::vector<std::string> files = ds.files(c.split);
    if (files.empty())
        throw Error(fmt::format(
            "compare: the {} split of {} holds no benchmark (of the dataset's {}, {} in the "
            "train split and {} in the test split): give --split all",
            split_text(c.split), c.dataset_dir,
            count_of(int64_t(ds.files(Split::All).size()), "benchmark"), ds.train.size(),
            ds.test.size()));
    if (!c.benchmarks.empty()) {
        std::vector<std::string> chosen;
        for (const auto &name : c.benchmarks) {
            auto it = std::find_if(files.begin(), files.end(), [&](const std::string &f) {
                return fs::path(f).filename().string() == name;
            });
            if (it == files.end())
                throw Error(fmt::format("compare: benchmark '{}' is not in the {} split of {}",
                                        name, split_text(c.split), c.dataset_dir));
            chosen.push_back(*it);
        }
        files = chosen;
    }
    if (c.limit > 0 && size_t(c.limit) < files.size()) files.resize(size_t(c.limit));
    return files;
}

// One run over the selected benchmarks: the rows so far (resumed ones first), the judge that
// measures every final schedule with the full protocol, side by side, and the progress counts.
class CompareRun {
public:
    CompareRun(const CompareConfig &c, const std::vector<std::string> &files)
        : c_(c),
          results_path_((fs::path(c.out_dir) / "results.csv").string()),
          rows_(read_rows(results_path_)),
          judge_(judge_config(c)),
          peak_(judge_.max_gflops()),
          t0_(std::chrono::steady_clock::now()) {
        total_pairs_ = int(files.size() * c.methods.size());
        for (const auto &f : files)
            for (const auto &m : c.methods)
                pairs_done_ += done(fs::path(f).filename().string(), m) != nullptr;
        pairs_todo_ = total_pairs_ - pairs_done_;
    }

    void benchmark(const std::string &file);
    std::vector<CompareRow> &rows() { return rows_; }
    double peak() const { return peak_; }

private:
    static EnvConfig judge_config(const CompareConfig &c) {
        EnvConfig judge_cfg;
        judge_cfg.action_space = c.space;
        judge_cfg.max_steps = 1 << 30;
        judge_cfg.measure = c.judge_measure;
        judge_cfg.max_memory = c.max_memory;
        judge_cfg.threads = c.threads;
        return judge_cfg;
    }
    // A measured row is kept; a failed one is tried again.
    const CompareRow *done(const std::string &b, const std::string &m) const {
        for (const auto &r : rows_)
            if (r.benchmark == b && r.method == m && !r.failed()) return &r;
        return nullptr;
    }
    bool measure(CompareRow &row, const Program &naive, const std::string &load_error, bool &judged,
                 Remeasurers &again);
    void record(const CompareRow &row);

    const CompareConfig &c_;
    const std::string results_path_;
    std::vector<CompareRow> rows_;
    Environment judge_;
    const double peak_;
    const std::chrono::steady_clock::time_point t0_;
    int computed_ = 0, total_pairs_ = 0, pairs_done_ = 0, pairs_todo_ = 0;
};

// Fills one new row; false when the method does not run on this benchmark (a library runs only
// its own kind). Any failure of the row is recorded in it.
bool CompareRun::measure(CompareRow &row, const Program &naive, const std::string &load_error,
                         bool &judged, Remeasurers &again) {
    const std::string &m = row.method;
    try {
        if (!load_error.empty()) throw Error(load_error);
        if (!runs_on(m, *naive.comp)) return false;
        if (!judged) {
            judge_.reset(naive);
            judged = true;
        }
        const CompareRow *old_base = done(row.benchmark, "base");
        const double base = old_base ? old_base->gflops : judge_.gflops();
        if (auto f = measure_row(c_, judge_, naive, row)) again.emplace_back(m, f);
        row.fraction_of_peak = row.gflops / peak_;
        // The base row is measured afresh by the judge (judged_gflops), like every final
        // schedule; the rows after it divide by that figure.
        row.speedup = m == "base" ? 1.0 : row.gflops / base;
    } catch (const std::exception &e) {
        row.gflops = row.fraction_of_peak = row.speedup = row.seconds = 0;
        row.schedules = 0;
        row.actions.clear();
        row.step_gflops.clear();
        row.error = one_field(e.what());
    }
    return true;
}

// Puts the row in place of an earlier one, writes results.csv, reports it.
void CompareRun::record(const CompareRow &row) {
    std::erase_if(rows_, [&](const CompareRow &r) {
        return r.benchmark == row.benchmark && r.method == row.method;
    });
    rows_.push_back(row);
    write_rows(results_path_, rows_);
    ++computed_;
    if (row.failed() && c_.on_failure) c_.on_failure(row);
    if (!c_.progress) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double rate = computed_ / el;
    c_.progress(fmt::format(
        "[{}/{}] {} {:<9} {} | {:.2f} runs/min | elapsed {} | ETA {}", pairs_done_ + computed_,
        total_pairs_, row.benchmark, row.method,
        row.failed() ? std::string("FAILED")
                     : fmt::format("{:8.2f} GFLOPS {:5.2f}x base", row.gflops, row.speedup),
        rate * 60, format_duration(el), format_duration((pairs_todo_ - computed_) / rate)));
}

void CompareRun::benchmark(const std::string &file) {
    const std::string bench_name = fs::path(file).filename().string();
    // A file that does not load fails each of its rows; the other benchmarks go on.
    Program naive;
    std::string load_error;
    try {
        naive = looptool::tuning_start(load_program_file(file));
    } catch (const std::exception &e) {
        load_error = e.what();
    }
    bool judged = false;
    Remeasurers again;  // per new row
    for (const auto &m : c_.methods) {
        if (done(bench_name, m)) continue;
        CompareRow row;
        row.benchmark = bench_name;
        row.method = m;
        if (measure(row, naive, load_error, judged, again)) record(row);
    }
    judge_rows(c_, bench_name, load_error.empty() ? naive.comp->flops() : 0, again, rows_, peak_);
    if (again.size() >= 2 && c_.judge_rounds >= 2) write_rows(results_path_, rows_);
}

}  // namespace

std::vector<CompareRow> run_compare(const CompareConfig &config) {
    CompareConfig c = config;
    c.threads = looptune::resolve_threads(c.threads);
    check_config(c);
    bench::set_library_threads(c.threads);
    const std::vector<std::string> files = select_files(c);
    std::optional<looptool::CacheNeighbour> neighbour;
    if (c.neighbour_core >= 0) neighbour.emplace(c.neighbour_core, sched_getcpu());
    if (contains(c.methods, "openblas")) bench::load_openblas("SkylakeX");
    if (contains(c.methods, "onednn")) bench::load_onednn();
    CompareRun run(c, files);
    for (const auto &f : files) run.benchmark(f);
    std::vector<CompareRow> &rows = run.rows();
    if (rows.empty())  // every method a library of another kind of benchmark
        throw Error(fmt::format(
            "compare: none of the methods ({}) runs on the {} selected: openblas and onednn run "
            "on matmuls only, onednn-matmul on (batched, strided) matmuls and matmuls with an "
            "epilogue, onednn-conv-plain and -best on conv2d only, onednn-softmax, "
            "onednn-layernorm and copy on those row operations (copy: and GELU) only",
            fmt::join(c.methods, ", "), count_of(int64_t(files.size()), "benchmark")));
    write_summary(c, rows, run.peak());
    if (c.plots) write_plots(c, rows);
    return rows;
}

}  // namespace looptune
