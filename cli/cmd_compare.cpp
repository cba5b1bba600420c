#include <fmt/format.h>

#include <unistd.h>

#include <optional>

#include "cli/commands.h"
#include "cli/validators.h"
#include "experiments/compare.h"
#include "looptool/ir/error.h"
#include "tune/cost_model.h"
#include "tune/guided_search.h"
#include "util/threads.h"

namespace looptool::cli {

namespace {

struct Opts {
    looptune::CompareConfig c;
    std::string split = "test", methods, benchmarks, policy, untrained, cost_model;
    bool json = false, no_plots = false;
    CLI::Option *benchmarks_option = nullptr, *space_option = nullptr;
};

void add_options(CLI::App *cmd, Opts &o) {
    std::string all;
    for (const auto &m : looptune::default_compare_methods()) all += (all.empty() ? "" : ",") + m;
    o.methods = all;
    cmd->add_option("--dataset", o.c.dataset_dir, "Directory of benchmark files")->required();
    cmd->add_option("--split", o.split, "train, test or all")->capture_default_str();
    cmd->add_option(
           "--methods", o.methods,
           "Comma-separated methods (also: policy, policy-greedy, policy-full, and the ablations "
           "policy-noseeds, seeds; onednn-matmul: oneDNN's matmul primitive on batched and "
           "strided matmuls such as attention's; with --untrained: untrained, untrained-greedy, "
           "untrained-noseeds; with --cost-model: policy-ranked)")
        ->capture_default_str();
    cmd->add_option("--against", o.c.against,
                    "The reference of the beat/tied/lost counts, one of --methods (default: "
                    "onednn where it ran, else base)");
    cmd->add_option("--budget-s", o.c.budget_s, "Wall-clock budget per search and benchmark")
        ->capture_default_str()
        ->check(positive());
    cmd->add_option("--steps", o.c.max_steps,
                    "Actions per sequence of every method (0: what each needs: the tile "
                    "template's whole sequences, a policy's own episode length, 10 for the other "
                    "searches)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--seed", o.c.seed, "Random seed")
        ->capture_default_str()
        ->check(unsigned_int());
    o.space_option = cmd->add_option("--space", o.c.space,
                                     "Action space: looptune, full, layout (full + flatten, pack) "
                                     "or threads (layout + parallel; the default above 1 thread)")
                         ->capture_default_str();
    cmd->add_option("--store", o.c.store_path, "SQLite measurement store shared by the searches");
    cmd->add_option("--limit", o.c.limit, "Only the first N benchmarks of the split (0: all)")
        ->capture_default_str()
        ->check(at_least(0));
    o.benchmarks_option = cmd->add_option(
        "--benchmarks", o.benchmarks,
        "Only these benchmarks (comma-separated names), or 'looptune' for LoopTune's 25 "
        "test benchmarks");
    cmd->add_option("--out", o.c.out_dir, "Output directory (resumed if it holds results.csv)")
        ->required();
    cmd->add_option("--policy", o.policy,
                    "Policy file for the `policy` method (default: the shipped one)");
    cmd->add_option("--untrained", o.untrained,
                    "A second policy file (an untrained network of the same architecture: "
                    "`train --steps 1 --learning-starts 100000` writes one) for the methods "
                    "`untrained` and `untrained-noseeds`: the learning's ablation")
        ->check(CLI::ExistingFile);
    cmd->add_option("--cost-model", o.cost_model,
                    "A cost model (`looptool cost-model`) for the method `policy-ranked`: "
                    "`policy` ranking schedules by it before measuring them (tune --rank model)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--const", o.c.constant_inputs,
                    "Inputs declared constant (comma-separated tensor names, e.g. W): a method "
                    "named X-prepacked (policy-prepacked) runs X with its packs of them done once "
                    "outside the timed calls, as a library reorders constant weights")
        ->delimiter(',');
    cmd->add_flag("--no-plots", o.no_plots, "Skip the PNG plots");
    cmd->add_flag("--final-only", o.c.final_only,
                  "Judge only each method's final schedule, not every state on its way (for "
                  "benchmarks whose early states take seconds a call: LoopTune's batch-32 convs)");
    cmd->add_option("--judge-rounds", o.c.judge_rounds,
                    "After all methods ran on a benchmark, measure their final kernels again in "
                    "this many alternating rounds and report each one's median (1: one "
                    "measurement per method, right after it tuned)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    cmd->add_option("--neighbour-core", o.c.neighbour_core,
                    "Meanwhile copy 64 MB buffers on this core: tune and judge while another "
                    "core streams through the shared L3 (-1: none)")
        ->check(at_least(-1));
    add_max_memory_option(cmd, o.c.max_memory);
    add_threads_option(cmd, o.c.threads);
    cmd->add_flag("--json", o.json, "Machine-readable summary on stdout");
}

// `policy` is `tune`'s default (the guided search, its own 0.5 s budget, not --budget-s);
// `policy-greedy` is `tune --greedy`; `policy-full` is `tune --full-measurements` (every state
// measured with the environment's full protocol). The ablations: `policy-noseeds` is the guided
// search without the seed rules (the policy's rollouts and branches only), `seeds` the seed
// rules alone (the fastest seed, measured in the policy's environment). The policy file is loaded
// when one of them is compared; it rolls out in the environment it was trained for (its step limit
// and loop count, as in `tune`), and a policy of another action space than --space is refused.
// With --untrained, `untrained` and `untrained-noseeds` run `policy` and `policy-noseeds` with
// that file's network: trained against untrained with everything else equal.
void add_policy_methods(Opts &o, const std::string &prefix, const std::string &path) {
    auto policy = std::make_shared<std::optional<looptune::Policy>>();
    // In the `threads` space (the default above one thread) the policy that chooses the
    // parallel loop too.
    const int threads = o.c.space == "threads" ? looptune::resolve_threads(o.c.threads) : 1;
    auto load = [policy, path, threads]() -> const looptune::Policy & {
        if (!*policy)
            policy->emplace(looptune::Policy::load(
                path.empty() ? looptune::default_policy_path(threads) : path));
        return **policy;
    };
    for (const char *suffix : {"", "-greedy", "-full", "-noseeds", "seeds"}) {
        const std::string kind = suffix;
        if (kind == "seeds" && prefix != "policy") continue;
        auto run = [load, kind](looptune::Environment &env, const Program &start) {
            if (kind == "seeds")
                return looptune::best_seed_actions(
                    env, start, looptune::guided_step_limit(*start.comp, load().info().max_steps));
            looptune::GuidedConfig g;
            g.greedy = kind == "-greedy";
            g.bounded_measurements = kind != "-full";
            g.tile_seeds = kind != "-noseeds";
            return looptune::guided_search(load(), env, start, g).actions;
        };
        o.c.extra_methods[kind == "seeds" ? kind : prefix + kind] = {
            run, [load](looptune::EnvConfig e) { return load().env_config(e); }};
    }
}

// `policy-ranked`: `policy` with the cost model ranking what it measures (tune --rank model).
void add_ranked_method(Opts &o) {
    auto model = std::make_shared<looptune::CostModel>(looptune::CostModel::load(o.cost_model));
    auto policy = std::make_shared<std::optional<looptune::Policy>>();
    const std::string path = o.policy.empty() ? looptune::default_policy_path() : o.policy;
    auto load = [policy, path]() -> const looptune::Policy & {
        if (!*policy) policy->emplace(looptune::Policy::load(path));
        return **policy;
    };
    auto run = [load, model](looptune::Environment &env, const Program &start) {
        looptune::GuidedConfig g;
        g.rank = model.get();
        return looptune::guided_search(load(), env, start, g).actions;
    };
    o.c.extra_methods["policy-ranked"] = {
        run, [load](looptune::EnvConfig e) { return load().env_config(e); }};
}

void add_progress(Opts &o, bool tty) {
    o.c.progress = [tty](const std::string &line) {
        if (tty)
            fmt::print(stderr, "\r\033[K{}", line);
        else
            fmt::print(stderr, "{}\n", line);
    };
    o.c.on_failure = [tty](const looptune::CompareRow &r) {
        fmt::print(stderr, "{}error: {} {}: {} (recorded as failed; going on)\n",
                   tty ? "\r\033[K" : "", r.benchmark, r.method, r.error);
    };
}

nlohmann::json summary_json(const Opts &o, const std::vector<looptune::CompareRow> &rows,
                            const std::vector<looptune::MethodSummary> &sums,
                            const nlohmann::json &failed) {
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
                     {"mean_seconds", s.mean_seconds},
                     {"against", s.against},
                     {"beat", s.beat},
                     {"tied", s.tied},
                     {"lost", s.lost}});
    return {{"out", o.c.out_dir}, {"rows", rows.size()}, {"methods", j}, {"failed", failed}};
}

}  // namespace

Run add_compare(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "compare",
        "Compare tuning methods on a dataset split: CSV, Markdown summary and PNG plots");
    auto o = std::make_shared<Opts>();
    add_options(cmd, *o);
    return [o] {
        o->c.split = looptune::parse_split(o->split);
        o->c.plots = !o->no_plots;
        o->c.benchmarks = o->benchmarks == "looptune" ? looptune::Dataset::looptune_test_names()
                                                      : split_list(o->benchmarks);
        if (o->benchmarks_option->count() && o->c.benchmarks.empty())
            throw Error(
                fmt::format("compare: --benchmarks '{}' names no benchmark", o->benchmarks));
        o->c.methods = split_list(o->methods);
        if (o->space_option->count() == 0 && looptune::resolve_threads(o->c.threads) > 1)
            o->c.space = "threads";
        add_policy_methods(*o, "policy", o->policy);
        if (!o->untrained.empty()) add_policy_methods(*o, "untrained", o->untrained);
        if (!o->cost_model.empty()) add_ranked_method(*o);
        const bool tty = ::isatty(2);
        add_progress(*o, tty);
        const auto rows = looptune::run_compare(o->c);
        if (tty) fmt::print(stderr, "\n");
        const auto sums = looptune::summarize(rows, o->c.methods, o->c.against);
        nlohmann::json failed = nlohmann::json::array();
        for (const auto &r : rows)
            if (r.failed())
                failed.push_back(
                    {{"benchmark", r.benchmark}, {"method", r.method}, {"error", r.error}});
        if (o->json)
            print_json(summary_json(*o, rows, sums, failed));
        else
            fmt::print("{}", looptune::format_summary_table(sums, o->c.out_dir, o->c.plots));
        if (!failed.empty())
            fmt::print(stderr, "{} of {} {} failed (the `error` column of results.csv)\n",
                       failed.size(), rows.size(), rows.size() == 1 ? "row" : "rows");
        return failed.empty() ? 0 : 2;  // 2: the run finished, some rows failed
    };
}

}  // namespace looptool::cli
