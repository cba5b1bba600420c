// The benchmark-sized random-schedule check (docs/reliability.md): by default 10,000 random
// legal action sequences on odd shapes, each verified by the scheduled interpreter and by its
// JIT kernel against the reference. Exits 0 when nothing differed, 2 when something did
// (the first failures are printed with shape, actions and tree), 1 on bad options.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "looptool/check/schedule_check.h"
#include "looptool/ir/error.h"

int main(int argc, char **argv) {
    CLI::App app{"Random legal schedules on odd shapes, checked by interpreter and JIT"};
    looptool::ScheduleCheckOptions o;
    bool json = false;
    app.add_option("--sequences", o.sequences, "Random action sequences to check")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--seed", o.seed, "Seed for shapes, actions and inputs")->capture_default_str();
    app.add_option("--max-actions", o.max_actions, "Longest sequence")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--max-volume", o.max_volume, "Largest iteration count of a shape")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--start", o.start, "First sequence to run (earlier ones are only drawn)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--space", o.space,
                   "Actions drawn from: full, looptune, or layout (full + pack, flatten)")
        ->check(CLI::IsMember({"full", "looptune", "layout", "threads"}))
        ->capture_default_str();
    app.add_option("--programs", o.programs,
                   "Programs drawn: contractions (matmul, conv2d, add), reductions (max, min, sum, "
                   "softmax, layernorm) or all")
        ->check(CLI::IsMember({"contractions", "reductions", "all"}))
        ->capture_default_str();
    app.add_flag("--progress", o.progress, "Print each sequence to stderr before running it");
    app.add_flag("--json", json, "Machine-readable output");
    CLI11_PARSE(app, argc, argv);
    try {
        auto jit = looptool::Jit::create();
        looptool::ScheduleCheckResult r = looptool::check_random_schedules(o, *jit);
        if (json) {
            fmt::print("{}\n", nlohmann::json{{"sequences", r.sequences},
                                              {"actions", r.actions},
                                              {"distinct_shapes", r.distinct_shapes},
                                              {"interpreter_mismatches", r.interpreter_mismatches},
                                              {"jit_mismatches", r.jit_mismatches},
                                              {"errors", r.errors},
                                              {"seconds", r.seconds},
                                              {"seed", o.seed},
                                              {"failures", r.failures}}
                                   .dump(2));
        } else {
            for (const auto &f : r.failures) fmt::print("FAILED: {}\n", f);
            fmt::print(
                "{} sequences ({} actions, {} distinct shapes, seed {}): {} interpreter "
                "mismatches, {} JIT mismatches, {} errors, {:.1f} s\n",
                r.sequences, r.actions, r.distinct_shapes, o.seed, r.interpreter_mismatches,
                r.jit_mismatches, r.errors, r.seconds);
        }
        return r.ok() ? 0 : 2;
    } catch (const looptool::Error &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
}
