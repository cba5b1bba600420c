#include <fmt/format.h>

#include <unistd.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "experiments/compare.h"
#include "looptool/ir/error.h"
#include "tune/guided_search.h"

namespace looptool::cli {

Run add_compare(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "compare",
        "Compare tuning methods on a dataset split: CSV, Markdown summary and PNG plots");
    struct Opts {
        looptune::CompareConfig c;
        std::string split = "test", methods, benchmarks, policy;
        bool json = false, no_plots = false;
    };
    auto o = std::make_shared<Opts>();
    std::string all;
    for (const auto &m : looptune::default_compare_methods()) all += (all.empty() ? "" : ",") + m;
    o->methods = all;
    cmd->add_option("--dataset", o->c.dataset_dir, "Directory of benchmark files")->required();
    cmd->add_option("--split", o->split, "train, test or all")->capture_default_str();
    cmd->add_option("--methods", o->methods,
                    "Comma-separated methods (also: policy, policy-greedy, policy-full)")
        ->capture_default_str();
    cmd->add_option("--budget-s", o->c.budget_s, "Wall-clock budget per search and benchmark")
        ->capture_default_str()
        ->check(positive());
    cmd->add_option("--steps", o->c.max_steps, "Actions per sequence")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--seed", o->c.seed, "Random seed")
        ->capture_default_str()
        ->check(unsigned_int());
    cmd->add_option("--space", o->c.space,
                    "Action space: looptune, full or layout (full + flatten, pack)")
        ->capture_default_str();
    cmd->add_option("--store", o->c.store_path, "SQLite measurement store shared by the searches");
    cmd->add_option("--limit", o->c.limit, "Only the first N benchmarks of the split (0: all)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option(
        "--benchmarks", o->benchmarks,
        "Only these benchmarks (comma-separated names), or 'looptune' for LoopTune's 25 "
        "test benchmarks");
    cmd->add_option("--out", o->c.out_dir, "Output directory (resumed if it holds results.csv)")
        ->required();
    cmd->add_option("--policy", o->policy,
                    "Policy file for the `policy` method (default: the shipped one)");
    cmd->add_flag("--no-plots", o->no_plots, "Skip the PNG plots");
    cmd->add_flag("--final-only", o->c.final_only,
                  "Judge only each method's final schedule, not every state on its way (for "
                  "benchmarks whose early states take seconds a call: LoopTune's batch-32 convs)");
    cmd->add_option("--judge-rounds", o->c.judge_rounds,
                    "After all methods ran on a benchmark, measure their final kernels again in "
                    "this many alternating rounds and report each one's median (1: one "
                    "measurement per method, right after it tuned)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    cmd->add_option("--neighbour-core", o->c.neighbour_core,
                    "Meanwhile copy 64 MB buffers on this core: tune and judge while another "
                    "core streams through the shared L3 (-1: none)")
        ->check(at_least(-1));
    add_max_memory_option(cmd, o->c.max_memory);
    cmd->add_flag("--json", o->json, "Machine-readable summary on stdout");
    return [o] {
        o->c.split = looptune::parse_split(o->split);
        o->c.plots = !o->no_plots;
        o->c.benchmarks = o->benchmarks == "looptune" ? looptune::Dataset::looptune_test_names()
                                                      : split_list(o->benchmarks);
        o->c.methods = split_list(o->methods);
        auto wants = [&](const char *m) {
            return std::find(o->c.methods.begin(), o->c.methods.end(), m) != o->c.methods.end();
        };
        if (wants("policy") || wants("policy-greedy") || wants("policy-full")) {
            // The policy rolls out in the same environment as the searches, so it gets the same
            // step limit and action space; a policy trained for others is refused, not adapted.
            auto policy = std::make_shared<looptune::Policy>(looptune::Policy::load(
                o->policy.empty() ? looptune::default_policy_path() : o->policy));
            const auto &info = policy->info();
            if (info.max_steps != o->c.max_steps || info.action_space != o->c.space)
                throw Error(fmt::format(
                    "policy {} was trained for {} steps in action space '{}': run compare with "
                    "--steps {} --space {}",
                    info.path, info.max_steps, info.action_space, info.max_steps,
                    info.action_space));
            // `policy` is `tune`'s default (the guided search, its own 0.5 s budget, not
            // --budget-s); `policy-greedy` is `tune --greedy`.
            // `policy-full` is `tune --full-measurements` (every state measured with the
            // environment's full protocol, as before the search's bound).
            for (const char *name : {"policy", "policy-greedy", "policy-full"})
                o->c.extra_methods[name] = [policy, name = std::string(name)](
                                               looptune::Environment &env, const Program &start) {
                    looptune::GuidedConfig g;
                    g.greedy = name == "policy-greedy";
                    g.bounded_measurements = name != "policy-full";
                    return looptune::guided_search(*policy, env, start, g).actions;
                };
        }
        const bool tty = ::isatty(2);
        o->c.progress = [tty](const std::string &line) {
            if (tty)
                fmt::print(stderr, "\r\033[K{}", line);
            else
                fmt::print(stderr, "{}\n", line);
        };
        o->c.on_failure = [tty](const looptune::CompareRow &r) {
            fmt::print(stderr, "{}error: {} {}: {} (recorded as failed; going on)\n",
                       tty ? "\r\033[K" : "", r.benchmark, r.method, r.error);
        };
        auto rows = looptune::run_compare(o->c);
        if (tty) fmt::print(stderr, "\n");
        auto sums = looptune::summarize(rows, o->c.methods);
        nlohmann::json failed = nlohmann::json::array();
        for (const auto &r : rows)
            if (r.failed())
                failed.push_back(
                    {{"benchmark", r.benchmark}, {"method", r.method}, {"error", r.error}});
        if (o->json) {
            nlohmann::json j = nlohmann::json::array();
            for (const auto &s : sums)
                j.push_back({{"method", s.method},
                             {"benchmarks", s.benchmarks},
                             {"failed", s.failed},
                             {"mean_gflops", s.mean_gflops},
                             {"geomean_gflops", s.geomean_gflops},
                             {"geomean_speedup", s.geomean_speedup},
                             {"geomean_vs_openblas", s.geomean_vs_openblas},
                             {"geomean_vs_onednn", s.geomean_vs_onednn},
                             {"geomean_vs_onednn_conv_plain", s.geomean_vs_onednn_conv_plain},
                             {"geomean_vs_onednn_conv_best", s.geomean_vs_onednn_conv_best},
                             {"mean_seconds", s.mean_seconds}});
            print_json(
                {{"out", o->c.out_dir}, {"rows", rows.size()}, {"methods", j}, {"failed", failed}});
        } else {
            fmt::print("{:<10} {:>5} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}\n", "method", "n",
                       "failed", "mean GF", "geomean GF", "speedup", "vs BLAS", "vs oneDNN",
                       "mean s");
            for (const auto &s : sums)
                fmt::print(
                    "{:<10} {:>5} {:>6} {:>10.1f} {:>10.1f} {:>8.2f}x {:>8.2f}x {:>8.2f}x "
                    "{:>9.2f}\n",
                    s.method, s.benchmarks, s.failed, s.mean_gflops, s.geomean_gflops,
                    s.geomean_speedup, s.geomean_vs_openblas, s.geomean_vs_onednn, s.mean_seconds);
            if (std::any_of(sums.begin(), sums.end(), [](const looptune::MethodSummary &s) {
                    return s.geomean_vs_onednn_conv_plain > 0;
                })) {
                fmt::print("\n{:<18} {:>13} {:>13}\n", "method", "vs conv plain", "vs conv best");
                for (const auto &s : sums)
                    fmt::print("{:<18} {:>12.2f}x {:>12.2f}x\n", s.method,
                               s.geomean_vs_onednn_conv_plain, s.geomean_vs_onednn_conv_best);
            }
            if (rows.empty())
                fmt::print("no benchmarks to compare; nothing written\n");
            else
                fmt::print("results in {}/results.csv, summary.md, plots/\n", o->c.out_dir);
        }
        if (!failed.empty())
            fmt::print(stderr, "{} of {} rows failed (the `error` column of results.csv)\n",
                       failed.size(), rows.size());
        return failed.empty() ? 0 : 2;  // 2: the run finished, some rows failed
    };
}

}  // namespace looptool::cli
