// Subcommand registration for the `looptool` CLI. Each command adds itself to the app and
// returns the function that runs it once parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace looptune {
struct EnvConfig;
}

namespace looptool::cli {

using Run = std::function<int()>;

/// The one list of subcommands: X(name, add function), in `looptool --help` order. Each
/// add function lives in cmd_<name>.cpp and adds the subcommand `name` to the app.
#define LOOPTOOL_COMMANDS(X)          \
    X("generate", add_generate)       \
    X("read", add_read)               \
    X("store", add_store)             \
    X("peak", add_peak)               \
    X("search", add_search)           \
    X("validate", add_validate)       \
    X("compare", add_compare)         \
    X("train", add_train)             \
    X("tune", add_tune)               \
    X("slurm-train", add_slurm_train) \
    X("export", add_export)           \
    X("policy", add_policy)           \
    X("lib", add_lib)                 \
    X("cost-model", add_cost_model)

#define LOOPTOOL_COMMAND_DECLARE(name, add) Run add(CLI::App &app);
LOOPTOOL_COMMANDS(LOOPTOOL_COMMAND_DECLARE)
#undef LOOPTOOL_COMMAND_DECLARE

struct Command {
    const char *name;
    Run (*add)(CLI::App &app);
};

inline constexpr Command kCommands[] = {
#define LOOPTOOL_COMMAND_ENTRY(name, add) {name, &add},
    LOOPTOOL_COMMANDS(LOOPTOOL_COMMAND_ENTRY)
#undef LOOPTOOL_COMMAND_ENTRY
};

/// In `looptool`: for a command that needs LibTorch (train, policy, slurm-train), replaces the
/// process with looptool-train beside it, same arguments (cli/train_side.cpp); returns for any
/// other.
void exec_train_side(int argc, char **argv);

/// Splits "a, b,c" at commas, dropping spaces and empty items.
std::vector<std::string> split_list(const std::string &text);

/// Adds --max-memory (a size in bytes, units accepted) filling EnvConfig::max_memory.
void add_max_memory_option(CLI::App *cmd, int64_t &bytes);

/// The environment options of the commands that step and measure (read, search, validate):
/// --space (default full), --store, --verify and --max-memory, written into `cfg`.
void add_env_options(CLI::App *cmd, looptune::EnvConfig &cfg);
/// Adds --threads filling `threads`, first set to default_threads() (util/threads.h); 0 also
/// stands for it. `more` ends the help text.
void add_threads_option(CLI::App *cmd, int &threads, const std::string &more = "");

/// Adds --tolerance: the factor on the verification's error bound, checked finite and >= 0.
void add_tolerance_option(CLI::App *cmd, double &factor);

/// Prints `j` as one JSON document on stdout.
void print_json(const nlohmann::json &j);

}  // namespace looptool::cli
