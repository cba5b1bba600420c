#include <fmt/format.h>

#include "agents/search.h"
#include "cli/commands.h"
#include "looptool/error.h"
#include "looptool/text_format.h"

namespace looptool::cli {

Run add_search(CLI::App &app) {
    auto *cmd = app.add_subcommand("search", "Tune one benchmark with a search baseline");
    struct Opts {
        std::string bench, algo = "greedy2", space = "full", store;
        looptune::SearchConfig search;
        bool verify = false, json = false, naive = false;
    };
    auto o = std::make_shared<Opts>();
    std::string algos;
    for (const auto &a : looptune::search_algorithms()) algos += (algos.empty() ? "" : ", ") + a;
    cmd->add_option("--bench", o->bench, "Benchmark file")->required();
    cmd->add_option("--algo", o->algo, "Search algorithm: " + algos)
        ->check(CLI::IsMember(looptune::search_algorithms()))
        ->capture_default_str();
    cmd->add_option("--budget-s", o->search.budget_s, "Wall-clock budget in seconds")->capture_default_str();
    cmd->add_option("--steps", o->search.max_steps, "Actions per sequence")->capture_default_str();
    cmd->add_option("--seed", o->search.seed, "Random seed (random, genetic)")->capture_default_str();
    cmd->add_option("--population", o->search.population, "genetic: population size")->capture_default_str();
    cmd->add_option("--generations", o->search.generations, "genetic: generations at most")->capture_default_str();
    cmd->add_option("--crossover", o->search.crossover_rate, "genetic: crossover rate")->capture_default_str();
    cmd->add_option("--mutation", o->search.mutation_rate, "genetic: per-gene mutation rate")->capture_default_str();
    cmd->add_option("--space", o->space, "Action space: looptune or full")->capture_default_str();
    cmd->add_option("--store", o->store, "SQLite measurement store shared across runs");
    cmd->add_flag("--verify", o->verify,
                  "Check every newly compiled kernel against the reference interpreter");
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        looptune::EnvConfig cfg;
        cfg.action_space = o->space;
        cfg.store_path = o->store;
        cfg.verify = o->verify;
        looptune::Environment env(cfg);
        Program start = Program::naive(load_program_file(o->bench).comp);
        env.reset(start);
        looptune::SearchResult r = looptune::run_search(o->algo, env, start, o->search);
        Comparison cmp = env.verify(r.best);
        if (!cmp.ok) throw Error(fmt::format("the best schedule failed verification: {}", cmp.first_mismatch));
        const double peak = env.max_gflops();
        std::vector<std::string> names;
        for (Action a : r.actions) names.push_back(action_name(a));
        if (o->json) {
            nlohmann::json curve = nlohmann::json::array();
            for (const auto &p : r.curve)
                curve.push_back({{"seconds", p.seconds}, {"best_gflops", p.best_gflops}, {"schedules", p.schedules}});
            print_json({{"benchmark", start.comp->name}, {"algo", r.algo}, {"gflops", r.best_gflops},
                        {"base_gflops", r.base_gflops}, {"speedup", r.best_gflops / r.base_gflops},
                        {"fraction_of_peak", r.best_gflops / peak}, {"actions", names},
                        {"schedules_measured", r.schedules_measured}, {"seconds", r.seconds},
                        {"budget_exhausted", r.budget_exhausted}, {"verified", cmp.ok},
                        {"program", serialize(r.best)}, {"curve", curve}});
        } else {
            fmt::print("{} on {}: {:.2f} GFLOPS ({:.1f}% of peak), {:.2f}x the naive nest ({:.2f} GFLOPS)\n",
                       r.algo, start.comp->name, r.best_gflops, 100 * r.best_gflops / peak,
                       r.best_gflops / r.base_gflops, r.base_gflops);
            fmt::print("actions: {}\n", fmt::join(names, ","));
            fmt::print("{} distinct schedules measured in {:.2f} s{}\n", r.schedules_measured, r.seconds,
                       r.budget_exhausted ? " (budget exhausted)" : "");
            fmt::print("{}verified against the reference\n", dump(r.best));
        }
        return 0;
    };
}

}  // namespace looptool::cli
