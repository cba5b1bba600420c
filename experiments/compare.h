// The comparison experiment: every method on every benchmark of a dataset split, side by
// side: per-benchmark rows (CSV), a Markdown summary, and PNG plots. Resumable: rows already
// in the output CSV are not recomputed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/environment.h"
#include "looptool/actions/actions.h"
#include "looptool/ir/loop_tree.h"
#include "looptool/measure/measure.h"

namespace looptune {

struct CompareRow;

/// A tuning method beyond the built-in ones (`policy` registers itself this way, so this
/// layer does not depend on LibTorch). Returns the action sequence from the naive nest.
using TuneMethod =
    std::function<std::vector<looptool::Action>(Environment &env, const looptool::Program &start)>;

struct CompareMethod {
    TuneMethod run;
    /// The environment it needs, from the one compare gives every method (action space, step
    /// limit, store, memory limit); empty: that one. A policy sets its own step limit and loop
    /// count. A method whose action space is not --space, or whose step limit is not the
    /// --steps given, is refused before anything runs.
    std::function<EnvConfig(EnvConfig)> environment;
};

struct CompareConfig {
    std::string dataset_dir;
    Split split = Split::Test;
    /// base, greedy1, greedy2, beam2dfs, beam4dfs, beam2bfs, beam4bfs, random, genetic, tile,
    /// openblas, onednn (matmul only), onednn-conv-plain, onednn-conv-best (conv2d only),
    /// onednn-softmax, onednn-layernorm, copy (those row operations only: onednn_rowop.h),
    /// onednn-matmul (matmuls with an epilogue only: onednn_matmul.h), and
    /// any name in `extra_methods`; and any of those searches or registered methods followed
    /// by `-prepacked` (constant_inputs).
    std::vector<std::string> methods;
    double budget_s = 60;  ///< per benchmark and search method
    /// Actions per sequence of every method; 0: what each needs (the searches' default_steps():
    /// tile's whole sequences, LoopTune's 10 for the others; a registered method's own).
    int max_steps = 0;
    uint64_t seed = 0;
    std::string space = "full";
    std::string store_path;  ///< shared measurement store (optional)
    int64_t max_memory = 0;  ///< EnvConfig::max_memory of every environment (--max-memory)
    /// Threads of every method: EnvConfig::threads of every environment and the judge's, and
    /// the libraries' (bench::set_library_threads). 0: every usable core (run_compare resolves
    /// it before anything runs).
    int threads = 1;
    std::string out_dir;
    int limit = 0;  ///< first N benchmarks of the split (0: all)
    /// Judge only each method's final schedule (step_gflops then holds that one figure), not
    /// every state on its way: a state near the naive nest of one of LoopTune's batch-32 convs
    /// takes ~50 s a call, so judging the 40-60 states of a conv tile took 20+ minutes per row.
    bool final_only = false;
    /// After every method has run on a benchmark, the judge measures their final kernels again
    /// in this many alternating rounds, and each figure is the median of its rounds: a slow
    /// phase of the machine then hits every method alike, not the one measured at that moment.
    /// 1: one measurement per method, right after it tuned. (`base` and kernels slower than the
    /// protocol's cap keep their one figure; rows resumed from an earlier run are not remeasured;
    /// a benchmark whose rounds would take over 30 s, such as a batch-32 conv, keeps one
    /// measurement per method.)
    int judge_rounds = 3;
    /// A core streaming through the shared L3 while the comparison runs
    /// (looptool::CacheNeighbour: tuning and judging on a busy machine); -1: none.
    int neighbour_core = -1;
    /// The judge's protocol (the environment's full one by default; tests shorten its cap).
    looptool::MeasureOptions judge_measure;
    /// Only these benchmark names (after the split); empty: all. Names missing from the split
    /// are an error.
    std::vector<std::string> benchmarks;
    /// The reference of the beat/tied/lost counts (MethodSummary); empty: onednn on the
    /// benchmarks where it was measured, base on the others. Must be one of `methods`.
    std::string against;
    bool plots = true;
    std::map<std::string, CompareMethod> extra_methods;
    /// Inputs declared constant (--const): a method X named `X-prepacked` (any search or
    /// registered method) runs as X with them (EnvConfig::constant_inputs), its packs of those
    /// inputs done once outside the timed calls, and is judged so; X itself stays per call.
    std::vector<std::string> constant_inputs;
    std::function<void(const std::string &)> progress;  ///< one progress line at a time
    /// Called for each failed row as it is recorded (the CLI prints it on stderr).
    std::function<void(const CompareRow &)> on_failure;
};

struct CompareRow {
    std::string benchmark, method;
    double gflops = 0;  ///< final schedule, full measurement protocol
    double fraction_of_peak = 0;
    double speedup = 0;               ///< over the naive nest, measured in the same run
    double seconds = 0;               ///< tuning time (0 for base and the libraries)
    int64_t schedules = 0;            ///< distinct schedules measured while tuning
    std::string actions;              ///< space-separated
    std::vector<double> step_gflops;  ///< GFLOPS after each action of the sequence
    /// The judge's figures of the final kernel in its alternating rounds (CompareConfig::
    /// judge_rounds), in order; `gflops` is their median. Empty: one measurement.
    std::vector<double> judged_gflops;
    /// Empty for a measured row. Otherwise why this benchmark and method failed (a file that
    /// does not load, a compile or verification failure, any error of that one item): the row
    /// is recorded with zeros, the run goes on, and a resumed run tries it again.
    std::string error;
    bool failed() const { return !error.empty(); }
};

struct MethodSummary {
    std::string method;
    int benchmarks = 0;  ///< measured rows (failed ones are not in the means)
    int failed = 0;      ///< failed rows
    double mean_gflops = 0, geomean_gflops = 0, geomean_speedup = 0, mean_seconds = 0;
    double geomean_vs_openblas = 0;  ///< 0 when openblas was not run
    double geomean_vs_onednn = 0;    ///< 0 when onednn was not run
    /// Against oneDNN's convolution on conv2d benchmarks; 0 when that method was not run.
    double geomean_vs_onednn_conv_plain = 0, geomean_vs_onednn_conv_best = 0;
    /// Benchmarks on which it beat, tied or lost to the reference (CompareConfig::against),
    /// over those where both were measured and the reference is another method. Each side's
    /// figures are its judged rounds (or its one measurement): beat when all of its figures are
    /// above all of the reference's, lost when all are below, tied when their ranges overlap.
    int beat = 0, tied = 0, lost = 0;
    /// The reference as named in reports ("onednn", "base", "onednn (base where onednn did not
    /// run)"); empty when there was none.
    std::string against;
    int compared() const { return beat + tied + lost; }
};

std::vector<std::string> default_compare_methods();

/// Runs (or resumes) the experiment; writes results.csv, summary.md and plots/ in out_dir
/// (created only when there is a row to write). Returns every row (old and new). One
/// benchmark or method that fails gives a failed row (CompareRow::error) and the run goes on;
/// errors of the whole run (configuration, dataset, output directory, a selection with no
/// benchmark or none any method runs on) throw looptool::Error.
std::vector<CompareRow> run_compare(const CompareConfig &config);

/// Per method (in `methods` order, those with rows), with beat/tied/lost counts against
/// `against` (CompareConfig::against; empty: onednn where measured, else base).
std::vector<MethodSummary> summarize(const std::vector<CompareRow> &rows,
                                     const std::vector<std::string> &methods,
                                     const std::string &against = "");

/// The summary as compare prints it on stdout: a table per method (a ratio against a method
/// that was not run is "-"), then where the results are (`plots`: whether plots were written).
std::string format_summary_table(const std::vector<MethodSummary> &sums, const std::string &out_dir,
                                 bool plots);

}  // namespace looptune
