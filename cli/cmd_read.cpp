#include <fmt/format.h>

#include "cli/commands.h"
#include "looptool/actions.h"
#include "looptool/error.h"
#include "looptool/interpreter.h"
#include "looptool/text_format.h"

namespace looptool::cli {

Run add_read(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "read", "Load a benchmark, replay an action sequence and verify the final loop tree");
    struct Opts {
        std::string bench, actions, actions_file, space = "full";
        bool skip_illegal = false, json = false, quiet = false;
        double tolerance = 1e-4;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--bench", o->bench, "Benchmark file (ours or loop_tool's format)")->required();
    auto *acts = cmd->add_option("--actions", o->actions, "Comma-separated actions, e.g. split_4,down");
    cmd->add_option("--actions-file", o->actions_file,
                    "CSV of actions: one per line or per field, header optional")
        ->excludes(acts);
    cmd->add_option("--space", o->space, "Action space: looptune or full");
    cmd->add_flag("--skip-illegal", o->skip_illegal,
                  "Skip illegal actions (as LoopTune's reader did) instead of failing");
    cmd->add_option("--tolerance", o->tolerance, "Relative error allowed in verification");
    cmd->add_flag("--quiet", o->quiet, "Print only the final tree and the verification");
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        ActionSpace space = ActionSpace::preset(o->space);
        Program p = load_program_file(o->bench);
        std::vector<Action> actions;
        if (!o->actions_file.empty())
            actions = parse_action_csv(read_file(o->actions_file), o->actions_file);
        else
            actions = parse_action_list(o->actions);

        nlohmann::json steps = nlohmann::json::array();
        if (!o->json && !o->quiet) fmt::print("initial loop tree:\n{}\n", dump(p));
        for (size_t i = 0; i < actions.size(); ++i) {
            Action a = actions[i];
            const char *why = space.index_of(a) < 0 ? "not in the action space" : why_illegal(p, a);
            if (why) {
                if (!o->skip_illegal)
                    throw Error(fmt::format("step {}: illegal action {}: {}", i + 1, action_name(a), why));
                steps.push_back({{"step", i + 1}, {"action", action_name(a)}, {"legal", false}, {"reason", why}});
                if (!o->json) fmt::print("step {}: {} skipped ({})\n\n", i + 1, action_name(a), why);
                continue;
            }
            p = apply(p, a);
            steps.push_back({{"step", i + 1}, {"action", action_name(a)}, {"legal", true}, {"tree", dump(p)}});
            if (!o->json && !o->quiet) fmt::print("step {}: {}\n{}\n", i + 1, action_name(a), dump(p));
        }
        Comparison cmp = verify_schedule(p, 1, o->tolerance);
        if (o->json) {
            nlohmann::json j;
            j["bench"] = o->bench;
            j["steps"] = steps;
            j["final_tree"] = dump(p);
            j["program"] = serialize(p);
            j["verified"] = cmp.ok;
            j["max_rel_error"] = cmp.max_rel_error;
            if (!cmp.ok) j["first_mismatch"] = cmp.first_mismatch;
            print_json(j);
        } else {
            fmt::print("final loop tree:\n{}\n", dump(p));
            if (cmp.ok)
                fmt::print("verified: matches the reference (max relative error {:.2e})\n", cmp.max_rel_error);
            else
                fmt::print("MISMATCH: {} (max relative error {:.2e})\n", cmp.first_mismatch, cmp.max_rel_error);
        }
        return cmp.ok ? 0 : 2;
    };
}

}  // namespace looptool::cli
