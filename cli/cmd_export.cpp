#include <fmt/format.h>

#include "cli/commands.h"
#include "env/schedule_match.h"
#include "looptool/actions/actions.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/export.h"
#include "tune/policy.h"
#include "util/threads.h"

namespace looptool::cli {

struct ExportCliOptions {
    std::string bench, actions, actions_file, schedule, policy, out, cpu, name;
    bool tune = false, naive = false, json = false;
    int threads = 0;  // add_threads_option sets the default
};

namespace {

/// The schedule to export: the benchmark's (or its naive nest) with --actions applied, a
/// --schedule program of the same computation, or the policy's best (--tune); `applied` gets
/// the actions' names.
Program export_schedule(const ExportCliOptions &o, std::vector<std::string> &applied) {
    const Program bench = load_program_file(o.bench);
    Program p = o.naive ? Program::naive(bench.comp) : bench;
    if (!o.actions.empty() || !o.actions_file.empty()) {
        const std::vector<Action> actions =
            o.actions_file.empty() ? parse_action_list(o.actions)
                                   : parse_action_csv(read_file(o.actions_file), o.actions_file);
        for (Action a : actions) {
            p = apply(p, a);
            applied.push_back(action_name(a));
        }
    } else if (!o.schedule.empty()) {
        p = load_program_file(o.schedule);
        looptune::check_schedule_of(bench, o.bench, p, o.schedule);
    } else if (o.tune) {
        const std::string path =
            o.policy.empty() ? looptune::default_policy_path(o.threads) : o.policy;
        looptune::Policy policy = looptune::Policy::load(path);
        looptune::EnvConfig cfg;
        cfg.threads = o.threads;  // with N > 1 the seeds include parallel ones
        looptune::Environment env(policy.env_config(cfg));
        looptune::PolicyTuneResult r =
            looptune::tune_with_policy(policy, env, Program::naive(bench.comp));
        p = r.best;
        applied = action_names(r.best_actions);
    }
    return p;
}

}  // namespace

Run add_export(CLI::App &app) {
    auto *cmd = app.add_subcommand("export",
                                   "Write a schedule's kernel as NAME.o, NAME.h, NAME.ll, NAME.s "
                                   "and NAME.program for use outside the tool");
    auto o = std::make_shared<ExportCliOptions>();
    cmd->add_option("--bench", o->bench, "Benchmark file (ours or loop_tool's format)")->required();
    auto *acts = cmd->add_option("--actions", o->actions,
                                 "Comma-separated actions applied to the benchmark's schedule");
    auto *file =
        cmd->add_option("--actions-file", o->actions_file, "CSV of actions (as `read` takes)");
    auto *sched =
        cmd->add_option("--schedule", o->schedule,
                        "A program file (ours) of the same computation whose schedule to export");
    auto *tune = cmd->add_flag("--tune", o->tune,
                               "Tune the benchmark with a policy and export its best schedule");
    acts->excludes(file, sched, tune);
    file->excludes(sched, tune);
    sched->excludes(tune);
    cmd->add_option("--policy", o->policy,
                    "Policy for --tune (default: the shipped policies/default.policy)")
        ->needs(tune);
    cmd->add_flag("--naive", o->naive,
                  "Start from the naive nest instead of the schedule stored in the benchmark");
    cmd->add_option("--out", o->out, "Output directory (created if missing)")->required();
    cmd->add_option(
        "--cpu", o->cpu,
        "LLVM CPU to compile for, e.g. znver4, skylake-avx512, x86-64-v3 (default: this host)");
    cmd->add_option("--name", o->name,
                    "C function and file name (default: the computation's name)");
    add_threads_option(cmd, o->threads);
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        o->threads = looptune::resolve_threads(o->threads);
        std::vector<std::string> applied;
        const Program p = export_schedule(*o, applied);
        ExportOptions opts;
        opts.cpu = o->cpu;
        opts.name = o->name;
        opts.lower.threads = o->threads;
        const ExportedKernel k = export_kernel(p, opts);
        const std::vector<std::string> files = write_exported_kernel(k, o->out);
        if (o->json) {
            print_json({{"benchmark", o->bench},
                        {"function", k.name},
                        {"cpu", k.cpu},
                        {"triple", k.triple},
                        {"threads", k.threads},
                        {"actions", applied},
                        {"files", files},
                        {"object_bytes", k.object.size()}});
        } else {
            fmt::print("{}", dump(p, false));
            fmt::print(
                "exported {} for {} ({}){}:\n", k.name, k.cpu, k.triple,
                k.threads > 1 ? fmt::format(", parallel loops on {} threads", k.threads) : "");
            for (const auto &f : files) fmt::print("  {}\n", f);
        }
        return 0;
    };
}

}  // namespace looptool::cli
