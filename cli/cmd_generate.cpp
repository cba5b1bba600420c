#include <fmt/format.h>

#include "cli/commands.h"
#include "looptool/error.h"
#include "looptool/generate.h"

namespace looptool::cli {

Run add_generate(CLI::App &app) {
    auto *cmd = app.add_subcommand("generate", "Write a benchmark dataset, one file per shape");
    struct Opts {
        std::string kind = "mm", dim_a, dim_b, out;
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--kind", o->kind, "Computation kind (mm)")->check(CLI::IsMember({"mm"}));
    cmd->add_option("--dimA", o->dim_a, "M_RANGE,K_RANGE (a:b:c, a:b, a|b|c or n)")->required();
    cmd->add_option("--dimB", o->dim_b, "K_RANGE,N_RANGE")->required();
    cmd->add_option("--out", o->out, "Output directory")->required();
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        auto shapes = matmul_shapes(o->dim_a, o->dim_b);
        auto paths = write_matmul_dataset(shapes, o->out);
        if (o->json) {
            nlohmann::json j;
            j["count"] = paths.size();
            j["dir"] = o->out;
            j["files"] = paths;
            print_json(j);
        } else {
            fmt::print("wrote {} benchmarks to {}\n", paths.size(), o->out);
        }
        return 0;
    };
}

}  // namespace looptool::cli
