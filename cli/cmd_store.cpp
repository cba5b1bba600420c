// `looptool store stats|merge|check`: inspect a measurement store, merge stores from other
// nodes, check one's integrity.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "env/measurement_store.h"
#include "looptool/error.h"

namespace looptool::cli {

namespace {

nlohmann::json stats_json(const looptune::MeasurementStore::Stats &st) {
    nlohmann::json machines = nlohmann::json::array();
    for (const auto &m : st.per_machine)
        machines.push_back({{"machine", m.machine},
                            {"measurements", m.measurements},
                            {"benchmarks", m.benchmarks},
                            {"best_gflops", m.best_gflops}});
    return {{"path", st.path},
            {"schema_version", st.schema_version},
            {"measurements", st.measurements},
            {"benchmarks", st.benchmarks},
            {"machines", st.machines},
            {"best_gflops", st.best_gflops},
            {"best_benchmark", st.best_benchmark},
            {"per_machine", machines}};
}

void print_stats(const looptune::MeasurementStore::Stats &st) {
    fmt::print("store:        {} (schema {})\n", st.path, st.schema_version);
    fmt::print("measurements: {}\nbenchmarks:   {}\nmachines:     {}\n", st.measurements,
               st.benchmarks, st.machines);
    if (st.measurements > 0)
        fmt::print("best:         {:.2f} GFLOPS ({})\n", st.best_gflops, st.best_benchmark);
    for (const auto &m : st.per_machine)
        fmt::print("  {}: {} measurements, {} benchmarks, best {:.2f} GFLOPS\n", m.machine,
                   m.measurements, m.benchmarks, m.best_gflops);
}

}  // namespace

Run add_store(CLI::App &app) {
    auto *cmd = app.add_subcommand("store", "Inspect or merge persistent measurement stores");
    cmd->require_subcommand(1);
    struct Opts {
        std::string store;
        std::vector<std::string> sources;
        bool json = false;
    };
    auto o = std::make_shared<Opts>();

    auto *stats = cmd->add_subcommand("stats", "What a store holds: rows, benchmarks, machines, best GFLOPS");
    stats->add_option("--store", o->store, "Measurement store (SQLite file)")->required();
    stats->add_flag("--json", o->json, "Machine-readable output");

    auto *merge = cmd->add_subcommand(
        "merge", "Copy every measurement of SRC stores into DEST (keys already in DEST are kept)");
    merge->add_option("--store", o->store, "Destination store (created if missing)")->required();
    merge->add_option("sources", o->sources, "Source stores")->required();
    merge->add_flag("--json", o->json, "Machine-readable output");

    auto *check = cmd->add_subcommand("check", "Full integrity check of a store (reads every page)");
    check->add_option("--store", o->store, "Measurement store (SQLite file)")->required();
    check->add_flag("--json", o->json, "Machine-readable output");

    return [o, stats, merge, check] {
        if (check->parsed()) {
            auto problems = looptune::MeasurementStore::open(o->store, /*create=*/false)->check();
            if (o->json)
                print_json({{"path", o->store}, {"ok", problems.empty()}, {"problems", problems}});
            else if (problems.empty())
                fmt::print("{}: ok\n", o->store);
            else
                fmt::print("{}: {} problem(s):\n{}\n", o->store, problems.size(),
                           fmt::join(problems, "\n"));
            return problems.empty() ? 0 : 2;
        }
        if (stats->parsed()) {
            // Reading must not create a store where there was none.
            auto st = looptune::MeasurementStore::open(o->store, /*create=*/false)->stats();
            if (o->json)
                print_json(stats_json(st));
            else
                print_stats(st);
            return 0;
        }
        LT_CHECK(merge->parsed(), "store: no subcommand parsed");
        // Check every source first, so a typo does not leave a new empty destination behind.
        for (const auto &src : o->sources) looptune::MeasurementStore::open(src, /*create=*/false);
        auto dest = looptune::MeasurementStore::open(o->store);
        nlohmann::json merged = nlohmann::json::array();
        for (const auto &src : o->sources) {
            int64_t added = dest->merge_from(src);
            merged.push_back({{"source", src}, {"added", added}});
            if (!o->json) fmt::print("{}: {} measurements added\n", src, added);
        }
        auto st = dest->stats();
        if (o->json)
            print_json({{"merged", merged}, {"store", stats_json(st)}});
        else
            print_stats(st);
        return 0;
    };
}

}  // namespace looptool::cli
