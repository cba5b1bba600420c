#include <fmt/format.h>

#include "env/dataset.h"
#include "search/search.h"
#include "search/trace.h"

#include <filesystem>
#include <random>
#include <set>
#include "cli/commands.h"
#include "cli/each_benchmark.h"
#include "cli/validators.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/ir/error.h"

namespace looptool::cli {

struct SearchOptions {
    std::vector<std::string> benches;
    std::string algo = "greedy2", dataset, split = "train", trace;
    int limit = 0, sample = 0;
    looptune::SearchConfig search;
    bool json = false, naive = false;
    looptune::EnvConfig env;
};

namespace {

void add_search_options(CLI::App *cmd, SearchOptions &o) {
    std::string algos;
    for (const auto &a : looptune::search_table())
        algos += fmt::format("\n  {}: {}", a.name, a.help);
    auto *bench = cmd->add_option("--bench", o.benches, "Benchmark file (repeatable)");
    cmd->add_option("--dataset", o.dataset, "Search every benchmark of a dataset split instead")
        ->excludes(bench);
    cmd->add_option("--split", o.split, "With --dataset: train, test or all")
        ->capture_default_str();
    cmd->add_option("--limit", o.limit, "With --dataset: only the first N benchmarks (0: all)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--sample", o.sample,
                    "With --dataset: N benchmarks of the split drawn at random (seeded by --seed)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option(
        "--trace", o.trace,
        "Append each benchmark's best sequence to this CSV (warm starts for `train --warmstart`); "
        "benchmarks already traced with this algorithm are skipped");
    cmd->add_option("--algo", o.algo, "Search algorithm: " + algos)
        ->check(CLI::IsMember(looptune::search_algorithms()))
        ->capture_default_str();
    cmd->add_option("--budget-s", o.search.budget_s, "Wall-clock budget in seconds")
        ->capture_default_str()
        ->check(positive());
    cmd->add_option("--steps", o.search.max_steps,
                    "Actions per sequence (0: what the algorithm needs: the tile template's "
                    "whole sequences, 10 for the others)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--seed", o.search.seed, "Random seed (random, genetic)")
        ->capture_default_str()
        ->check(unsigned_int());
    cmd->add_option("--population", o.search.population, "genetic: population size")
        ->capture_default_str()
        ->check(at_least(2));
    cmd->add_option("--generations", o.search.generations, "genetic: generations at most")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--crossover", o.search.crossover_rate, "genetic: crossover rate")
        ->capture_default_str()
        ->check(unit_interval());
    cmd->add_option("--mutation", o.search.mutation_rate, "genetic: per-gene mutation rate")
        ->capture_default_str()
        ->check(unit_interval());
    add_env_options(cmd, o.env);
    cmd->add_flag("--json", o.json, "Machine-readable output");
}

/// The benchmarks to search: --bench files, or a dataset split (sampled, limited).
std::vector<std::string> search_benchmarks(const SearchOptions &o) {
    std::vector<std::string> benches = o.benches;
    if (!o.dataset.empty()) {
        auto files = looptune::Dataset::load(o.dataset).files(looptune::parse_split(o.split));
        if (o.sample > 0 && size_t(o.sample) < files.size()) {
            std::mt19937_64 rng(o.search.seed);
            for (size_t i = files.size() - 1; i > 0; --i)
                std::swap(files[i], files[std::uniform_int_distribution<size_t>(0, i)(rng)]);
            files.resize(size_t(o.sample));
        }
        if (o.limit > 0 && size_t(o.limit) < files.size()) files.resize(size_t(o.limit));
        benches.insert(benches.end(), files.begin(), files.end());
    }
    if (benches.empty()) throw Error("search: give --bench FILE or --dataset DIR");
    return benches;
}

/// Searches one benchmark, verifies its best schedule, records its trace and prints or
/// collects the result.
void search_one(looptune::Environment &env, const SearchOptions &o,
                const std::vector<std::string> &benches, size_t i, nlohmann::json &results) {
    Program start = tuning_start(load_program_file(benches[i]));
    env.reset(start);
    looptune::SearchResult r = looptune::run_search(o.algo, env, start, o.search);
    Comparison cmp = env.verify(r.best);
    if (!cmp.ok)
        throw Error(fmt::format("the best schedule failed verification ({} of {}): {}",
                                cmp.mismatches, cmp.coverage(), cmp.first_mismatch));
    if (!o.trace.empty())
        looptune::append_traces(o.trace,
                                {{benches[i], r.algo, r.best_gflops, r.base_gflops, r.actions}});
    const double peak = env.max_gflops();
    const std::vector<std::string> names = action_names(r.actions);
    if (o.json) {
        nlohmann::json curve = nlohmann::json::array();
        for (const auto &p : r.curve)
            curve.push_back({{"seconds", p.seconds},
                             {"best_gflops", p.best_gflops},
                             {"schedules", p.schedules}});
        results.push_back({{"benchmark", start.comp->name},
                           {"algo", r.algo},
                           {"gflops", r.best_gflops},
                           {"base_gflops", r.base_gflops},
                           {"speedup", r.best_gflops / r.base_gflops},
                           {"fraction_of_peak", r.best_gflops / peak},
                           {"actions", names},
                           {"schedules_measured", r.schedules_measured},
                           {"seconds", r.seconds},
                           {"budget_exhausted", r.budget_exhausted},
                           {"verified", cmp.ok},
                           {"program", serialize(r.best)},
                           {"curve", curve}});
    } else if (benches.size() > 1) {
        fmt::print("[{}/{}] {} {}: {:.2f} GFLOPS, {:.2f}x, {} schedules in {:.1f} s: {}\n", i + 1,
                   benches.size(), r.algo, start.comp->name, r.best_gflops,
                   r.best_gflops / r.base_gflops, r.schedules_measured, r.seconds,
                   fmt::join(names, ","));
        std::fflush(stdout);
    } else {
        fmt::print(
            "{} on {}: {:.2f} GFLOPS ({:.1f}% of peak), {:.2f}x the naive nest ({:.2f} "
            "GFLOPS)\n",
            r.algo, start.comp->name, r.best_gflops, 100 * r.best_gflops / peak,
            r.best_gflops / r.base_gflops, r.base_gflops);
        fmt::print("actions: {}\n", fmt::join(names, ","));
        fmt::print("{} distinct schedules measured in {:.2f} s{}\n", r.schedules_measured,
                   r.seconds, r.budget_exhausted ? " (budget exhausted)" : "");
        fmt::print("{}verified against the reference\n", dump(r.best));
    }
}

int run_search(const SearchOptions &o) {
    const std::vector<std::string> benches = search_benchmarks(o);
    std::set<std::string> traced;
    if (!o.trace.empty() && std::filesystem::exists(o.trace))
        for (const auto &t : looptune::load_traces(o.trace))
            if (t.algo == o.algo) traced.insert(t.benchmark);
    nlohmann::json results = nlohmann::json::array();
    looptune::EnvConfig cfg = o.env;
    cfg.reference.progress = true;
    looptune::Environment env(cfg);
    const int failed = each_benchmark(
        benches, o.json, results, {{"algo", o.algo}},
        [&](size_t i) {
            if (!traced.count(benches[i])) search_one(env, o, benches, i, results);
        },
        [&](size_t i, const std::string &why) {
            return fmt::format("[{}/{}] {} FAILED: {}", i + 1, benches.size(), o.algo, why);
        });
    if (o.json) print_json(results.size() == 1 ? results[0] : results);
    return finish_benchmarks(failed, benches.size());
}

}  // namespace

Run add_search(CLI::App &app) {
    auto *cmd = app.add_subcommand("search", "Tune one benchmark with a search baseline");
    auto o = std::make_shared<SearchOptions>();
    add_search_options(cmd, *o);
    return [o] { return run_search(*o); };
}

}  // namespace looptool::cli
