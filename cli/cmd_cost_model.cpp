#include <fmt/format.h>

#include "cli/commands.h"
#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "tune/cost_model.h"

namespace looptool::cli {

Run add_cost_model(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "cost-model",
        "Fit this machine's cost model to a measurement store (tune --rank model ranks "
        "schedules with it before measuring them)");
    struct Opts {
        std::string store, out;
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--store", o->store, "Measurement store to fit to (this machine's rows)")
        ->required();
    cmd->add_option("--out", o->out,
                    "Where to write the model (default: this machine's, which tune uses)");
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        const std::string out = o->out.empty() ? looptune::default_cost_model_path() : o->out;
        if (out.empty()) throw Error("cost-model: no cache directory (HOME unset); give --out");
        const std::string machine = looptune::machine_fingerprint(machine_peak_gflops());
        const looptune::CostModel m = looptune::fit_cost_model_from_store(o->store, machine);
        m.save(out);
        const looptune::CostFit &f = m.fit_quality();
        if (o->json) {
            print_json({{"model", out},
                        {"store", o->store},
                        {"machine", machine},
                        {"rows", f.rows},
                        {"benchmarks", f.benchmarks},
                        {"lambda", f.lambda},
                        {"heldout_spearman", f.heldout_spearman}});
        } else {
            fmt::print(
                "fitted to {} measurements of {} benchmarks in {} (ridge penalty {:g}); held-out "
                "rank correlation within a benchmark {:.2f}\nwrote {}\n",
                f.rows, f.benchmarks, o->store, f.lambda, f.heldout_spearman, out);
        }
        return 0;
    };
}

}  // namespace looptool::cli
