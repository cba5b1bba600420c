#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "looptool/measure/measure.h"

namespace looptool::cli {

Run add_peak(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "peak",
        "Measure this core's FP32 peak (FMA chains, widest ISA) and store it as MAX_GFLOPS");
    struct Opts {
        double seconds = 0.5;
        bool json = false, no_store = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--seconds", o->seconds, "Timed seconds (after warm-ups)")->check(positive());
    cmd->add_flag("--no-store", o->no_store, "Do not write the cache file");
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        PeakResult r = measure_peak_gflops(o->seconds);
        std::string path = o->no_store ? "" : store_peak(r);
        if (o->json) {
            nlohmann::json j{{"gflops", r.gflops}, {"isa", r.isa}, {"cpu", cpu_model_name()}};
            if (!path.empty()) j["stored"] = path;
            print_json(j);
        } else {
            fmt::print("cpu: {}\npeak: {:.1f} GFLOPS (FP32, one core, {} FMA chains)\n",
                       cpu_model_name(), r.gflops, r.isa);
            if (!path.empty()) fmt::print("stored in {}\n", path);
            if (std::getenv("MAX_GFLOPS"))
                fmt::print("note: MAX_GFLOPS={} is set and overrides the stored value\n",
                           std::getenv("MAX_GFLOPS"));
        }
        return 0;
    };
}

}  // namespace looptool::cli
