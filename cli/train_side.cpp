// `looptool` without LibTorch: the commands that need it (train, policy; slurm-train, which
// checks its train arguments with train's own parser) are listed in --help here and run by
// looptool-train, the executable beside this one, which links LibTorch (and MPI)
// and has every command. Exec rather than a plugin: the process, its arguments, exit code and
// MPI rank stay the same, and nothing of LibTorch is mapped into any other command.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace looptool::cli {

namespace {

// The subcommand as --help lists it; it never runs here (main execs looptool-train first).
Run listed(CLI::App &app, const char *name, const char *description) {
    auto *cmd = app.add_subcommand(name, description);
    cmd->allow_extras();
    return [] {
        fmt::print(stderr, "error: this command runs in looptool-train\n");
        return 1;
    };
}

}  // namespace

Run add_train(CLI::App &app) {
    return listed(app, "train",
                  "Train a DQN or Ape-X policy (LibTorch, in process; runs looptool-train)");
}

Run add_policy(CLI::App &app) {
    return listed(app, "policy",
                  "Policy files: convert a LibTorch policy into a flat one (runs looptool-train)");
}

Run add_slurm_train(CLI::App &app) {
    return listed(app, "slurm-train",
                  "Write a requeue-safe sbatch script for `looptool train` into RUN_DIR and submit "
                  "it (runs looptool-train):\n"
                  "  looptool slurm-train [options] --out RUN_DIR -- <train args>");
}

void exec_train_side(int argc, char **argv) {
    if (argc < 2) return;
    const std::string command = argv[1];
    if (command != "train" && command != "policy" && command != "slurm-train") return;
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string(argv[0]);
    dir = dir.substr(0, dir.rfind('/') + 1);
    const std::string train = dir + "looptool-train";
    ::execv(train.c_str(), argv);
    fmt::print(stderr, "error: `looptool {}` runs {}, which could not be started ({})\n", command,
               train, std::strerror(errno));
    std::exit(1);
}

}  // namespace looptool::cli
