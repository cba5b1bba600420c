#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "env/environment.h"
#include "looptool/check/verify.h"
#include "looptool/ir/error.h"
#include "util/openblas_restart.h"
#include "util/threads.h"

namespace looptool::cli {
void print_json(const nlohmann::json &j) { std::cout << j.dump(2) << std::endl; }

std::vector<std::string> split_list(const std::string &text) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : text + ",") {
        if (ch == ',') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else if (ch != ' ') {
            cur += ch;
        }
    }
    return out;
}

void add_max_memory_option(CLI::App *cmd, int64_t &bytes) {
    cmd->add_option("--max-memory", bytes,
                    "Refuse a benchmark whose buffers and reference would need more memory than "
                    "this (bytes, or with a unit: 512MB, 8GB, 8GiB); default: MemAvailable")
        ->transform(CLI::AsSizeValue(true))
        // Run before the unit conversion, which clamps or wraps a number beyond 64 bits.
        ->transform(CLI::Validator(
            [](std::string &s) -> std::string {
                const size_t digits = s.find_first_not_of("0123456789");
                if (s.substr(0, digits).size() > 18)  // 10^18 bytes: no machine has them
                    return fmt::format("{} is not a size below 2^63 bytes", s);
                return {};
            },
            ""))
        ->check(CLI::Validator(
            [](std::string &s) -> std::string {
                int64_t v = 0;
                const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
                if (ec != std::errc() || end != s.data() + s.size() || v <= 0)
                    return "not a size in bytes between 1 and 2^63 - 1";
                return {};
            },
            ""));
}

void add_threads_option(CLI::App *cmd, int &threads, const std::string &more) {
    threads = looptune::default_threads();
    cmd->add_option("--threads", threads,
                    "Threads a parallel loop runs on (default and 0: every core the process may "
                    "use; 1: single-thread kernels); the roof is this many times the single-core "
                    "peak" +
                        more)
        ->capture_default_str()
        ->check(CLI::Range(0, 1024));
}

void add_env_options(CLI::App *cmd, looptune::EnvConfig &cfg) {
    cfg.action_space = "full";
    cmd->add_option(
           "--space", cfg.action_space,
           "Action space: looptune, full, layout (full + flatten, pack) or threads (layout + "
           "parallel)")
        ->capture_default_str();
    cmd->add_option("--store", cfg.store_path,
                    "SQLite measurement store, shared across runs (created if missing)");
    add_threads_option(cmd, cfg.threads);
    cmd->add_flag("--verify", cfg.verify,
                  "Check every newly compiled kernel against the reference interpreter");
    add_max_memory_option(cmd, cfg.max_memory);
}

void add_tolerance_option(CLI::App *cmd, double &factor) {
    cmd->add_option("--tolerance", factor,
                    "Factor on the forward error bound in verification (docs/measurement.md): "
                    "finite, >= 0; 1 is the bound itself")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string &s) -> std::string {
                try {
                    check_tolerance(std::stod(s), "--tolerance");
                } catch (const Error &e) {
                    return e.what();
                } catch (const std::exception &) {
                    return "--tolerance: not a number: " + s;
                }
                return {};
            },
            "FACTOR>=0"));
}
}  // namespace looptool::cli

// LibTorch links OpenBLAS: in looptool-train `train` runs LibTorch's GEMMs through it (the GNN
// encoder, batched policy inference), which with AVX2 kernels ran at half the speed, so those
// subcommands restart once for it (util/openblas_restart.h). `looptool` links no OpenBLAS:
// `compare` loads it with dlopen after setting these variables (baselines/openblas.cpp).
static void restart_for_openblas(int argc, char **argv) {
    for (const char *c : {"compare", "train", "tune"})  // the subcommand comes first
        if (argc > 1 && std::string(argv[1]) == c) looptune::restart_for_openblas(argv);
}

int main(int argc, char **argv) {
    using namespace looptool::cli;
#ifndef LOOPTOOL_TRAIN_SIDE
    exec_train_side(argc, argv);  // train, policy, slurm-train: in looptool-train
#endif
    restart_for_openblas(argc, argv);
    CLI::App app{"looptool: loop-nest auto-tuning with a JIT-executing loop tool"};
    app.set_version_flag("--version", std::string("looptool ") + LOOPTUNE_VERSION);
    app.require_subcommand(1);
    std::map<std::string, Run> runs;
    for (const Command &c : kCommands) runs[c.name] = c.add(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help
        // One line, and exit 1 like every other bad input (CLI11's own codes are 101..115).
        fmt::print(stderr, "error: {} (run with --help for more information)\n", e.what());
        return 1;
    }
    try {
        for (auto *sub : app.get_subcommands()) {
            auto run = runs.find(sub->get_name());
            LT_CHECK(run != runs.end(),
                     "subcommand " + sub->get_name() + " is not in LOOPTOOL_COMMANDS");
            return run->second();
        }
    } catch (const looptool::Error &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    } catch (const looptool::InternalError &e) {
        fmt::print(stderr, "{}\n", e.what());
        return 3;
    } catch (const std::exception &e) {
        // Another library's exception (LibTorch's carry a backtrace after the first line).
        const std::string what = e.what();
        fmt::print(stderr, "error: {}\n", what.substr(0, what.find('\n')));
        return 1;
    }
    return 0;
}
