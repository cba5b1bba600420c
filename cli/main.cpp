#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "looptool/error.h"

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
}  // namespace looptool::cli

// LibTorch links OpenBLAS, so it is loaded (and reads OPENBLAS_CORETYPE, set to Haswell on
// some machines) before main() runs. `compare` measures OpenBLAS with its AVX-512 kernels on
// one thread: it restarts itself once with that environment.
static void restart_for_openblas(int argc, char **argv) {
    bool compare = false;
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "compare") compare = true;
    const char *core = std::getenv("OPENBLAS_CORETYPE");
    const char *threads = std::getenv("OPENBLAS_NUM_THREADS");
    if (!compare || std::getenv("LOOPTUNE_NO_RESTART") ||
        (core && std::string(core) == "SkylakeX" && threads && std::string(threads) == "1"))
        return;
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("LOOPTUNE_NO_RESTART", "1", 1);  // never loop
    execv("/proc/self/exe", argv);
    // exec failed: carry on; compare then reports the core type it found.
}

int main(int argc, char **argv) {
    using namespace looptool::cli;
    restart_for_openblas(argc, argv);
    CLI::App app{"looptool: loop-nest auto-tuning with a JIT-executing loop tool"};
    app.require_subcommand(1);
    std::map<std::string, Run> runs;
    runs["generate"] = add_generate(app);
    runs["read"] = add_read(app);
    runs["store"] = add_store(app);
    runs["peak"] = add_peak(app);
    runs["search"] = add_search(app);
    runs["validate"] = add_validate(app);
    runs["compare"] = add_compare(app);
    runs["train"] = add_train(app);
    runs["tune"] = add_tune(app);
    runs["slurm-train"] = add_slurm_train(app);
    runs["export"] = add_export(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    try {
        for (auto *sub : app.get_subcommands()) return runs.at(sub->get_name())();
    } catch (const looptool::Error &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    } catch (const looptool::InternalError &e) {
        fmt::print(stderr, "{}\n", e.what());
        return 3;
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
