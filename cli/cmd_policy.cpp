// `looptool policy convert IN.pt OUT.policy`: a policy saved by LibTorch (the format `tune` read
// before it ran without LibTorch) as a flat policy file. `looptool policy extend IN --space S
// --out OUT`: a flat policy widened to a larger action space (policy/policy_extend.h). Runs in
// looptool-train.
#include <fmt/format.h>

#include "cli/commands.h"
#include "policy/policy_extend.h"
#include "policy/policy_file.h"
#include "rl/policy_convert.h"

namespace looptool::cli {

struct PolicyOptions {
    std::string in, out, space = "threads";
};

Run add_policy(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "policy",
        "Policy files: convert a LibTorch policy into a flat one, or widen one to a larger "
        "action space (runs looptool-train)");
    cmd->require_subcommand(1);
    auto o = std::make_shared<PolicyOptions>();
    auto *convert = cmd->add_subcommand(
        "convert", "Write a LibTorch policy file (.pt) as a flat policy file `tune` can read");
    convert->add_option("IN", o->in, "LibTorch policy file (checksum checked)")->required();
    convert->add_option("OUT", o->out, "Flat policy file to write (atomically)")->required();
    auto *extend = cmd->add_subcommand(
        "extend",
        "Widen a flat policy to a larger action space: one more output per new action, whose "
        "Q-value starts at the mean of the others; the old actions' Q-values are unchanged");
    extend->add_option("IN", o->in, "Flat policy file")->required()->check(CLI::ExistingFile);
    extend->add_option("--space", o->space, "Action space to widen it to (holding its own)")
        ->capture_default_str();
    extend->add_option("--out", o->out, "Flat policy file to write (atomically)")->required();
    return [o, convert] {
        if (convert->parsed()) {
            looptune::convert_policy_file(o->in, o->out);
            fmt::print("{}: written from {}\n", o->out, o->in);
            return 0;
        }
        looptune::extend_policy_file(o->in, o->space, o->out);
        fmt::print("{}: {} widened to action space {}\n", o->out, o->in, o->space);
        return 0;
    };
}

}  // namespace looptool::cli
