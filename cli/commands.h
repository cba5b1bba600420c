// Subcommand registration for the `looptool` CLI. Each command adds itself to the app and
// returns the function that runs it once parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace looptool::cli {

using Run = std::function<int()>;

Run add_generate(CLI::App &app);
Run add_read(CLI::App &app);
Run add_store(CLI::App &app);
Run add_peak(CLI::App &app);
Run add_search(CLI::App &app);
Run add_validate(CLI::App &app);
Run add_compare(CLI::App &app);
Run add_train(CLI::App &app);
Run add_tune(CLI::App &app);
Run add_slurm_train(CLI::App &app);
Run add_export(CLI::App &app);

/// Splits "a, b,c" at commas, dropping spaces and empty items.
std::vector<std::string> split_list(const std::string &text);

/// Prints `j` as one JSON document on stdout.
void print_json(const nlohmann::json &j);

}  // namespace looptool::cli
