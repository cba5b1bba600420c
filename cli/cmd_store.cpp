// `looptool store stats|merge|check`: inspect a measurement store, merge stores from other
// nodes, check one's integrity.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>

#include "cli/commands.h"
#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"

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
            {"invalid_rows", st.invalid},
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
    if (st.invalid > 0)
        fmt::print(
            "invalid:      {} rows with invalid values, left out above (`looptool store check`)\n",
            st.invalid);
}

struct StoreOptions {
    std::string store;
    std::vector<std::string> sources;
    bool json = false;
};

int run_store_check(const StoreOptions &o) {
    // Read-only: checking someone's database must not change it (not even to WAL).
    auto problems = looptune::MeasurementStore::open_read_only(o.store)->check();
    if (o.json)
        print_json({{"path", o.store}, {"ok", problems.empty()}, {"problems", problems}});
    else if (problems.empty())
        fmt::print("{}: ok\n", o.store);
    else
        fmt::print("{}: {} problem(s):\n{}\n", o.store, problems.size(), fmt::join(problems, "\n"));
    return problems.empty() ? 0 : 2;
}

int run_store_stats(const StoreOptions &o) {
    // Read-only: no new file, no journal-mode switch, nothing written.
    auto st = looptune::MeasurementStore::open_read_only(o.store)->stats();
    if (o.json)
        print_json(stats_json(st));
    else
        print_stats(st);
    return 0;
}

int run_store_merge(const StoreOptions &o) {
    // Check every source first, so a typo does not leave a new empty destination behind.
    for (const auto &src : o.sources) looptune::MeasurementStore::open_read_only(src);
    // A new destination is written under a temporary name and renamed once every source is
    // in: damage deep in a source (found only while copying) leaves no destination at all.
    const bool fresh = !std::filesystem::exists(o.store);
    const std::string target = fresh ? fmt::format("{}.tmp.{}", o.store, ::getpid()) : o.store;
    auto remove_target = [&] {
        for (const char *suffix : {"", "-wal", "-shm", "-journal"})
            std::filesystem::remove(target + suffix);
    };
    nlohmann::json merged = nlohmann::json::array();
    looptune::MeasurementStore::Stats st;
    try {
        auto dest = looptune::MeasurementStore::open(target);
        for (const auto &src : o.sources) {
            int64_t skipped = 0;
            int64_t added = dest->merge_from(src, &skipped);
            merged.push_back({{"source", src}, {"added", added}, {"skipped_invalid", skipped}});
            if (!o.json)
                fmt::print(
                    "{}: {} measurements added{}\n", src, added,
                    skipped ? fmt::format(", {} rows with invalid values skipped", skipped) : "");
        }
        st = dest->stats();
        dest.reset();  // closing checkpoints the WAL into the file before the rename
        if (fresh) std::filesystem::rename(target, o.store);
    } catch (...) {
        if (fresh) remove_target();
        throw;
    }
    st.path = o.store;
    if (o.json)
        print_json({{"merged", merged}, {"store", stats_json(st)}});
    else
        print_stats(st);
    return 0;
}

}  // namespace

Run add_store(CLI::App &app) {
    auto *cmd = app.add_subcommand("store", "Inspect or merge persistent measurement stores");
    cmd->require_subcommand(1);
    auto o = std::make_shared<StoreOptions>();

    auto *stats =
        cmd->add_subcommand("stats", "What a store holds: rows, benchmarks, machines, best GFLOPS");
    stats->add_option("--store", o->store, "Measurement store (SQLite file)")->required();
    stats->add_flag("--json", o->json, "Machine-readable output");

    auto *merge = cmd->add_subcommand(
        "merge", "Copy every measurement of SRC stores into DEST (keys already in DEST are kept)");
    merge->add_option("--store", o->store, "Destination store (created if missing)")->required();
    merge->add_option("sources", o->sources, "Source stores")->required();
    merge->add_flag("--json", o->json, "Machine-readable output");

    auto *check =
        cmd->add_subcommand("check", "Full integrity check of a store (reads every page)");
    check->add_option("--store", o->store, "Measurement store (SQLite file)")->required();
    check->add_flag("--json", o->json, "Machine-readable output");

    return [o, stats, merge, check] {
        if (check->parsed()) return run_store_check(*o);
        if (stats->parsed()) return run_store_stats(*o);
        LT_CHECK(merge->parsed(), "store: no subcommand parsed");
        return run_store_merge(*o);
    };
}

}  // namespace looptool::cli
