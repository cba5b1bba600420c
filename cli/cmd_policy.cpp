// `looptool policy convert IN.pt OUT.policy`: a policy saved by LibTorch (the format `tune` read
// before it ran without LibTorch) as a flat policy file. Runs in looptool-train.
#include <fmt/format.h>

#include "cli/commands.h"
#include "rl/policy_convert.h"

namespace looptool::cli {

struct PolicyOptions {
    std::string in, out;
};

Run add_policy(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "policy", "Policy files: convert a LibTorch policy into a flat one (runs looptool-train)");
    cmd->require_subcommand(1);
    auto o = std::make_shared<PolicyOptions>();
    auto *convert = cmd->add_subcommand(
        "convert", "Write a LibTorch policy file (.pt) as a flat policy file `tune` can read");
    convert->add_option("IN", o->in, "LibTorch policy file (checksum checked)")->required();
    convert->add_option("OUT", o->out, "Flat policy file to write (atomically)")->required();
    return [o] {
        looptune::convert_policy_file(o->in, o->out);
        fmt::print("{}: written from {}\n", o->out, o->in);
        return 0;
    };
}

}  // namespace looptool::cli
